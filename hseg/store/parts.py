"""What a store is made of (:class:`StoreParts`), put together once when it opens: the collection,
the backend of its client's shape (:mod:`hseg.store.backends`), the derived indexes the backend
opens beside it, the encoder binding and the per-document turns.
:class:`hseg.store.HierarchicalStore` holds one and hands it to the objects it delegates to (its
reads, its writes, its searches); none of them holds the store.

Example:
    >>> import chromadb, uuid
    >>> parts = open_store(f"c-{uuid.uuid4().hex}", client=chromadb.EphemeralClient())
    >>> parts.backend.kind, parts.units is not None, parts.lexical.location.kind
    ('memory', True, 'memory')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hseg.chunking.schema import SCHEMA_KEY
from hseg.encoders.factory import as_encoder
from hseg.errors import CollectionNotFoundError, StoreNotFoundError
from hseg.retrieval.parents import DEFAULT_OVERSAMPLE
from hseg.store.backends.base import Backend
from hseg.store.backends.choose import choose_backend, opening_errors
from hseg.store.connection import (
    DEFAULT_HNSW,
    check_schema,
    collection_space,
    get_or_create_collection,
    holds_database,
    open_client,
    open_collection,
)
from hseg.store.encoder_binding import EncoderBinding
from hseg.store.indexes import Indexes
from hseg.store.lexical.index import LexicalIndex
from hseg.store.turns import DocumentTurns, Leases
from hseg.store.unit_index import UnitIndex

#: seconds a write of an embedded store waits for another process's (:meth:`HierarchicalStore.writing`)
DEFAULT_LOCK_TIMEOUT = 600.0


@dataclass(eq=False)
class StoreParts:
    """The parts of one store. ``client`` is the chromadb client it was opened with (for a wrapped
    collection, the collection's ``ServerAPI``); ``units`` and ``lexical`` are its derived indexes
    (``None``: absent); ``made_by_opening`` says why a search refuses to answer while the collection
    that opening created holds nothing (``None``: it answers)."""

    collection: Any
    client: Any
    backend: Backend
    units: UnitIndex | None
    lexical: LexicalIndex | None
    binding: EncoderBinding
    turns: DocumentTurns
    lock_timeout: float
    oversample: float
    allow_mismatch: bool
    made_by_opening: str | None = None

    @property
    def indexes(self) -> Indexes:
        """The derived indexes, in the order a write reaches them."""
        return Indexes(self.units, self.lexical)

    def lexical_for(self, action: str) -> LexicalIndex:
        """The lexical index, or a ``ValueError`` saying that ``action`` needs one."""
        if self.lexical is None:
            raise ValueError(f"collection {self.collection.name!r}: {action} needs a lexical index, which a store "
                             "wrapping an object that is not a chromadb collection does not have")
        return self.lexical

    def batch_size(self) -> int:
        """Records per write call: the client's ``get_max_batch_size()``
        (:meth:`hseg.store.backends.Backend.max_batch_size`)."""
        return self.backend.max_batch_size(self.client)


def check_lock_timeout(value: Any) -> None:
    """Refuse a ``lock_timeout`` that is not a number of seconds >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"lock_timeout must be a number of seconds >= 0, got {value!r}")


def open_store(collection_name: str = "hseg", *, path: str | None = None, client: Any = None,
               host: str | None = None, port: int = 8000, encoder: Any = None,
               configuration: Mapping[str, Any] | None = None, oversample: float = DEFAULT_OVERSAMPLE,
               allow_mismatch: bool = False, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
               create: bool = True) -> StoreParts:
    """The parts of the store :class:`hseg.store.HierarchicalStore`'s constructor opens (its arguments,
    its errors): the client of ``path``, ``client`` or ``host``, the collection opened or created."""
    check_lock_timeout(lock_timeout)
    new_database = path is not None and not holds_database(path)
    if new_database and not create:  # before the client: opening a database creates it
        raise StoreNotFoundError(f"no Chroma database at {path}: nothing to open (check the path; create=True "
                                 "makes a new store there)")
    client = open_client(path, client, host, port)
    extra = dict(configuration or {})
    extra = dict(extra.get("hnsw") or {}) if "hnsw" in extra else extra  # accept Chroma's nested form too
    hnsw = {**DEFAULT_HNSW, **extra}
    if hnsw.get("space") != "cosine":
        raise ValueError(f"configuration: space must be 'cosine', got {hnsw.get('space')!r}")
    enc = as_encoder(encoder) if encoder is not None else None
    with opening_errors(client):
        made: str | None = None
        try:
            collection = open_collection(client, collection_name)
        except CollectionNotFoundError as absent:
            if not create:
                raise
            collection = get_or_create_collection(client, collection_name, hnsw, enc)
            made = _made_by_opening(collection_name, path, new_database, absent.existing)
        parts = _assemble(collection, client, enc, oversample, allow_mismatch, hnsw, lock_timeout)
    # only where a path names the store: a mistyped one must not pass for an index that found nothing
    parts.made_by_opening = made if path is not None else None
    return parts


def wrap_collection(collection: Any, encoder: Any = None, *, oversample: float = DEFAULT_OVERSAMPLE,
                    allow_mismatch: bool = False, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> StoreParts:
    """The parts of a store over an existing collection (:meth:`hseg.store.HierarchicalStore.from_collection`)."""
    check_lock_timeout(lock_timeout)
    return _assemble(collection, None, encoder, oversample, allow_mismatch, DEFAULT_HNSW, lock_timeout)


def _assemble(collection: Any, client: Any, encoder: Any, oversample: float, allow_mismatch: bool,
              hnsw: Mapping[str, Any], lock_timeout: float) -> StoreParts:
    space = collection_space(collection)
    if space != "cosine":
        raise ValueError(
            f"collection {collection.name!r} uses the {space!r} distance space; hseg needs 'cosine' "
            "(the space is fixed at creation: create a new collection)"
        )
    check_schema(collection.name, (collection.metadata or {}).get(SCHEMA_KEY))
    backend = choose_backend(collection)  # the one look at the client: every shape question asks it
    client = client if client is not None else backend.api  # from_collection: the collection's
    units = backend.unit_index(collection, hnsw, lambda: parts.batch_size())  # parts: made below, asked later
    lexical = backend.lexical_index(collection)
    binding = EncoderBinding(collection, encoder, allow_mismatch=allow_mismatch, errors=backend.errors)
    journal = None if lexical is None else lexical.journal
    turns = DocumentTurns(str(getattr(collection, "id", None) or f"object-{id(collection)}"),
                          None if journal is None else Leases(journal.collection), f"collection {collection.name!r}")
    parts = StoreParts(collection, client, backend, units, lexical, binding, turns, lock_timeout, oversample,
                       allow_mismatch)
    # an embedded client never reloads its vector index: searches must notice other processes' writes
    backend.open_reads(lambda: (parts.collection, parts.units), parts.batch_size)
    return parts


def _made_by_opening(name: str, path: str | None, new_database: bool, existing: list[str]) -> str:
    """What a search of the collection ``name`` says while it is empty, opening the store having created it."""
    fix = "check the path and the name, add documents first, or open with create=False to refuse a missing store"
    if new_database:
        return (f"no hseg store at {path}: no Chroma database was there, so opening the store created one just now "
                f"(the folder {path}), and it holds nothing; {fix}")
    have = f"collections there: {', '.join(existing)}" if existing else "it held no collections"
    return (f"collection {name!r} at {path} holds nothing: it was not there ({have}), so opening the store "
            f"created it just now; {fix}")
