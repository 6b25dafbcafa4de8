"""The BM25 terms of each word a connection has read, kept from one search to the next and brought
up to date after writes instead of read again.

How and why: docs/design.md, ``hseg.store.lexical.terms``.
"""

from __future__ import annotations

import math
import sqlite3
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hseg.retrieval.lexical_query import fts5_match
from hseg.store.lexical.tables import changes_since, changes_state

#: the rows changed since a word's last whole read, as a fraction of the table's, past which it is read whole
DRIFT = 0.02

Terms = tuple[np.ndarray, np.ndarray]  # (ascending rowids, BM25 terms)


@dataclass
class _Kept:
    rowids: np.ndarray
    scores: np.ndarray
    seq: int  # the change log position the terms are at
    read_at: int  # the position of the word's last whole read
    rows: int  # the table's rows at ``seq``


class KeptTerms:
    """Each word's terms as a connection read them, at most ``max_pairs`` (rowid, term) pairs, least
    recently used first out. Call :meth:`get` inside a read snapshot of the connection."""

    def __init__(self, max_pairs: int) -> None:
        self.max_pairs = max_pairs
        self._terms: OrderedDict[str, _Kept] = OrderedDict()
        self.pairs = 0
        self._state: tuple[int, int] | None = None  # (data_version, total_changes) the log state is for
        self._log: tuple[int, int, int] | None = None  # (last change, floor, rows) of the file then
        self.patched = 0  #: words brought up to date instead of read whole (for tests and benchmarks)

    def get(self, conn: sqlite3.Connection, terms: Sequence[str]) -> list[Terms]:
        """Each word's ``(rowids, terms)``, from what is kept where it can be brought up to date."""
        state = (int(conn.execute("PRAGMA data_version").fetchone()[0]), conn.total_changes)
        if state != self._state:
            self._state = state
            self._log = changes_state(conn)
            if self._log is None:  # a file without a change log: what is kept holds until the next write
                self._terms.clear()
                self.pairs = 0
        log = self._log
        wanted = [self._current(term, log) for term in terms]
        stale = [k.seq for k in wanted if k is not None and log is not None and k.seq < log[0]]
        events = _events(conn, min(stale)) if stale else None
        out = []
        for term, kept in zip(terms, wanted):
            if kept is None:
                found = read_terms(conn, term)
                at, rows = (log[0], log[2]) if log is not None else (0, 0)
                self._keep(term, _Kept(found[0], found[1], at, at, rows))
            else:
                if log is not None and kept.seq < log[0]:
                    assert events is not None
                    kept = self._patched(conn, term, kept, events, log)
                self._terms.move_to_end(term)
                found = (kept.rowids, kept.scores)
            out.append(found)
        return out

    def forget(self) -> None:
        """Drop every kept word."""
        self._terms.clear()
        self.pairs = 0
        self._state = self._log = None

    def _current(self, term: str, log: tuple[int, int, int] | None) -> _Kept | None:
        """The kept terms of ``term`` if they can be brought up to date (else they are dropped)."""
        kept = self._terms.get(term)
        if kept is None or log is None:
            return kept
        last, floor, rows = log
        if kept.seq < floor or last - kept.read_at > DRIFT * max(rows, 1):
            self._drop(term)
            return None
        return kept

    def _patched(self, conn: sqlite3.Connection, term: str, kept: _Kept, events: tuple[np.ndarray, ...],
                 log: tuple[int, int, int]) -> _Kept:
        seqs, rows, added = events
        since = seqs > kept.seq
        touched, first = np.unique(rows[since][::-1], return_index=True)  # each row's last event
        now_added = touched[added[since][::-1][first] == 1]
        keep = ~np.isin(kept.rowids, touched)
        old_rows, old_scores = kept.rowids[keep], kept.scores[keep]
        new_rows, new_scores = _read_added(conn, term, now_added)
        n_now = len(old_rows) + len(new_rows)
        scale = _idf(n_now, log[2]) / _idf(len(kept.rowids), kept.rows)
        rowids = np.concatenate([old_rows, new_rows])
        order = np.argsort(rowids, kind="stable")
        scores = np.concatenate([old_scores * scale, new_scores])
        fresh = _Kept(rowids[order], scores[order], log[0], kept.read_at, log[2])
        self._drop(term)
        self._keep(term, fresh)
        self.patched += 1
        return fresh

    def _keep(self, term: str, kept: _Kept) -> None:
        if len(kept.rowids) > self.max_pairs:
            return
        self._terms[term] = kept
        self.pairs += len(kept.rowids)
        while self.pairs > self.max_pairs:
            _, dropped = self._terms.popitem(last=False)
            self.pairs -= len(dropped.rowids)

    def _drop(self, term: str) -> None:
        kept = self._terms.pop(term, None)
        if kept is not None:
            self.pairs -= len(kept.rowids)


def read_terms(conn: sqlite3.Connection, term: str, from_rowid: int | None = None) -> Terms:
    """The rows holding ``term`` (from ``from_rowid`` on) and its BM25 term in each: FTS5's
    ``-bm25()`` of the one-word query."""
    params: list[object]
    sql, params = "SELECT rowid, -bm25(fts) FROM fts WHERE fts MATCH ?", [fts5_match([term])]
    if from_rowid is not None:
        sql, params = sql + " AND rowid >= ?", [*params, from_rowid]
    found = conn.execute(sql, params).fetchall()
    return (np.fromiter((r for r, _ in found), np.int64, len(found)),
            np.fromiter((x for _, x in found), np.float64, len(found)))


def _read_added(conn: sqlite3.Connection, term: str, added: np.ndarray) -> Terms:
    """``term``'s terms in the rows ``added`` (as of now)."""
    if not len(added):
        return np.empty(0, np.int64), np.empty(0, np.float64)
    rowids, scores = read_terms(conn, term, int(added.min()))
    mine = np.isin(rowids, added)
    return rowids[mine], scores[mine]


def _events(conn: sqlite3.Connection, since: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    seqs, rows, added = changes_since(conn, since)
    return np.asarray(seqs, np.int64), np.asarray(rows, np.int64), np.asarray(added, np.int8)


def _idf(n: int, rows: int) -> float:
    """FTS5's IDF of a phrase in ``n`` of ``rows`` rows (``fts5_bm25``: never below 1e-6)."""
    idf = math.log((rows - n + 0.5) / (n + 0.5))
    return idf if idf > 0.0 else 1e-6
