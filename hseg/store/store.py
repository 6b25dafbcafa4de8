"""What the store is: :class:`HierarchicalStore`, the one object users hold, a facade over the
rooms of this package. It opens a collection (:mod:`hseg.store.connection`), checks the encoder
(:mod:`hseg.store.encoder_binding`), writes and deletes whole documents with their unit and lexical
index rows (:mod:`hseg.store.documents`), reads records page by page (:mod:`hseg.store.reading`,
:mod:`hseg.store.stats`), and searches (:mod:`hseg.store.searching`, which plans the reads of
:mod:`hseg.retrieval`)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import numpy as np

from hseg.chunking.chunks import Chunking
from hseg.chunking.records import Record, records_for
from hseg.chunking.schema import (
    CLUSTER,
    CLUSTER_INDEX_KEY,
    DOC_ID_KEY,
    ENCODER_KEY,
    INDEX_KEY,
    LEVEL_KEY,
    SCHEMA_KEY,
    level_is,
    of_document,
)
from hseg.encoders.factory import as_encoder
from hseg.errors import CollectionNotFoundError, StoreNotFoundError
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.parents import DEFAULT_OVERSAMPLE
from hseg.retrieval.plans import run_many, run_one
from hseg.retrieval.settings import SearchSettings
from hseg.store.backends import choose_backend, opening_errors
from hseg.store.connection import (
    DEFAULT_HNSW,
    check_schema,
    collection_space,
    drop_unit_index,
    get_or_create_collection,
    holds_database,
    lexical_errors,
    open_client,
    open_collection,
    open_unit_index,
)
from hseg.store.documents import (
    Indexes,
    checked_document,
    chunkings_to_add,
    delete_documents,
    same_text_elsewhere,
    with_text_hashes,
    write_documents,
)
from hseg.store.encoder_binding import EncoderBinding
from hseg.store.lexical import LexicalIndex, lexical_state
from hseg.store.maintenance import Incomplete, Maintenance
from hseg.store.reading import pages
from hseg.store.searching import SearchPlanner, search_settings
from hseg.store.searching import query_text as query_text_of
from hseg.store.stats import collection_stats
from hseg.store.turns import DocumentTurns, Leases
from hseg.store.unit_index import UnitIndex

__all__ = ["HierarchicalStore"]

logger = logging.getLogger(__name__)


T = TypeVar("T")

#: seconds a write of an embedded store waits for another process's (:meth:`HierarchicalStore.writing`)
DEFAULT_LOCK_TIMEOUT = 600.0


def _made_by_opening(name: str, path: str | None, new_database: bool, existing: list[str]) -> str:
    """What a search of the collection ``name`` says while it is empty, opening the store having created it."""
    fix = "check the path and the name, add documents first, or open with create=False to refuse a missing store"
    if new_database:
        return (f"no hseg store at {path}: no Chroma database was there, so opening the store created one just now "
                f"(the folder {path}), and it holds nothing; {fix}")
    have = f"collections there: {', '.join(existing)}" if existing else "it held no collections"
    return (f"collection {name!r} at {path} holds nothing: it was not there ({have}), so opening the store "
            f"created it just now; {fix}")


def _check_lock_timeout(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"lock_timeout must be a number of seconds >= 0, got {value!r}")


class HierarchicalStore:
    """Segment + cluster vectors of hierarchical chunks in one Chroma collection.

    Args:
        collection_name: the collection, created (cosine space) when absent.
        path: directory of a ``chromadb.PersistentClient`` (the embedded default).
        client: any chromadb client (``EphemeralClient()``, ``HttpClient(...)``, ...).
        host: a Chroma server, through ``chromadb.HttpClient``.
        port: that server's port.
        encoder: embeds query strings (anything :func:`hseg.encoders.as_encoder` accepts); it must
            be the model that embedded the chunks. Default: all-MiniLM-L6-v2, loaded on first use.
        configuration: extra HNSW settings for a new collection, e.g. ``{"ef_search": 400}`` (or
            Chroma's ``{"hnsw": {...}}`` form). An existing collection keeps its own settings. The
            default ``ef_search`` (4096, :data:`hseg.store.connection.EXACT_SEARCH_RECORDS`) makes
            searches exact, hence identical from one build of the same documents to the next, on
            collections of up to that many records; a lower one is faster on large stores.
        oversample: the first Chroma request asks for ``ceil(oversample * k)`` records (>= 1;
            default 1.5); later requests widen as needed, so this only tunes latency.
        allow_encoder_mismatch: accept an encoder whose name differs from the one recorded in the
            collection (e.g. the same model loaded from another path).
        lock_timeout: seconds a write of an embedded store (``path=``, or a ``PersistentClient``)
            waits while another process writes to it (default 600), then raises
            :class:`hseg.errors.WriterBusyError`; see :meth:`writing`.
        create: ``False`` opens an existing collection only (a :class:`hseg.errors.CollectionNotFoundError`
            naming the collections there when it is absent, a :class:`hseg.errors.StoreNotFoundError` when
            ``path`` holds no Chroma database), so that a store opened to read writes nothing. With ``True``
            and a ``path``, a search of a collection this created and nothing has written yet raises
            :class:`hseg.errors.StoreNotFoundError` (a mistyped path or name) instead of returning ``[]``.

    Only one of ``path``, ``client`` and ``host`` may be given; with none, the store uses
    ``chromadb.EphemeralClient()`` (in memory; all ephemeral clients of a process share data).

    Raises:
        ValueError: more than one of ``path``/``client``/``host``, a ``lock_timeout`` below 0, a space
            other than cosine (in ``configuration`` or the existing collection's).
        EncoderMismatchError: ``encoder`` is not the model the collection records (unless
            ``allow_encoder_mismatch``).
        SchemaTooNewError: the collection was written by a newer hseg.
        CollectionNotFoundError: with ``create=False``, no such collection (``StoreNotFoundError``: no
            Chroma database at ``path``).
        ServerUnreachableError: the Chroma server at ``host`` cannot be reached.

    Example:
        >>> import chromadb
        >>> store = HierarchicalStore("demo", client=chromadb.EphemeralClient())  # doctest: +SKIP
        >>> store.add([chunking], [{"source": "a.md"}])  # doctest: +SKIP
        >>> [h.cluster_id for h in store.search("query", k=2, where={"source": "a.md"})]  # doctest: +SKIP
    """

    def __init__(
        self,
        collection_name: str = "hseg",
        *,
        path: str | None = None,
        client: Any = None,
        host: str | None = None,
        port: int = 8000,
        encoder: Any = None,
        configuration: Mapping[str, Any] | None = None,
        oversample: float = DEFAULT_OVERSAMPLE,
        allow_encoder_mismatch: bool = False,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        create: bool = True,
    ) -> None:
        _check_lock_timeout(lock_timeout)
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
            self._init(collection, client, enc, oversample, allow_encoder_mismatch, hnsw)
        # only where a path names the store: a mistyped one must not pass for an index that found nothing
        self._made_by_opening = made if path is not None else None
        self.lock_timeout = lock_timeout

    @classmethod
    def from_collection(
        cls,
        collection: Any,
        encoder: Any = None,
        *,
        oversample: float = DEFAULT_OVERSAMPLE,
        allow_encoder_mismatch: bool = False,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    ) -> HierarchicalStore:
        """Wrap an existing chromadb ``Collection`` (e.g. ``langchain_chroma.Chroma._collection``).

        The collection must use the cosine space; it may also hold records of other writers, which
        :meth:`search` ignores.

        Args:
            collection: a chromadb ``Collection``.
            encoder: embeds query strings, as the constructor's.
            oversample: as the constructor's.
            allow_encoder_mismatch: as the constructor's.
            lock_timeout: as the constructor's.

        Returns:
            The store over that collection.

        Raises:
            ValueError: the collection is not in the cosine space, or ``lock_timeout`` is below 0.
            EncoderMismatchError: ``encoder`` is not the model the collection records (unless
                ``allow_encoder_mismatch``).
            SchemaTooNewError: the collection was written by a newer hseg.

        Example:
            >>> vs = langchain_chroma.Chroma("c", embedding_function=emb,  # doctest: +SKIP
            ...     collection_configuration={"hnsw": {"space": "cosine"}})
            >>> store = HierarchicalStore.from_collection(vs._collection, encoder=emb)  # doctest: +SKIP
        """
        _check_lock_timeout(lock_timeout)
        self = cls.__new__(cls)
        self._init(collection, None, encoder, oversample, allow_encoder_mismatch,
                   DEFAULT_HNSW)
        self.lock_timeout = lock_timeout
        return self

    def _init(self, collection: Any, client: Any, encoder: Any, oversample: float, allow_mismatch: bool,
              hnsw: Mapping[str, Any]) -> None:
        space = collection_space(collection)
        if space != "cosine":
            raise ValueError(
                f"collection {collection.name!r} uses the {space!r} distance space; hseg needs 'cosine' "
                "(the space is fixed at creation: create a new collection)"
            )
        check_schema(collection.name, (collection.metadata or {}).get(SCHEMA_KEY))
        self.collection = collection
        self._backend = choose_backend(collection)  # the one look at the client: every shape question asks it
        self.client = client if client is not None else self._backend.api  # from_collection: the collection's
        self._made_by_opening = None
        self.oversample = oversample
        self.allow_encoder_mismatch = allow_mismatch
        # opened, not created: a store opened only to read writes nothing (the first write creates it)
        hnsw = dict(hnsw)
        self.unit_index = UnitIndex(lambda create: open_unit_index(collection, hnsw, create=create), collection,
                                    self.max_batch_size, lambda: drop_unit_index(collection)) \
            if self._backend.units else None
        self.lexical_index = LexicalIndex.open(collection, self._backend.lexical_location(collection))
        self.planner = SearchPlanner(collection.name, self.lexical_index, oversample)
        self.encoder_binding = EncoderBinding(collection, encoder, allow_mismatch=allow_mismatch,
                                              errors=self._backend.errors)
        # an embedded client never reloads its vector index: searches must notice other processes' writes
        self._fresh = self._backend.open_reads(lambda: (self.collection, self.unit_index), self._reader_of)
        journal = None if self.lexical_index is None else self.lexical_index.journal
        self.turns = DocumentTurns(str(getattr(collection, "id", None) or f"object-{id(collection)}"),
                                   None if journal is None else Leases(journal.collection),
                                   f"collection {collection.name!r}")
        """The per-document turns every write of documents takes (:mod:`hseg.store.turns`)."""
        self.maintenance = Maintenance(self, self._backend.errors)
        """What keeps the store whole: what is incomplete, the repair, what ``hseg index`` remembers
        (:class:`hseg.store.maintenance.Maintenance`)."""

    @property
    def _indexes(self) -> Indexes:
        return Indexes(self.unit_index, self.lexical_index)

    def _reader_of(self, collection: Any, companion: Any) -> tuple[Any, UnitIndex | None]:
        """A search's view of a private client's collections (never written through). Its unit index's
        coverage is decided here, while the view is opened with no writer writing: counted during a
        write, the two collections would seem out of step."""
        if self.unit_index is None:
            return collection, None
        units = UnitIndex(lambda create: companion, collection, self.max_batch_size)
        units.complete()
        return collection, units

    def _reading(self, wait_s: float | None = None) -> AbstractContextManager[tuple[Any, UnitIndex | None]]:
        """The collection and unit index a search reads (:meth:`hseg.store.backends.Backend.reading`)."""
        return self._backend.reading(wait_s)

    def _read(self, run: Callable[[Any, UnitIndex | None], T]) -> T:
        """``run(collection, unit index)`` on the view a search reads, again on a newer one where that
        view was torn or its reads disagreed (:meth:`hseg.store.backends.Backend.read`)."""
        return self._backend.read(run, self.unit_index, self.lock_timeout)

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold this embedded store's writer lock for the block (nothing for a server or in-memory store).

        Every write of the store takes it by itself (:meth:`add`, :meth:`delete`, :meth:`delete_where`,
        :meth:`sync_unit_index`, :meth:`drop`): processes writing one embedded store take turns, each
        waiting up to :attr:`lock_timeout` seconds, then :class:`hseg.store.lock.WriterBusyError`. A
        block of writes made around the store through its collection (e.g. a LlamaIndex
        ``ChromaVectorStore.add``) holds it for all of them; the store's own writes inside take it
        again without waiting. On entry, when another process wrote since this process's client last
        wrote, the client is started anew, so the writes go through a vector index holding that
        process's vectors instead of saving an older one over them (:mod:`hseg.store.lock`,
        :func:`hseg.store.freshness.current_writes`).

        Example:
            >>> with store.writing():  # doctest: +SKIP
            ...     chroma_vector_store.add(nodes)
            ...     store.sync_unit_index(doc_ids)
        """
        with self._backend.writing(self.collection, self.lock_timeout):
            yield

    def writer_turn(self) -> object | None:
        """This process's present hold of the embedded store's writer lock (:func:`hseg.store.lock.writer_turn`;
        ``None``: not held, or a server or in-memory store, which has none)."""
        return self._backend.writer_turn()

    @contextlib.contextmanager
    def _turn(self, doc_ids: Sequence[str]) -> Iterator[None]:
        """The turns of these documents (:mod:`hseg.store.turns`) for the block; a server lost while they
        are taken is named in the error, as in every write."""
        with contextlib.ExitStack() as held:
            with self._backend.errors(f"taking the write turn of {len(doc_ids)} documents"):
                held.enter_context(self.turns.taking(doc_ids, self.lock_timeout))
            yield

    @contextlib.contextmanager
    def _writing(self, action: str) -> Iterator[None]:
        """Around one of this store's writes: the writer lock of an embedded store (:meth:`writing`),
        its fresh reads must not take it for another process's, and a lost server is named in the error."""
        with self.writing(), self._backend.own_write(), self._backend.errors(action):
            yield

    # ----------------------------------------------------------------- the indexes

    def sync_lexical_index(self, doc_ids: Sequence[str] | None = None) -> int:
        """Rebuild the lexical (BM25) index of these documents (default: all) from the stored records;
        returns the segments it holds.

        Needed only for documents written into the collection without hseg (e.g. by a LlamaIndex
        ``ChromaVectorStore``); :meth:`add` and :meth:`delete` keep the index in step, and a search or
        ``hseg index`` repairs what a write cut short left (:mod:`hseg.store.lexical`).

        Example:
            >>> store.sync_lexical_index()  # doctest: +SKIP
            2134
        """
        index = self.planner.lexical("rebuilding the lexical index")
        with self._backend.errors("rebuilding the lexical index"), lexical_errors(index.location.path):
            return int(index.sync(None if doc_ids is None else list(doc_ids)))

    def sync_unit_index(self, doc_ids: Sequence[str] | None = None) -> int:
        """Rebuild the unit index of these documents (default: all) from the stored records; returns
        the number of unit records written.

        Needed only for documents written into the collection without it (e.g. by a LlamaIndex
        ``IngestionPipeline`` into a ``ChromaVectorStore``, or by hseg before 0.3); :meth:`add`
        keeps the index in step by itself, and ``hseg index`` repairs what a cut-short write left.
        A full rebuild (no ``doc_ids``) also writes an index of an older layout anew in the current
        one, whose records hold fewer metadata keys (:mod:`hseg.retrieval.unit_vectors`).

        Example:
            >>> store.sync_unit_index()  # doctest: +SKIP
            2576
        """
        if self.unit_index is None:
            raise ValueError(f"collection {self.collection.name!r}: no unit index (the store has no Chroma client)")
        docs = list(self.doc_ids() if doc_ids is None else doc_ids)
        # the records it reads may have been written around hseg's checks (a ChromaVectorStore): refuse
        # to index vectors of two models together, before writing each batch
        binding = self.encoder_binding
        reference = [binding.query_name()]

        def check(metadatas: list[dict[str, Any]]) -> None:
            reference[0] = binding.check_records(metadatas, reference[0])

        with self._writing("rebuilding the unit index"):
            # a full rebuild also brings an index of an older layout to the current one
            written = self.unit_index.rebuild(docs, check) if doc_ids is None else self.unit_index.sync(docs, check)
            # after a full rebuild the index is complete (short of a writer working at the same time)
            self.unit_index.after_write(complete=True if doc_ids is None else None)
            if binding.recorded is None and reference[0] is not None:
                binding.record(reference[0])  # e.g. a collection made by ChromaVectorStore
        return written

    # ----------------------------------------------------------------- encoder

    @property
    def encoder(self) -> Any:
        """The query encoder (the default model is loaded on first access)."""
        return self.encoder_binding.encoder

    @encoder.setter
    def encoder(self, encoder: Any) -> None:
        self.encoder_binding.encoder = encoder

    def use_encoder(self, encoder: Any) -> None:
        """Embed queries with ``encoder`` from now on, checked against the collection's encoder as the
        constructor checks it.

        Args:
            encoder: anything :func:`hseg.encoders.as_encoder` accepts.

        Raises:
            EncoderMismatchError: ``encoder`` is not the model the collection records (unless
                ``allow_encoder_mismatch``).

        Example:
            >>> store = HierarchicalStore("hseg", path="./chroma-db", create=False)  # doctest: +SKIP
            >>> store.use_encoder(load_encoder(store.encoder_name))  # doctest: +SKIP
        """
        self.encoder_binding = EncoderBinding(self.collection, encoder, allow_mismatch=self.allow_encoder_mismatch,
                                              errors=self._backend.errors)

    @property
    def encoder_name(self) -> str | None:
        """The encoder name recorded in the collection, if any."""
        return self.encoder_binding.recorded

    # ----------------------------------------------------------------- writes

    def max_batch_size(self) -> int:
        """Records per write call: the client's ``get_max_batch_size()``
        (:meth:`hseg.store.backends.Backend.max_batch_size`)."""
        return self._backend.max_batch_size(self.client)

    def add(
        self,
        chunkings: Chunking | Iterable[Chunking],
        metadatas: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
        *,
        on_written: Callable[[list[str]], None] | None = None,
        stored: Incomplete | None = None,
        on_same_text: Callable[[dict[str, list[str]]], None] | None = None,
    ) -> int:
        """Upsert the records of one or more documents; returns the number of records written.

        ``metadatas`` is one mapping per chunking (or a single mapping for all). Idempotent:
        re-adding the same chunking rewrites the same ids. Records of a re-added document that
        the new chunking no longer has are deleted, and user metadata keys it no longer has are
        removed. All records are built (and validated) before the first write.

        A document given twice with the same text, chunks and metadata is written once; the same
        ``doc_id`` with different content raises ``ValueError``. A blank document (no chunks) writes
        nothing and removes what the store held for its id.

        Crash safety: documents are packed whole into upsert calls (at most :meth:`max_batch_size`
        records each) and Chroma applies one call as a whole, so a process killed mid-``add`` or a
        server that goes away leaves every document either complete or absent. Only a document with
        more records than one call holds (several thousand: megabytes of text) is split; its cluster
        records go first, each carrying its full parent text, so a reader of a partly written
        document still gets whole parents, and adding it again completes it.

        Records of a re-added document that its new chunking lacks are deleted after the upserts. A
        process killed between the two leaves both versions of that document, and :meth:`search` may
        return hits of either, until the document is added again: the next ``add`` of it deletes
        every stored record its chunking lacks, whichever version wrote them. ``hseg index`` does not
        skip such a document as unchanged (records of another text, other settings or another
        chunking make it incomplete: :func:`hseg.ingest.is_complete`), so re-running it cleans up.
        The order of the writes, and what a crash leaves: :mod:`hseg.store.documents`.

        ``on_written(doc_ids)`` is told, after each write call, which documents now have all their
        records stored (their unit-index records follow at the end of the ``add``): what a caller
        needs to say what an ``add`` that failed half way had written.

        Every record carries its document's ``content_sha256``. A document whose text the store
        already holds under another id (a loader's random ids, as LlamaIndex's ``SimpleDirectoryReader``
        gives without ``filename_as_id=True``, store a file again on every run) is written, and
        logged as a warning naming both ids; ``on_same_text({doc id: [other ids]})`` hears the same.

        Args:
            chunkings: one chunking or several (one per document).
            metadatas: one mapping per chunking, or a single mapping for all.
            on_written: called as ``on_written(doc_ids)`` after each write call.
            stored: the answer of :meth:`maintenance.incomplete <hseg.store.maintenance.Maintenance.incomplete>`
                for these documents (``hseg index`` asks it first); what it read of their records is used
                instead of reading them again, while the writer lock it was read under is still held.
            on_same_text: called once, before the write, as ``on_same_text({doc id: other ids})``
                with the documents whose text is stored (or given in this call) under other ids.

        Returns:
            The number of records written.

        Raises:
            ValueError: metadata the store cannot keep, or one ``doc_id`` given twice with different
                content (before anything is written).
            EncoderMismatchError: vectors of another model or dimension than the collection's.
            WriterBusyError: another process kept an embedded store's writer lock past ``lock_timeout``.
            ServerUnreachableError: the Chroma server cannot be reached.

        Example:
            >>> store.add(chunker.chunk_many(texts, doc_ids), [{"source": p} for p in paths])  # doctest: +SKIP
            57
        """
        items, metas = chunkings_to_add(chunkings, metadatas)
        doc_ids = [c.doc_id for c in items]
        per_doc = [records_for(ch, md) for ch, md in zip(items, metas)]
        records = [r for recs in per_doc for r in recs]
        binding = self.encoder_binding
        with self._backend.errors("reading the collection"):
            binding.check_dimension(records)
        enc_name = binding.of_chunkings(items)
        if enc_name is not None:
            binding.check_name(enc_name)
            for r in records:  # a chunking made without the chunker does not name its encoder: the store's
                r.metadata.setdefault(ENCODER_KEY, enc_name)
        if not items:
            return 0
        return self._write(doc_ids, per_doc, enc_name, stored, on_written, on_same_text)

    def add_records(self, documents: Mapping[str, Sequence[Record]], *,
                    on_written: Callable[[list[str]], None] | None = None,
                    on_same_text: Callable[[dict[str, list[str]]], None] | None = None) -> int:
        """Write documents given as their records, ``{doc id: records}``, through the write of :meth:`add`
        (turn, writer lock, unit-index and lexical rows, the old version replaced as one unit); returns
        the number of records written. For adapters whose framework carries the records (a LlamaIndex
        node is one record: its id, vector, text and metadata): each document must be whole, as
        :func:`hseg.chunking.records.records_for` builds it (its cluster records tile its text and list
        exactly its segment records).

        Args:
            documents: ``{doc id: records}``.
            on_written: called as ``on_written(doc_ids)`` after each write call, as :meth:`add`'s.
            on_same_text: told the documents whose text is stored under other ids, as :meth:`add`'s
                (which also logs them as a warning).

        Returns:
            The number of records written.

        Raises:
            ValueError: ``documents`` is not a dict, or a document is not whole (naming it), before
                anything is written.
            EncoderMismatchError: vectors of another model or dimension than the collection's.
            WriterBusyError: another process kept an embedded store's writer lock past ``lock_timeout``.
            ServerUnreachableError: the Chroma server cannot be reached.

        Example:
            >>> store.add_records({"report": records_for(chunking, {"source": "r.md"})})  # doctest: +SKIP
            57
        """
        if not isinstance(documents, Mapping):
            raise ValueError(f"documents must be a dict of doc id -> records, got {type(documents).__name__}")
        doc_ids = [str(d) for d in documents]
        per_doc = [checked_document(d, list(documents[d])) for d in doc_ids]
        records = [r for recs in per_doc for r in recs]
        binding = self.encoder_binding
        with self._backend.errors("reading the collection"):
            binding.check_dimension(records)
        enc_name = binding.check_records((r.metadata for r in records), binding.query_name())
        if enc_name is not None:
            binding.check_name(enc_name)
        if not doc_ids:
            return 0
        return self._write(doc_ids, per_doc, enc_name, None, on_written, on_same_text)

    def _write(self, doc_ids: list[str], per_doc: list[list[Record]], enc_name: str | None,
               stored: Incomplete | None, on_written: Callable[[list[str]], None] | None,
               on_same_text: Callable[[dict[str, list[str]]], None] | None = None) -> int:
        """The one write of whole documents: their turns, then the writer lock, then what the store
        holds of them and of their texts under other ids, their records and index rows, and the old
        records they no longer have."""
        binding = self.encoder_binding
        per_doc, shas = with_text_hashes(per_doc, doc_ids)
        with self._turn(doc_ids), self._writing(f"writing {len(doc_ids)} documents"):
            old = self._existing(doc_ids, stored)
            with self._backend.errors("reading the collection"):
                same = same_text_elsewhere(self.collection, shas)
            for doc_id, others in same.items():
                logger.warning("document %r: its text is also stored under %s; both are searched (random ids, as "
                               "LlamaIndex's SimpleDirectoryReader gives without filename_as_id=True, store a file "
                               "again on every run): give documents stable ids, or delete the other", doc_id,
                               ", ".join(repr(o) for o in others))
            if same and on_same_text is not None:
                on_same_text(same)
            binding.adopt_if_empty(enc_name)
            stale = write_documents(self.collection, self._indexes, per_doc, doc_ids, old, self.max_batch_size(),
                                    on_written, errors=self._backend.errors)
            binding.record(enc_name)
        written = sum(len(recs) for recs in per_doc)
        logger.info("add: %d documents, %d records upserted, %d stale records deleted", len(doc_ids), written, stale)
        return written

    def _existing(self, doc_ids: list[str], stored: Incomplete | None = None) -> Mapping[str, Mapping[str, Any]]:
        """``{record id: metadata}`` of the records the collection holds for these documents: as
        ``stored`` read them when it asked about them all under this hold of the writer lock (no other
        process can have written them since), else read now, in the documents' turns: an answer read
        with no lock held (a server's client, an in-memory store) may be older than another writer's
        version, which this write must replace too."""
        if stored is None or stored.turn is None or stored.turn is not self.writer_turn() \
                or not stored.asked.issuperset(doc_ids):
            held: Mapping[str, Mapping[str, Mapping[str, Any]]] = self.maintenance.records(doc_ids)
        else:
            held = {d: stored.records[d] for d in doc_ids if d in stored.records}
        return {rid: meta for records in held.values() for rid, meta in records.items()}

    def drop(self) -> None:
        """Delete the collection, its unit index and its lexical index (everything this store holds);
        the store object is unusable afterwards. Deleting only the collection by hand would leave the
        unit index behind, and a later collection of the same name would find it stale.

        Example:
            >>> HierarchicalStore("scratch", path="./chroma").drop()  # doctest: +SKIP
        """
        api = self._backend.api  # the server API both collections were opened through
        where = {"tenant": self.collection.tenant, "database": self.collection.database}
        with self.writing(), self._backend.errors(f"deleting collection {self.collection.name!r}"):
            if self.lexical_index is not None:
                self.lexical_index.drop()
            if self.unit_index is not None and self.unit_index.existing is not None:
                api.delete_collection(self.unit_index.name, **where)  # first: it names the collection's records
            api.delete_collection(self.collection.name, **where)
        self._backend.close()
        logger.info("dropped collection %r, its unit index and its lexical index", self.collection.name)

    def delete(self, doc_id: str) -> int:
        """Remove every record of a document, and its unit-index and lexical rows.

        Args:
            doc_id: the document.

        Returns:
            How many records were removed (0 for a document the store does not hold).

        Raises:
            WriterBusyError: another process kept an embedded store's writer lock past ``lock_timeout``.
            ServerUnreachableError: the Chroma server cannot be reached.
        """
        with self._turn([doc_id]), self._writing(f"deleting document {doc_id!r}"):
            ids = self.collection.get(where=of_document(doc_id), include=[])["ids"]
            delete_documents(self.collection, self._indexes, [doc_id], ids, self.max_batch_size())
        logger.info("delete: %d records of document %r", len(ids), doc_id)
        return len(ids)

    def delete_where(self, where: Mapping[str, Any]) -> int:
        """Remove every record matching a Chroma ``where`` (e.g. another writer's document key). The
        documents' unit-index records go first.

        Args:
            where: a non-empty Chroma ``where``.

        Returns:
            How many records were removed.

        Raises:
            ValueError: ``where`` is not a non-empty dict.
            WriterBusyError: another process kept an embedded store's writer lock past ``lock_timeout``.
            ServerUnreachableError: the Chroma server cannot be reached.

        Example:
            >>> store.delete_where({"document_id": "report"})  # doctest: +SKIP
            12
        """
        if not isinstance(where, Mapping) or not where:
            raise ValueError(f"where must be a non-empty dict, got {where!r}")
        with self._backend.errors(f"reading records where {dict(where)}"):
            found = self.collection.get(where=dict(where), include=["metadatas"])
        docs = sorted({str(m[DOC_ID_KEY]) for m in found["metadatas"] if m and DOC_ID_KEY in m})
        # read again in the documents' turns: a write of one of them may have been under way
        with self._turn(docs), self._writing(f"deleting records where {dict(where)}"):
            got = self.collection.get(where=dict(where), include=["metadatas"])
            docs = sorted({str(m[DOC_ID_KEY]) for m in got["metadatas"] if m and DOC_ID_KEY in m})
            delete_documents(self.collection, self._indexes, docs, got["ids"], self.max_batch_size())
        return len(got["ids"])

    # ----------------------------------------------------------------- reads

    def count(self, where: Mapping[str, Any] | None = None) -> int:
        """Number of records in the collection (both levels, and records of other writers), or of
        those matching a Chroma ``where``.

        Args:
            where: a Chroma ``where``, or ``None`` for every record.

        Returns:
            The number of records.

        Raises:
            ServerUnreachableError: the Chroma server cannot be reached.

        Example:
            >>> store.count({"source": "notes/a.md"})  # doctest: +SKIP
            14
        """
        with self._backend.errors("count"):
            if where:
                return len(self.collection.get(where=dict(where), include=[])["ids"])
            return int(self.collection.count())

    def iter_metadatas(self, where: Mapping[str, Any] | None = None, *, page: int = 5000
                       ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every record's metadata (or that of those matching ``where``), read page by page; records of
        other writers sharing the collection included.

        Args:
            where: a Chroma ``where``, or ``None`` for every record.
            page: records read per call.

        Yields:
            ``(record id, metadata)``.

        Raises:
            ServerUnreachableError: the Chroma server cannot be reached.

        Example:
            >>> clusters = store.iter_metadatas({"hseg_level": "cluster"})  # doctest: +SKIP
            >>> sources = {m.get("source") for _, m in clusters}  # doctest: +SKIP
        """
        return self._metadatas(where, page, "reading the collection")

    def _metadatas(self, where: Mapping[str, Any] | None, page: int, action: str
                   ) -> Iterator[tuple[str, dict[str, Any]]]:
        with self._backend.errors(action):
            for got in pages(self.collection, where, ["metadatas"], page):
                yield from ((rid, dict(m or {})) for rid, m in zip(got["ids"], got["metadatas"]))

    def doc_ids(self) -> list[str]:
        """Sorted ids of the documents stored (read from the cluster records, page by page)."""
        clusters = self._metadatas(level_is(CLUSTER), 5000, "listing the documents")
        return sorted({str(m[DOC_ID_KEY]) for _, m in clusters if DOC_ID_KEY in m})

    def stats(self) -> dict[str, Any]:
        """Counts and mean token sizes of the hseg records, how many documents are whole (their
        records and unit-index records all there, each with its vector;
        :func:`hseg.store.completeness.completeness`), ``records_without_vectors`` and
        ``unit_records_without_vectors`` (records metadata alone keeps: no search finds them), and
        ``record_encoders``, the records counted by the encoder their ``hseg_encoder`` names (more than
        one, or another than ``encoder``, means vectors of several models were written into the
        collection), and ``lexical_index``: where it lives and the segments it holds once checked (a
        damaged file is built again first; ``problem`` says why it cannot be); read page by page
        (:func:`hseg.store.stats.collection_stats`), through a view
        that has seen other processes' writes.

        Example:
            >>> store.stats()["documents"]  # doctest: +SKIP
            5
        """
        with self._reading() as (collection, units):
            stats = collection_stats(collection, units, self.maintenance.lexical_segments, errors=self._backend.errors)
        stats["lexical_index"] = None if self.lexical_index is None else lexical_state(self.lexical_index)
        return stats

    def get_records(self, doc_id: str, *, include_embeddings: bool = True) -> list[Record]:
        """A document's records in document order (each cluster record before its segments).

        Args:
            doc_id: the document.
            include_embeddings: read the vectors too (else each record's ``embedding`` is empty).

        Returns:
            The records (``[]`` for a document the store does not hold).

        Raises:
            ServerUnreachableError: the Chroma server cannot be reached.
        """
        include = ["documents", "metadatas"] + (["embeddings"] if include_embeddings else [])
        # through the reads' view: an embedded client reads vectors from its own, possibly stale, index
        with self._reading() as (collection, _), self._backend.errors(f"reading document {doc_id!r}"):
            got = collection.get(where=of_document(doc_id), include=include)
        embs = got.get("embeddings")
        recs = [
            Record(rid, np.asarray(embs[i], dtype=np.float32) if include_embeddings else np.empty(0, np.float32),
                   doc, dict(meta))
            for i, (rid, doc, meta) in enumerate(zip(got["ids"], got["documents"], got["metadatas"]))
        ]
        recs.sort(key=lambda r: (r.metadata[CLUSTER_INDEX_KEY], r.metadata[LEVEL_KEY] != CLUSTER,
                                 r.metadata[INDEX_KEY]))
        return recs

    def search(
        self,
        query: str | np.ndarray | Sequence[float],
        k: int | None = None,
        *,
        settings: SearchSettings | None = None,
        query_text: str | None = None,
        **fields: Any,
    ) -> list[SearchHit]:
        """The best hits for a query, best first: the one search door.

        Args:
            query: a string (embedded with :attr:`encoder`) or a query vector.
            k: results (default 4); a shorthand for ``k=`` in ``fields``.
            settings: a :class:`~hseg.retrieval.settings.SearchSettings` (default: its defaults).
            query_text: the query's words for the lexical side when ``query`` is a vector (a string
                query is its own text); needed only with ``lexical_weight`` > 0.
            fields: any of its fields (``budget_tokens``, ``unit``, ``mode``, ``cluster_weight``,
                ``neighbour_weight``, ``lexical_weight``, ``where``, ``where_document``), overriding ``settings``.

        Returns:
            The hits, best first, each with its exact span of its document.

        Raises:
            ValueError: a setting out of range or unknown (naming it), a ``query_text`` that is not a
                string or is given beside a string query, or ``lexical_weight`` > 0 on a store without
                a lexical index (one wrapping an object that is not a chromadb collection).
            EncoderMismatchError: a query vector of another dimension than the collection's, or a hit
                whose vectors another model made.
            StoreNotFoundError: a store opened at a ``path`` that held none, and nothing written since.
            IndexOutOfStepError: what the search read disagrees with the collection.
            ServerUnreachableError: the Chroma server cannot be reached.

        ``unit="cluster"`` (default) returns whole parents ranked by the max cosine over their vectors
        (paper eq. 2, :mod:`hseg.retrieval.parents`); ``"segment"`` and ``"auto"`` return passages of
        adjacent segments (:mod:`hseg.retrieval.passages`). Every path is exact with respect to the
        neighbours Chroma returns. With ``lexical_weight=λ`` > 0 every unit is ranked by its dense score
        ``+ λ ·`` its BM25 score divided by the query's best (the lexical index,
        :mod:`hseg.store.lexical`), exact with respect to what Chroma and the lexical index return.

        Example:
            >>> [(h.cluster_id, round(h.score, 3)) for h in store.search("tides", k=2)]  # doctest: +SKIP
            [('clu-5d0c...', 0.612), ('clu-a9e1...', 0.574)]
            >>> hits = store.search("tides", budget_tokens=1024, unit="auto")  # doctest: +SKIP
            >>> hybrid = store.search("tides", budget_tokens=1024, unit="auto", lexical_weight=0.3)  # doctest: +SKIP
        """
        chosen = search_settings(settings, k, fields)
        text = query_text_of(query, query_text, "query_text")
        self._refuse_made_by_opening()

        def run(collection: Any, units: UnitIndex | None) -> list[SearchHit]:
            vec = self.encoder_binding.query_vector(query, collection=collection)
            with self._backend.errors("search"):
                return self.planner.answer(chosen, lambda used: run_one(self.planner.plan(vec, used, collection,
                                                                                          units, text)))

        hits = self._read(run)
        self._check_hits(hits)
        return hits

    def search_many(
        self,
        queries: Sequence[str | np.ndarray | Sequence[float]],
        k: int | None = None,
        *,
        settings: SearchSettings | None = None,
        query_texts: Sequence[str | None] | None = None,
        **fields: Any,
    ) -> list[list[SearchHit]]:
        """:meth:`search` for many queries, with the same settings and the same answers, in fewer
        Chroma calls: the searches advance together and each step's reads go to Chroma as one
        ``query`` with many query vectors and one ``get`` (:mod:`hseg.retrieval.plans`). For evaluations
        and batch jobs; a single question is :meth:`search`.

        Args:
            queries: strings or query vectors.
            k: results per query, as :meth:`search`'s.
            settings: as :meth:`search`'s, for every query.
            query_texts: the words of vector queries for the lexical side (one per query; ``None`` for a
                string query).
            fields: as :meth:`search`'s.

        Returns:
            One list of hits per query, in order.

        Raises:
            ValueError: ``queries`` is not a list, ``query_texts`` not one per query, or as :meth:`search`.
            EncoderMismatchError: as :meth:`search`.
            StoreNotFoundError: as :meth:`search`.
            IndexOutOfStepError: as :meth:`search`.
            ServerUnreachableError: the Chroma server cannot be reached.

        Example:
            >>> hits = store.search_many(["what causes tides?", "who saw Jupiter's moons?"], budget_tokens=1024,
            ...                          unit="auto")  # doctest: +SKIP
            >>> len(hits)  # doctest: +SKIP
            2
        """
        if isinstance(queries, (str, np.ndarray)) or not isinstance(queries, Sequence):
            raise ValueError(f"queries must be a list of strings or vectors, got {type(queries).__name__}")
        if query_texts is not None and (isinstance(query_texts, str) or len(query_texts) != len(queries)):
            raise ValueError(f"query_texts must be a list with one entry per query ({len(queries)}), "
                             f"got {query_texts!r:.80}")
        chosen = search_settings(settings, k, fields)
        texts = [query_text_of(q, None if query_texts is None else query_texts[i], f"query_texts[{i}]")
                 for i, q in enumerate(queries)]
        binding = self.encoder_binding
        self._refuse_made_by_opening()

        def run(collection: Any, units: UnitIndex | None) -> list[list[SearchHit]]:
            vectors = [binding.query_vector(q, f"queries[{i}]", collection=collection) for i, q in enumerate(queries)]
            with self._backend.errors("search"):
                return self.planner.answer(chosen, lambda used: run_many(
                    [self.planner.plan(v, used, collection, units, t) for v, t in zip(vectors, texts)]))

        answers = self._read(run)
        self._check_hits([h for hits in answers for h in hits])
        return answers

    def _refuse_made_by_opening(self) -> None:
        """A :class:`~hseg.errors.StoreNotFoundError` for a search of a collection that opening this store
        created (at a ``path`` that held none) while it still holds nothing: a mistyped path or name, which
        an answer of ``[]`` would pass off as an index that found nothing. Once written, it searches."""
        if self._made_by_opening is None:
            return
        if self.count() > 0:
            self._made_by_opening = None
            return
        raise StoreNotFoundError(self._made_by_opening)

    def _check_hits(self, hits: list[SearchHit]) -> None:
        """Refuse an answer with a hit whose vectors another model made than the queries'. A document is
        written whole with one encoder, so the ranking of an answer with no such hit is that of the
        query model's records alone; checking the hits costs no read."""
        binding = self.encoder_binding
        binding.check_records((h.metadata for h in hits), binding.query_name())

    # ----------------------------------------------------------------- async

    async def asearch(self, query: Any, k: int | None = None, *, settings: SearchSettings | None = None,
                      query_text: str | None = None, **fields: Any) -> list[SearchHit]:
        """:meth:`search` in a worker thread (the encoder and Chroma calls block)."""
        return await asyncio.to_thread(functools.partial(self.search, query, k, settings=settings,
                                                         query_text=query_text, **fields))

    async def asearch_many(self, queries: Any, k: int | None = None, *, settings: SearchSettings | None = None,
                           query_texts: Sequence[str | None] | None = None, **fields: Any) -> list[list[SearchHit]]:
        """:meth:`search_many` in a worker thread."""
        return await asyncio.to_thread(functools.partial(self.search_many, queries, k, settings=settings,
                                                         query_texts=query_texts, **fields))

    async def aadd(self, chunkings: Any, metadatas: Any = None) -> int:
        """:meth:`add` in a worker thread."""
        return await asyncio.to_thread(self.add, chunkings, metadatas)

    async def adelete(self, doc_id: str) -> int:
        """:meth:`delete` in a worker thread."""
        return await asyncio.to_thread(self.delete, doc_id)
