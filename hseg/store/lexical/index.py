"""The lexical index of one collection, as a store holds it: the verbs of a derived index
(:class:`~hseg.store.indexes.DerivedIndex`), staying in step before a search, and a damaged file
repaired. What differs between the two kinds (see :mod:`hseg.store.lexical`), the write bracket, the
check and the rebuild, is in their classes, each holding the table:
:class:`~hseg.store.lexical.maintained.MaintainedKind` and :class:`~hseg.store.lexical.cached.CachedKind`."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from hseg.chunking.records import Record
from hseg.store.connection import lexical_errors
from hseg.store.lexical.cached import CachedKind
from hseg.store.lexical.database import Database
from hseg.store.lexical.follow import Follower
from hseg.store.lexical.journal import Journal
from hseg.store.lexical.location import Location
from hseg.store.lexical.maintained import MaintainedKind
from hseg.store.lexical.reads import TableReads
from hseg.store.lexical.repair import check_file, repair
from hseg.store.lexical.table import LexicalTable


class LexicalIndex(TableReads):
    """The lexical index of ``collection`` at ``location``; ``journal`` is the write log a cache
    follows (:mod:`hseg.store.lexical.journal`; cache mode only). Its kind (``kind``: maintained or
    cached, as ``location`` says) holds its :class:`~hseg.store.lexical.table.LexicalTable`
    (``table``). Nothing is opened or read until the first use, so a store that never searches
    lexically (a Ray worker, say) pays nothing but the log's entries around its writes. A search
    reads it as the table (:class:`~hseg.store.lexical.reads.TableReads`).

    Example:
        >>> index = backend.lexical_index(collection)  # doctest: +SKIP
        >>> index.ensure_fresh(); index.top(["tides"], 3)  # doctest: +SKIP
        [(LexicalRow(segment_id='seg-...', ...), 7.91), ...]
    """

    def __init__(self, collection: Any, location: Location, journal: Journal | None = None) -> None:
        self.collection = collection
        self.location = location
        self.journal = journal
        self.table = LexicalTable(collection, location)
        self.kind: MaintainedKind | CachedKind
        if location.maintained:
            self.kind = MaintainedKind(self.table)
        elif journal is None:
            raise ValueError(f"collection {collection.name!r}: a cached lexical index needs its write log (journal)")
        else:
            self.kind = CachedKind(self.table, journal)
        self._checks: ThreadPoolExecutor | None = None  # where checks run beside a search (a cache's)
        self._pending = threading.local()  # the check a thread started beside its search, until it reads

    @property
    def db(self) -> Database:
        pending: Future[None] | None = getattr(self._pending, "check", None)
        if pending is not None:  # this thread's first read since it started a check: the check first
            self._pending.check = None
            pending.result()
        return self.table.db

    @property
    def maintained(self) -> bool:
        """True when hseg writers keep the index in step (embedded and in-memory stores)."""
        return self.kind.maintained

    @property
    def follower(self) -> Follower | None:
        """What keeps a cache in step with the write log (``None``: the index is maintained)."""
        return self.kind.follower

    def meta(self) -> dict[str, str]:
        """The file's ``meta`` table: its collection, layout, whether it is built, and its sync state."""
        return self.table.meta()

    # ----------------------------------------------------------------- staying in step

    def ensure_fresh(self) -> None:
        """Bring the index in step with the collection where it may not be; cheap when it is: a look
        at the *pending* table (maintained) or one read of the write log's recent entries (cache).
        A damaged file is set aside and built again (:meth:`repair`)."""
        try:
            self._step()
        except sqlite3.DatabaseError as exc:
            self.repair(exc)
            self._step()

    def prepare(self) -> None:
        """Before a search that reads the index: :meth:`ensure_fresh` now (maintained: a look at its
        *pending* table), or beside the search for a cache (:meth:`check_beside`: its check reads the
        write log over the network, at the same time as the search's first read of Chroma)."""
        if self.kind.checks_beside:
            self.check_beside()
        else:
            self.ensure_fresh()

    def check_beside(self) -> None:
        """Start :meth:`ensure_fresh` in a worker thread; this thread's next read of the index waits for
        it (and raises what it raised). For a cache, whose check reads the write log from the server: a
        search's first read there (its kNN) and the check go over the network at once."""
        self.settle()
        if self._checks is None:
            self._checks = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hseg-lexical-check")
        self._pending.check = self._checks.submit(self.ensure_fresh)

    def settle(self) -> None:
        """Wait for a check this thread started beside its search and did not read after (what it
        raised is left to the next check to meet again)."""
        pending: Future[None] | None = getattr(self._pending, "check", None)
        self._pending.check = None
        if pending is not None:
            with contextlib.suppress(Exception):
                pending.result()

    def _step(self) -> None:
        check_file(self.table, self.rebuild_locked)
        self.kind.keep_in_step()

    def repair(self, problem: BaseException) -> None:
        """Set a file SQLite cannot read aside and build it again (:func:`hseg.store.lexical.repair.repair`)."""
        repair(self.table, problem, self.rebuild_locked)

    def rebuild_locked(self) -> None:
        """Every row again from the collection, under the writer lock."""
        with self.table.db.writer():
            self.table.adopt()
            self.kind.rebuild_rows()

    # ----------------------------------------------------------------- the derived index's verbs

    @contextlib.contextmanager
    def writing(self, doc_ids: Sequence[str]) -> Iterator[None]:
        """Around one store write of these documents: Chroma's records, the unit index and
        :meth:`write`/:meth:`forget` happen inside (the kind's bracket). Its file failing for its
        folder (read-only, full) is a :class:`~hseg.errors.LexicalIndexStorageError` naming that
        folder, not SQLite's "attempt to write a readonly database", which reads as Chroma's."""
        with lexical_errors(self.location.path), self.kind.bracket(sorted(set(doc_ids)), self.repair):
            yield

    def write(self, records: Sequence[Record], doc_ids: Sequence[str]) -> int:
        """Replace the rows of these whole documents by their segment ``records`` (inside
        :meth:`writing`); returns the rows written. A cache is not written: its readers re-read it."""
        return self.kind.write(records, doc_ids)

    def forget(self, doc_ids: Sequence[str]) -> None:
        """Remove the rows of these documents (inside :meth:`writing`, before Chroma's records go); a
        cache's readers re-read them instead."""
        self.kind.forget(doc_ids)

    def delete(self, doc_ids: Sequence[str]) -> None:
        """:meth:`forget` (its former name)."""
        self.forget(doc_ids)

    def held(self, doc_ids: Sequence[str], shas: Mapping[str, str] | None = None) -> dict[str, set[str]] | None:
        """``{doc id: segment ids}`` the index holds rows of, after a check; with ``shas`` only rows
        written from that text (documents it holds no row of: absent). ``None`` for a cache: derived
        from the collection, it cannot miss a document."""
        if not self.maintained:
            return None
        with lexical_errors(self.location.path):
            self.ensure_fresh()
            held = self.documents(doc_ids)
        return {d: segments for d, (segments, sha) in held.items() if shas is None or sha == shas.get(d)}

    def documents_holding(self, shas: Iterable[str]) -> dict[str, set[str]] | None:
        """``{content_sha256: ids of the documents holding that text}`` for these hashes (a hash no
        document holds: absent), from the ``documents`` table's index on its hash: a cost that does not
        grow with the store. ``None`` where the index cannot answer for the collection exactly and the
        caller must ask Chroma: a cache (a server client's, behind other clients' writes by up to its
        next check), a maintained index out of step (a write cut short, not built, records written
        around hseg: its next check repairs it), or a file SQLite cannot read.

        Example:
            >>> index.documents_holding([content_sha256(text)])  # doctest: +SKIP
            {'9b1c...': {'tides.md'}}
        """
        try:
            return self.kind.documents_holding(shas)
        except sqlite3.Error:  # the write's bracket repairs the file; the look-up asks Chroma meanwhile
            return None

    def rebuild(self, doc_ids: Sequence[str] | None = None) -> int:
        """The rows of these documents (default: all) again from the collection; returns the rows
        written (a full rebuild: the segments the index holds). In cache mode, naming documents logs
        them as written, so that every reader re-reads them (and writes no row here)."""
        if doc_ids is None:
            try:
                self.rebuild_locked()
            except sqlite3.DatabaseError as exc:
                self.repair(exc)  # builds it again too
            self.table.count_checked = True
            return self.count()
        with self.writing(doc_ids):
            return self.kind.rewrite(list(doc_ids))

    def sync(self, doc_ids: Sequence[str] | None = None) -> int:
        """:meth:`rebuild` of these documents (default: all); returns the segments the index holds afterwards."""
        self.rebuild(doc_ids)
        return self.count()

    def drop(self) -> None:
        """Delete the index (its file, or the in-memory database) and the write log."""
        if self.journal is not None:
            with contextlib.suppress(Exception):
                self.journal.drop()
        self.table.drop()

    def state(self) -> dict[str, Any]:
        """What ``stats`` reports of the index: where it lives and the segments it holds after a check
        (which repairs a damaged file), or the ``problem`` when it can be neither read nor built again."""
        out: dict[str, Any] = {"kind": self.location.kind,
                               "path": None if self.location.path is None else str(self.location.path)}
        try:
            self.ensure_fresh()
            out["segments"] = self.count()
        except Exception as exc:  # stats still counts a store whose lexical index fails, and says why
            out["segments"], out["problem"] = None, str(exc)
        return out
