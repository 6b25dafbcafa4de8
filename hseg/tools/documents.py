"""A stored document read back from its cluster records: its clusters in order, and the characters
of any span of it. (The list of a store's documents is the store's:
:meth:`hseg.store.HierarchicalStore.document_page`.)

How and why: docs/design.md, ``hseg.tools.documents``.

Example:
    >>> clusters = document_clusters(store, "notes/a.md")  # doctest: +SKIP
    >>> text_of(clusters, 0, 12)  # doctest: +SKIP
    '# Tides\\n\\nThe'
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hseg.chunking.schema import CLUSTER, ClusterMeta, level_is, of_document
from hseg.errors import IndexOutOfStepError
from hseg.store.backends import remote_errors


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
