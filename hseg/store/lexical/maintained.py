"""The maintained kind of lexical index: an embedded or in-memory store's, kept in step by every hseg
write (see :mod:`hseg.store.lexical`): *pending* documents while a write runs, rows written in the
same bracket as Chroma's records, and a check that re-reads what a write cut short left pending."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence

from hseg.chunking.records import Record
from hseg.store.lexical.table import LexicalTable
from hseg.store.lexical.tables import documents_holding, set_meta

logger = logging.getLogger(__name__)


class MaintainedKind:
    """How ``table`` is kept when every hseg writer writes it.

    Example:
        >>> kind = MaintainedKind(LexicalTable(collection, Location("memory", None, "demo")))  # doctest: +SKIP
        >>> kind.keep_in_step(); kind.table.count()  # doctest: +SKIP
        2134
    """

    #: writers keep the rows: a document can be missing from them (a write around hseg)
    maintained = True
    follower = None
    #: its check is a look at a local file: run before the search, not beside it
    checks_beside = False

    def __init__(self, table: LexicalTable) -> None:
        self.table = table

    def in_step(self) -> bool:
        """Whether the rows are the collection's as far as this object can tell without repairing
        anything: the file is this collection's and built, no document is *pending*, and the record
        count it recorded is the collection's (compared once per object, as every check does). One
        read when it is; nothing is written."""
        table = self.table
        # one statement on the fast path: the meta rows and whether any document is pending
        found = table.db.rows("SELECT key, value FROM meta UNION ALL SELECT '', '' FROM pending LIMIT 1000")
        meta = {k: v for k, v in found if k}
        pending = any(not k for k, _ in found)
        if pending or not (table.belongs(meta) and meta.get("built") == "1"):
            return False
        if not table.count_checked and int(meta.get("synced_count", -1)) == int(table.collection.count()):
            table.count_checked = True
        return table.count_checked

    def documents_holding(self, shas: Iterable[str]) -> dict[str, set[str]] | None:
        """``{sha: ids of the documents holding that text}`` (:func:`~hseg.store.lexical.tables.documents_holding`)
        when the rows are in step (:meth:`in_step`), else ``None``: a write cut short, a file not built
        or records written around hseg are the collection's to answer, and repairing them is a
        search's check, not a write's look-up."""
        if not self.in_step():
            return None
        with self.table.db.lock:
            return documents_holding(self.table.db.conn, shas)

    def keep_in_step(self) -> None:
        """Re-read the documents a write cut short left *pending*, or everything where the file is
        not built or the collection's record count changed without it; one read when nothing did."""
        table = self.table
        if self.in_step():
            return
        meta = table.meta()
        built = table.belongs(meta) and meta.get("built") == "1"
        # a writer at work holds the lock: its rows come with its write, so wait only for a missing index
        with table.db.writer(blocking=not built) as got:
            if not got:
                return
            table.adopt()
            meta = table.meta()
            pending_docs = [d for (d,) in table.db.rows("SELECT doc_id FROM pending")]
            if pending_docs:
                logger.warning("collection %r: %d documents of a write that did not finish (a process killed "
                               "mid-write?); re-reading them into the lexical index", table.name, len(pending_docs))
                table.rewrite(pending_docs)
            elif meta.get("built") != "1" or int(meta.get("synced_count", -1)) != int(table.collection.count()):
                if meta.get("built") == "1":
                    logger.warning("collection %r: records were written without hseg's lexical index (the "
                                   "record count changed); rebuilding it", table.name)
                table.rebuild()
            table.count_checked = True

    def rebuild_rows(self) -> None:
        """Every row again from the collection (writer lock held, file adopted)."""
        self.table.rebuild()

    @contextlib.contextmanager
    def bracket(self, docs: list[str], repair: Callable[[BaseException], None]) -> Iterator[None]:
        """Around one write of ``docs``: under the writer lock, the documents are *pending* until the
        write ends (a process killed in between leaves them so, and the next check re-reads them); a
        file SQLite cannot read is built again first (``repair``)."""
        table = self.table
        try:
            table.meta()
        except sqlite3.DatabaseError as exc:  # a file SQLite cannot read: built again before the write
            repair(exc)
        with table.db.writer():
            table.adopt()
            if table.meta().get("built") != "1" and int(table.collection.count()) == 0:
                with table.db.transaction() as c:
                    set_meta(c, built="1", synced_count="0")  # nothing stored yet: the index is whole
            with table.db.transaction() as c:
                c.executemany("INSERT OR IGNORE INTO pending VALUES (?)", ((d,) for d in docs))
            try:
                yield
            except BaseException:
                # the write failed part way (a refused record, a full disk): rows as Chroma now has them
                with contextlib.suppress(Exception):
                    table.rewrite(docs)
                raise
            count = int(table.collection.count())
            with table.db.transaction() as c:
                c.executemany("DELETE FROM pending WHERE doc_id = ?", ((d,) for d in docs))
                set_meta(c, synced_count=str(count))

    def write(self, records: Sequence[Record], doc_ids: Sequence[str]) -> int:
        """Replace the rows of these whole documents by their segment ``records``; returns the rows written."""
        return self.table.write(records, doc_ids)

    def forget(self, doc_ids: Sequence[str]) -> None:
        """Remove the rows of these documents."""
        self.table.delete(doc_ids)

    def rewrite(self, doc_ids: list[str]) -> int:
        """The rows of these documents again from the collection (inside the bracket); returns the rows written."""
        return self.table.rewrite(doc_ids)
