"""The documents a store holds, as a list (:class:`StoredDocument`, a page of them :class:`DocumentPage`):
made from the lexical index's rows (:meth:`hseg.store.lexical.reads.TableReads.document_page`) or, for
a store without one, from every segment record's metadata (:func:`documents_in`).

Example:
    >>> page_of([], offset=0, limit=10)
    DocumentPage(total=0, offset=0, documents=[], more=False)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hseg.chunking.schema import (
    BOOKKEEPING_KEYS,
    CLUSTER_ID_KEY,
    CONTENT_HASH_KEY,
    DOC_ID_KEY,
    END_KEY,
    INDEXED_AT_KEY,
    START_KEY,
    TOKENS_KEY,
    user_metadata,
)
from hseg.store.indexed_at import iso_utc


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


def from_last_segment(doc_id: Any, sha: Any, tokens: Any, clusters: Any, meta: dict[str, Any],
                      text: str | None) -> StoredDocument:
    """A document from its figures and its last segment's metadata and text: the document ends where
    that segment does, and every record of a document carries the same user metadata and time."""
    return StoredDocument(str(doc_id), int(meta.get(START_KEY, 0)) + len(text or ""), int(tokens or 0),
                          int(clusters), None if sha is None else str(sha), iso_utc(meta.get(INDEXED_AT_KEY)),
                          _user(meta))


def documents_in(segments: Iterable[tuple[str, dict[str, Any]]]) -> list[StoredDocument]:
    """Every document of these ``(record id, metadata)`` segment records, sorted by id: the list of a
    store without a lexical index, which reads every segment record for it."""
    seen: dict[str, list[Any]] = {}
    for _, meta in segments:
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


def page_of(every: Sequence[StoredDocument], offset: int, limit: int, after: str | None = None) -> DocumentPage:
    """The page of the sorted list ``every`` that :class:`DocumentPage` describes (only the ids after
    ``after``, where given)."""
    rest = every if after is None else [d for d in every if d.doc_id > after]
    return DocumentPage(len(every), offset, list(rest[offset:offset + limit]), len(rest) > offset + limit)


def _sha(meta: Any) -> str | None:
    sha = meta.get(CONTENT_HASH_KEY)
    return None if sha is None else str(sha)


def _user(meta: Any) -> dict[str, Any]:
    return {k: v for k, v in user_metadata(meta).items() if k not in BOOKKEEPING_KEYS}
