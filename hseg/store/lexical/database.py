"""The lexical index's SQLite file: one connection to it with the index's writer lock, and the BM25
terms of each word the connection has read.

A word's terms are FTS5's own: ``-bm25()`` of the one-word query (:func:`_term_scores`). Adding a
query's words up one at a time, in its order (:func:`hseg.store.lexical.reads.summed_terms`), gives
FTS5's ``-bm25()`` of the ``OR`` of the words to the bit, and lets a connection keep each word's
terms (:meth:`Database.term_scores`) until the file changes: the common words that make a long
question expensive are mostly words that earlier questions asked (``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hseg.retrieval.lexical_query import fts5_match
from hseg.store.lexical.tables import SCHEMA

__all__ = ["TERM_CACHE_PAIRS", "Database", "file_lock", "file_inode", "memory_database", "drop_memory_database"]

#: (rowid, score) pairs a connection keeps of its words' BM25 terms (16 bytes each: 32 MiB), least
#: recently used first out; 200 long questions over 40k segments use ~0.7M (``benchmarks/RESULTS.md``)
TERM_CACHE_PAIRS = 2_000_000
class Database:
    """One SQLite connection (serialised by a lock: searches run in worker threads too) and the
    index's writer lock."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(":memory:" if path is None else str(path), isolation_level=None,
                                    check_same_thread=False, timeout=600.0)
        #: the file this connection opened (a repair compares it with the file now at ``path``)
        self.inode = None if path is None else file_inode(path)
        self.lock = threading.RLock()
        self._memory_writer = threading.Lock()
        # each word's BM25 terms (rowids, scores), kept while the file is as they were read from it
        self._terms: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._terms_pairs = 0
        self._terms_state: tuple[int, int] | None = None
        # Set up under the writer lock: switching a file to WAL while another connection (another
        # store on the same path, in this process or another) is writing fails at once with "database
        # is locked" (SQLite does not wait on its busy timeout there): 7 of 40 two-writer loops did.
        with self.lock, self.writer():
            if path is not None:
                self.conn.execute("PRAGMA synchronous=NORMAL")
                # WAL (kept in the file once set): readers see the last commit while a writer works
                if self.conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    self.conn.execute("PRAGMA journal_mode=WAL")
            for statement in SCHEMA:
                self.conn.execute(statement)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self.lock:
            return self.conn.execute(sql, params).fetchall()

    def term_scores(self, terms: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each word's ``(rowids, BM25 terms)`` (ascending rowids), read in one snapshot.

        A word's terms are kept and reused while the file is unchanged: a word's IDF and every row's
        length are the table's, so any write may change any of them. The file is unchanged while
        ``PRAGMA data_version`` (other connections' commits, read inside the snapshot) and this
        connection's ``total_changes`` (its own writes, rolled back ones too) are. Not kept within
        a transaction of this connection: a rollback would not undo its count."""
        with self.lock:
            if self.conn.in_transaction:
                return [_term_scores(self.conn, term) for term in terms]
            with self.snapshot() as conn:
                return self._cached_term_scores(conn, terms)

    def _cached_term_scores(self, conn: sqlite3.Connection,
                            terms: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        state = (int(conn.execute("PRAGMA data_version").fetchone()[0]), conn.total_changes)
        if state != self._terms_state:
            self._forget_terms(state)
        out = []
        for term in terms:
            found = self._terms.get(term)
            if found is None:
                found = _term_scores(conn, term)
                self._keep(term, found)
            else:
                self._terms.move_to_end(term)
            out.append(found)
        return out

    @property
    def kept_term_pairs(self) -> int:
        """How many (rowid, term) pairs the connection keeps now (at most :data:`TERM_CACHE_PAIRS`)."""
        with self.lock:
            return self._terms_pairs

    def forget_terms(self) -> None:
        """Drop every kept word's terms: the next search reads them from the file, as a new process
        would (for benchmarks of a process's first question)."""
        with self.lock:
            self._forget_terms(None)

    def _forget_terms(self, state: tuple[int, int] | None) -> None:
        # what the kept terms are valid for: None matches no state of the file
        self._terms.clear()
        self._terms_pairs, self._terms_state = 0, state

    def _keep(self, term: str, found: tuple[np.ndarray, np.ndarray]) -> None:
        if len(found[0]) > TERM_CACHE_PAIRS:
            return
        self._terms[term] = found
        self._terms_pairs += len(found[0])
        while self._terms_pairs > TERM_CACHE_PAIRS:
            _, (dropped, _) = self._terms.popitem(last=False)
            self._terms_pairs -= len(dropped)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """The connection for reads that must see one state of the file (WAL: a read transaction's
        snapshot), e.g. several statements that make one answer (not inside a transaction)."""
        with self.lock:
            self.conn.execute("BEGIN")
            try:
                yield self.conn
            finally:
                self.conn.execute("COMMIT")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    @contextlib.contextmanager
    def writer(self, *, blocking: bool = True) -> Iterator[bool]:
        """Hold the writer lock for the block; yields False (lock not taken) when ``blocking`` is off
        and another writer holds it."""
        if self.path is None:
            got = self._memory_writer.acquire(blocking=blocking)
            try:
                yield got
            finally:
                if got:
                    self._memory_writer.release()
            return
        with file_lock(self.path, blocking=blocking) as got:
            yield got

    def close(self) -> None:
        with self.lock:
            self.conn.close()


def file_inode(path: Path) -> int | None:
    """The inode of the file at ``path`` (``None`` where there is none)."""
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def file_lock(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    """The writer lock of the index file at ``path`` (``flock`` on ``<path>.lock``, released by the
    kernel however its holder exits); yields False when ``blocking`` is off and another holds it.
    It needs no readable index file: a damaged one is repaired under it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing the descriptor releases the flock


_MEMORY: dict[str, Database] = {}
_MEMORY_LOCK = threading.Lock()


def memory_database(key: str) -> Database:
    """The in-memory index of an ephemeral collection, shared by every store of the process (as
    ``EphemeralClient`` collections are)."""
    with _MEMORY_LOCK:
        db = _MEMORY.get(key)
        if db is None:
            db = _MEMORY[key] = Database(None)
        return db


def drop_memory_database(key: str) -> None:
    """Close and forget the in-memory index named ``key`` (nothing if there is none)."""
    with _MEMORY_LOCK:
        db = _MEMORY.pop(key, None)
    if db is not None:
        db.close()


def _term_scores(conn: sqlite3.Connection, term: str) -> tuple[np.ndarray, np.ndarray]:
    """The rows holding ``term`` and its BM25 term in each (FTS5's ``-bm25()`` of the one-word query)."""
    found = conn.execute("SELECT rowid, -bm25(fts) FROM fts WHERE fts MATCH ?", (fts5_match([term]),)).fetchall()
    return (np.fromiter((r for r, _ in found), np.int64, len(found)),
            np.fromiter((x for _, x in found), np.float64, len(found)))
