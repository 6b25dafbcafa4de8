"""The lexical index of one collection: where it lives, the write bracket every hseg write goes
through, and how a reader finds it in step with Chroma (see :mod:`hseg.store.lexical` for the two
ways it is kept)."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from hseg.chunking.records import SCHEMA_VERSION, Record
from hseg.chunking.schema import LEVEL_KEY, SEGMENT, level_is
from hseg.progress import Progress
from hseg.store.lexical import follow
from hseg.store.lexical.database import Database, drop_memory_database, memory_database
from hseg.store.lexical.journal import Journal
from hseg.store.lexical.location import Location
from hseg.store.lexical.reads import TableReads
from hseg.store.lexical.tables import FORMAT, SCHEMA, clear_rows, delete_documents, insert_rows, set_meta
from hseg.store.reading import get_by_documents, pages, read_ahead

__all__ = ["LexicalIndex"]

logger = logging.getLogger(__name__)

_PAGE = 2000  # records per Chroma read when rebuilding



class LexicalIndex(TableReads):
    """The lexical index of ``collection`` at ``location``; ``journal`` is the write log a cache
    follows (:mod:`hseg.store.lexical.journal`; cache mode only). Nothing is opened or read until
    the first use, so a store that never searches lexically (a Ray worker, say) pays nothing but the
    log's entries around its writes.

    Example:
        >>> index = LexicalIndex.open(collection, store._backend.lexical_location(collection))  # doctest: +SKIP
        >>> index.ensure_fresh(); index.top(["tides"], 3)  # doctest: +SKIP
        [(LexicalRow(segment_id='seg-...', ...), 7.91), ...]
    """

    def __init__(self, collection: Any, location: Location, journal: Journal | None = None) -> None:
        if not location.maintained and journal is None:
            raise ValueError(f"collection {collection.name!r}: a cached lexical index needs its write log (journal)")
        self.collection = collection
        self.location = location
        self.journal = journal
        self._db: Database | None = None
        self._count_checked = False  # the first check of this object compares record counts too
        self.follower = follow.Follower(self) if journal is not None else None
        self._checks: ThreadPoolExecutor | None = None  # where checks run beside a search (a cache's)
        self._pending = threading.local()  # the check a thread started beside its search, until it reads

    @classmethod
    def open(cls, collection: Any, location: Location | None) -> LexicalIndex | None:
        """The lexical index of a collection at ``location``, which the store's backend says
        (:meth:`hseg.store.backends.Backend.lexical_location`; ``None``: no lexical index). A cache
        (a client of a server) gets the write log its writers keep (created empty when absent),
        through the collection's own connection."""
        if location is None:
            return None
        return cls(collection, location, None if location.maintained else Journal.open(collection))

    @property
    def maintained(self) -> bool:
        """True when hseg writers keep the index in step (embedded and in-memory stores)."""
        return self.location.maintained

    @property
    def db(self) -> Database:
        pending: Future[None] | None = getattr(self._pending, "check", None)
        if pending is not None:  # this thread's first read since it started a check: the check first
            self._pending.check = None
            pending.result()
        if self._db is None:
            self._db = memory_database(self.location.key) if self.location.path is None else \
                Database(self.location.path)
        return self._db

    def meta(self) -> dict[str, str]:
        """The file's ``meta`` table: its collection, layout, whether it is built, and its sync state."""
        return dict(self.db.rows("SELECT key, value FROM meta"))

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
        from hseg.store.lexical.repair import check_file

        check_file(self)
        if self.follower is not None:
            self.follower.follow()
        else:
            self._fresh_maintained()

    def repair(self, problem: BaseException) -> None:
        """Set a file SQLite cannot read aside and build it again (:func:`hseg.store.lexical.repair.repair`)."""
        from hseg.store.lexical.repair import repair

        repair(self, problem)

    def _fresh_maintained(self) -> None:
        # one statement on the fast path: the meta rows and whether any document is pending
        found = self.db.rows("SELECT key, value FROM meta UNION ALL SELECT '', '' FROM pending LIMIT 1000")
        meta = {k: v for k, v in found if k}
        pending = any(not k for k, _ in found)
        built = self.belongs(meta) and meta.get("built") == "1"
        if built and not pending and self._count_checked:
            return
        if built and not pending and int(meta.get("synced_count", -1)) == int(self.collection.count()):
            self._count_checked = True
            return
        # a writer at work holds the lock: its rows come with its write, so wait only for a missing index
        with self.db.writer(blocking=not built) as got:
            if not got:
                return
            self.adopt()
            meta = self.meta()
            pending_docs = [d for (d,) in self.db.rows("SELECT doc_id FROM pending")]
            if pending_docs:
                logger.warning("collection %r: %d documents of a write that did not finish (a process killed "
                               "mid-write?); re-reading them into the lexical index", self.collection.name,
                               len(pending_docs))
                self.rewrite(pending_docs)
            elif meta.get("built") != "1" or int(meta.get("synced_count", -1)) != int(self.collection.count()):
                if meta.get("built") == "1":
                    logger.warning("collection %r: records were written without hseg's lexical index (the "
                                   "record count changed); rebuilding it", self.collection.name)
                self.rebuild()
            self._count_checked = True

    def lost_rows(self) -> bool:
        """Whether the file holds another number of segment rows than its last write recorded."""
        noted = self.meta().get("rows")
        return noted is not None and int(noted) != self.count()

    def belongs(self, meta: dict[str, str]) -> bool:
        """Whether a file's ``meta`` is this collection's, in this version's layout."""
        return meta.get("collection_id") == str(self.collection.id) and meta.get("format") == FORMAT

    def adopt(self) -> None:
        """Start afresh when the file belongs to another collection of the same name (dropped and
        created again) or to another layout; call with the writer lock held."""
        meta = self.meta()
        if self.belongs(meta):
            return
        with self.db.transaction() as c:
            if meta.get("format") != FORMAT:  # another layout: its tables again, as this version declares them
                c.execute("DROP TABLE IF EXISTS segments")
                for statement in SCHEMA:
                    c.execute(statement)
            c.execute("DELETE FROM meta")
            clear_rows(c)
            set_meta(c, collection_id=str(self.collection.id), format=FORMAT, built="0", schema=str(SCHEMA_VERSION),
                     rows="0")

    def rebuild(self, **meta: str) -> int:
        """Every row again from the collection's segment records, in one transaction (readers see the
        old index until it commits), with ``meta`` set in it; returns the segments indexed. Call with
        the writer lock held."""
        t0 = time.perf_counter()
        count = int(self.collection.count())
        n = 0
        # minutes at a million records, and a first search may be what waits for it
        note = Progress()
        with self.db.transaction() as c:
            clear_rows(c)
            # closed on an error too, so that the reading thread stops here, whoever keeps the error
            with contextlib.closing(read_ahead(pages(self.collection, level_is(SEGMENT), ["documents", "metadatas"],
                                                     _PAGE))) as read:
                for got in read:
                    n += insert_rows(c, got["ids"], got["documents"], got["metadatas"], logged=False)
                    note.note("lexical index of %r: %d segments indexed (the collection holds %d records)",
                              self.collection.name, n, count)
            set_meta(c, **{"built": "1", "synced_count": str(count), **meta})
        note.note("lexical index of %r: %d segments indexed, merging their terms", self.collection.name, n)
        # one b-tree per term instead of one per flush (faster queries), and the WAL folded back so that
        # it keeps no second copy of the index (the old index's pages stay in the file, free for the next
        # rebuild)
        with self.db.transaction() as c:
            c.execute("INSERT INTO fts(fts) VALUES ('optimize')")
        if self.location.path is not None:
            self.db.rows("PRAGMA wal_checkpoint(TRUNCATE)")
        logger.info("collection %r: lexical index built, %d segments in %.2f s", self.collection.name, n,
                    time.perf_counter() - t0)
        return n

    def rebuild_locked(self) -> None:
        """Every row again from the collection, under the writer lock (a cache notes the write log's
        recent entries as applied, :meth:`~hseg.store.lexical.follow.Follower.rebuild`)."""
        with self.db.writer():
            self.adopt()
            if self.follower is not None:
                self.follower.rebuild()
            else:
                self.rebuild()

    def rewrite(self, doc_ids: Sequence[str], *, clear_pending: bool = True, **meta: str) -> None:
        """The rows of these documents as the collection now holds them, with ``meta`` set in the same
        commit. Call with the writer lock held."""
        got_ids: list[str] = []
        docs: list[str] = []
        metas: list[Any] = []
        for got in get_by_documents(self.collection, list(doc_ids), ["documents", "metadatas"]):
            for rid, doc, m in zip(got["ids"], got["documents"], got["metadatas"]):
                if (m or {}).get(LEVEL_KEY) == SEGMENT:
                    got_ids.append(rid)
                    docs.append(doc)
                    metas.append(m)
        count = int(self.collection.count()) if clear_pending else None
        with self.db.transaction() as c:
            delete_documents(c, doc_ids)
            insert_rows(c, got_ids, docs, metas)
            if clear_pending:
                c.executemany("DELETE FROM pending WHERE doc_id = ?", ((d,) for d in doc_ids))
                set_meta(c, synced_count=str(count))
            set_meta(c, **meta)

    # ----------------------------------------------------------------- writes (the store's)

    @contextlib.contextmanager
    def writing(self, doc_ids: Sequence[str]) -> Iterator[None]:
        """Around one store write of these documents: Chroma's records, the unit index and
        :meth:`write`/:meth:`delete` happen inside.

        Maintained: under the writer lock, the documents are *pending* until the write ends (a
        process killed in between leaves them so, and the next check re-reads them). Cache: the
        write is an ``open`` entry of the log while it runs and a ``done`` entry once it ends, failed
        or not (:mod:`hseg.store.lexical.journal`)."""
        docs = sorted(set(doc_ids))
        if self.journal is not None:
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
            return
        try:
            self.meta()
        except sqlite3.DatabaseError as exc:  # a file SQLite cannot read: built again before the write
            self.repair(exc)
        with self.db.writer():
            self.adopt()
            if self.meta().get("built") != "1" and int(self.collection.count()) == 0:
                with self.db.transaction() as c:
                    set_meta(c, built="1", synced_count="0")  # nothing stored yet: the index is whole
            with self.db.transaction() as c:
                c.executemany("INSERT OR IGNORE INTO pending VALUES (?)", ((d,) for d in docs))
            try:
                yield
            except BaseException:
                # the write failed part way (a refused record, a full disk): rows as Chroma now has them
                with contextlib.suppress(Exception):
                    self.rewrite(docs)
                raise
            count = int(self.collection.count())
            with self.db.transaction() as c:
                c.executemany("DELETE FROM pending WHERE doc_id = ?", ((d,) for d in docs))
                set_meta(c, synced_count=str(count))

    def write(self, records: Sequence[Record], doc_ids: Sequence[str]) -> int:
        """Replace the rows of these whole documents by their segment ``records`` (inside
        :meth:`writing`); returns the rows written. A cache is not written: its readers re-read it."""
        if not self.maintained:
            return 0
        segments = [r for r in records if r.metadata.get(LEVEL_KEY) == SEGMENT]
        with self.db.transaction() as c:
            delete_documents(c, doc_ids)
            return insert_rows(c, [r.id for r in segments], [r.document for r in segments],
                               [r.metadata for r in segments])

    def delete(self, doc_ids: Sequence[str]) -> None:
        """Remove the rows of these documents (inside :meth:`writing`, before Chroma's records go)."""
        if self.maintained:
            with self.db.transaction() as c:
                delete_documents(c, doc_ids)

    def sync(self, doc_ids: Sequence[str] | None = None) -> int:
        """Rebuild the rows of these documents (default: all) from the collection; returns the
        segments the index holds afterwards. In cache mode, naming documents logs them as written,
        so that every reader re-reads them."""
        if doc_ids is None:
            try:
                self.rebuild_locked()
            except sqlite3.DatabaseError as exc:
                self.repair(exc)  # builds it again too
            self._count_checked = True
        else:
            with self.writing(doc_ids):
                if self.maintained:
                    self.rewrite(list(doc_ids))
        return self.count()

    def drop(self) -> None:
        """Delete the index (its file, or the in-memory database) and the write log."""
        if self.journal is not None:
            with contextlib.suppress(Exception):
                self.journal.drop()
        if self._db is not None:
            self._db.close()
            self._db = None
        if self.location.path is None:
            drop_memory_database(self.location.key)
            return
        for suffix in ("", "-wal", "-shm", ".lock"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(f"{self.location.path}{suffix}")

