"""What every index derived from a store's collection does: the one contract the store's writes, its
upkeep and its ``stats`` speak to (:class:`DerivedIndex`).

An index derived from the collection holds rows that Chroma's records determine (the unit index's
fused vectors, the lexical index's BM25 rows), so it can always be rebuilt from them. Each kind
keeps itself in step its own way; what the store asks of every kind is the same six verbs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from hseg.chunking.records import Record


@runtime_checkable
class DerivedIndex(Protocol):
    """An index whose rows are derived from the store's collection.

    The store writes through it in one order (:class:`hseg.store.indexes.Indexes`): it enters every
    index's :meth:`writing` bracket, writes the collection's records, then each index's rows
    (:meth:`write`), then deletes the records the documents no longer have; a delete calls
    :meth:`forget` (indexes in the reverse order) before the records go. A crash anywhere in the
    bracket must leave the index able to find out and repair itself.

    Example:
        >>> from hseg.store.indexes import DerivedIndex
        >>> isinstance(backend.lexical_index(collection), DerivedIndex)  # doctest: +SKIP
        True
    """

    def writing(self, doc_ids: Sequence[str]) -> AbstractContextManager[None]:
        """The bracket around one write (or delete) of these documents: whatever the index needs to
        find a write cut short, and what it records once the write ended (not on an error)."""
        ...

    def write(self, records: Sequence[Record], doc_ids: Sequence[str]) -> int:
        """Replace the rows of these whole documents by those derived from ``records`` (inside
        :meth:`writing`, after the collection's records are written); returns the rows written."""
        ...

    def forget(self, doc_ids: Sequence[str]) -> None:
        """Remove the rows of these documents (inside :meth:`writing`, before the records go)."""
        ...

    def held(self, doc_ids: Sequence[str], shas: Mapping[str, str] | None = None) -> dict[str, set[str]] | None:
        """``{doc id: ids of the segments the index holds rows of}`` for these documents; with ``shas``
        (``{doc id: content_sha256}``) only rows written from that text. ``None``: the index is not
        kept by writers (each reader derives it) and cannot miss a document."""
        ...

    def rebuild(self, doc_ids: Sequence[str] | None = None) -> int:
        """The rows of these documents (default: every document) again from the collection; returns
        the rows written."""
        ...

    def drop(self) -> None:
        """Delete the index and everything it keeps beside it."""
        ...

    def state(self) -> dict[str, Any]:
        """What ``stats`` reports of the index (where it lives, what it holds, a problem if any)."""
        ...
