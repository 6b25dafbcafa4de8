"""Which model a collection's vectors come from, checked once for every door: the encoder the
collection records, the store's query encoder (loaded on first use), the names the records and the
chunkings carry, and the vectors' dimension.

One collection holds the vectors of one model. The name is compared canonically
(:func:`hseg.encoders.canonical_model_name`: ``all-MiniLM-L6-v2`` and
``sentence-transformers/all-MiniLM-L6-v2`` are one model); a collection that holds nothing binds no
encoder, so a store left empty by a failed first run takes the next one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from hseg.chunking.chunks import Chunking
from hseg.chunking.records import Record, check_unicode
from hseg.chunking.schema import DOC_ID_KEY, ENCODER_KEY, SCHEMA_KEY, SCHEMA_VERSION
from hseg.encoders import DEFAULT_MODEL, canonical_model_name
from hseg.encoders.factory import as_encoder
from hseg.errors import EncoderMismatchError
from hseg.store.connection import ServerErrors, check_encoder, set_collection_metadata


class EncoderBinding:
    """The encoder side of a store over ``collection``: ``encoder`` (anything
    :func:`hseg.encoders.as_encoder` takes, or ``None`` for the default model, loaded on first use)
    checked against what the collection records unless ``allow_mismatch``; ``errors`` names a lost
    server (the store's backend's, :meth:`hseg.store.backends.Backend.errors`).

    Example:
        >>> binding = EncoderBinding(collection, None, allow_mismatch=False, errors=backend.errors)  # doctest: +SKIP
        >>> binding.recorded  # doctest: +SKIP
        'sentence-transformers/all-MiniLM-L6-v2'
    """

    def __init__(self, collection: Any, encoder: Any, *, allow_mismatch: bool, errors: ServerErrors) -> None:
        self.collection = collection
        self.errors = errors
        self.allow_mismatch = allow_mismatch
        self._encoder = None
        self._lock = threading.Lock()
        self._dimension: int | None = None  # the collection's vector dimension, read once it holds a record
        if encoder is not None:
            self._encoder = as_encoder(encoder)
            self.check_name(self._encoder.name)

    # ------------------------------------------------------------------ names

    @property
    def encoder(self) -> Any:
        """The query encoder (the default model is loaded on first access, after its name is checked)."""
        if self._encoder is None:
            self.check_name(DEFAULT_MODEL)  # before paying for the model load
            with self._lock:
                if self._encoder is None:
                    self._encoder = as_encoder(None)
        return self._encoder

    @encoder.setter
    def encoder(self, encoder: Any) -> None:
        """Replace the query encoder as given (benchmarks swap in a lookup of precomputed vectors)."""
        self._encoder = encoder

    def use(self, encoder: Any) -> None:
        """Embed queries with ``encoder`` (anything :func:`hseg.encoders.as_encoder` takes) from now on,
        once its name is checked as the constructor checks it (the encoder in use stays on a mismatch)."""
        chosen = as_encoder(encoder)
        self.check_name(chosen.name)
        self._encoder = chosen

    @property
    def recorded(self) -> str | None:
        """The encoder name recorded in the collection, if any."""
        name = (self.collection.metadata or {}).get(ENCODER_KEY)
        return None if name is None else str(name)

    def check_name(self, name: str) -> None:
        """Refuse an encoder ``name`` that is not the collection's (unless it holds nothing)."""
        try:
            check_encoder(self.collection.name, self.recorded, name, allow_mismatch=self.allow_mismatch)
        except EncoderMismatchError:
            if self.collection.count() > 0:
                raise
            # a collection that holds nothing binds no encoder (say, one left by a failed first run):
            # the next write records the new one

    def query_name(self) -> str | None:
        """The model of the query vectors as far as it is known: the encoder's, else the recorded one."""
        return str(self._encoder.name) if self._encoder is not None else self.recorded

    def check_records(self, metadatas: Iterable[Mapping[str, Any]], expected: str | None) -> str | None:
        """Refuse records whose ``hseg_encoder`` names another model than ``expected`` (or, with none,
        than the first record that names one): a writer around hseg's own checks (a LlamaIndex
        ``IngestionPipeline`` into a ``ChromaVectorStore``) can mix models. Returns ``expected`` or the
        name found. Records without the key pass."""
        if self.allow_mismatch:
            return expected
        first_doc = None
        same: dict[str, bool] = {}  # names seen: the same model as expected? (canonical names stat paths)
        for meta in metadatas:
            name = meta.get(ENCODER_KEY)
            if not name or name == expected:
                continue
            name = str(name)
            if expected is None:
                expected, first_doc = name, meta.get(DOC_ID_KEY)
                continue
            if name not in same:
                same[name] = canonical_model_name(name) == canonical_model_name(expected)
            if not same[name]:
                if first_doc is not None:
                    against = f"document {first_doc!r} holds vectors of {expected!r}"
                elif self._encoder is not None:
                    against = f"this store embeds queries with {expected!r}"
                else:
                    against = f"the collection was built with {expected!r}"
                raise EncoderMismatchError(
                    f"collection {self.collection.name!r}: document {meta.get(DOC_ID_KEY)!r} holds vectors of "
                    f"encoder {name!r}, but {against}; one collection must hold the vectors of one model (these were "
                    "written around hseg's checks, e.g. by an IngestionPipeline into a ChromaVectorStore whose parser "
                    "used another encoder): delete the document and add it again with the collection's encoder, or "
                    "pass allow_encoder_mismatch=True if both names are one model"
                )
        return expected

    def check_hits(self, metadatas: Iterable[Mapping[str, Any]]) -> None:
        """Refuse an answer with a hit (given by its metadata) whose vectors another model made than the
        queries'. A document is written whole with one encoder, so the ranking of an answer with no such
        hit is that of the query model's records alone; checking the hits costs no read."""
        self.check_records(metadatas, self.query_name())

    def of_chunkings(self, items: list[Chunking]) -> str | None:
        """The encoder of what is being added: the chunkings' (each records its own), checked against
        the query encoder and against each other; ``None`` when neither tells."""
        names = {canonical_model_name(str(c.info["encoder"])) for c in items if c.info.get("encoder")}
        if len(names) > 1 and not self.allow_mismatch:
            raise EncoderMismatchError(f"chunkings: made with different encoders {sorted(names)}; one collection "
                                       "holds the vectors of one encoder")
        own = canonical_model_name(str(self._encoder.name)) if self._encoder is not None else None
        for name in names:
            if own is not None and name != own and not self.allow_mismatch:
                raise EncoderMismatchError(f"chunkings: made with encoder {name!r}, but this store embeds queries "
                                           f"with {own!r}; chunk with the store's encoder, or "
                                           "allow_encoder_mismatch=True")
        return own or (names.pop() if len(names) == 1 else None)

    def record(self, encoder_name: str | None, *, replace: bool = False) -> None:
        """Write the schema version and ``encoder_name`` (unless one is recorded, or ``replace``) into
        the collection's metadata; nothing when both are there already."""
        wanted: dict[str, Any] = {SCHEMA_KEY: SCHEMA_VERSION}
        if encoder_name is not None and (ENCODER_KEY not in (self.collection.metadata or {}) or replace):
            wanted[ENCODER_KEY] = encoder_name
        set_collection_metadata(self.collection, wanted)

    def adopt_if_empty(self, encoder_name: str | None) -> None:
        """An empty collection takes ``encoder_name`` in place of the one it records."""
        recorded = self.recorded
        if encoder_name is not None and recorded is not None and self.collection.count() == 0 \
                and canonical_model_name(recorded) != canonical_model_name(encoder_name):
            self.record(encoder_name, replace=True)

    # ------------------------------------------------------------------ vectors

    def dimension(self, collection: Any = None) -> int | None:
        """The dimension of the collection's vectors (``None`` while it holds none), read from one
        record the first time it is known and kept: Chroma fixes it with the first write."""
        if self._dimension is None:
            got = (collection if collection is not None else self.collection).get(limit=1, include=["embeddings"])
            emb = got.get("embeddings")
            if emb is not None and len(emb):
                self._dimension = len(emb[0])
        return self._dimension

    def check_dimension(self, records: list[Record]) -> None:
        """Refuse records of several dimensions, or of another than the collection's."""
        dims = {r.embedding.shape[0] for r in records}
        if len(dims) > 1:
            raise EncoderMismatchError(f"chunkings: embeddings of different dimensions {sorted(dims)}")
        have = self.dimension() if dims else None
        if have is not None and have != next(iter(dims)):
            raise EncoderMismatchError(f"chunkings: embedding dimension {next(iter(dims))} != the collection's {have}")

    def query_vector(self, query: Any, what: str = "query", *, collection: Any = None) -> np.ndarray:
        """The unit vector of a query string (embedded) or vector, checked against the collection's
        dimension; ``ValueError`` naming ``what`` for a blank string, a zero vector or a wrong size."""
        if isinstance(query, str):
            if not query.strip():
                raise ValueError(f"{what} must be a non-blank string or a vector, got {query!r}")
            # before the encoder, whose tokenizer fails on a lone surrogate with a bare TypeError
            check_unicode(what, query, why="the encoder takes valid Unicode only")
            vec = np.asarray(self.encoder.encode_query(query), dtype=np.float32).reshape(-1)
        else:
            vec = _vector_of(query, what)
        norm = float(np.linalg.norm(vec))
        if not np.isfinite(norm) or norm == 0.0:
            raise ValueError(f"{what}: vector is zero or not finite")
        # Chroma would refuse it with its own InvalidArgumentError, deep in the first read of a search
        with self.errors("search"):
            have = self.dimension(collection)
        if have is not None and vec.size != have:
            source = f"the encoder {self.encoder.name!r} gives" if isinstance(query, str) else "got"
            raise EncoderMismatchError(f"{what}: {source} a vector of dimension {vec.size}, but collection "
                             f"{self.collection.name!r} holds vectors of dimension {have}; embed queries with the "
                             "model that embedded the collection")
        return vec / norm


def _vector_of(query: Any, what: str) -> np.ndarray:
    """A query that is not a string as a 1-D float vector; ``ValueError`` naming ``what`` otherwise."""
    if isinstance(query, (bytes, bytearray, memoryview)):
        # numpy would read bytes as one unparsable number, and a bytearray as a vector of its byte values
        raise ValueError(f"{what} must be a str or a vector of numbers, got {type(query).__name__}; decode it "
                         f"first ({what}.decode('utf-8'))")
    try:
        vec = np.asarray(query, dtype=np.float32)
    except (TypeError, ValueError):  # e.g. a list of strings: numpy's "could not convert string to float"
        raise ValueError(f"{what} must be a str or a vector of numbers, got {type(query).__name__} "
                         f"{query!r:.60}") from None
    if vec.ndim == 2 and vec.shape[0] == 1:
        vec = vec[0]
    if vec.ndim != 1 or vec.size == 0:
        got = f"shape {vec.shape}" if vec.ndim else f"{type(query).__name__} {query!r:.60}"
        raise ValueError(f"{what} must be a str or a 1-D vector of numbers, got {got}")
    return vec
