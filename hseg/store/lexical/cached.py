"""The cached kind of lexical index: a client of a server derives it per machine from the collection
and follows every client's writes through the write log (see :mod:`hseg.store.lexical`); a write
adds entries to the log and no row here."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence

from hseg.chunking.records import Record
from hseg.store.lexical.follow import Follower
from hseg.store.lexical.journal import Journal
from hseg.store.lexical.table import LexicalTable


class CachedKind:
    """How ``table`` is kept as a cache: following ``journal``, the write log every hseg writer of
    the collection keeps (:mod:`hseg.store.lexical.journal`).

    Example:
        >>> kind = CachedKind(table, backend.journal(collection))  # doctest: +SKIP
        >>> kind.keep_in_step(); kind.follower.rebuilds  # doctest: +SKIP
        1
    """

    #: derived by each reader from the collection: it cannot miss a document
    maintained = False
    #: its check reads the write log from the server: run beside the search's first read of Chroma
    checks_beside = True

    def __init__(self, table: LexicalTable, journal: Journal) -> None:
        self.table = table
        self.journal = journal
        #: what keeps the cache in step with the write log (its ``rebuilds`` and ``applied`` count what it did)
        self.follower = Follower(table, journal)

    def keep_in_step(self) -> None:
        """One read of the write log's recent entries, and the documents they name re-read
        (:meth:`Follower.follow`)."""
        self.follower.follow()

    def rebuild_rows(self) -> None:
        """Every row again from the collection, the log's recent entries noted as applied (writer
        lock held, file adopted)."""
        self.follower.rebuild()

    @contextlib.contextmanager
    def bracket(self, docs: list[str], repair: Callable[[BaseException], None]) -> Iterator[None]:
        """Around one write of ``docs``: an ``open`` entry of the log while it runs and a ``done``
        entry once it ends, failed or not (``repair`` is not needed: no row is written here)."""
        open_id = self.journal.begin(docs)
        try:
            yield
        except BaseException:
            # a failed write may have changed some records: readers re-read its documents too (the
            # server may be what failed: the original error is the one to see)
            with contextlib.suppress(Exception):
                self.journal.end(open_id, docs)
            raise
        self.journal.end(open_id, docs)

    def documents_holding(self, shas: Iterable[str]) -> dict[str, set[str]] | None:
        """``None``: the collection answers which documents hold these texts, not the cache. A cache
        is in step only as of its last check, seconds behind another client's write; following the
        log before each write would make every writer re-read every other writer's documents (and a
        writer that never searches build the whole cache first) and still miss writes under way."""
        return None

    def write(self, records: Sequence[Record], doc_ids: Sequence[str]) -> int:
        """Nothing: every reader re-reads the documents the log names."""
        return 0

    def forget(self, doc_ids: Sequence[str]) -> None:
        """Nothing: every reader re-reads the documents the log names."""

    def rewrite(self, doc_ids: list[str]) -> int:
        """Nothing (inside the bracket, the log names the documents for every reader to re-read)."""
        return 0
