"""The unit index as an object: the companion collection of fused vectors (:mod:`hseg.retrieval.unit_vectors`)
and keeping it in step with the records it points to.

It is a derived index (:class:`hseg.store.indexes.DerivedIndex`): writes (:meth:`UnitIndex.write`
and :meth:`UnitIndex.forget` inside :meth:`UnitIndex.writing`, :meth:`UnitIndex.rebuild`) are the
only calls that change it, and each records the counts both collections had when they were left in step.
A search asks :meth:`UnitIndex.usable`, which only reads: when those counts still hold the index is
trusted at the price of two counts; otherwise the segments are counted once per object (a metadata
scan of the collection) and, if the index does not cover them, ``unit="auto"`` takes the
gathered path until ``hseg index`` or :meth:`UnitIndex.rebuild` repairs it.

An index keeps the layout it was created in (:data:`~hseg.retrieval.unit_vectors.UNIT_LAYOUT`, in the
companion's metadata; none there: layout 1) and every write follows it, so its records never mix
layouts. A full :meth:`UnitIndex.rebuild` writes an older index anew in the current layout. Each
document's unit records go in one upsert call where they fit, as the collection's do.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from hseg.chunking.records import Record
from hseg.chunking.schema import (
    CLUSTER,
    CLUSTER_WEIGHT_KEY,
    CONTENT_HASH_KEY,
    DOC_ID_KEY,
    NEIGHBOUR_WEIGHT_KEY,
    SEGMENT,
    SYNCED_RECORDS_KEY,
    SYNCED_UNITS_KEY,
    UNIT_LAYOUT_KEY,
    level_is,
)
from hseg.progress import Progress
from hseg.retrieval.settings import DEFAULT_CLUSTER_WEIGHT, DEFAULT_NEIGHBOUR_WEIGHT
from hseg.retrieval.unit_vectors import UNIT_LAYOUT, UnitKey, companion_name, serves_filter, unit_records
from hseg.store.batches import delete_ids
from hseg.store.paging import batched, get_by_documents, pages

logger = logging.getLogger(__name__)

#: documents read back per call when rebuilding the index from the collection's records
_SYNC_DOCUMENTS = 100
#: records per read when listing the documents of the store
_DOCUMENTS_PAGE = 5000


class UnitIndex:
    """The unit index of ``records`` (the store's collection), held in a companion collection that
    ``open_companion(create)`` opens: ``None`` while it is absent and ``create`` is false. Reads never
    create it (an absent index is an empty one); the first write does.

    ``batch_size()`` gives the records per write call (the client's limit); ``drop_companion()``
    deletes the companion collection (for :meth:`rebuild`; ``None``: the index cannot be rebuilt).

    Example:
        >>> units = backend.unit_index(collection, DEFAULT_HNSW, lambda: 1000)  # doctest: +SKIP
        >>> units.usable(0.5, 0.2) is not None, units.held(["a.md"])  # doctest: +SKIP
        (True, {'a.md': {'seg-...', ...}})
    """

    def __init__(self, open_companion: Callable[[bool], Any], records: Any, batch_size: Callable[[], int],
                 drop_companion: Callable[[], None] | None = None) -> None:
        self._open = open_companion
        self._drop = drop_companion
        self._companion = open_companion(False)
        self.records = records
        self._batch_size = batch_size
        self._complete: bool | None = None  # decided on the first unit="auto" search of this object
        self._warned_weights: set[tuple[float, float]] = set()  # weights the index cannot serve, told once

    @property
    def collection(self) -> Any:
        """The companion collection, created empty if absent: for writes (reads use :attr:`existing`)."""
        if self._companion is None:
            self._companion = self._open(True)
        return self._companion

    @property
    def existing(self) -> Any:
        """The companion collection, or ``None`` while nobody has created it (looked up again each time)."""
        if self._companion is None:
            self._companion = self._open(False)
        return self._companion

    @property
    def name(self) -> str:
        return companion_name(self.records.name)

    def look_again(self) -> None:
        """Look the companion collection up again at its next use, and decide its coverage again:
        another client deleted it (:meth:`gone`), or may have."""
        self._companion = None
        self._complete = None

    def gone(self, exc: BaseException) -> bool:
        """Whether ``exc`` is Chroma saying this index's companion collection does not exist (another
        client deleted it; the name, or on a server the id, of the collection this object held)."""
        from chromadb.errors import NotFoundError

        held = self._companion
        return isinstance(exc, NotFoundError) and (
            self.name in str(exc) or (held is not None and str(getattr(held, "id", "")) in str(exc)))

    @property
    def weights(self) -> tuple[float, float]:
        """``(cluster_weight, neighbour_weight)`` the index was built with (the defaults, which a new
        index is created with, while it is absent)."""
        meta = (self.existing.metadata if self.existing is not None else None) or {}
        return (float(meta.get(CLUSTER_WEIGHT_KEY, DEFAULT_CLUSTER_WEIGHT)),
                float(meta.get(NEIGHBOUR_WEIGHT_KEY, DEFAULT_NEIGHBOUR_WEIGHT)))

    @property
    def layout(self) -> int:
        """The layout of the index's records (:data:`~hseg.retrieval.unit_vectors.UNIT_LAYOUT` while it
        is absent: a new index is created in it)."""
        if self.existing is None:
            return UNIT_LAYOUT
        return int((self.existing.metadata or {}).get(UNIT_LAYOUT_KEY, 1))

    def count(self) -> int:
        return 0 if self.existing is None else int(self.existing.count())

    # ----------------------------------------------------------------- reads

    def usable(self, cluster_weight: float, neighbour_weight: float, where: Mapping[str, Any] | None = None) -> Any:
        """The companion collection if it serves a search with these weights and this ``where`` (its
        records hold the keys the filter names) and covers every segment, else ``None`` (the caller
        gathers its candidates instead). Never writes."""
        if not serves_filter(where, self.layout):
            logger.debug("collection %r: unit='auto' filtered on %s takes the slower path: the unit index's "
                         "records do not hold every key it names", self.records.name, where)
            return None
        built = self.weights
        if built != (cluster_weight, neighbour_weight):
            if (cluster_weight, neighbour_weight) not in self._warned_weights:
                self._warned_weights.add((cluster_weight, neighbour_weight))
                logger.warning("collection %r: unit='auto' with cluster_weight=%g, neighbour_weight=%g takes the "
                               "slower path (several round trips): the unit index serves the weights it was built "
                               "with, %g/%g", self.records.name, cluster_weight, neighbour_weight, *built)
            return None
        return self.existing if self.complete() else None

    def complete(self) -> bool:
        """Whether the index covers every segment of :attr:`records`, decided once per object (an
        empty store is decided again at the next call). Never writes."""
        if self._complete is None:
            units, records = self.count(), int(self.records.count())
            if units == records == 0:
                return True  # empty: decide again once something is stored
            if self._synced_counts() == (records, units):
                self._complete = True  # nobody wrote since hseg last left both in step
            else:
                segments = self._segment_count()
                self._complete = units == segments
                if not self._complete:
                    logger.warning("collection %r: the unit index holds %d records for %d segments (documents "
                                   "added without it, or a write that was cut short); unit='auto' takes the slower "
                                   "path until 'hseg index' is re-run or store.sync_unit_index() repairs it",
                                   self.records.name, units, segments)
        return self._complete

    def unit_ids(self, doc_ids: Sequence[str]) -> dict[str, list[str]]:
        """``{doc id: ids of the index's records}`` for these documents."""
        out: dict[str, list[str]] = {d: [] for d in doc_ids}
        for doc, uid, _ in self._records_of(doc_ids):
            out.setdefault(doc, []).append(uid)
        return out

    def segment_ids(self, doc_ids: Sequence[str], shas: Mapping[str, str] | None = None) -> dict[str, set[str]]:
        """``{doc id: ids of the segments the index holds}`` for these documents; with ``shas``, only of
        the unit records written from that text of their document (``content_sha256``): a segment's
        id comes from its span, so a record left by a write cut short can hold another text's vector
        under the same id."""
        out: dict[str, set[str]] = {d: set() for d in doc_ids}
        for doc, uid, meta in self._records_of(doc_ids):
            if shas is None or meta.get(CONTENT_HASH_KEY) == shas.get(doc):
                out.setdefault(doc, set()).add(UnitKey.parse(uid).segment_id)
        return out

    def _records_of(self, doc_ids: Sequence[str]) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """``(doc id, unit record id, metadata)`` of the index's records of these documents."""
        if self.existing is None:
            return
        for got in get_by_documents(self.existing, doc_ids, ["metadatas"]):
            for uid, meta in zip(got["ids"], got["metadatas"]):
                yield str((meta or {}).get(DOC_ID_KEY)), uid, dict(meta or {})

    def _segment_count(self) -> int:
        return len(self.records.get(where=level_is(SEGMENT), include=[])["ids"])

    def _synced_counts(self) -> tuple[int, int] | None:
        meta = (self.existing.metadata if self.existing is not None else None) or {}
        if SYNCED_RECORDS_KEY not in meta:
            return None
        return int(meta[SYNCED_RECORDS_KEY]), int(meta.get(SYNCED_UNITS_KEY, -1))

    # ----------------------------------------------------------------- writes

    def write(self, records: Sequence[Record], doc_ids: Sequence[str]) -> int:
        """Upsert the unit records of these whole documents and delete the index's other records of them;
        returns the number written."""
        by_doc: dict[str, list[Record]] = {}
        for r in records:
            by_doc.setdefault(str(r.metadata[DOC_ID_KEY]), []).append(r)
        companion = self.collection  # created first: the layout is the one it was created in
        (w, v), layout = self.weights, self.layout
        per_doc = [unit_records(recs, w, v, layout) for recs in by_doc.values()]
        for part in _packed(per_doc, self._batch_size()):
            companion.upsert(ids=[u.id for u in part], embeddings=[u.embedding for u in part],
                                   metadatas=[u.metadata for u in part])
        self.delete(doc_ids, keep={u.id for units in per_doc for u in units})
        return sum(len(units) for units in per_doc)

    @contextlib.contextmanager
    def writing(self, doc_ids: Sequence[str]) -> Iterator[None]:
        """The bracket around one write of these documents: once it ended (not on an error), the counts
        both collections have are recorded when the index is known to be in step (:meth:`after_write`)."""
        yield
        self.after_write()

    def forget(self, doc_ids: Sequence[str]) -> None:
        """Remove the index's records of these documents (inside :meth:`writing`, before the records go)."""
        self.delete(doc_ids)

    def held(self, doc_ids: Sequence[str], shas: Mapping[str, str] | None = None) -> dict[str, set[str]]:
        """``{doc id: ids of the segments the index holds}`` for these documents (:meth:`segment_ids`)."""
        return self.segment_ids(doc_ids, shas)

    def delete(self, doc_ids: Sequence[str], keep: set[str] | frozenset[str] = frozenset()) -> None:
        """Remove the index's records of these documents, but those in ``keep``."""
        if self.existing is None:
            return
        stale = [u for got in get_by_documents(self.existing, doc_ids, []) for u in got["ids"] if u not in keep]
        delete_ids(self.existing, stale, self._batch_size())

    def sync(self, doc_ids: Sequence[str], check: Callable[[list[dict[str, Any]]], None] | None = None) -> int:
        """Rebuild the index of these documents from the stored records; returns the unit records written.
        ``check`` sees each batch's record metadata before it is written (and may refuse it)."""
        written, done, note = 0, 0, Progress()
        doc_ids = list(doc_ids)
        for part in batched(doc_ids, _SYNC_DOCUMENTS):
            for got in get_by_documents(self.records, part, ["embeddings", "metadatas", "documents"]):
                records = [Record(rid, np.asarray(e, dtype=np.float32), d or "", dict(m or {}))
                           for rid, e, d, m in zip(got["ids"], got["embeddings"], got["documents"], got["metadatas"])]
                if check is not None:
                    check([r.metadata for r in records])
                written += self.write(records, part)
            done += len(part)
            note.note("unit index of %r: %d of %d documents, %d unit records written", self.records.name, done,
                      len(doc_ids), written)
        return written

    def rebuild(self, doc_ids: Sequence[str] | None = None,
                check: Callable[[list[dict[str, Any]]], None] | None = None) -> int:
        """:meth:`sync` of these documents (default: every document of the store) and the counts
        recorded (:meth:`after_write`); returns the unit records written. ``check`` sees each batch's
        record metadata before it is written (and may refuse it).

        A full rebuild also writes an index of a layout older than
        :data:`~hseg.retrieval.unit_vectors.UNIT_LAYOUT` anew (Chroma merges the metadata of an upsert
        into a record's, so records cannot change layout in place); another client's search
        meanwhile takes the slower path (an index that does not cover the segments) or fails on the
        dropped collection. After it the index is complete (short of a writer working at the same time)."""
        if doc_ids is not None:
            written = self.sync(doc_ids, check)
            self.after_write()
            return written
        if self.existing is not None and self.layout < UNIT_LAYOUT:
            if self._drop is None:
                raise ValueError(f"collection {self.records.name!r}: this unit index cannot be written anew")
            weights = {CLUSTER_WEIGHT_KEY: self.weights[0], NEIGHBOUR_WEIGHT_KEY: self.weights[1]}
            logger.info("collection %r: writing the unit index anew in layout %d (it was in layout %d)",
                        self.records.name, UNIT_LAYOUT, self.layout)
            self._drop()
            self._companion, self._complete = None, None
            self.collection.modify(metadata={**self._own_metadata(), **weights})
        written = self.sync(self._stored_documents(), check)
        self.after_write(complete=True)
        return written

    def drop(self) -> None:
        """Delete the companion collection (nothing while it is absent)."""
        if self.existing is None:
            return
        if self._drop is None:
            raise ValueError(f"collection {self.records.name!r}: this unit index cannot be dropped (a reading view)")
        self._drop()
        self._companion, self._complete = None, None

    def state(self) -> dict[str, Any]:
        """What ``stats`` reports of the index: its companion collection, the records it holds and their layout."""
        return {"kind": "companion", "name": self.name, "records": self.count(), "layout": self.layout}

    def _stored_documents(self) -> list[str]:
        """Sorted ids of the documents of :attr:`records` (read from the cluster records, page by page)."""
        docs = {str(m[DOC_ID_KEY]) for got in pages(self.records, level_is(CLUSTER), ["metadatas"], _DOCUMENTS_PAGE)
                for m in got["metadatas"] if m and DOC_ID_KEY in m}
        return sorted(docs)

    def after_write(self, *, complete: bool | None = None) -> None:
        """Called by the store after each write: ``complete=True`` when the write made the index whole
        (a full sync); records both counts when the index is known to be in step."""
        if complete is not None:
            self._complete = complete
        elif self._complete is None:  # decided here, on the write path, so that searches never write
            self._complete = self.count() == self._segment_count()
        if self._complete:
            meta = {**self._own_metadata(), SYNCED_RECORDS_KEY: int(self.records.count()),
                    SYNCED_UNITS_KEY: self.count()}
            self.collection.modify(metadata=meta)

    def _own_metadata(self) -> dict[str, Any]:
        """The companion's metadata as ``modify`` takes it back (Chroma's own ``hnsw:`` keys left out)."""
        return {k: v for k, v in (self.collection.metadata or {}).items() if not k.startswith("hnsw:")}


def _packed(per_doc: list[list[Record]], batch: int) -> Iterator[list[Record]]:
    """Upsert calls of at most ``batch`` records that never split a document's records that fit one."""
    part: list[Record] = []
    for units in per_doc:
        if part and len(part) + len(units) > batch:
            yield part
            part = []
        if len(units) > batch:
            yield from (list(b) for b in batched(units, batch))
            continue
        part += units
    if part:
        yield part
