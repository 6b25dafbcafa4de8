"""Export a sentence-transformers model to ONNX, locally, from its own weights (used by
:class:`hseg.encoders.OnnxEncoder` on first use; needs torch, sentence-transformers and onnx).

How and why: docs/design.md, ``hseg.encoders.onnx_export``.

Example:
    >>> manifest = export_model("sentence-transformers/all-MiniLM-L6-v2", Path("/tmp/minilm-onnx"))  # doctest: +SKIP
    >>> manifest.min_probe_cosine > 0.9999  # doctest: +SKIP
    True
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hseg.encoders.identity import canonical_model_name, offline_model_path, source_identity
from hseg.encoders.onnx_model import GRAPH_NAME, ExportedModel, OnnxManifest
from hseg.encoders.torch_backend import sentence_embedding_dimension

logger = logging.getLogger(__name__)

#: an export whose vectors differ more than this from the torch model's is refused
MIN_COSINE = 0.9999
OPSET = 17
_SUPPORTED_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

#: texts of very different lengths, encoded in one padded batch; the last is cut by the window
PROBES = (
    "Hi.",
    "The cat sat on the mat.",
    "Galileo observed the moons of Jupiter in 1610 with a telescope he built himself.",
    "Ümlauts, accents (café, naïve), CJK 東京 and emoji 🚀 survive tokenisation.",
    "  Leading and trailing whitespace, \ttabs\nand newlines.  ",
    " ".join(f"Sentence {i} of a long paragraph about orbital mechanics and precession." for i in range(60)),
)


def export_model(source: str, folder: Path) -> OnnxManifest:
    """Export model ``source`` (a name or folder) into ``folder``, checked, and return its manifest.

    Written into a temporary sibling folder and moved into place, so a crash or a concurrent
    export never leaves a half-written model for the next process to load.
    """

    model = _load(offline_model_path(source) or source)
    name = canonical_model_name(source)
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        manifest = _describe(model, name, source)
        model[0].tokenizer.backend_tokenizer.save(str(work / "tokenizer.json"))
        _trace(model, manifest, work / GRAPH_NAME)
        manifest = _checked(model, manifest, work)
        manifest.write(work)
        _move_into_place(work, folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    logger.info("exported %s to %s (probe cosine >= %.7f)", name, folder, manifest.min_probe_cosine)
    return manifest


# ----------------------------------------------------------------------------- steps


def _load(source: str) -> Any:
    from sentence_transformers import SentenceTransformer

    try:  # eager attention traces to plain MatMul/Softmax, the graph onnxruntime optimises best
        return SentenceTransformer(source, device="cpu", model_kwargs={"attn_implementation": "eager"}).eval()
    except (TypeError, ValueError):
        return SentenceTransformer(source, device="cpu").eval()


def _describe(model: Any, name: str, source: str) -> OnnxManifest:
    """The manifest of ``model``, or ``ValueError`` when its shape is not one this export serves."""
    import onnx
    import sentence_transformers
    import torch


    hint = f"encoder {name!r} cannot be exported to ONNX by hseg ({{}}); use backend='torch'"
    tokenizer: Any = getattr(model[0], "tokenizer", None)
    if getattr(tokenizer, "backend_tokenizer", None) is None:
        raise ValueError(hint.format("it has no fast (tokenizers) tokenizer"))
    if getattr(tokenizer, "padding_side", "right") != "right":
        raise ValueError(hint.format("its tokenizer pads on the left"))
    inputs = tuple(n for n in tokenizer.model_input_names if n in _SUPPORTED_INPUTS)
    if set(tokenizer.model_input_names) - set(_SUPPORTED_INPUTS) or "input_ids" not in inputs:
        raise ValueError(hint.format(f"its inputs are {tokenizer.model_input_names}"))
    prompts = {k: v for k, v in (getattr(model, "prompts", None) or {}).items() if v}
    if prompts and any(getattr(m, "include_prompt", True) is False for m in model):
        raise ValueError(hint.format("its pooling leaves prompt tokens out"))
    return OnnxManifest(
        model=name,
        source=source_identity(source),
        dimension=sentence_embedding_dimension(model),
        max_seq_length=int(model.max_seq_length),
        inputs=inputs,
        pad_id=int(tokenizer.pad_token_id or 0),
        pad_type_id=int(getattr(tokenizer, "pad_token_type_id", 0) or 0),
        prompts=prompts,
        default_prompt_name=getattr(model, "default_prompt_name", None),
        versions={"torch": torch.__version__, "onnx": onnx.__version__,
                  "sentence-transformers": sentence_transformers.__version__},
    )


def _trace(model: Any, manifest: OnnxManifest, path: Path) -> None:
    import warnings

    import torch

    class SentenceEmbedding(torch.nn.Module):
        """The model's forward from token tensors to the sentence vector, as one traceable call."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            return self.model(dict(zip(manifest.inputs, tensors)))["sentence_embedding"]

    features = _preprocess(model, PROBES[:3])  # padded: the trace sees a masked batch
    example = tuple(features[n] for n in manifest.inputs)
    axes = {n: {0: "batch", 1: "sequence"} for n in manifest.inputs}
    with torch.no_grad(), warnings.catch_warnings():
        # the tracer warns about Python conditions on shapes; the probe check below is what
        # shows the graph holds for every batch and length
        warnings.simplefilter("ignore")
        torch.onnx.export(SentenceEmbedding().eval(), example, str(path), input_names=list(manifest.inputs),
                          output_names=["sentence_embedding"],
                          dynamic_axes={**axes, "sentence_embedding": {0: "batch"}},
                          opset_version=OPSET, dynamo=False)


def _checked(model: Any, manifest: OnnxManifest, folder: Path) -> OnnxManifest:
    """``manifest`` with the probes' worst cosine, after checking ids and vectors against torch."""
    import dataclasses

    import numpy as np
    import torch

    exported = ExportedModel(folder, manifest, device="cpu", batch_size=len(PROBES))
    features = _preprocess(model, PROBES)
    mask = features["attention_mask"].numpy().astype(bool)
    torch_ids = [row[keep].tolist() for row, keep in zip(features["input_ids"].numpy(), mask)]
    if torch_ids != exported.token_ids(PROBES):
        raise ValueError(f"encoder {manifest.model!r}: the exported tokenizer does not reproduce the model's "
                         "token ids; use backend='torch'")
    with torch.no_grad():
        reference = model(features)["sentence_embedding"].numpy()
    reference = reference / np.linalg.norm(reference, axis=1, keepdims=True)
    worst = float(np.min(np.sum(reference * exported.encode(PROBES), axis=1)))
    if worst < MIN_COSINE:
        raise ValueError(f"encoder {manifest.model!r}: ONNX vectors differ from torch (cosine {worst:.6f} < "
                         f"{MIN_COSINE}); use backend='torch'")
    return dataclasses.replace(manifest, min_probe_cosine=worst)


def _preprocess(model: Any, texts: tuple[str, ...]) -> dict[str, Any]:
    """The tensors sentence-transformers' ``encode`` feeds the model for ``texts``."""
    preprocess = getattr(model, "preprocess", None) or model.tokenize  # ``tokenize`` before version 6
    return dict(preprocess(list(texts)))


def _move_into_place(work: Path, folder: Path) -> None:
    """Replace ``folder`` by ``work``; if another process put a fresh export there first, keep it."""
    if folder.exists():
        shutil.rmtree(folder, ignore_errors=True)
    work.chmod(0o755)  # mkdtemp's 0o700 would hide a shared cache from other users
    try:
        os.replace(work, folder)
    except OSError:
        if not (folder / GRAPH_NAME).exists():
            raise
