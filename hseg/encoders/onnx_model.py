"""An exported ONNX model on disk: its manifest, its cache folder, and running its graph.

The export itself is :mod:`hseg.encoders.onnx_export`; :class:`hseg.encoders.onnx_runtime.OnnxEncoder`
puts the two together behind the encoder protocol.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hseg.encoders.base import l2_normalize

logger = logging.getLogger(__name__)


MANIFEST_NAME = "hseg-onnx.json"


#: bumped when the folder layout or the export changes, so older exports are redone
MANIFEST_FORMAT = 1


GRAPH_NAME = "model.onnx"


#: measured fastest on CPU for sentences, ahead of 32 (docs/decisions.md)
DEFAULT_BATCH_SIZE = 16


@dataclass(frozen=True)
class OnnxManifest:
    """What :class:`OnnxEncoder` needs to run an exported model, written next to the graph."""

    model: str  #: canonical model name
    source: str | None  #: identity of the weights exported (see :func:`source_identity`)
    dimension: int
    max_seq_length: int
    inputs: tuple[str, ...]  #: graph inputs, in the tokenizer's order
    pad_id: int
    pad_type_id: int = 0
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None
    min_probe_cosine: float = 1.0  #: worst cosine of ONNX vs torch vectors on the export probes
    versions: dict[str, str] = field(default_factory=dict)  #: torch, onnx, sentence-transformers at export
    format: int = MANIFEST_FORMAT

    def write(self, folder: Path) -> None:
        (folder / MANIFEST_NAME).write_text(json.dumps(asdict(self), indent=1, sort_keys=True))

    @classmethod
    def read(cls, folder: Path) -> OnnxManifest | None:
        """The manifest in ``folder``; ``None`` when absent, unreadable or of another format."""
        try:
            data = json.loads((folder / MANIFEST_NAME).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
            return None
        data["inputs"] = tuple(data.get("inputs", ()))
        try:
            return cls(**data)
        except TypeError:
            return None


def onnx_cache_dir() -> Path:
    """``$HSEG_ONNX_CACHE``, else ``$XDG_CACHE_HOME/hseg/onnx`` (``~/.cache/hseg/onnx``)."""
    if os.environ.get("HSEG_ONNX_CACHE"):
        return Path(os.environ["HSEG_ONNX_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hseg" / "onnx"


def model_cache_folder(name: str, cache_dir: str | Path | None = None, weights: str | Path | None = None) -> Path:
    """The cache folder of one model: readable slug plus a hash of the name and of where its
    ``weights`` lie, so distinct names never share a folder, and neither do two installations of
    one model (two virtual environments would otherwise re-export it in turn, each finding the
    other's export made from other weights)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")[-60:] or "model"
    key = name if weights is None else f"{name}\0{weights}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    root = Path(cache_dir) if cache_dir is not None else onnx_cache_dir()
    return root / f"{slug}-{digest}"


class ExportedModel:
    """One exported folder loaded for inference: the onnxruntime session and the tokenizer.

    Texts are encoded as given (prompts are the caller's business), longest first in batches of
    similar lengths, like sentence-transformers, so little padding is wasted.
    """

    def __init__(self, folder: Path, manifest: OnnxManifest, *, graph: str = GRAPH_NAME, device: str | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE, show_progress: bool = False,
                 threads: int | None = None) -> None:
        from tokenizers import Tokenizer

        self.manifest = manifest
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.session = _session(folder / graph, device, threads)
        path = str(folder / "tokenizer.json")
        self.tokenizer = Tokenizer.from_file(path)
        self.tokenizer.no_padding()  # batches are padded here, after sorting by length
        self.tokenizer.enable_truncation(manifest.max_seq_length)
        self._counter = Tokenizer.from_file(path)
        self._counter.no_padding()
        self._counter.no_truncation()

    def count_tokens(self, text: str) -> int:
        return len(self._counter.encode(text).ids)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids each text is encoded from (truncated to the model's window)."""
        return [e.ids for e in self.tokenizer.encode_batch(list(texts))]

    def encode(self, texts: Sequence[str]) -> np.ndarray:

        if not texts:
            return np.zeros((0, self.manifest.dimension), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(list(texts))
        order = np.argsort([-len(e.ids) for e in encodings], kind="stable")
        out = np.empty((len(encodings), self.manifest.dimension), dtype=np.float32)
        starts: Any = range(0, len(encodings), self.batch_size)
        if self.show_progress and len(starts) > 1:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc="encoding", unit="batch")
        for start in starts:
            rows = order[start:start + self.batch_size]
            out[rows] = self.session.run(None, self._feed([encodings[i] for i in rows]))[0]
        return l2_normalize(out)

    def _feed(self, encodings: list[Any]) -> dict[str, np.ndarray]:
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self.manifest.pad_id, dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.full_like(ids, self.manifest.pad_type_id)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = 1
            types[row, :n] = e.type_ids
        columns = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return {name: columns[name] for name in self.manifest.inputs}


def _session(path: Path, device: str | None, threads: int | None = None) -> Any:
    import onnxruntime as ort

    available = ort.get_available_providers()
    if device is not None and device.startswith("cuda") and "CUDAExecutionProvider" not in available:
        raise ValueError(f"device={device!r}: onnxruntime offers no CUDA provider here (providers {available}); "
                         "install onnxruntime-gpu or use device='cpu'")
    use_cuda = "CUDAExecutionProvider" in available and (device is None or device.startswith("cuda"))
    providers: list[Any] = ["CPUExecutionProvider"]
    if use_cuda:
        index = int(device.split(":")[1]) if device and ":" in device else 0
        providers.insert(0, ("CUDAExecutionProvider", {"device_id": index}))
    options = ort.SessionOptions()
    options.log_severity_level = 3  # onnxruntime's own warnings about unused initializers alarm users
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1  # the graph runs sequentially: one pool is all it uses
    return ort.InferenceSession(str(path), options, providers=providers)
