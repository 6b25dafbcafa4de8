"""What the store is: :class:`HierarchicalStore`, the one object users hold. It opens a collection
(:mod:`hseg.store.connection`), writes documents whole (:mod:`hseg.store.writing`), keeps the
unit index in step, reads records page by page, and searches (:mod:`hseg.retrieval.parents`,
:mod:`hseg.retrieval.passages`)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from hseg.chunking.chunks import Chunking
from hseg.chunking.records import ENCODER_KEY, SCHEMA_VERSION, Record, check_unicode, records_for
from hseg.encoders import DEFAULT_MODEL, canonical_model_name
from hseg.encoders.factory import as_encoder
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.lexical_query import lexical_query
from hseg.retrieval.parents import DEFAULT_OVERSAMPLE, parents_plan
from hseg.retrieval.passages import units_plan
from hseg.retrieval.plans import Plan, run_many, run_one
from hseg.retrieval.settings import SearchSettings
from hseg.retrieval.unit_vectors import UnitKey
from hseg.store.completeness import completeness
from hseg.store.connection import (
    DEFAULT_HNSW,
    check_encoder,
    check_schema,
    collection_space,
    connect_errors,
    get_or_create_collection,
    has_unit_index,
    open_client,
    open_lexical_index,
    open_unit_index,
    remote_errors,
)
from hseg.store.freshness import FreshReads, persist_directory
from hseg.store.reading import get_by_documents, ids_without_vectors, level_stats, pages
from hseg.store.unit_index import UnitIndex
from hseg.store.writing import dedupe, delete_ids, write_batches, write_failure

__all__ = ["HierarchicalStore"]

logger = logging.getLogger(__name__)

_FALLBACK_BATCH = 1000  # when a wrapped collection does not tell us its client's limit


class HierarchicalStore:
    """Segment + cluster vectors of hierarchical chunks in one Chroma collection.

    Args:
        collection_name: the collection, created (cosine space) when absent.
        path: directory of a ``chromadb.PersistentClient`` (the embedded default).
        client: any chromadb client (``EphemeralClient()``, ``HttpClient(...)``, ...).
        host, port: a Chroma server, through ``chromadb.HttpClient``.
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

    Only one of ``path``, ``client`` and ``host`` may be given; with none, the store uses
    ``chromadb.EphemeralClient()`` (in memory; all ephemeral clients of a process share data).

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
    ) -> None:
        client = open_client(path, client, host, port)
        extra = dict(configuration or {})
        extra = dict(extra.get("hnsw") or {}) if "hnsw" in extra else extra  # accept Chroma's nested form too
        hnsw = {**DEFAULT_HNSW, **extra}
        if hnsw.get("space") != "cosine":
            raise ValueError(f"configuration: space must be 'cosine', got {hnsw.get('space')!r}")
        enc = as_encoder(encoder) if encoder is not None else None
        with connect_errors(client):
            collection = get_or_create_collection(client, collection_name, hnsw, enc)
            self._init(collection, client, enc, oversample, allow_encoder_mismatch, hnsw)

    @classmethod
    def from_collection(
        cls,
        collection: Any,
        encoder: Any = None,
        *,
        oversample: float = DEFAULT_OVERSAMPLE,
        allow_encoder_mismatch: bool = False,
    ) -> HierarchicalStore:
        """Wrap an existing chromadb ``Collection`` (e.g. ``langchain_chroma.Chroma._collection``).

        The collection must use the cosine space; it may also hold records of other writers, which
        :meth:`search` ignores.

        Example:
            >>> vs = langchain_chroma.Chroma("c", embedding_function=emb,  # doctest: +SKIP
            ...     collection_configuration={"hnsw": {"space": "cosine"}})
            >>> store = HierarchicalStore.from_collection(vs._collection, encoder=emb)  # doctest: +SKIP
        """
        self = cls.__new__(cls)
        self._init(collection, getattr(collection, "_client", None), encoder, oversample, allow_encoder_mismatch,
                   DEFAULT_HNSW)
        return self

    def _init(self, collection: Any, client: Any, encoder: Any, oversample: float, allow_mismatch: bool,
              hnsw: Mapping[str, Any]) -> None:
        if isinstance(oversample, bool) or not isinstance(oversample, (int, float)) or not oversample >= 1:
            raise ValueError(f"oversample must be a number >= 1, got {oversample!r}")
        space = collection_space(collection)
        if space != "cosine":
            raise ValueError(
                f"collection {collection.name!r} uses the {space!r} distance space; hseg needs 'cosine' "
                "(the space is fixed at creation: create a new collection)"
            )
        meta = collection.metadata or {}
        check_schema(collection.name, meta.get("hseg_schema"))
        self.collection = collection
        self.client = client
        self.oversample = oversample
        self.allow_encoder_mismatch = allow_mismatch
        self._encoder = None
        self._encoder_lock = threading.Lock()
        self._dimension: int | None = None  # the collection's vector dimension, read once it holds a record
        if encoder is not None:
            self._encoder = as_encoder(encoder)
            self._check_encoder_name(self._encoder.name)
        # opened, not created: a store opened only to read writes nothing (the first write creates it)
        hnsw = dict(hnsw)
        self.unit_index = UnitIndex(lambda create: open_unit_index(collection, hnsw, create=create), collection,
                                    self.max_batch_size) if has_unit_index(collection) else None
        self.lexical_index = open_lexical_index(collection, self.max_batch_size)
        self._warned_no_text = False
        # an embedded client never reloads its vector index: searches must notice other processes' writes
        path = persist_directory(collection)
        self._fresh = None if path is None else FreshReads(path, lambda: (self.collection, self.unit_index),
                                                           self._reader_of)

    def _reader_of(self, collection: Any, companion: Any) -> tuple[Any, UnitIndex | None]:
        """A search's view of a private client's collections (never written through)."""
        if self.unit_index is None:
            return collection, None
        return collection, UnitIndex(lambda create: companion, collection, self.max_batch_size)

    def _reading(self) -> AbstractContextManager[tuple[Any, UnitIndex | None]]:
        """The collection and unit index a search reads (see :mod:`hseg.store.freshness`)."""
        return nullcontext((self.collection, self.unit_index)) if self._fresh is None else self._fresh.reading()

    def _fresh_writing(self) -> AbstractContextManager[None]:
        """This store's own writes, which its fresh reads must not take for another process's."""
        return nullcontext() if self._fresh is None else self._fresh.writing()

    # ----------------------------------------------------------------- the lexical index

    def sync_lexical_index(self, doc_ids: Sequence[str] | None = None) -> int:
        """Rebuild the lexical (BM25) index of these documents (default: all) from the stored records;
        returns the segments it holds.

        Needed only for documents written into the collection without hseg (e.g. by a LlamaIndex
        ``ChromaVectorStore``); :meth:`add` and :meth:`delete` keep the index in step, and a search or
        ``hseg index`` repairs what a write cut short left (:mod:`hseg.store.lexical_index`).

        Example:
            >>> store.sync_lexical_index()  # doctest: +SKIP
            2134
        """
        index = self._lexical("rebuilding the lexical index")
        with remote_errors(self.collection, "rebuilding the lexical index"):
            return int(index.sync(None if doc_ids is None else list(doc_ids)))

    def lexical_documents(self, doc_ids: Sequence[str]) -> dict[str, tuple[set[str], str | None]] | None:
        """``{doc id: (segment ids, content_sha256)}`` the lexical index holds for these documents, for
        ``hseg index``'s completeness check; ``None`` where the index is not kept by writers (a
        server's per-client cache is derived from the collection, so it cannot miss a document)."""
        if self.lexical_index is None or not self.lexical_index.maintained:
            return None
        with remote_errors(self.collection, "reading the lexical index"):
            self.lexical_index.ensure_fresh()
            return dict(self.lexical_index.documents(doc_ids))

    def _lexical(self, action: str) -> Any:
        if self.lexical_index is None:
            raise ValueError(f"collection {self.collection.name!r}: {action} needs a lexical index, which a store "
                             "wrapping an object that is not a chromadb collection does not have")
        return self.lexical_index

    def _lexical_writing(self, doc_ids: Sequence[str]) -> Any:
        """The lexical index's bracket around one write of these documents (nothing without one)."""
        if self.lexical_index is None:
            return contextlib.nullcontext()
        return self.lexical_index.writing(doc_ids)

    # ----------------------------------------------------------------- the unit index

    @property
    def unit_weights(self) -> tuple[float, float] | None:
        """``(cluster_weight, neighbour_weight)`` the unit index was built with (``None``: no index)."""
        return None if self.unit_index is None else self.unit_index.weights

    def sync_unit_index(self, doc_ids: Sequence[str] | None = None) -> int:
        """Rebuild the unit index of these documents (default: all) from the stored records; returns
        the number of unit records written.

        Needed only for documents written into the collection without it (e.g. by a LlamaIndex
        ``IngestionPipeline`` into a ``ChromaVectorStore``, or by hseg before 0.3); :meth:`add`
        keeps the index in step by itself, and ``hseg index`` repairs what a cut-short write left.

        Example:
            >>> store.sync_unit_index()  # doctest: +SKIP
            2576
        """
        if self.unit_index is None:
            raise ValueError(f"collection {self.collection.name!r}: no unit index (the store has no Chroma client)")
        docs = list(self.doc_ids() if doc_ids is None else doc_ids)
        # the records it reads may have been written around hseg's checks (a ChromaVectorStore): refuse
        # to index vectors of two models together, before writing each batch
        reference = [self._query_encoder_name()]

        def check(metadatas: list[dict[str, Any]]) -> None:
            reference[0] = self._check_record_encoders(metadatas, reference[0])

        with self._fresh_writing(), remote_errors(self.collection, "rebuilding the unit index"):
            written = self.unit_index.sync(docs, check=check)
            # after a full rebuild the index is complete (short of a writer working at the same time)
            self.unit_index.after_write(complete=True if doc_ids is None else None)
            if self.encoder_name is None and reference[0] is not None:
                self._record_collection_meta(reference[0])  # e.g. a collection made by ChromaVectorStore
        return written

    def documents_missing_vectors(self, records: Mapping[str, Sequence[str]]) -> set[str]:
        """The documents of ``records`` (``{doc id: record ids}``) with a record whose vector is missing,
        in the collection or in the unit index: metadata alone does not make a document searchable."""
        owner = {rid: doc for doc, rids in records.items() for rid in rids}
        with remote_errors(self.collection, "reading the collection's vectors"):
            bad = {owner[rid] for rid in ids_without_vectors(self.collection, list(owner))}
            if self.unit_index is not None:
                units = self.unit_index.unit_ids([d for d in records if d not in bad])
                unit_owner = {uid: doc for doc, uids in units.items() for uid in uids}
                companion = self.unit_index.existing
                if unit_owner and companion is not None:
                    bad |= {unit_owner[u] for u in ids_without_vectors(companion, list(unit_owner))}
        return bad

    def unit_segment_ids(self, doc_ids: Sequence[str]) -> dict[str, set[str]]:
        """``{doc id: ids of the segments the unit index holds}`` for these documents."""
        if self.unit_index is None:
            return {d: set() for d in doc_ids}
        with remote_errors(self.collection, "reading the unit index"):
            return self.unit_index.segment_ids(doc_ids)

    # ----------------------------------------------------------------- encoder

    @property
    def encoder(self) -> Any:
        """The query encoder (the default model is loaded on first access)."""
        if self._encoder is None:
            self._check_encoder_name(DEFAULT_MODEL)  # before paying for the model load
            with self._encoder_lock:
                if self._encoder is None:
                    self._encoder = as_encoder(None)
        return self._encoder

    @property
    def encoder_name(self) -> str | None:
        """The encoder name recorded in the collection, if any."""
        name = (self.collection.metadata or {}).get("hseg_encoder")
        return None if name is None else str(name)

    def _check_encoder_name(self, name: str) -> None:
        try:
            check_encoder(self.collection.name, self.encoder_name, name, allow_mismatch=self.allow_encoder_mismatch)
        except ValueError:
            if self.collection.count() > 0:
                raise
            # a collection that holds nothing binds no encoder (say, one left by a failed first run):
            # the next write records the new one

    def _query_encoder_name(self) -> str | None:
        """The model of this store's query vectors as far as it is known: its encoder's, else the one
        the collection records."""
        return str(self._encoder.name) if self._encoder is not None else self.encoder_name

    def _check_record_encoders(self, metadatas: Iterable[Mapping[str, Any]], expected: str | None) -> str | None:
        """Refuse records whose ``hseg_encoder`` names another model than ``expected`` (or, with none,
        than the first record that names one): one collection holds the vectors of one model, and a
        writer around hseg's own checks (a LlamaIndex ``IngestionPipeline`` into a ``ChromaVectorStore``)
        can break that. Returns ``expected`` or the name found. Records without the key pass."""
        if self.allow_encoder_mismatch:
            return expected
        first_doc = None
        same: dict[str, bool] = {}  # names seen: the same model as expected? (canonical names stat paths)
        for meta in metadatas:
            name = meta.get(ENCODER_KEY)
            if not name or name == expected:
                continue
            name = str(name)
            if expected is None:
                expected, first_doc = name, meta.get("hseg_doc_id")
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
                raise ValueError(
                    f"collection {self.collection.name!r}: document {meta.get('hseg_doc_id')!r} holds vectors of "
                    f"encoder {name!r}, but {against}; one collection must hold the vectors of one model (these were "
                    "written around hseg's checks, e.g. by an IngestionPipeline into a ChromaVectorStore whose parser "
                    "used another encoder): delete the document and add it again with the collection's encoder, or "
                    "pass allow_encoder_mismatch=True if both names are one model"
                )
        return expected

    def _record_collection_meta(self, encoder_name: str | None, *, replace: bool = False) -> None:
        meta = dict(self.collection.metadata or {})
        wanted: dict[str, Any] = {"hseg_schema": SCHEMA_VERSION}
        if encoder_name is not None and ("hseg_encoder" not in meta or replace):
            wanted["hseg_encoder"] = encoder_name
        if all(meta.get(k) == v for k, v in wanted.items()):
            return
        # modify() replaces the metadata and refuses hnsw:* keys (the space lives in the configuration)
        merged = {k: v for k, v in meta.items() if not k.startswith("hnsw:")}
        merged.update(wanted)
        self.collection.modify(metadata=merged)

    # ----------------------------------------------------------------- server errors

    # ----------------------------------------------------------------- writes

    def max_batch_size(self) -> int:
        """Records per write call: the client's ``get_max_batch_size()``."""
        getter = getattr(self.client, "get_max_batch_size", None)
        size = getter() if getter is not None else _FALLBACK_BATCH
        return max(1, int(size))

    def add(
        self,
        chunkings: Chunking | Iterable[Chunking],
        metadatas: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
        *,
        on_written: Callable[[list[str]], None] | None = None,
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

        ``on_written(doc_ids)`` is told, after each write call, which documents now have all their
        records stored (their unit-index records follow at the end of the ``add``): what a caller
        needs to say what an ``add`` that failed half way had written.

        Example:
            >>> store.add(chunker.chunk_many(texts, doc_ids), [{"source": p} for p in paths])  # doctest: +SKIP
            57
        """
        items = [chunkings] if isinstance(chunkings, Chunking) else list(chunkings)
        for i, item in enumerate(items):
            if not isinstance(item, Chunking):
                raise ValueError(f"chunkings[{i}] must be a Chunking (from HierarchicalChunker), "
                                 f"got {type(item).__name__}")
        if metadatas is None or isinstance(metadatas, Mapping):
            metas: list[Any] = [metadatas] * len(items)
        elif isinstance(metadatas, (str, bytes)):
            raise ValueError(f"metadatas must be a dict, a list of dicts or None, got {type(metadatas).__name__}")
        else:
            metas = list(metadatas)
            if len(metas) != len(items):
                raise ValueError(f"metadatas: got {len(metas)} for {len(items)} chunkings")
        items, metas = dedupe(items, metas)
        doc_ids = [c.doc_id for c in items]
        per_doc = [records_for(ch, md) for ch, md in zip(items, metas)]
        records = [r for recs in per_doc for r in recs]
        with remote_errors(self.collection, "reading the collection"):
            self._check_dimension(records)
        enc_name = self._ingest_encoder_name(items)
        if enc_name is not None:
            self._check_encoder_name(enc_name)
            for r in records:  # a chunking made without the chunker does not name its encoder: the store's
                r.metadata.setdefault(ENCODER_KEY, enc_name)
        if not items:
            return 0
        with self._fresh_writing():
            self._write(items, doc_ids, per_doc, records, enc_name, on_written)
        return len(records)

    def _write(self, items: list[Chunking], doc_ids: list[str], per_doc: list[list[Record]], records: list[Record],
               enc_name: str | None, on_written: Callable[[list[str]], None] | None) -> None:
        """The writes of :meth:`add`, once everything is checked."""
        with remote_errors(self.collection, "reading the collection"):
            old = self._existing(doc_ids)
            batch = self.max_batch_size()
            recorded = self.encoder_name
            if enc_name is not None and recorded is not None and self.collection.count() == 0 \
                    and canonical_model_name(recorded) != canonical_model_name(enc_name):
                self._record_collection_meta(enc_name, replace=True)  # an empty collection takes the new encoder
        new_ids = {r.id for r in records}
        stale = [rid for rid in old if rid not in new_ids]
        done: list[str] = []  # documents whose every record is written
        # order: Chroma's records, the unit index, the lexical rows, then the stale records go (after the
        # indexes dropped them); the outer context names the server for the lexical journal's calls
        with remote_errors(self.collection, f"recording the write of {len(doc_ids)} documents"), \
                self._lexical_writing(doc_ids):
            for part, complete, partial in write_batches(per_doc, doc_ids, batch):
                if part:
                    with remote_errors(self.collection, write_failure(len(doc_ids), done, partial)):
                        self.collection.upsert(
                            ids=[r.id for r in part],
                            embeddings=[r.embedding for r in part],
                            documents=[r.document for r in part],
                            # upsert merges metadata: a key the document no longer has is removed by sending None
                            metadatas=[{**{k: None for k in old.get(r.id, {}) if k not in r.metadata}, **r.metadata}
                                       for r in part],
                        )
                done += complete
                if on_written is not None and complete:
                    on_written(list(complete))
            with remote_errors(self.collection, f"writing the unit index of {len(doc_ids)} documents"):
                if self.unit_index is not None:
                    self.unit_index.write(records, doc_ids)  # also drops the index's records of stale segments
                if self.lexical_index is not None:
                    self.lexical_index.write(records, doc_ids)
            with remote_errors(self.collection, f"deleting stale records after writing all {len(doc_ids)} documents"):
                delete_ids(self.collection, stale, batch)
                self._record_collection_meta(enc_name)
                if self.unit_index is not None:
                    self.unit_index.after_write()
        logger.info("add: %d documents, %d records upserted, %d stale records deleted",
                    len(items), len(records), len(stale))

    def _ingest_encoder_name(self, items: list[Chunking]) -> str | None:
        """The encoder of what is being added: the chunkings' (each records its own), checked against
        the store's encoder and against each other; ``None`` when neither tells."""
        names = {canonical_model_name(str(c.info["encoder"])) for c in items if c.info.get("encoder")}
        if len(names) > 1 and not self.allow_encoder_mismatch:
            raise ValueError(f"chunkings: made with different encoders {sorted(names)}; one collection holds the "
                             "vectors of one encoder")
        own = canonical_model_name(str(self._encoder.name)) if self._encoder is not None else None
        for name in names:
            if own is not None and name != own and not self.allow_encoder_mismatch:
                raise ValueError(f"chunkings: made with encoder {name!r}, but this store embeds queries with "
                                 f"{own!r}; chunk with the store's encoder, or allow_encoder_mismatch=True")
        return own or (names.pop() if len(names) == 1 else None)

    def _check_dimension(self, records: list[Record]) -> None:
        dims = {r.embedding.shape[0] for r in records}
        if len(dims) > 1:
            raise ValueError(f"chunkings: embeddings of different dimensions {sorted(dims)}")
        have = self._collection_dimension() if dims else None
        if have is not None and have != next(iter(dims)):
            raise ValueError(f"chunkings: embedding dimension {next(iter(dims))} != the collection's {have}")

    def _collection_dimension(self, collection: Any = None) -> int | None:
        """The dimension of the collection's vectors (``None`` while it holds none), read from one
        record the first time it is known and kept: Chroma fixes it with the first write."""
        if self._dimension is None:
            got = (collection if collection is not None else self.collection).get(limit=1, include=["embeddings"])
            emb = got.get("embeddings")
            if emb is not None and len(emb):
                self._dimension = len(emb[0])
        return self._dimension

    def _existing(self, doc_ids: list[str]) -> dict[str, dict[str, Any]]:
        """``{record id: metadata}`` of the records the collection holds for these documents."""
        return {rid: meta for records in self.stored_records(doc_ids).values() for rid, meta in records.items()}

    def drop(self) -> None:
        """Delete the collection, its unit index and its lexical index (everything this store holds);
        the store object is unusable afterwards. Deleting only the collection by hand would leave the
        unit index behind, and a later collection of the same name would find it stale.

        Example:
            >>> HierarchicalStore("scratch", path="./chroma").drop()  # doctest: +SKIP
        """
        api = self.collection._client  # the server API both collections were opened through
        where = {"tenant": self.collection.tenant, "database": self.collection.database}
        with remote_errors(self.collection, f"deleting collection {self.collection.name!r}"):
            if self.lexical_index is not None:
                self.lexical_index.drop()
            if self.unit_index is not None and self.unit_index.existing is not None:
                api.delete_collection(self.unit_index.name, **where)  # first: it names the collection's records
            api.delete_collection(self.collection.name, **where)
        if self._fresh is not None:
            self._fresh.close()
        logger.info("dropped collection %r, its unit index and its lexical index", self.collection.name)

    def delete(self, doc_id: str) -> int:
        """Remove every record of a document; returns how many were removed."""
        with self._fresh_writing(), remote_errors(self.collection, f"deleting document {doc_id!r}"), \
                self._lexical_writing([doc_id]):
            # the indexes first: they never name a record the collection lacks
            if self.lexical_index is not None:
                self.lexical_index.delete([doc_id])
            if self.unit_index is not None:
                self.unit_index.delete([doc_id])
            ids = self.collection.get(where={"hseg_doc_id": doc_id}, include=[])["ids"]
            delete_ids(self.collection, ids, self.max_batch_size())
            if self.unit_index is not None:
                self.unit_index.after_write()
        logger.info("delete: %d records of document %r", len(ids), doc_id)
        return len(ids)

    # ----------------------------------------------------------------- reads

    def count(self) -> int:
        """Number of records in the collection (both levels, and records of other writers)."""
        with remote_errors(self.collection, "count"):
            return int(self.collection.count())

    def iter_metadatas(self, where: Mapping[str, Any] | None = None, *, page: int = 5000
                       ) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(record id, metadata)`` of every record (or those matching ``where``), read page by page;
        records of other writers sharing the collection included.

        Example:
            >>> clusters = store.iter_metadatas({"hseg_level": "cluster"})  # doctest: +SKIP
            >>> sources = {m.get("source") for _, m in clusters}  # doctest: +SKIP
        """
        return self._metadatas(where, page, "reading the collection")

    def _metadatas(self, where: Mapping[str, Any] | None, page: int, action: str
                   ) -> Iterator[tuple[str, dict[str, Any]]]:
        with remote_errors(self.collection, action):
            for got in pages(self.collection, where, ["metadatas"], page):
                yield from ((rid, dict(m or {})) for rid, m in zip(got["ids"], got["metadatas"]))

    def doc_ids(self) -> list[str]:
        """Sorted ids of the documents stored (read from the cluster records, page by page)."""
        clusters = self._metadatas({"hseg_level": "cluster"}, 5000, "listing the documents")
        return sorted({str(m["hseg_doc_id"]) for _, m in clusters if "hseg_doc_id" in m})

    def stored_records(self, doc_ids: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
        """``{doc id: {record id: metadata}}`` of what the collection holds for these documents
        (documents it does not hold are absent).

        Example:
            >>> store.stored_records(["report"])["report"]  # doctest: +SKIP
            {'cluster-5d0c...': {'hseg_level': 'cluster', ...}, ...}
        """
        out: dict[str, dict[str, dict[str, Any]]] = {}
        with remote_errors(self.collection, "reading the collection"):
            for got in get_by_documents(self.collection, doc_ids, ["metadatas"]):
                for rid, meta in zip(got["ids"], got["metadatas"]):
                    if meta:
                        out.setdefault(str(meta["hseg_doc_id"]), {})[rid] = dict(meta)
        return out

    def stats(self) -> dict[str, Any]:
        """Counts and mean token sizes of the hseg records, how many documents are whole (their
        records and unit-index records all there; :func:`hseg.store.completeness.completeness`), and
        ``record_encoders``, the records counted by the encoder their ``hseg_encoder`` names (more than
        one, or another than ``encoder``, means vectors of several models were written into the
        collection); read page by page. Vectors are not read here: ``hseg index`` checks them when it
        skips a document.

        Example:
            >>> store.stats()["documents"]  # doctest: +SKIP
            5
        """
        by_doc: dict[str, dict[str, dict[str, Any]]] = {}
        metas = []
        encoders: dict[str, int] = {}
        for rid, m in self.iter_metadatas():
            metas.append(m)
            if "hseg_doc_id" in m:
                by_doc.setdefault(str(m["hseg_doc_id"]), {})[rid] = m
            if m.get(ENCODER_KEY) and m.get("hseg_level") in ("cluster", "segment"):
                encoders[str(m[ENCODER_KEY])] = encoders.get(str(m[ENCODER_KEY]), 0) + 1
        units: dict[str, set[str]] | None = None
        if self.unit_index is not None:
            units = {}
            companion = self.unit_index.existing  # a read: an index nobody created yet is an empty one
            with remote_errors(self.collection, "reading the unit index"):
                for got in ([] if companion is None else pages(companion, None, ["metadatas"], 5000)):
                    for uid, m in zip(got["ids"], got["metadatas"]):
                        units.setdefault(str((m or {}).get("hseg_doc_id")), set()).add(UnitKey.parse(uid).segment_id)
        meta = self.collection.metadata or {}
        return {"collection": self.collection.name, "encoder": meta.get("hseg_encoder"),
                "schema": meta.get("hseg_schema"), **level_stats(metas), **completeness(by_doc, units),
                "record_encoders": encoders,
                "unit_index_records": None if self.unit_index is None else self.unit_index.count()}

    def delete_where(self, where: Mapping[str, Any]) -> int:
        """Remove every record matching a Chroma ``where`` (e.g. another writer's document key);
        returns how many were removed. The documents' unit-index records go first.

        Example:
            >>> store.delete_where({"document_id": "report"})  # doctest: +SKIP
            12
        """
        if not isinstance(where, Mapping) or not where:
            raise ValueError(f"where must be a non-empty dict, got {where!r}")
        with self._fresh_writing(), remote_errors(self.collection, f"deleting records where {dict(where)}"):
            got = self.collection.get(where=dict(where), include=["metadatas"])
            docs = sorted({str(m["hseg_doc_id"]) for m in got["metadatas"] if m and "hseg_doc_id" in m})
            with self._lexical_writing(docs):
                # the indexes first: they never name a record the collection lacks
                if self.lexical_index is not None:
                    self.lexical_index.delete(docs)
                if self.unit_index is not None:
                    self.unit_index.delete(docs)
                delete_ids(self.collection, got["ids"], self.max_batch_size())
                if self.unit_index is not None:
                    self.unit_index.after_write()
        return len(got["ids"])

    def get_records(self, doc_id: str, *, include_embeddings: bool = True) -> list[Record]:
        """A document's records in document order (each cluster record before its segments)."""
        include = ["documents", "metadatas"] + (["embeddings"] if include_embeddings else [])
        # through the reads' view: an embedded client reads vectors from its own, possibly stale, index
        with self._reading() as (collection, _), remote_errors(self.collection, f"reading document {doc_id!r}"):
            got = collection.get(where={"hseg_doc_id": doc_id}, include=include)
        embs = got.get("embeddings")
        recs = [
            Record(rid, np.asarray(embs[i], dtype=np.float32) if include_embeddings else np.empty(0, np.float32),
                   doc, dict(meta))
            for i, (rid, doc, meta) in enumerate(zip(got["ids"], got["documents"], got["metadatas"]))
        ]
        recs.sort(key=lambda r: (r.metadata["hseg_cluster_index"], r.metadata["hseg_level"] != "cluster",
                                 r.metadata["hseg_index"]))
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

        ``unit="cluster"`` (default) returns whole parents ranked by the max cosine over their vectors
        (paper eq. 2, :mod:`hseg.retrieval.parents`); ``"segment"`` and ``"auto"`` return passages of
        adjacent segments (:mod:`hseg.retrieval.passages`). Every path is exact with respect to the
        neighbours Chroma returns. With ``lexical_weight=λ`` > 0 every unit is ranked by its dense score
        ``+ λ ·`` its BM25 score divided by the query's best (the lexical index,
        :mod:`hseg.store.lexical_index`), exact with respect to what Chroma and the lexical index return.

        Example:
            >>> [(h.cluster_id, round(h.score, 3)) for h in store.search("tides", k=2)]  # doctest: +SKIP
            [('clu-5d0c...', 0.612), ('clu-a9e1...', 0.574)]
            >>> hits = store.search("tides", budget_tokens=1024, unit="auto")  # doctest: +SKIP
            >>> hybrid = store.search("tides", budget_tokens=1024, unit="auto", lexical_weight=0.3)  # doctest: +SKIP
        """
        chosen = _settings(settings, k, fields)
        text = _query_text(query, query_text, "query_text")
        with self._reading() as (collection, units):
            vec = self._query_vector(query, collection=collection)
            with remote_errors(self.collection, "search"):
                self._lexical_ready(chosen)
                hits = run_one(self._plan(vec, chosen, collection, units, text))
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
        and batch jobs; a single question is :meth:`search`. ``query_texts`` gives the words of vector
        queries for the lexical side (one per query; ``None`` for a string query).

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
        chosen = _settings(settings, k, fields)
        texts = [_query_text(q, None if query_texts is None else query_texts[i], f"query_texts[{i}]")
                 for i, q in enumerate(queries)]
        with self._reading() as (collection, units):
            vectors = [self._query_vector(q, f"queries[{i}]", collection=collection) for i, q in enumerate(queries)]
            with remote_errors(self.collection, "search"):
                self._lexical_ready(chosen)
                answers = run_many([self._plan(v, chosen, collection, units, t) for v, t in zip(vectors, texts)])
        self._check_hits([h for hits in answers for h in hits])
        return answers

    def _check_hits(self, hits: list[SearchHit]) -> None:
        """Refuse an answer with a hit whose vectors another model made than the queries'. A document is
        written whole with one encoder, so the ranking of an answer with no such hit is that of the
        query model's records alone; checking the hits costs no read."""
        self._check_record_encoders((h.metadata for h in hits), self._query_encoder_name())

    def _lexical_ready(self, settings: SearchSettings) -> None:
        """Bring the lexical index in step before a search that uses it (once per call)."""
        if settings.lexical_weight:
            self._lexical("a search with lexical_weight > 0").ensure_fresh()

    def _plan(self, vec: np.ndarray, settings: SearchSettings, collection: Any, units: UnitIndex | None,
              text: str | None = None) -> Plan[list[SearchHit]]:
        """The reads of one search (see :mod:`hseg.retrieval.plans`) of ``collection``, its unit index and,
        with a lexical weight, the lexical index."""
        lexical = None
        if settings.lexical_weight and text is not None:
            lexical = lexical_query(self._lexical("a search with lexical_weight > 0"), text, settings.lexical_weight)
        elif settings.lexical_weight and not self._warned_no_text:
            self._warned_no_text = True  # a vector has no words: the dense side is all there is to search
            logger.warning("collection %r: a vector query without query_text= is searched densely, without its "
                           "lexical_weight=%g; give its text to search it hybrid", self.collection.name,
                           settings.lexical_weight)
        if settings.resolved_unit == "cluster":
            return parents_plan(collection, vec, settings, oversample=self.oversample, lexical=lexical)
        index = None
        if settings.resolved_unit == "auto" and units is not None:
            index = units.usable(settings.cluster_weight, settings.neighbour_weight)
        return units_plan(collection, vec, settings, unit_index=index, lexical=lexical)

    def _query_vector(self, query: Any, what: str = "query", *, collection: Any = None) -> np.ndarray:
        if isinstance(query, str):
            if not query.strip():
                raise ValueError(f"{what} must be a non-blank string or a vector, got {query!r}")
            # before the encoder, whose tokenizer fails on a lone surrogate with a bare TypeError
            check_unicode(what, query, why="the encoder takes valid Unicode only")
            vec = np.asarray(self.encoder.encode_query(query), dtype=np.float32).reshape(-1)
        else:
            vec = np.asarray(query, dtype=np.float32)
            if vec.ndim == 2 and vec.shape[0] == 1:
                vec = vec[0]
            if vec.ndim != 1 or vec.size == 0:
                raise ValueError(f"{what} must be a string or a 1-D vector, got shape {vec.shape}")
        norm = float(np.linalg.norm(vec))
        if not np.isfinite(norm) or norm == 0.0:
            raise ValueError(f"{what}: vector is zero or not finite")
        # Chroma would refuse it with its own InvalidArgumentError, deep in the first read of a search
        with remote_errors(self.collection, "search"):
            have = self._collection_dimension(collection)
        if have is not None and vec.size != have:
            source = f"the encoder {self.encoder.name!r} gives" if isinstance(query, str) else "got"
            raise ValueError(f"{what}: {source} a vector of dimension {vec.size}, but collection "
                             f"{self.collection.name!r} holds vectors of dimension {have}; embed queries with the "
                             "model that embedded the collection")
        return vec / norm

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



def _query_text(query: Any, text: str | None, name: str) -> str | None:
    """The words of a query for the lexical side: a string query's own, else ``text`` (may be ``None``)."""
    if text is not None and not isinstance(text, str):
        raise ValueError(f"{name} must be a string or None, got {type(text).__name__}")
    if isinstance(query, str):
        if text is not None and text != query:
            raise ValueError(f"{name}: give it only beside a vector query (a string query is its own text)")
        return query
    return text


def _settings(settings: SearchSettings | None, k: int | None, fields: dict[str, Any]) -> SearchSettings:
    """The settings of one call: ``settings`` with ``k`` and ``fields`` over it."""
    if k is not None:
        fields = {**fields, "k": k}
    return SearchSettings.resolve(settings, **fields)
