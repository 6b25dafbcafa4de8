"""The ONNX Runtime encoder: a sentence-transformers model served without torch or transformers.

:class:`OnnxEncoder` runs a graph exported from the model's own weights (by
:mod:`hseg.onnx_export`, on first use, then cached) with ``onnxruntime`` and tokenizes with the
``tokenizers`` library. Serving a query therefore imports neither torch nor transformers: a cold
``hseg query`` pays for onnxruntime (~0.2 s) instead of sentence-transformers (~6 s).

The exported graph contains the whole sentence-transformers pipeline (transformer, pooling,
dense layers, normalisation), traced from the same torch modules, and the tokenizer is the one
the model was configured with; the export is refused unless its vectors and token ids match the
torch model's on probe texts (see :func:`hseg.onnx_export.export_model`).

Cache: ``$HSEG_ONNX_CACHE`` or ``$XDG_CACHE_HOME/hseg/onnx`` (``~/.cache/hseg/onnx``), one folder
per model with ``model.onnx``, ``tokenizer.json`` and ``hseg-onnx.json`` (the manifest). A folder
is re-exported when the model's weights change (their size and modification time are recorded).

Example:
    >>> enc = OnnxEncoder()  # doctest: +SKIP
    >>> enc.encode(["a cat", "a dog"]).shape  # doctest: +SKIP
    (2, 384)
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

__all__ = ["OnnxEncoder", "OnnxManifest", "onnx_cache_dir", "model_folder", "source_identity", "MANIFEST_NAME",
           "MANIFEST_FORMAT", "GRAPH_NAME", "model_cache_folder", "weights_path", "ExportedModel"]

logger = logging.getLogger(__name__)

MANIFEST_NAME = "hseg-onnx.json"
#: bumped when the folder layout or the export changes, so older exports are redone
MANIFEST_FORMAT = 1
GRAPH_NAME = "model.onnx"
#: measured fastest on 2 CPU cores for sentences (benchmarks/RESULTS.md); 32 costs ~7% more
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


def _hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home) / "hub"


def model_folder(name: str) -> Path | None:
    """Where the weights of model ``name`` are on disk, found without importing torch: the offline
    MiniLM package, a local folder, or the Hugging Face cache's snapshot of ``main``; ``None`` if
    it has never been downloaded."""
    from hseg.encoders import offline_model_path

    offline = offline_model_path(name)
    if offline is not None:
        return Path(offline)
    if os.path.isdir(name):
        return Path(name)
    repo = _hub_cache() / ("models--" + name.replace("/", "--"))
    try:
        commit = (repo / "refs" / "main").read_text().strip()
    except OSError:
        return None
    snapshot = repo / "snapshots" / commit
    return snapshot if snapshot.is_dir() else None


_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def weights_path(name: str) -> Path | None:
    """The resolved path of the weights file of ``name`` (or of its folder when it holds none of
    the usual files); ``None`` when the weights are not on disk."""
    folder = model_folder(name)
    if folder is None:
        return None
    for file in _WEIGHT_FILES:
        if (folder / file).exists():
            return Path(os.path.realpath(folder / file))  # the HF cache's symlink to the blob
    return folder.resolve()


def source_identity(name: str) -> str | None:
    """Identity of the weights of ``name`` on disk: path, size and modification time of the
    weights file (a stat, not a hash: it is checked on every load, also by a cold ``hseg query``);
    ``None`` when the weights are not on disk."""
    return _identity(weights_path(name))


def _identity(path: Path | None) -> str | None:
    if path is None:
        return None
    if path.is_dir():  # no weights file of a known name: the folder stands for them
        return str(path)
    st = os.stat(path)
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


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
        from hseg.encoders import DEFAULT_MODEL, canonical_model_name

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
        self.manifest = self._ready_manifest(source, _identity(weights))
        self.runner = ExportedModel(self.folder, self.manifest, device=device,
                                    batch_size=batch_size or DEFAULT_BATCH_SIZE, show_progress=show_progress,
                                    threads=threads)

    def _ready_manifest(self, source: str, identity: str | None) -> OnnxManifest:
        """The cached export, made (or redone) here when missing or exported from other weights."""
        manifest = OnnxManifest.read(self.folder)
        fresh = manifest is not None and (identity is None or manifest.source == identity)
        if manifest is None or not fresh or not (self.folder / GRAPH_NAME).exists():
            from hseg.onnx_export import export_model

            logger.info("exporting %s to ONNX in %s (once per model)", self._name, self.folder)
            manifest = export_model(source, self.folder)
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
        from hseg.encoders import l2_normalize

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
