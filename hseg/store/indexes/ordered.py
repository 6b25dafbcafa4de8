"""The indexes kept beside one collection, in the order a write reaches them (:class:`Indexes`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

from hseg.chunking.records import Record
from hseg.store.indexes.contract import DerivedIndex


class Indexes:
    """The derived indexes of a collection (:class:`~hseg.store.indexes.DerivedIndex`), in write
    order; ``None`` stands for an index the store does not have and is left out.

    The order is what keeps every index from naming a record the collection lacks, and a write cut
    short findable: the brackets open last-written first (so the last index's bracket, the lexical
    index's *pending* documents or write-log entry, surrounds everything), rows are written in order
    after the records, and forgotten in the reverse order before the records go.

    Example:
        >>> indexes = Indexes(units, backend.lexical_index(collection))  # doctest: +SKIP
        >>> with indexes.writing(["a.md"]):  # doctest: +SKIP
        ...     collection.upsert(...); indexes.write(records, ["a.md"])
    """

    def __init__(self, *indexes: DerivedIndex | None) -> None:
        self._indexes = tuple(i for i in indexes if i is not None)

    def __iter__(self) -> Iterator[DerivedIndex]:
        return iter(self._indexes)

    def __len__(self) -> int:
        return len(self._indexes)

    @contextlib.contextmanager
    def writing(self, doc_ids: Sequence[str]) -> Iterator[None]:
        """Every index's bracket around one write of these documents (the last index's outermost);
        they close in write order once the write ended."""
        with contextlib.ExitStack() as brackets:
            for index in reversed(self._indexes):
                brackets.enter_context(index.writing(doc_ids))
            yield

    def write(self, records: Sequence[Record], doc_ids: Sequence[str]) -> None:
        """Every index's rows of these whole documents, in order, after the collection's records."""
        for index in self._indexes:
            index.write(records, doc_ids)

    def forget(self, doc_ids: Sequence[str]) -> None:
        """Every index's rows of these documents, in the reverse order, before the records go."""
        for index in reversed(self._indexes):
            index.forget(doc_ids)

    def held(self, doc_ids: Sequence[str], shas: Mapping[str, str] | None = None
             ) -> list[tuple[DerivedIndex, dict[str, set[str]]]]:
        """``(index, {doc id: segment ids it holds})`` for each index kept by writers
        (:meth:`~hseg.store.indexes.DerivedIndex.held`)."""
        out = []
        for index in self._indexes:
            held = index.held(doc_ids, shas)
            if held is not None:
                out.append((index, held))
        return out

    def drop(self) -> None:
        """Delete every index, the last written first (the first may name the records of the others)."""
        for index in reversed(self._indexes):
            index.drop()
