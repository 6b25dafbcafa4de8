"""The lexical index's tables and the statements that write them: one row per segment record (what a
search reads of it, its text in the FTS5 table), the documents with the sha their rows came from,
the documents a writer left *pending*, and the log entries a cache has applied.

Every function here takes an open transaction's connection: what commits together is the caller's
to say (:mod:`hseg.store.lexical.index`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hseg.chunking.schema import (
    CLUSTER_ID_KEY,
    CONTENT_HASH_KEY,
    CUTS_KEY,
    DOC_ID_KEY,
    INDEX_KEY,
    LEVEL_KEY,
    SEGMENT,
    TOKENS_KEY,
)
from hseg.retrieval.unit_vectors import search_metadata
from hseg.store.paging import batched

#: the FTS5 tokenizer: Unicode words, case and diacritics folded, English stemmed, other scripts kept
TOKENIZER = "porter unicode61 remove_diacritics 2"

#: the layout of the file (:data:`SCHEMA`), kept in its ``meta`` table; a file of another layout is rebuilt
#: (2: ``segments.cuts``; 3: ``segments.record``; 4: ``changes``, which every writer must keep; the
#: ``applied`` table and the ``documents_sha`` index are created where they are missing: they change no
#: row, so a file of layout 4 gains them in place when it is next opened, not rebuilt)
FORMAT = "4"

#: change events the file keeps (:func:`note_changes`): a reader whose kept terms are older than the
#: oldest kept reads them anew
CHANGES_KEPT = 200_000

#: ids per SQL statement (SQLite's bound on the variables of one statement is 32766)
SQL_IDS = 900

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS segments(rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, doc_id TEXT NOT NULL, "
    "cluster_id TEXT NOT NULL, position INTEGER NOT NULL, tokens INTEGER NOT NULL, cuts TEXT, record TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS segments_doc ON segments(doc_id)",
    "CREATE INDEX IF NOT EXISTS segments_cluster ON segments(cluster_id)",
    # the segments after a passage (LexicalIndex.following) in one index range, not a scan of the document
    "CREATE INDEX IF NOT EXISTS segments_doc_position ON segments(doc_id, position)",
    "CREATE TABLE IF NOT EXISTS documents(doc_id TEXT PRIMARY KEY, sha TEXT)",
    # the documents holding a text (documents_holding): each write's "same text under another id" look-up
    # in one index range, whatever the store holds
    "CREATE INDEX IF NOT EXISTS documents_sha ON documents(sha)",
    "CREATE TABLE IF NOT EXISTS pending(doc_id TEXT PRIMARY KEY)",
    # the write log's entries (hseg.store.lexical.journal) a cache has read its documents for, with
    # their time: entries older than the log keeps are forgotten here too
    "CREATE TABLE IF NOT EXISTS applied(entry TEXT PRIMARY KEY, at REAL NOT NULL)",
    # each segment row added (1) or deleted (0), in order: what a connection's kept BM25 terms
    # (hseg.store.lexical.terms) are brought up to date from; AUTOINCREMENT: a position is never reused
    "CREATE TABLE IF NOT EXISTS changes(seq INTEGER PRIMARY KEY AUTOINCREMENT, row INTEGER NOT NULL, "
    "added INTEGER NOT NULL)",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(text, tokenize='{TOKENIZER}')",
)


def set_meta(c: sqlite3.Connection, **values: str) -> None:
    c.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", values.items())


def clear_rows(c: sqlite3.Connection) -> None:
    """Every row of every segment, document, pending document and applied entry (``meta`` stays,
    its row count at 0)."""
    for table in ("segments", "documents", "fts", "pending", "applied", "changes"):
        c.execute(f"DELETE FROM {table}")
    # every row changes: a marker event, and every kept term older than it is read anew
    c.execute("INSERT INTO changes(row, added) VALUES (-1, 0)")
    set_meta(c, rows="0", changes_floor=str(_last_change(c)))


def _last_change(c: sqlite3.Connection) -> int:
    row = c.execute("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").fetchone()
    return 0 if row is None else int(row[0])


def _note_changes(c: sqlite3.Connection, rowids: Iterable[int], added: bool) -> None:
    """Log rows added or deleted, and forget the events past the :data:`CHANGES_KEPT` most recent."""
    c.executemany("INSERT INTO changes(row, added) VALUES (?, ?)", ((r, int(added)) for r in rowids))
    floor = _last_change(c) - CHANGES_KEPT
    if c.execute("DELETE FROM changes WHERE seq <= ?", (floor,)).rowcount:
        set_meta(c, changes_floor=str(floor))


def changes_state(c: sqlite3.Connection) -> tuple[int, int, int] | None:
    """``(last change, floor, rows)``: the position of the last change event, the position below which
    events are forgotten, and the file's segment rows; ``None`` for a file without them."""
    meta = dict(c.execute("SELECT key, value FROM meta WHERE key IN ('rows', 'changes_floor')").fetchall())
    if "rows" not in meta:
        return None
    return _last_change(c), int(meta.get("changes_floor", "0")), int(meta["rows"])


def changes_since(c: sqlite3.Connection, seq: int) -> tuple[list[int], list[int], list[int]]:
    """The change events after position ``seq``, in order: their positions, rows, and 1 (added) or 0."""
    got = c.execute("SELECT seq, row, added FROM changes WHERE seq > ? ORDER BY seq", (seq,)).fetchall()
    return [g[0] for g in got], [g[1] for g in got], [g[2] for g in got]


def _count_rows(c: sqlite3.Connection, delta: int) -> None:
    # the file's segment rows (meta ``rows``), kept by the statements that add and remove them so that
    # a file that lost rows behind them is found (LexicalIndex.lost_rows); a file of before has none
    c.execute("UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'rows'", (delta,))


def insert_rows(c: sqlite3.Connection, ids: Sequence[str], docs: Sequence[Any], metas: Sequence[Any], *,
                logged: bool = True) -> int:
    """The rows of these segment records (other records are skipped: another writer's sharing the
    collection) and their documents' shas; returns the rows written. ``logged=False`` after
    :func:`clear_rows` only (a rebuild): the clear tells every reader that every row changed."""
    n = 0
    shas: dict[str, str | None] = {}
    added: list[int] = []
    for rid, text, meta in zip(ids, docs, metas):
        meta = meta or {}
        if meta.get(LEVEL_KEY) != SEGMENT or CLUSTER_ID_KEY not in meta:
            continue
        doc = str(meta[DOC_ID_KEY])
        cuts = meta.get(CUTS_KEY)
        cur = c.execute("INSERT OR REPLACE INTO segments(id, doc_id, cluster_id, position, tokens, cuts, record) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)", (rid, doc, str(meta[CLUSTER_ID_KEY]),
                                                         int(meta[INDEX_KEY]), int(meta[TOKENS_KEY]),
                                                         None if cuts is None else str(cuts),
                                                         json.dumps(search_metadata(meta))))
        c.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (cur.lastrowid, text or ""))
        added.append(int(cur.lastrowid or 0))  # lastrowid is set after an INSERT
        sha = meta.get(CONTENT_HASH_KEY)
        shas[doc] = None if sha is None else str(sha)
        n += 1
    if logged:
        _note_changes(c, added, True)
    c.executemany("INSERT OR REPLACE INTO documents VALUES (?, ?)", shas.items())
    _count_rows(c, n)  # callers remove a document's rows before writing them again: no row is replaced
    return n


def delete_documents(c: sqlite3.Connection, doc_ids: Sequence[str]) -> None:
    """Every row of these documents."""
    for part in batched(list(doc_ids), SQL_IDS):
        marks = ",".join("?" * len(part))
        _note_changes(c, [r for (r,) in c.execute(f"SELECT rowid FROM segments WHERE doc_id IN ({marks})", part)],
                      False)
        c.execute(f"DELETE FROM fts WHERE rowid IN (SELECT rowid FROM segments WHERE doc_id IN ({marks}))", part)
        _count_rows(c, -c.execute(f"DELETE FROM segments WHERE doc_id IN ({marks})", part).rowcount)
        c.execute(f"DELETE FROM documents WHERE doc_id IN ({marks})", part)


def record_applied(c: sqlite3.Connection, entries: Mapping[str, float], forget_before: float) -> None:
    """Note these log entries ``{entry id: time}`` as applied, and forget those older than
    ``forget_before`` (the log itself no longer holds them)."""
    c.executemany("INSERT OR REPLACE INTO applied VALUES (?, ?)", entries.items())
    c.execute("DELETE FROM applied WHERE at < ?", (forget_before,))


def applied_among(c: sqlite3.Connection, entries: Iterable[str]) -> set[str]:
    """Those of ``entries`` already applied."""
    out: set[str] = set()
    for part in batched(list(entries), SQL_IDS):
        out.update(e for (e,) in c.execute(f"SELECT entry FROM applied WHERE entry IN ({','.join('?' * len(part))})",
                                           part))
    return out


def documents_holding(c: sqlite3.Connection, shas: Iterable[str]) -> dict[str, set[str]]:
    """``{sha: ids of the documents whose rows came from that text}`` for these shas (a sha no document
    has: absent); one look-up of the ``documents_sha`` index per :data:`SQL_IDS` shas."""
    out: dict[str, set[str]] = {}
    for part in batched(sorted(set(shas)), SQL_IDS):
        for doc_id, sha in c.execute(f"SELECT doc_id, sha FROM documents WHERE sha IN ({','.join('?' * len(part))})",
                                     part):
            out.setdefault(str(sha), set()).add(str(doc_id))
    return out
