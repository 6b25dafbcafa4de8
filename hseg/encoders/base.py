"""Sentence encoders: one small protocol and adapters for the libraries users already have.

The protocol is ``encode(texts) -> np.ndarray`` of shape ``(n, d)``, float32, rows L2-normalised
(so a dot product is a cosine). ``encode_query(text)`` embeds a query (asymmetric models differ).

How and why: docs/design.md, ``hseg.encoders.base``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from hseg.encoders.identity import canonical_model_name

logger = logging.getLogger(__name__)

#: how a model given by name is run; both give the same vectors (cosine >= 0.9999)
BACKENDS = ("onnx", "torch")
#: onnx: as fast as torch at ingestion on CPU and much faster to start (benchmarks/RESULTS.md)
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


