"""The lexical index's SQLite file: one connection to it with the index's writer lock, and the BM25
terms of each word the connection has read (:mod:`hseg.store.lexical.terms`)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hseg.store.lexical.tables import SCHEMA
from hseg.store.lexical.terms import KeptTerms, read_terms
from hseg.store.lock import lock_descriptor

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
        # each word's BM25 terms (rowids, scores), brought up to date after writes
        self._terms = KeptTerms(TERM_CACHE_PAIRS)
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
        """Each word's ``(rowids, BM25 terms)`` (ascending rowids), read in one snapshot, from the
        words' kept terms where they can be brought up to date (:mod:`hseg.store.lexical.terms`). Not
        kept within a transaction of this connection: a rollback would undo what they were read from."""
        with self.lock:
            if self.conn.in_transaction:
                return [read_terms(self.conn, term) for term in terms]
            with self.snapshot() as conn:
                return self._terms.get(conn, terms)

    @property
    def kept_term_pairs(self) -> int:
        """How many (rowid, term) pairs the connection keeps now (at most :data:`TERM_CACHE_PAIRS`)."""
        with self.lock:
            return self._terms.pairs

    @property
    def kept_terms(self) -> KeptTerms:
        """The words' kept terms (for tests and benchmarks: how many were brought up to date)."""
        return self._terms

    def forget_terms(self) -> None:
        """Drop every kept word's terms: the next search reads them from the file, as a new process
        would (for benchmarks of a process's first question)."""
        with self.lock:
            self._terms.forget()

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
    """The writer lock of the index file at ``path`` (an exclusive lock of ``<path>.lock``,
    :func:`hseg.store.lock.lock_descriptor`, released by the kernel however its holder exits); yields
    False when ``blocking`` is off and another holds it. It needs no readable index file: a damaged
    one is repaired under it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        yield lock_descriptor(fd, blocking=blocking)
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
