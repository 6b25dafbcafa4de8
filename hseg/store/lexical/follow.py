"""A cache following the write log: how a client of a server keeps its lexical index in step with
what every client writes, at a cost that grows with the documents written, not with the store.

How and why: docs/design.md, ``hseg.store.lexical.follow``.
"""

from __future__ import annotations

import logging
import math

from hseg.store.lexical.journal import (
    MARGIN_S,
    NEAR_MARGIN_S,
    OPEN_STALE_S,
    OPEN_WRITE_TTL_S,
    SWEEP_S,
    Entry,
    Journal,
    LogRead,
)
from hseg.store.lexical.table import LexicalTable
from hseg.store.lexical.tables import applied_among, record_applied, set_meta

logger = logging.getLogger(__name__)

_POSITION = "log_position"


class Follower:
    """Keeps ``table`` (a cache's) in step with its collection through its write log ``journal``.

    Example:
        >>> follower = Follower(table, Journal.open(collection))  # doctest: +SKIP
        >>> follower.follow(); follower.rebuilds  # doctest: +SKIP
        1
    """

    def __init__(self, table: LexicalTable, journal: Journal) -> None:
        self.table = table
        self.journal = journal
        self._position = -math.inf  # this object's last complete read of the log (the server's clock)
        self._swept = -math.inf  # its last read MARGIN_S back
        self._reread: dict[str, float] = {}  # open entries whose documents this object re-read, and when
        self.rebuilds = 0  #: full rebuilds this object made (for tests and logs)
        self.applied = 0  #: log entries this object applied (for tests and logs)

    def position(self, meta: dict[str, str]) -> float:
        """The cache's position: the later of the file's and this object's."""
        return max(float(meta.get(_POSITION, "-inf")), self._position)

    def follow(self) -> None:
        """One check (docs/design.md, ``hseg.store.lexical.follow``)."""
        table = self.table
        meta = table.meta()
        position = self.position(meta)
        started = self.journal.now()
        if not (table.belongs(meta) and meta.get("built") == "1" and math.isfinite(position)):
            self._rebuild_locked("no cache of this collection yet", meta)
            return
        sweep = started - self._swept >= SWEEP_S
        log = self.journal.read(since=position - (MARGIN_S if sweep else NEAR_MARGIN_S), by_ids=sweep)
        if log.horizon >= position - MARGIN_S:
            self._rebuild_locked("the write log was compacted past this cache's last read", meta)
            return
        docs, entries = self._to_apply(log, started)
        if entries or docs:
            self._apply(entries, docs, started, counted=not log.opens)
        elif not log.opens and meta.get("synced_count", "") == "":
            self._apply([], set(), started, counted=True)  # at rest again: the count the log explains
        elif not log.opens and not table.count_checked:
            table.count_checked = True
            if int(meta["synced_count"]) != int(table.collection.count()):
                self._rebuild_locked("records were written without hseg's write log (the record count changed)",
                                     meta)
                return
        self._position = started
        if sweep:
            self._swept = started

    def _to_apply(self, log: LogRead, now: float) -> tuple[set[str], list[Entry]]:
        """The documents of ``open`` entries to re-read, and the ``done`` entries not yet applied."""
        docs: set[str] = set()
        for entry in log.opens:
            last = self._reread.get(entry.id, -math.inf)
            if now - entry.at >= OPEN_STALE_S and now - last >= OPEN_STALE_S and last < entry.at + OPEN_WRITE_TTL_S:
                self._reread[entry.id] = now
                docs.update(entry.docs)
        with self.table.db.lock:
            fresh = applied_among(self.table.db.conn, [e.id for e in log.done])
        return docs, [e for e in log.done if e.id not in fresh]

    def _apply(self, entries: list[Entry], docs: set[str], started: float, *, counted: bool) -> None:
        """Re-read ``docs`` and those of ``entries``, note the entries applied and move the position
        (and, when ``counted``, no write being under way, the record count), in one commit."""
        table = self.table
        with table.db.writer():
            with table.db.lock:
                fresh = applied_among(table.db.conn, [e.id for e in entries])
            entries = [e for e in entries if e.id not in fresh]  # another process sharing the file applied them
            docs = docs | {d for e in entries for d in e.docs}
            if not docs and not entries and not counted:
                return
            moved = {_POSITION: repr(max(started, float(table.meta().get(_POSITION, "-inf")))),
                     # under way: the count includes part of a write, so no count is known until the next rest
                     "synced_count": str(int(table.collection.count())) if counted else ""}
            if docs:
                table.rewrite(sorted(docs), clear_pending=False, **moved)
            with table.db.transaction() as c:
                record_applied(c, {e.id: e.at for e in entries}, forget_before=started - 3 * MARGIN_S)
                set_meta(c, **moved)
        self.applied += len(entries)
        table.count_checked = table.count_checked or counted  # the count now recorded is the collection's

    def _rebuild_locked(self, why: str, seen: dict[str, str]) -> None:
        table = self.table
        with table.db.writer():  # processes sharing this cache file rebuild one at a time
            meta = table.meta()
            if meta.get(_POSITION) != seen.get(_POSITION) and table.belongs(meta) and meta.get("built") == "1":
                return  # another process rebuilt it while this one waited: the next check follows from there
            logger.info("collection %r: rebuilding the lexical cache: %s", table.name, why)
            table.adopt()
            self.rebuild()

    def rebuild(self) -> None:
        """Every row again from the collection, the log's recent entries noted as applied (their writes
        ended before the collection was read). Call with the writer lock held."""
        started = self.journal.now()
        log = self.journal.read(since=started - 2 * MARGIN_S)
        # with a write under way the count holds part of it: known again at the next rest
        self.table.rebuild(**{_POSITION: repr(started), **({"synced_count": ""} if log.opens else {})})
        with self.table.db.transaction() as c:
            record_applied(c, {e.id: e.at for e in log.done}, forget_before=started - 3 * MARGIN_S)
        self.rebuilds += 1
        self.table.count_checked = True
        self._position = started
