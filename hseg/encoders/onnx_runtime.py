"""The ONNX Runtime encoder: a sentence-transformers model served without torch or transformers.

How and why: docs/design.md, ``hseg.encoders.onnx_runtime``.

Example:
    >>> enc = OnnxEncoder()  # doctest: +SKIP
    >>> enc.encode(["a cat", "a dog"]).shape  # doctest: +SKIP
    (2, 384)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from hseg.encoders.identity import DEFAULT_MODEL, canonical_model_name, weights_identity, weights_path
from hseg.encoders.onnx_export import export_model
from hseg.encoders.onnx_model import DEFAULT_BATCH_SIZE, GRAPH_NAME, ExportedModel, OnnxManifest, model_cache_folder

logger = logging.getLogger(__name__)


class OnnxEncoder:
    """A sentence-transformers model run by ONNX Runtime, behind the :class:`~hseg.encoders.Encoder` protocol.

    Args:
        model: a sentence-transformers model name or folder (default all-MiniLM-L6-v2, offline).
        device: ``"cpu"``, ``"cuda"`` (needs the ``onnxruntime-gpu`` package) or ``None``: CUDA when
            onnxruntime offers it, else CPU.
        batch_size: texts per run (``None``: 16, fastest measured on CPU).
        threads: onnxruntime's intra-op threads on CPU (``None``: one per core). Give 1 when several
            encoders share a machine, one per process (Ray workers), so they do not oversubscribe it.
        cache_dir: the cache's root folder (``None``: :func:`onnx_cache_dir`).
        show_progress: a tqdm bar over batches on long inputs.

    The first use of a model exports it (torch and sentence-transformers load once, seconds);
    later processes load the cached graph only.

    Example:
        >>> enc = OnnxEncoder("sentence-transformers/all-MiniLM-L6-v2")  # doctest: +SKIP
        >>> float(enc.encode(["a cat"]) @ enc.encode_query("a kitten"))  # doctest: +SKIP
        0.79...
    """

    backend = "onnx"

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str | None = None,
        batch_size: int | None = None,
        cache_dir: str | Path | None = None,
        show_progress: bool = False,
        threads: int | None = None,
    ) -> None:
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size <= 0):
            raise ValueError(f"batch_size must be an int > 0, got {batch_size!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads <= 0):
            raise ValueError(f"threads must be an int > 0 or None, got {threads!r}")
        if device not in (None, "cpu", "cuda") and not str(device).startswith("cuda:"):
            raise ValueError(f"device must be None, 'cpu' or 'cuda[:N]' for the onnx backend, got {device!r}")
        source = model or DEFAULT_MODEL
        self._name = canonical_model_name(source)
        weights = weights_path(source)  # looked up once: the cache folder and the freshness check use it
        self.folder = model_cache_folder(self._name, cache_dir, weights)
        self.export_seconds: float | None = None
        """Seconds this encoder spent exporting its model to ONNX (``None``: the cached export was loaded)."""
        self.manifest = self._ready_manifest(source, weights_identity(weights))
        self.runner = ExportedModel(self.folder, self.manifest, device=device,
                                    batch_size=batch_size or DEFAULT_BATCH_SIZE, show_progress=show_progress,
                                    threads=threads)

    def _ready_manifest(self, source: str, identity: str | None) -> OnnxManifest:
        """The cached export, made (or redone) here when missing or exported from other weights."""
        manifest = OnnxManifest.read(self.folder)
        fresh = manifest is not None and (identity is None or manifest.source == identity)
        if manifest is None or not fresh or not (self.folder / GRAPH_NAME).exists():
            from hseg.progress import logger as progress

            # long (tens of seconds) and once: said as it starts, on the progress lines the CLI shows
            progress.info("exporting %s to ONNX in %s: once per model on this machine (torch loads the model for "
                          "it), later runs load the export", self._name, self.folder)
            started = time.perf_counter()
            manifest = export_model(source, self.folder)
            self.export_seconds = time.perf_counter() - started
            progress.info("exported %s to ONNX in %.1f s", self._name, self.export_seconds)
        return manifest

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self.manifest.dimension

    @property
    def max_seq_length(self) -> int:
        """Longest input, in the model's own tokens, that the model reads without truncation."""
        return self.manifest.max_seq_length

    @property
    def batch_size(self) -> int:
        return self.runner.batch_size

    @property
    def providers(self) -> list[str]:
        """The onnxruntime execution providers in use, best first."""
        return list(self.runner.session.get_providers())

    def count_tokens(self, text: str) -> int:
        """Length of ``text`` in the model's own tokenizer, special tokens included."""
        return self.runner.count_tokens(text)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        prompt = self.manifest.prompts.get(self.manifest.default_prompt_name or "", "")
        return self.runner.encode([prompt + t for t in texts] if prompt else list(texts))

    def encode_query(self, text: str) -> np.ndarray:
        prompts = self.manifest.prompts
        prompt = prompts.get("query", prompts.get(self.manifest.default_prompt_name or "", ""))
        return self.runner.encode([prompt + text])[0]


