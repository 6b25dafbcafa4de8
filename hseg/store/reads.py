"""What a store's reads of its records do (:class:`Reads`): counts, metadata page by page, the
documents held (a page at a time, or those near an id), ``stats``, one document's records and the
lexical index's best segments for some words, each through the store's backend (its errors, and for
the reads of vectors its fresh views).

Example:
    >>> reads = Reads(parts)  # doctest: +SKIP
    >>> reads.count({"source": "notes/a.md"})  # doctest: +SKIP
    14
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from hseg.chunking.records import Record
from hseg.chunking.schema import (
    CLUSTER,
    CLUSTER_INDEX_KEY,
    DOC_ID_KEY,
    INDEX_KEY,
    LEVEL_KEY,
    SEGMENT,
    level_is,
    of_document,
)
from hseg.errors import StoreNotFoundError
from hseg.retrieval.lexical_query import LexicalRow
from hseg.store.connection import lexical_errors
from hseg.store.lexical import LexicalIndex, lexical_state
from hseg.store.listing import DocumentPage, StoredDocument, documents_in, page_of
from hseg.store.paging import pages
from hseg.store.parts import StoreParts
from hseg.store.stats import collection_stats

#: a segment the lexical index found: its row, its BM25 score, its record's metadata (as a search reads
#: it) and its text
LexicalMatch = tuple[LexicalRow, float, dict[str, Any], str]


class Reads:
    """The reads of the store whose parts are ``parts`` (see :class:`hseg.store.HierarchicalStore`'s
    methods of the same names for what each returns)."""

    def __init__(self, parts: StoreParts) -> None:
        self._parts = parts

    def count(self, where: Mapping[str, Any] | None = None) -> int:
        """Records in the collection, or those matching a Chroma ``where``."""
        parts = self._parts
        with parts.backend.errors("count"):
            if where:
                return len(parts.collection.get(where=dict(where), include=[])["ids"])
            return int(parts.collection.count())

    def metadatas(self, where: Mapping[str, Any] | None = None, page: int = 5000,
                  action: str = "reading the collection") -> Iterator[tuple[str, dict[str, Any]]]:
        """``(record id, metadata)`` of every record matching ``where``, read page by page; a lost
        server is named with ``action``."""
        with self._parts.backend.errors(action):
            for got in pages(self._parts.collection, where, ["metadatas"], page):
                yield from ((rid, dict(m or {})) for rid, m in zip(got["ids"], got["metadatas"]))

    def doc_ids(self) -> list[str]:
        """Sorted ids of the documents stored (read from the cluster records, page by page)."""
        clusters = self.metadatas(level_is(CLUSTER), 5000, "listing the documents")
        return sorted({str(m[DOC_ID_KEY]) for _, m in clusters if DOC_ID_KEY in m})

    def document_page(self, offset: int, limit: int, after: str | None = None) -> DocumentPage:
        """The documents sorted by id (after id ``after``, where given), ``limit`` of them from
        ``offset``: read from the lexical index, or from every segment record without one."""
        index = self._parts.lexical
        if index is None:
            return page_of(self._documents(), offset, limit, after)
        with self._lexical(index, "listing the documents"):
            return index.document_page(offset, limit, after)

    def document_ids_near(self, doc_id: str, n: int) -> list[str]:
        """Up to ``n`` document ids either side of ``doc_id`` in sorted order (every id without a
        lexical index)."""
        index = self._parts.lexical
        if index is None:
            return [d.doc_id for d in self._documents()]
        with self._lexical(index, "listing the documents"):
            return index.ids_near(doc_id, n)

    def lexical_top(self, terms: Sequence[str], limit: int) -> list[LexicalMatch] | None:
        """The ``limit`` best segments for ``terms`` by BM25, best first, each with its record (those
        removed between the two reads of the index left out); ``None`` without a lexical index."""
        index = self._parts.lexical
        if index is None:
            return None
        with self._lexical(index, "a lexical search"):
            top = index.top(terms, limit)
            records = index.records([row.segment_id for row, _ in top])
        return [(row, score, *records[row.segment_id]) for row, score in top if row.segment_id in records]

    def stats(self, lexical_of: Callable[[list[str]], Mapping[str, set[str]] | None]) -> dict[str, Any]:
        """The store's figures (:func:`hseg.store.stats.collection_stats`) through a view that has
        seen other processes' writes; ``lexical_of(doc ids)`` gives the segments the lexical index
        holds per document."""
        parts = self._parts
        with parts.backend.reading() as (collection, units):
            stats = collection_stats(collection, units, lexical_of, errors=parts.backend.errors)
        stats["lexical_index"] = None if parts.lexical is None else lexical_state(parts.lexical)
        return stats

    def records(self, doc_id: str, include_embeddings: bool = True) -> list[Record]:
        """A document's records in document order (each cluster record before its segments)."""
        include = ["documents", "metadatas"] + (["embeddings"] if include_embeddings else [])
        backend = self._parts.backend
        # through the reads' view: an embedded client reads vectors from its own, possibly stale, index
        with backend.reading() as (collection, _), backend.errors(f"reading document {doc_id!r}"):
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

    def _documents(self) -> list[StoredDocument]:
        # a store without a lexical index has no list of its documents but its segment records
        return documents_in(self.metadatas(level_is(SEGMENT)))

    @contextmanager
    def _lexical(self, index: LexicalIndex, action: str) -> Iterator[None]:
        """Around a read of the lexical index: brought in step first (a reader follows other writers,
        as a search does), a lost server or a full or read-only disk named as such."""
        with self._parts.backend.errors(action), lexical_errors(index.location.path):
            index.ensure_fresh()
            yield

    def refuse_made_by_opening(self) -> None:
        """A :class:`~hseg.errors.StoreNotFoundError` for a search of a collection that opening the store
        created (at a ``path`` that held none) while it still holds nothing: a mistyped path or name,
        which an answer of ``[]`` would pass off as an index that found nothing. Once written, it searches."""
        parts = self._parts
        if parts.made_by_opening is None:
            return
        if self.count() > 0:
            parts.made_by_opening = None
            return
        raise StoreNotFoundError(parts.made_by_opening)
