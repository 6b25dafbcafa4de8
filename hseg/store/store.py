"""What the store is: :class:`HierarchicalStore`, the one object users hold. It opens a collection
(:mod:`hseg.store.connection`), writes documents whole (:mod:`hseg.store.writing`), keeps the
unit index in step, reads records page by page, and searches (:mod:`hseg.search`,
:mod:`hseg.unit_search`)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from hseg.chunks import Chunking
from hseg.encoders import canonical_model_name
from hseg.reads import Plan, run_many, run_one
from hseg.records import SCHEMA_VERSION, Record, records_for
from hseg.search import DEFAULT_OVERSAMPLE, ParentHit, check_search_args, parents_plan
from hseg.store.connection import (
    DEFAULT_HNSW,
    check_schema,
    collection_space,
    connect_errors,
    get_or_create_collection,
    open_client,
    open_unit_index,
    remote_errors,
)
from hseg.store.reading import level_stats, pages
from hseg.store.writing import dedupe, write_batches, write_failure
from hseg.unit_index import UnitKey, unit_records
from hseg.unit_search import units_plan
from hseg.units import DEFAULT_CLUSTER_WEIGHT, DEFAULT_NEIGHBOUR_WEIGHT

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
        enc = _as_encoder(encoder) if encoder is not None else None
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
        if encoder is not None:
            self._encoder = _as_encoder(encoder)
            self._check_encoder_name(self._encoder.name)
        self.unit_index = open_unit_index(collection, hnsw)
        self._unit_index_complete: bool | None = None  # checked on the first unit="auto" search
        self._warned_weights: set[tuple[float, float]] = set()  # weights the unit index cannot serve, told once

    # ----------------------------------------------------------------- the unit index

    @property
    def unit_weights(self) -> tuple[float, float] | None:
        """``(cluster_weight, neighbour_weight)`` the unit index was built with (``None``: no index)."""
        if self.unit_index is None:
            return None
        meta = self.unit_index.metadata or {}
        return (float(meta.get("hseg_cluster_weight", DEFAULT_CLUSTER_WEIGHT)),
                float(meta.get("hseg_neighbour_weight", DEFAULT_NEIGHBOUR_WEIGHT)))

    def _usable_unit_index(self, cluster_weight: float, neighbour_weight: float) -> Any:
        """The unit index if it serves a search with these weights and covers every segment."""
        built = self.unit_weights
        if built is None:  # no unit index
            return None
        if built != (cluster_weight, neighbour_weight):
            if (cluster_weight, neighbour_weight) not in self._warned_weights:
                self._warned_weights.add((cluster_weight, neighbour_weight))
                logger.warning("collection %r: unit='auto' with cluster_weight=%g, neighbour_weight=%g takes the "
                               "slower path (several round trips): the unit index serves the weights it was built "
                               "with, %g/%g", self.collection.name, cluster_weight, neighbour_weight, *built)
            return None
        if self._unit_index_complete is None:
            # once per store object: the index must hold one record per segment record, or a
            # search through it would silently miss documents written by another tool
            units, records = self.unit_index.count(), self.collection.count()
            if units == records == 0:
                return self.unit_index  # empty: decide again once something is stored
            if self._synced_counts() == (records, units):
                self._unit_index_complete = True  # nobody wrote since hseg last left both in step
            else:  # counting segments costs a metadata scan (~0.5 s on 100k records)
                segments = len(self.collection.get(where={"hseg_level": "segment"}, include=[])["ids"])
                self._unit_index_complete = units == segments
                if units == segments:
                    self._mark_unit_index_synced()
                else:
                    logger.warning("collection %r: the unit index holds %d records for %d segments (documents "
                                   "written by another tool or an older hseg); unit='auto' takes the slower path "
                                   "until sync_unit_index() is run", self.collection.name, units, segments)
        return self.unit_index if self._unit_index_complete else None

    def sync_unit_index(self, doc_ids: Sequence[str] | None = None) -> int:
        """Rebuild the unit index of these documents (default: all) from the stored records; returns
        the number of unit records written.

        Needed only for documents written into the collection by another tool (e.g. a LlamaIndex
        ``IngestionPipeline`` into a ``ChromaVectorStore``) or by hseg before 0.3; :meth:`add`
        keeps the index in step by itself.

        Example:
            >>> store.sync_unit_index()  # doctest: +SKIP
            2576
        """
        if self.unit_index is None:
            raise ValueError(f"collection {self.collection.name!r}: no unit index (the store has no Chroma client)")
        docs = list(self.doc_ids() if doc_ids is None else doc_ids)
        written = 0
        for i in range(0, len(docs), 100):
            part = docs[i : i + 100]
            with remote_errors(self.collection, "rebuilding the unit index"):
                where = {"hseg_doc_id": part[0]} if len(part) == 1 else {"hseg_doc_id": {"$in": part}}
                got = self.collection.get(where=where, include=["embeddings", "metadatas"])
                records = [Record(rid, np.asarray(e, dtype=np.float32), "", dict(m or {}))
                           for rid, e, m in zip(got["ids"], got["embeddings"], got["metadatas"])]
                written += self._write_units(records, part)
        # after a full rebuild the index is complete (short of a writer working at the same time)
        self._unit_index_complete = True if doc_ids is None else None
        self._after_unit_write()
        return written

    def _after_unit_write(self) -> None:
        if self._unit_index_complete:  # it was complete and this object kept it so
            with remote_errors(self.collection, "recording the unit index state"):
                self._mark_unit_index_synced()

    def _synced_counts(self) -> tuple[int, int] | None:
        meta = self.unit_index.metadata or {}
        if "hseg_synced_records" not in meta:
            return None
        return int(meta["hseg_synced_records"]), int(meta.get("hseg_synced_units", -1))

    def _mark_unit_index_synced(self) -> None:
        """Record both counts in the index's metadata: while they hold, a new store object can trust
        the index without counting segments (a count is ~10 ms, the segment scan ~0.5 s at 100k)."""
        meta = {k: v for k, v in (self.unit_index.metadata or {}).items() if not k.startswith("hnsw:")}
        meta.update(hseg_synced_records=self.collection.count(), hseg_synced_units=self.unit_index.count())
        self.unit_index.modify(metadata=meta)

    def unit_segment_ids(self, doc_ids: Sequence[str]) -> dict[str, set[str]]:
        """``{doc id: ids of the segments the unit index holds}`` for these documents."""
        out: dict[str, set[str]] = {d: set() for d in doc_ids}
        if self.unit_index is None:
            return out
        with remote_errors(self.collection, "reading the unit index"):
            for i in range(0, len(doc_ids), 500):
                part = list(doc_ids[i : i + 500])
                where = {"hseg_doc_id": part[0]} if len(part) == 1 else {"hseg_doc_id": {"$in": part}}
                got = self.unit_index.get(where=where, include=["metadatas"])
                for uid, meta in zip(got["ids"], got["metadatas"]):
                    out.setdefault(str((meta or {}).get("hseg_doc_id")), set()).add(UnitKey.parse(uid).segment_id)
        return out

    def _write_units(self, records: list[Record], doc_ids: list[str]) -> int:
        """Upsert the unit records of these whole documents and delete the index's other records of them."""
        by_doc: dict[str, list[Record]] = {}
        for r in records:
            by_doc.setdefault(str(r.metadata["hseg_doc_id"]), []).append(r)
        w, v = self.unit_weights or (DEFAULT_CLUSTER_WEIGHT, DEFAULT_NEIGHBOUR_WEIGHT)
        units = [u for recs in by_doc.values() for u in unit_records(recs, w, v)]
        batch = self.max_batch_size()
        for i in range(0, len(units), batch):
            part = units[i : i + batch]
            self.unit_index.upsert(ids=[u.id for u in part], embeddings=[u.embedding for u in part],
                                   metadatas=[u.metadata for u in part])
        self._delete_units(doc_ids, keep={u.id for u in units})
        return len(units)

    def _delete_units(self, doc_ids: Sequence[str], keep: set[str] | frozenset[str] = frozenset()) -> None:
        if self.unit_index is None:
            return
        for i in range(0, len(doc_ids), 500):
            part = list(doc_ids[i : i + 500])
            where = {"hseg_doc_id": part[0]} if len(part) == 1 else {"hseg_doc_id": {"$in": part}}
            stale = [u for u in self.unit_index.get(where=where, include=[])["ids"] if u not in keep]
            for j in range(0, len(stale), self.max_batch_size()):
                self.unit_index.delete(ids=stale[j : j + self.max_batch_size()])

    # ----------------------------------------------------------------- encoder

    @property
    def encoder(self) -> Any:
        """The query encoder (the default model is loaded on first access)."""
        if self._encoder is None:
            from hseg.encoders import DEFAULT_MODEL

            self._check_encoder_name(DEFAULT_MODEL)  # before paying for the model load
            with self._encoder_lock:
                if self._encoder is None:
                    self._encoder = _as_encoder(None)
        return self._encoder

    @property
    def encoder_name(self) -> str | None:
        """The encoder name recorded in the collection, if any."""
        name = (self.collection.metadata or {}).get("hseg_encoder")
        return None if name is None else str(name)

    def _check_encoder_name(self, name: str) -> None:
        recorded = self.encoder_name
        if recorded is not None and canonical_model_name(recorded) != canonical_model_name(name) \
                and not self.allow_encoder_mismatch:
            raise ValueError(
                f"collection {self.collection.name!r} was built with encoder {recorded!r}, got {name!r}; pass the "
                "same encoder, or allow_encoder_mismatch=True if it is the same model under another name"
            )

    def _record_collection_meta(self, encoder_name: str | None) -> None:
        meta = dict(self.collection.metadata or {})
        wanted: dict[str, Any] = {"hseg_schema": SCHEMA_VERSION}
        if encoder_name is not None and "hseg_encoder" not in meta:
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
        if not items:
            return 0

        with remote_errors(self.collection, "reading the collection"):
            old = self._existing(doc_ids)
            batch = self.max_batch_size()
        new_ids = {r.id for r in records}
        stale = [rid for rid in old if rid not in new_ids]
        done: list[str] = []  # documents whose every record is written
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
        with remote_errors(self.collection, f"writing the unit index of {len(doc_ids)} documents"):
            if self.unit_index is not None:
                self._write_units(records, doc_ids)  # also drops the index's records of stale segments
        with remote_errors(self.collection, f"deleting stale records after writing all {len(doc_ids)} documents"):
            for i in range(0, len(stale), batch):
                self.collection.delete(ids=stale[i : i + batch])
            self._record_collection_meta(enc_name)
        if self.unit_index is not None:
            self._after_unit_write()
        logger.info("add: %d documents, %d records upserted, %d stale records deleted",
                    len(items), len(records), len(stale))
        return len(records)

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
        if not dims:
            return
        got = self.collection.get(limit=1, include=["embeddings"])
        emb = got.get("embeddings")
        if emb is not None and len(emb):
            have = len(emb[0])
            if have != next(iter(dims)):
                raise ValueError(f"chunkings: embedding dimension {next(iter(dims))} != the collection's {have}")

    def _existing(self, doc_ids: list[str]) -> dict[str, dict[str, Any]]:
        """``{record id: metadata}`` of the records the collection holds for these documents."""
        return {rid: meta for records in self.stored_records(doc_ids).values() for rid, meta in records.items()}

    def drop(self) -> None:
        """Delete the collection and its unit index from Chroma (everything this store holds); the
        store object is unusable afterwards. Deleting only the collection by hand would leave the
        unit index behind, and a later collection of the same name would find it stale.

        Example:
            >>> HierarchicalStore("scratch", path="./chroma").drop()  # doctest: +SKIP
        """
        api = self.collection._client  # the server API both collections were opened through
        where = {"tenant": self.collection.tenant, "database": self.collection.database}
        with remote_errors(self.collection, f"deleting collection {self.collection.name!r}"):
            if self.unit_index is not None:
                api.delete_collection(self.unit_index.name, **where)  # first: it names the collection's records
            api.delete_collection(self.collection.name, **where)
        logger.info("dropped collection %r and its unit index", self.collection.name)

    def delete(self, doc_id: str) -> int:
        """Remove every record of a document; returns how many were removed."""
        with remote_errors(self.collection, f"deleting document {doc_id!r}"):
            self._delete_units([doc_id])  # first: the index never names a record the collection lacks
            ids = self.collection.get(where={"hseg_doc_id": doc_id}, include=[])["ids"]
            batch = self.max_batch_size()
            for i in range(0, len(ids), batch):
                self.collection.delete(ids=ids[i : i + batch])
        if self.unit_index is not None:
            self._after_unit_write()
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
        ids = list(doc_ids)
        with remote_errors(self.collection, "reading the collection"):
            for i in range(0, len(ids), 500):  # a bounded $in list and response per call
                part = ids[i : i + 500]
                where = {"hseg_doc_id": part[0]} if len(part) == 1 else {"hseg_doc_id": {"$in": part}}
                got = self.collection.get(where=where, include=["metadatas"])
                for rid, meta in zip(got["ids"], got["metadatas"]):
                    if meta:
                        out.setdefault(str(meta["hseg_doc_id"]), {})[rid] = dict(meta)
        return out

    def stats(self) -> dict[str, Any]:
        """Counts and mean token sizes of the hseg records, read page by page.

        Example:
            >>> store.stats()["documents"]  # doctest: +SKIP
            5
        """
        stats = level_stats(meta for _, meta in self.iter_metadatas())
        meta = self.collection.metadata or {}
        return {"collection": self.collection.name, "encoder": meta.get("hseg_encoder"),
                "schema": meta.get("hseg_schema"), **stats,
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
        with remote_errors(self.collection, f"deleting records where {dict(where)}"):
            got = self.collection.get(where=dict(where), include=["metadatas"])
            docs = sorted({str(m["hseg_doc_id"]) for m in got["metadatas"] if m and "hseg_doc_id" in m})
            self._delete_units(docs)  # first: the index never names a record the collection lacks
            batch = self.max_batch_size()
            for i in range(0, len(got["ids"]), batch):
                self.collection.delete(ids=got["ids"][i : i + batch])
        if self.unit_index is not None:
            self._after_unit_write()
        return len(got["ids"])

    def get_records(self, doc_id: str, *, include_embeddings: bool = True) -> list[Record]:
        """A document's records in document order (each cluster record before its segments)."""
        include = ["documents", "metadatas"] + (["embeddings"] if include_embeddings else [])
        with remote_errors(self.collection, f"reading document {doc_id!r}"):
            got = self.collection.get(where={"hseg_doc_id": doc_id}, include=include)
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
        where: Mapping[str, Any] | None = None,
        mode: str = "segment+cluster",
        budget_tokens: int | None = None,
        where_document: Mapping[str, Any] | None = None,
        unit: str = "cluster",
        cluster_weight: float = DEFAULT_CLUSTER_WEIGHT,
        neighbour_weight: float = DEFAULT_NEIGHBOUR_WEIGHT,
    ) -> list[ParentHit]:
        """Top parents by max cosine over their vectors (paper eq. 2), best first.

        Args:
            query: a string (embedded with :attr:`encoder`) or a query vector.
            k: number of parents (default 4); mutually exclusive with ``budget_tokens``.
            where: a Chroma metadata filter on records (e.g. ``{"source": "a.md"}``); it applies to
                segment and cluster records alike.
            mode: ``"segment+cluster"`` (eq. 2), ``"cluster"`` (Cluster Only) or ``"segment"``.
            budget_tokens: return parents in rank order while their total ``hseg_tokens`` stays
                ≤ this budget (always at least one): the equal-reader-input rule.
            where_document: a Chroma document filter, passed through.
            unit: what a result is. ``"cluster"`` (default): whole parents, the paper.
                ``"segment"``: passages of segments ranked by their own similarity.
                ``"auto"``: the budget-aware unit of :mod:`hseg.units`: segments ranked by
                ``cos(q, segment) + cluster_weight * cos(q, cluster)``, adjacent ones merged, a whole
                cluster when several of its segments qualify. With ``k`` it returns passages made of
                the first ``k`` segments; with ``budget_tokens`` it fills the budget.
            cluster_weight: the cluster's share in ``unit="auto"`` scores.
            neighbour_weight: the share of the mean score of a segment's two neighbours.

        The result is exact with respect to the neighbours Chroma returns (see :mod:`hseg.search`).

        Example:
            >>> [(h.cluster_id, round(h.score, 3)) for h in store.search("tides", k=2)]  # doctest: +SKIP
            [('clu-5d0c...', 0.612), ('clu-a9e1...', 0.574)]
        """
        k_eff = check_search_args(k, mode, budget_tokens, where, unit=unit, cluster_weight=cluster_weight,
                                  neighbour_weight=neighbour_weight)
        vec = self._query_vector(query)
        if unit == "cluster":
            return self._parents(vec, k_eff, budget_tokens, mode, where, where_document)
        return self._passages(vec, k_eff, budget_tokens, unit, where, where_document, float(cluster_weight),
                              float(neighbour_weight))

    def search_parents(
        self,
        query: str | np.ndarray | Sequence[float],
        k: int | None = None,
        *,
        budget_tokens: int | None = None,
        mode: str = "segment+cluster",
        where: Mapping[str, Any] | None = None,
        where_document: Mapping[str, Any] | None = None,
    ) -> list[ParentHit]:
        """Whole parents (the paper's retrieval): :meth:`search` with ``unit="cluster"``.

        Example:
            >>> [h.unit for h in store.search_parents("tides", k=2)]  # doctest: +SKIP
            ['cluster', 'cluster']
        """
        k_eff = check_search_args(k, mode, budget_tokens, where)
        return self._parents(self._query_vector(query), k_eff, budget_tokens, mode, where, where_document)

    def search_passages(
        self,
        query: str | np.ndarray | Sequence[float],
        k: int | None = None,
        *,
        budget_tokens: int | None = None,
        unit: str = "auto",
        where: Mapping[str, Any] | None = None,
        where_document: Mapping[str, Any] | None = None,
        cluster_weight: float = DEFAULT_CLUSTER_WEIGHT,
        neighbour_weight: float = DEFAULT_NEIGHBOUR_WEIGHT,
    ) -> list[ParentHit]:
        """Passages of adjacent segments (``unit="auto"`` or ``"segment"``): :meth:`search` with that unit.

        Example:
            >>> hits = store.search_passages("tides", budget_tokens=1024)  # doctest: +SKIP
            >>> sum(h.token_count for h in hits) <= 1024 or len(hits) == 1  # doctest: +SKIP
            True
        """
        if unit == "cluster":
            raise ValueError("unit must be 'auto' or 'segment' for passages; whole parents come from search_parents")
        k_eff = check_search_args(k, "segment+cluster", budget_tokens, where, unit=unit,
                                  cluster_weight=cluster_weight, neighbour_weight=neighbour_weight)
        return self._passages(self._query_vector(query), k_eff, budget_tokens, unit, where, where_document,
                              float(cluster_weight), float(neighbour_weight))

    def search_many(
        self,
        queries: Sequence[str | np.ndarray | Sequence[float]],
        k: int | None = None,
        *,
        where: Mapping[str, Any] | None = None,
        mode: str = "segment+cluster",
        budget_tokens: int | None = None,
        where_document: Mapping[str, Any] | None = None,
        unit: str = "cluster",
        cluster_weight: float = DEFAULT_CLUSTER_WEIGHT,
        neighbour_weight: float = DEFAULT_NEIGHBOUR_WEIGHT,
    ) -> list[list[ParentHit]]:
        """:meth:`search` for many queries, with the same settings and the same answers, in fewer
        Chroma calls: the searches advance together and each step's reads go to Chroma as one
        ``query`` with many query vectors and one ``get`` (:mod:`hseg.reads`). For evaluations
        and batch jobs; a single question is :meth:`search`.

        Example:
            >>> hits = store.search_many(["what causes tides?", "who saw Jupiter's moons?"], budget_tokens=1024,
            ...                          unit="auto")  # doctest: +SKIP
            >>> len(hits)  # doctest: +SKIP
            2
        """
        if isinstance(queries, (str, np.ndarray)) or not isinstance(queries, Sequence):
            raise ValueError(f"queries must be a list of strings or vectors, got {type(queries).__name__}")
        k_eff = check_search_args(k, mode, budget_tokens, where, unit=unit, cluster_weight=cluster_weight,
                                  neighbour_weight=neighbour_weight)
        vectors = [self._query_vector(q) for q in queries]
        with remote_errors(self.collection, "search"):
            return run_many([self._plan(v, k_eff, budget_tokens, mode, unit, where, where_document,
                                        float(cluster_weight), float(neighbour_weight)) for v in vectors])

    def _parents(self, vec: np.ndarray, k: int | None, budget: int | None, mode: str, where: Any,
                 where_document: Any) -> list[ParentHit]:
        with remote_errors(self.collection, "search"):
            return run_one(self._plan(vec, k, budget, mode, "cluster", where, where_document, 0.0, 0.0))

    def _passages(self, vec: np.ndarray, k: int | None, budget: int | None, unit: str, where: Any,
                  where_document: Any, cluster_weight: float, neighbour_weight: float) -> list[ParentHit]:
        with remote_errors(self.collection, "search"):
            return run_one(self._plan(vec, k, budget, "segment+cluster", unit, where, where_document, cluster_weight,
                                      neighbour_weight))

    def _plan(self, vec: np.ndarray, k: int | None, budget: int | None, mode: str, unit: str, where: Any,
              where_document: Any, cluster_weight: float, neighbour_weight: float) -> Plan[list[ParentHit]]:
        """The reads of one search (see :mod:`hseg.reads`); weights apply to passages only."""
        if unit == "cluster":
            return parents_plan(self.collection, vec, k=k, mode=mode, where=where, where_document=where_document,
                                budget_tokens=budget, oversample=self.oversample)
        index = self._usable_unit_index(cluster_weight, neighbour_weight) if unit == "auto" else None
        return units_plan(self.collection, vec, unit=unit, k=k, budget_tokens=budget, where=where,
                          where_document=where_document, cluster_weight=cluster_weight,
                          neighbour_weight=neighbour_weight, unit_index=index)

    def _query_vector(self, query: Any) -> np.ndarray:
        if isinstance(query, str):
            if not query.strip():
                raise ValueError(f"query must be a non-blank string or a vector, got {query!r}")
            vec = np.asarray(self.encoder.encode_query(query), dtype=np.float32).reshape(-1)
        else:
            vec = np.asarray(query, dtype=np.float32)
            if vec.ndim == 2 and vec.shape[0] == 1:
                vec = vec[0]
            if vec.ndim != 1 or vec.size == 0:
                raise ValueError(f"query must be a string or a 1-D vector, got shape {vec.shape}")
        norm = float(np.linalg.norm(vec))
        if not np.isfinite(norm) or norm == 0.0:
            raise ValueError("query vector is zero or not finite")
        return vec / norm

    # ----------------------------------------------------------------- async

    async def asearch(self, query: Any, k: int | None = None, **kwargs: Any) -> list[ParentHit]:
        """:meth:`search` in a worker thread (the encoder and Chroma calls block)."""
        return await asyncio.to_thread(self.search, query, k, **kwargs)

    async def asearch_many(self, queries: Any, k: int | None = None, **kwargs: Any) -> list[list[ParentHit]]:
        """:meth:`search_many` in a worker thread."""
        return await asyncio.to_thread(self.search_many, queries, k, **kwargs)

    async def aadd(self, chunkings: Any, metadatas: Any = None) -> int:
        """:meth:`add` in a worker thread."""
        return await asyncio.to_thread(self.add, chunkings, metadatas)

    async def adelete(self, doc_id: str) -> int:
        """:meth:`delete` in a worker thread."""
        return await asyncio.to_thread(self.delete, doc_id)


def _as_encoder(encoder: Any) -> Any:
    from hseg.encoders import as_encoder

    return as_encoder(encoder)

