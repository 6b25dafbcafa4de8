"""A stored document read back from its cluster records: its clusters in order; and the documents of
a store, a page at a time, with their sizes and when each was indexed.

How and why: docs/design.md, ``hseg.tools.documents``.

Example:
    >>> clusters = document_clusters(store, "notes/a.md")  # doctest: +SKIP
    >>> text_of(clusters, 0, 12)  # doctest: +SKIP
    '# Tides\\n\\nThe'
    >>> document_page(store, offset=0, limit=10).documents[0].indexed_at  # doctest: +SKIP
    '2026-12-06T08:31:24Z'
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hseg.chunking.schema import (
    BOOKKEEPING_KEYS,
    CLUSTER,
    CLUSTER_ID_KEY,
    CONTENT_HASH_KEY,
    DOC_ID_KEY,
    END_KEY,
    INDEXED_AT_KEY,
    SEGMENT,
    START_KEY,
    TOKENS_KEY,
    ClusterMeta,
    level_is,
    of_document,
    user_metadata,
)
from hseg.errors import IndexOutOfStepError
from hseg.store.backends import remote_errors
from hseg.store.connection import lexical_errors
from hseg.store.indexed_at import iso_utc


@dataclass(frozen=True)
class StoredCluster:
    """A cluster record of a document: its id, exact span, tokens, heading path and text."""

    id: str
    start: int
    end: int
    tokens: int
    heading_path: tuple[str, ...]
    text: str
    #: its first and last page (the schema's page range), ``None`` for a document without pages
    pages: tuple[int, int] | None = None


def document_clusters(store: Any, doc_id: str) -> list[StoredCluster]:
    """The clusters of document ``doc_id`` in document order (``[]`` when the store holds none).

    ``IndexOutOfStepError`` when they do not tile the document (records lost or half written: adding
    the document again mends it), so that no span is ever read with characters missing.
    """
    where = {"$and": [of_document(doc_id), level_is(CLUSTER)]}
    with remote_errors(store.collection, f"reading document {doc_id!r}"):
        got = store.collection.get(where=where, include=["documents", "metadatas"])
    clusters = []
    for text, meta in zip(got["documents"], got["metadatas"]):
        view = ClusterMeta.of(meta or {})
        clusters.append(StoredCluster(view.cluster_id, view.start, view.end, view.tokens, view.heading_path,
                                      text or "", view.pages))
    clusters.sort(key=lambda c: c.start)
    at = 0
    for c in clusters:
        if c.start != at or c.end - c.start != len(c.text):
            raise IndexOutOfStepError(
                f"document {doc_id!r}: its cluster records do not tile its text (at character {at}, cluster "
                f"{c.id!r} spans [{c.start}, {c.end}) with {len(c.text)} characters); add the document again "
                "(hseg index) to mend it")
        at = c.end
    return clusters


def covering(clusters: Sequence[StoredCluster], start: int, end: int) -> list[StoredCluster]:
    """The clusters that share a character with ``[start, end)`` (the one holding ``start`` for an
    empty span), in order."""
    first = bisect.bisect_right([c.start for c in clusters], start) - 1
    out = [clusters[max(first, 0)]]
    for c in clusters[max(first, 0) + 1:]:
        if c.start >= end:
            break
        out.append(c)
    return out


def text_of(clusters: Sequence[StoredCluster], start: int, end: int) -> str:
    """The characters ``[start, end)`` of the document these clusters tile."""
    return "".join(c.text[max(start, c.start) - c.start: min(end, c.end) - c.start]
                   for c in covering(clusters, start, end))


@dataclass(frozen=True)
class StoredDocument:
    """A document as its records describe it."""

    doc_id: str
    chars: int
    #: the sum of its segments' tokens
    tokens: int
    clusters: int
    content_sha256: str | None
    #: when it was indexed, ISO 8601 UTC (:data:`~hseg.chunking.schema.INDEXED_AT_KEY`); ``None`` for a
    #: document written before hseg kept the time
    indexed_at: str | None
    metadata: dict[str, Any]


@dataclass(frozen=True)
class DocumentPage:
    """Documents sorted by id, ``limit`` of them from ``offset``, how many the store holds, and whether
    more follow."""

    total: int
    offset: int
    documents: list[StoredDocument]
    more: bool


# a page of the lexical index's documents, sorted by id (after a given one: {after}), with each one's
# segments, tokens, clusters and last position: one range of the documents table's key, then the page's
# segment rows (index segments_doc)
_PAGE = ("SELECT d.doc_id, d.sha, count(*), sum(s.tokens), count(DISTINCT s.cluster_id), max(s.position) "
         "FROM (SELECT doc_id, sha FROM documents {after} ORDER BY doc_id LIMIT ? OFFSET ?) d "
         "JOIN segments s ON s.doc_id = d.doc_id GROUP BY d.doc_id ORDER BY d.doc_id")
# the last segment of each document named, with its text: where the document ends, its user metadata
# and its time (every record of a document carries the same); index segments_doc_position
_LAST = ("WITH last(doc_id, position) AS (VALUES {pairs}) SELECT s.doc_id, s.record, f.text FROM last "
         "JOIN segments s ON s.doc_id = last.doc_id AND s.position = last.position JOIN fts f ON f.rowid = s.rowid")
# the ids either side of a source in the documents table's order
_AFTER = "SELECT doc_id FROM documents WHERE doc_id >= ? ORDER BY doc_id LIMIT ?"
_BEFORE = "SELECT doc_id FROM documents WHERE doc_id < ? ORDER BY doc_id DESC LIMIT ?"


def document_page(store: Any, offset: int, limit: int, after: str | None = None) -> DocumentPage:
    """The documents of ``store`` sorted by id (only those after id ``after``, where given), ``limit``
    of them from ``offset``, each with its size, content hash, time and metadata: read from the lexical
    index, brought in step first (a reader follows other writers as a search does), in one snapshot of
    it. A page after an id costs the same however deep it lies; one from an offset skips that many
    ids first. Without a lexical index (a store over an object that is not a chromadb collection)
    every segment record is read (:func:`documents`).
    """
    index = store._parts.lexical  # the tools read the index itself (the store keeps it private)
    if index is None:
        every = documents(store)
        rest = every if after is None else [d for d in every if d.doc_id > after]
        return DocumentPage(len(every), offset, rest[offset:offset + limit], len(rest) > offset + limit)
    with remote_errors(store.collection, "listing the documents"), lexical_errors(index.location.path):
        index.ensure_fresh()
        with index.db.snapshot() as conn:
            total = int(conn.execute("SELECT count(*) FROM documents").fetchone()[0])
            page = conn.execute(_PAGE.format(after="" if after is None else "WHERE doc_id > ?"),
                                ([] if after is None else [after]) + [limit + 1, offset]).fetchall()
            more, page = len(page) > limit, page[:limit]  # one more row read: whether another page follows
            last = conn.execute(_LAST.format(pairs=",".join(["(?, ?)"] * len(page))),
                                [x for row in page for x in (row[0], row[5])]).fetchall() if page else []
    ends = {doc: (json.loads(record), text) for doc, record, text in last}
    out = []
    for doc, sha, _, tokens, clusters, _ in page:
        meta, text = ends.get(doc, ({}, ""))
        out.append(StoredDocument(str(doc), int(meta.get(START_KEY, 0)) + len(text or ""), int(tokens or 0),
                                  int(clusters), None if sha is None else str(sha), iso_utc(meta.get(INDEXED_AT_KEY)),
                                  _user(meta)))
    return DocumentPage(total, offset, out, more)


def nearby_sources(store: Any, source: str, n: int = 50) -> list[str]:
    """Up to ``2 n`` stored document ids next to ``source`` in sorted order (every id without a
    lexical index): the candidates of a "did you mean" that costs no read of the whole store."""
    index = store._parts.lexical  # the tools read the index itself (the store keeps it private)
    if index is None:
        return [d.doc_id for d in documents(store)]
    with remote_errors(store.collection, "listing the documents"), lexical_errors(index.location.path):
        index.ensure_fresh()
        with index.db.snapshot() as conn:
            return [d for (d,) in conn.execute(_BEFORE, (source, n)).fetchall()] + \
                [d for (d,) in conn.execute(_AFTER, (source, n)).fetchall()]


def documents(store: Any) -> list[StoredDocument]:
    """Every document of the store, sorted by id, from its segment records' metadata (read page by
    page): the list where the store has no lexical index."""
    seen: dict[str, list[Any]] = {}
    for _, meta in store.iter_metadatas(level_is(SEGMENT)):
        doc_id = meta.get(DOC_ID_KEY)
        if doc_id is None:
            continue
        entry = seen.setdefault(str(doc_id), [0, 0, set(), meta])
        entry[0] = max(entry[0], int(meta.get(END_KEY, 0)))
        entry[1] += int(meta.get(TOKENS_KEY, 0))
        entry[2].add(meta.get(CLUSTER_ID_KEY))
    return [StoredDocument(doc, chars, tokens, len(clusters), _sha(meta), iso_utc(meta.get(INDEXED_AT_KEY)),
                           _user(meta))
            for doc, (chars, tokens, clusters, meta) in sorted(seen.items())]


def _sha(meta: Any) -> str | None:
    sha = meta.get(CONTENT_HASH_KEY)
    return None if sha is None else str(sha)


def _user(meta: Any) -> dict[str, Any]:
    return {k: v for k, v in user_metadata(meta).items() if k not in BOOKKEEPING_KEYS}
