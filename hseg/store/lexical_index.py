"""The lexical index: BM25 over a store's segments in SQLite FTS5, kept with the store.

One index per collection, one row per segment record (the retrieval unit of every search: a parent's
lexical score is its best segment's), tokenised ``porter unicode61 remove_diacritics 2``
(:mod:`hseg.retrieval.lexical_query`). Chroma cannot hold it (sparse indexes are refused by local
and ``chroma run`` servers), so it lives beside Chroma, in one of two ways (:func:`lexical_location`):

* **maintained** (an embedded ``PersistentClient``: ``<path>/hseg-lexical/<collection>.sqlite``; an
  ``EphemeralClient``: an in-memory database shared by the process). Every hseg write updates it in
  step, inside :meth:`LexicalIndex.writing`: the writer takes the index's writer lock (``flock`` on
  ``<file>.lock``, released by the kernel however its holder exits), records the documents it is
  about to write as *pending* (committed), writes Chroma's records, then the unit index, then the
  documents' rows, and clears *pending* with the collection's record count in one last commit
  (deletes run in the reverse order: rows first). A process killed anywhere in between leaves its
  documents *pending*; the next process to check the index (a search, a write, ``hseg index``)
  while no writer holds the lock re-reads those documents from Chroma and rewrites their rows, so
  the two sides agree again. A reader that finds the lock held uses the index as it is: it lags
  the write in flight by that write's documents, as Chroma itself does until the write ends.
* **cache** (any other client, e.g. an ``HttpClient`` of a ``chroma run`` server shared by many
  processes): the index cannot live in the server, so each client machine derives it from the
  collection's documents into ``$HSEG_CACHE/lexical/<host_port>/<tenant>/<database>/<collection>.sqlite``
  (default ``~/.cache/hseg``). hseg writers keep a journal in the companion collection
  ``<name>_hseg_writes``: before a write, a record naming its documents (an *open* write); after it,
  a new random token and the open record deleted. A reader compares the token with the one its
  cache was built at (one ``get`` of a handful of records per search) and rebuilds on a change, and
  re-reads the documents of every open write (whose writer is at work, or died: those documents
  are the only ones that can differ from a token's state). A rebuild reads every segment record
  (measured at 40k records in ``benchmarks/RESULTS.md``).

Each row holds what a search reads of its segment record beside its text (``segments.record``:
:func:`~hseg.retrieval.unit_vectors.search_metadata` as JSON; the text is the FTS5 table's), so the
hybrid ``unit="auto"`` search reads its passages here (:meth:`LexicalIndex.records`), in a tenth of
what a Chroma ``get`` of the same records costs (``benchmarks/RESULTS.md``, round 16).

A search scores every segment holding a query word (the normaliser of ``lex`` is the query's best
BM25), one word at a time (:meth:`LexicalIndex.scored`: FTS5's own floats and order), and each
connection keeps its words' terms until the file changes (:mod:`hseg.store.lexical_sqlite`, which
holds the file's tables and connection): the common words that make a long question expensive are
mostly words earlier questions asked.

Records written without hseg (another tool writing hseg records into the collection) change
Chroma's record count without a token or *pending* entry: each index object compares the count
with the one recorded at its last sync on its first check and rebuilds if they differ, as the unit
index does (:mod:`hseg.store.unit_index`); later foreign writes are seen by the next object.
``HierarchicalStore.sync_lexical_index()`` rebuilds on demand.

Example:
    >>> index = store.lexical_index  # doctest: +SKIP
    >>> index.ensure_fresh(); index.top(["tides"], 3)  # doctest: +SKIP
    [(LexicalRow(segment_id='seg-...', ...), 7.91), ...]
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hseg.chunking.records import CUTS_KEY, SCHEMA_VERSION, Record
from hseg.retrieval.lexical_query import LexicalRow
from hseg.retrieval.unit_vectors import search_metadata, with_derived
from hseg.store.lexical_sqlite import (
    FORMAT,
    SCHEMA,
    TOKENIZER,
    Database,
    drop_memory_database,
    memory_database,
    summed_terms,
)
from hseg.store.reading import batched, get_by_documents, pages

__all__ = ["TOKENIZER", "FOLDER", "JOURNAL_SUFFIX", "Location", "LexicalIndex", "cache_root", "journal_name",
           "lexical_location"]

logger = logging.getLogger(__name__)

#: the folder beside an embedded store's Chroma files that holds its lexical indexes
FOLDER = "hseg-lexical"
#: the journal collection of collection ``name`` (cache mode) is ``name + JOURNAL_SUFFIX``
JOURNAL_SUFFIX = "_hseg_writes"
#: an open write older than this is taken for a dead writer's: its documents are re-read once more, then no longer
OPEN_WRITE_TTL_S = 3600.0
#: open records of dead writers older than this are deleted by the next writer
_JOURNAL_KEEP_S = 7 * 24 * 3600.0
_TOKEN_ID = "token"
_OPEN_PREFIX = "open-"
#: segment ids per SQL statement (SQLite's bound on the variables of one statement is 32766)
_SQL_IDS = 900

#: positions :meth:`LexicalIndex.following` reads at a time, for all open chains in one statement: a
#: chain is rarely longer (1.2 rows on average at budget 4096, ``benchmarks/RESULTS.md`` round 12),
#: and every row read costs time in Python
_FOLLOWING_PAGE = 2

_PAGE = 2000  # records per Chroma read when rebuilding



# --------------------------------------------------------------------------- where it lives


@dataclass(frozen=True)
class Location:
    """Where a collection's lexical index lives: ``kind`` is ``"embedded"`` or ``"memory"`` (maintained
    by every writer) or ``"cache"`` (derived per client machine); ``path`` is the SQLite file
    (``None`` in memory) and ``key`` names the in-memory database."""

    kind: str
    path: Path | None
    key: str

    @property
    def maintained(self) -> bool:
        return self.kind != "cache"


def cache_root() -> Path:
    """``$HSEG_CACHE``, else ``$XDG_CACHE_HOME/hseg``, else ``~/.cache/hseg``."""
    if os.environ.get("HSEG_CACHE"):
        return Path(os.environ["HSEG_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hseg"


def journal_name(collection_name: str) -> str:
    """Name of the write journal beside ``collection_name`` (cache mode).

    Example:
        >>> journal_name("docs")
        'docs_hseg_writes'
    """
    return collection_name + JOURNAL_SUFFIX


def lexical_location(collection: Any) -> Location | None:
    """Where the lexical index of ``collection`` lives (``None`` for an object that is not a chromadb
    collection: no lexical index)."""
    from hseg.store.connection import server_address

    api = getattr(collection, "_client", None)
    if api is None or not hasattr(api, "get_settings"):
        return None
    name, tenant, database = str(collection.name), str(collection.tenant), str(collection.database)
    address = server_address(collection)
    settings = api.get_settings()
    if address is None and getattr(settings, "is_persistent", False) and getattr(settings, "persist_directory", None):
        return Location("embedded", Path(settings.persist_directory) / FOLDER / f"{name}.sqlite", name)
    if address is None and not getattr(settings, "is_persistent", True):
        return Location("memory", None, f"{collection.id}")
    where = (address or "client").replace(":", "_").replace("/", "_")
    return Location("cache", cache_root() / "lexical" / where / tenant / database / f"{name}.sqlite", name)


# --------------------------------------------------------------------------- the index


class LexicalIndex:
    """The lexical index of ``collection`` at ``location`` (see the module docstring).

    ``journal`` is the write-journal collection (cache mode only); ``batch_size()`` the records per
    Chroma call. Nothing is opened or read until the first use, so a store that never searches
    lexically (a Ray worker, say) pays nothing but the journal's records around its writes.
    """

    def __init__(self, collection: Any, location: Location, batch_size: Callable[[], int],
                 journal: Any = None) -> None:
        if not location.maintained and journal is None:
            raise ValueError(f"collection {collection.name!r}: a cached lexical index needs its journal collection")
        self.collection = collection
        self.location = location
        self.journal = journal
        self._batch_size = batch_size
        self._db: Database | None = None
        self._count_checked = False  # the first check of this object compares record counts too
        self._settled: set[str] = set()  # expired open writes whose documents this object re-read

    @property
    def maintained(self) -> bool:
        """True when hseg writers keep the index in step (embedded and in-memory stores)."""
        return self.location.maintained

    @property
    def db(self) -> Database:
        if self._db is None:
            self._db = memory_database(self.location.key) if self.location.path is None else \
                Database(self.location.path)
        return self._db

    def _meta(self) -> dict[str, str]:
        return dict(self.db.rows("SELECT key, value FROM meta"))

    # ----------------------------------------------------------------- reads (a search)

    def scored(self, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Every segment holding any of ``terms`` as ``(rowids, BM25 scores)`` (higher is better), best
        first, ties by rowid: the ranking of FTS5's ``-bm25()`` for ``fts5_match(terms)``, to the bit.

        It is summed here, one word at a time, so that each word's terms can be kept and reused
        (:meth:`~hseg.store.lexical_sqlite.Database.term_scores`): FTS5 takes ~2 µs a matching row
        to score, so a question of 15 words that hold 10k of 40k segments costs ~25 ms, mostly in
        its common words, which other questions ask too (``benchmarks/RESULTS.md``, round 15). Exact:
        FTS5's ``bm25()`` is a sum over the query's phrases, in their order, starting from 0.0; a
        phrase's term depends only on the phrase (its IDF), the row (its size, the phrase's
        occurrences) and the table's totals, and a row without the phrase adds 0.0. So a one-word
        query scores each row with exactly that word's term, and adding those terms in the query's
        order gives FTS5's own sum (``tests/test_lexical_index.py`` compares both on every bit; a
        SQLite compiled to fuse FTS5's multiply and add, as compilers may on ARM, rounds its own sum
        differently in the last bit).
        All words are read in one snapshot of the index, as one statement would be."""
        return summed_terms(self.db.term_scores(terms))

    def ids_at(self, rowids: Iterable[int]) -> dict[int, str]:
        """``{rowid: segment id}`` for those of ``rowids`` the index holds."""
        out: dict[int, str] = {}
        for part in batched([int(r) for r in rowids], _SQL_IDS):
            out.update(self.db.rows(f"SELECT rowid, id FROM segments WHERE rowid IN ({','.join('?' * len(part))})",
                                    part))
        return out

    def rowids_of(self, segment_ids: Iterable[str]) -> dict[str, int]:
        """``{segment id: rowid}`` for those of ``segment_ids`` the index holds."""
        out: dict[str, int] = {}
        for part in batched(list(dict.fromkeys(segment_ids)), _SQL_IDS):
            out.update(self.db.rows(f"SELECT id, rowid FROM segments WHERE id IN ({','.join('?' * len(part))})",
                                    list(part)))
        return out

    def rows(self, segment_ids: Iterable[str]) -> dict[str, LexicalRow]:
        """``{segment id: row}`` for those of ``segment_ids`` the index holds."""
        out: dict[str, LexicalRow] = {}
        for part in batched(list(dict.fromkeys(segment_ids)), _SQL_IDS):
            for fields in self.db.rows(f"SELECT id, doc_id, cluster_id, position, tokens FROM segments "
                                       f"WHERE id IN ({','.join('?' * len(part))})", list(part)):
                out[fields[0]] = LexicalRow(*fields)
        return out

    def records(self, segment_ids: Iterable[str]) -> dict[str, tuple[dict[str, Any], str]]:
        """``{segment id: (metadata, text)}`` for those of ``segment_ids`` the index holds: each as its
        segment record reads to a search (:func:`~hseg.retrieval.unit_vectors.search_metadata` with the
        derived keys put back), its text exactly the record's document."""
        out: dict[str, tuple[dict[str, Any], str]] = {}
        for part in batched(list(dict.fromkeys(segment_ids)), _SQL_IDS):
            for sid, cid, tokens, record, text in self.db.rows(
                    f"SELECT s.id, s.cluster_id, s.tokens, s.record, f.text FROM segments s JOIN fts f "
                    f"ON f.rowid = s.rowid WHERE s.id IN ({','.join('?' * len(part))})", list(part)):
                out[sid] = (with_derived(json.loads(record), cid, tokens, text), text)
        return out

    def following(self, segment_ids: Iterable[str], max_tokens: int) -> dict[str, list[LexicalRow]]:
        """``{segment id: the segments after it in its document, in order}``, as long as their tokens
        add up to at most ``max_tokens``, then the first that does not fit (whose first sentences may
        still fit: rule 6 of :mod:`hseg.retrieval.selection`), each row with its sentence cuts
        (``LexicalRow.cuts``). Only those the index holds: a gap in the positions ends the list."""
        start = self.rows(segment_ids)
        chains: dict[str, list[LexicalRow]] = {sid: [] for sid in start}
        # a list still open: its document and the position it reached
        last = {sid: (row.doc_id, int(row.position)) for sid, row in start.items()} if max_tokens > 0 else {}
        total = dict.fromkeys(chains, 0)
        page = _FOLLOWING_PAGE
        while last:
            rows = []
            for wanted in batched(list(last.items()), _SQL_IDS // 3):
                pairs = " UNION ALL ".join("SELECT ?, ?, ?" for _ in wanted)
                rows += self.db.rows(f"WITH open(sid, doc_id, after) AS ({pairs}) SELECT o.sid, n.id, n.doc_id, "
                                     "n.cluster_id, n.position, n.tokens, n.cuts FROM open o JOIN segments n "
                                     "ON n.doc_id = o.doc_id AND n.position > o.after AND n.position <= o.after + ? "
                                     "ORDER BY o.sid, n.position",
                                     [x for sid, (doc, after) in wanted for x in (sid, doc, after)] + [page])
            grew = dict.fromkeys(last, 0)
            ended: set[str] = set()
            for sid, *fields in rows:
                row = LexicalRow(*fields)
                if sid in ended:
                    continue
                if row.position != last[sid][1] + 1:
                    ended.add(sid)
                    continue
                if total[sid] + row.tokens > max_tokens:
                    chains[sid].append(row)
                    ended.add(sid)
                    continue
                chains[sid].append(row)
                total[sid] += row.tokens
                last[sid] = (row.doc_id, row.position)
                grew[sid] += 1
            last = {sid: at for sid, at in last.items() if grew[sid] == page}  # a full page: read on
        return chains

    def top(self, terms: Sequence[str], n: int) -> list[tuple[LexicalRow, float]]:
        """The ``n`` best segments for ``terms`` with their BM25 scores, best first."""
        rowids, scores = self.scored(terms)
        ids = self.ids_at(rowids[:n].tolist())
        rows = self.rows(ids.values())
        return [(rows[ids[r]], float(x)) for r, x in zip(rowids[:n].tolist(), scores[:n]) if ids.get(r) in rows]

    def lookup(self, terms: Sequence[str], segment_ids: Iterable[str]) -> dict[str, tuple[LexicalRow, float]]:
        """``{segment id: (row, BM25 score)}`` for those of ``segment_ids`` the index holds (score 0
        when no query word occurs in it)."""
        rowids, scores = self.scored(terms)
        score = dict(zip(rowids.tolist(), scores.tolist()))
        rows = self.rows(segment_ids)
        at = self.rowids_of(rows)
        return {sid: (row, score.get(at[sid], 0.0)) for sid, row in rows.items()}

    def cluster_sizes(self, cluster_ids: Iterable[str]) -> dict[str, tuple[int, int]]:
        """``{cluster id: (segments, tokens)}``: what taking a whole cluster costs (as in :class:`UnitKey`)."""
        ids = list(dict.fromkeys(cluster_ids))
        out: dict[str, tuple[int, int]] = {}
        for part in batched(ids, _SQL_IDS):
            for cid, n, t in self.db.rows(f"SELECT cluster_id, count(*), sum(tokens) FROM segments WHERE cluster_id "
                                          f"IN ({','.join('?' * len(part))}) GROUP BY cluster_id", part):
                out[cid] = (int(n), int(t))
        return out

    def cluster_segments(self, cluster_ids: Iterable[str]) -> dict[str, list[str]]:
        """``{cluster id: its segment ids in document order}``."""
        ids = list(dict.fromkeys(cluster_ids))
        out: dict[str, list[str]] = {c: [] for c in ids}
        for part in batched(ids, _SQL_IDS):
            for cid, sid in self.db.rows(f"SELECT cluster_id, id FROM segments WHERE cluster_id IN "
                                         f"({','.join('?' * len(part))}) ORDER BY position", part):
                out[cid].append(sid)
        return out

    def count(self) -> int:
        """Segments the index holds."""
        return int(self.db.rows("SELECT count(*) FROM segments")[0][0])

    def documents(self, doc_ids: Sequence[str]) -> dict[str, tuple[set[str], str | None]]:
        """``{doc id: (its segment ids, the content_sha256 its rows came from)}`` for the documents the
        index holds (maintained indexes; checked by ``hseg index``: :func:`hseg.ingest.is_complete`)."""
        out: dict[str, tuple[set[str], str | None]] = {}
        for part in batched(list(doc_ids), _SQL_IDS):
            marks = ",".join("?" * len(part))
            for doc, sha in self.db.rows(f"SELECT doc_id, sha FROM documents WHERE doc_id IN ({marks})", part):
                out[doc] = (set(), sha)
            for doc, sid in self.db.rows(f"SELECT doc_id, id FROM segments WHERE doc_id IN ({marks})", part):
                out.setdefault(doc, (set(), None))[0].add(sid)
        return out

    # ----------------------------------------------------------------- staying in step

    def ensure_fresh(self) -> None:
        """Bring the index in step with the collection where it may not be (see the module docstring);
        cheap when it is: a look at the *pending* table (maintained) or one journal ``get`` (cache)."""
        if self.maintained:
            self._fresh_maintained()
        else:
            self._fresh_cache()

    def _fresh_maintained(self) -> None:
        # one statement on the fast path: the meta rows and whether any document is pending
        found = self.db.rows("SELECT key, value FROM meta UNION ALL SELECT '', '' FROM pending LIMIT 1000")
        meta = {k: v for k, v in found if k}
        pending = any(not k for k, _ in found)
        known = meta.get("collection_id") == str(self.collection.id) and meta.get("format") == FORMAT
        built = known and meta.get("built") == "1"
        if built and not pending and self._count_checked:
            return
        if built and not pending and int(meta.get("synced_count", -1)) == int(self.collection.count()):
            self._count_checked = True
            return
        # a writer at work holds the lock: its rows come with its write, so wait only for a missing index
        with self.db.writer(blocking=not built) as got:
            if not got:
                return
            self._adopt()
            meta = self._meta()
            pending_docs = [d for (d,) in self.db.rows("SELECT doc_id FROM pending")]
            if pending_docs:
                logger.warning("collection %r: %d documents of a write that did not finish (a process killed "
                               "mid-write?); re-reading them into the lexical index", self.collection.name,
                               len(pending_docs))
                self._rewrite(pending_docs)
            elif meta.get("built") != "1" or int(meta.get("synced_count", -1)) != int(self.collection.count()):
                if meta.get("built") == "1":
                    logger.warning("collection %r: records were written without hseg's lexical index (the "
                                   "record count changed); rebuilding it", self.collection.name)
                self._rebuild()
            self._count_checked = True

    def _fresh_cache(self) -> None:
        token, opens = self._journal_state()
        if not self._cache_current(token, check_count=not self._count_checked):
            with self.db.writer():  # processes sharing this cache file rebuild one at a time
                token, opens = self._journal_state()
                if not self._cache_current(token, check_count=True):  # another process may have just rebuilt it
                    self._adopt()
                    self._rebuild(token)
        self._count_checked = True
        now = time.time()
        docs: list[str] = []
        for rid, started, names in opens:
            if now - started < OPEN_WRITE_TTL_S:
                docs += names  # a writer at work, or one that died: these documents may differ from the token's state
            elif rid not in self._settled:
                self._settled.add(rid)
                docs += names
        if docs:
            with self.db.writer():
                self._rewrite(sorted(set(docs)), clear_pending=False)

    def _cache_current(self, token: str, *, check_count: bool) -> bool:
        meta = self._meta()
        if meta.get("collection_id") != str(self.collection.id) or meta.get("format") != FORMAT \
                or meta.get("built") != "1" or meta.get("token") != token:
            return False
        return not check_count or int(meta.get("synced_count", -1)) == int(self.collection.count())

    def _adopt(self) -> None:
        """Start afresh when the file belongs to another collection of the same name (dropped and
        created again) or to another layout; call with the writer lock held."""
        meta = self._meta()
        if meta.get("collection_id") == str(self.collection.id) and meta.get("format") == FORMAT:
            return
        with self.db.transaction() as c:
            if meta.get("format") != FORMAT:  # another layout: its tables again, as this version declares them
                c.execute("DROP TABLE IF EXISTS segments")
                for statement in SCHEMA:
                    c.execute(statement)
            for table in ("segments", "documents", "pending", "fts", "meta"):
                c.execute(f"DELETE FROM {table}")
            c.executemany("INSERT INTO meta VALUES (?, ?)",
                          [("collection_id", str(self.collection.id)), ("format", FORMAT), ("built", "0"),
                           ("schema", str(SCHEMA_VERSION))])

    def _rebuild(self, token: str | None = None) -> int:
        """Every row again from the collection's segment records, in one transaction (readers see the
        old index until it commits); returns the segments indexed. Call with the writer lock held."""
        t0 = time.perf_counter()
        count = int(self.collection.count())
        n = 0
        with self.db.transaction() as c:
            for table in ("segments", "documents", "fts", "pending"):
                c.execute(f"DELETE FROM {table}")
            shas: dict[str, str | None] = {}
            for got in pages(self.collection, {"hseg_level": "segment"}, ["documents", "metadatas"], _PAGE):
                n += self._insert(c, got["ids"], got["documents"], got["metadatas"], shas)
            c.executemany("INSERT OR REPLACE INTO documents VALUES (?, ?)", shas.items())
            if token is not None:
                after, _ = self._journal_state()
                # a write finished while we read: the next check rebuilds again
                _set_meta(c, token=token if after == token else "")
            _set_meta(c, built="1", synced_count=str(count))
        # one b-tree per term instead of one per flush (~15% faster queries at 40k segments, 0.2 s),
        # and the WAL folded back so that it keeps no second copy of the index (the old index's pages
        # stay in the file, free for the next rebuild: 43 MB for 35 MB of index at 40k segments)
        with self.db.transaction() as c:
            c.execute("INSERT INTO fts(fts) VALUES ('optimize')")
        if self.location.path is not None:
            self.db.rows("PRAGMA wal_checkpoint(TRUNCATE)")
        logger.info("collection %r: lexical index built, %d segments in %.2f s", self.collection.name, n,
                    time.perf_counter() - t0)
        return n

    def _rewrite(self, doc_ids: Sequence[str], *, clear_pending: bool = True) -> None:
        """The rows of these documents as the collection now holds them. Call with the writer lock held."""
        got_ids: list[str] = []
        docs: list[str] = []
        metas: list[Any] = []
        for got in get_by_documents(self.collection, list(doc_ids), ["documents", "metadatas"]):
            for rid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"]):
                if (meta or {}).get("hseg_level") == "segment":
                    got_ids.append(rid)
                    docs.append(doc)
                    metas.append(meta)
        count = int(self.collection.count())
        with self.db.transaction() as c:
            _delete_documents(c, doc_ids)
            shas: dict[str, str | None] = {}
            self._insert(c, got_ids, docs, metas, shas)
            c.executemany("INSERT OR REPLACE INTO documents VALUES (?, ?)", shas.items())
            if clear_pending:
                c.executemany("DELETE FROM pending WHERE doc_id = ?", ((d,) for d in doc_ids))
                _set_meta(c, synced_count=str(count))

    @staticmethod
    def _insert(c: sqlite3.Connection, ids: Sequence[str], docs: Sequence[Any], metas: Sequence[Any],
                shas: dict[str, str | None]) -> int:
        n = 0
        for rid, text, meta in zip(ids, docs, metas):
            meta = meta or {}
            if meta.get("hseg_level") != "segment" or "hseg_cluster_id" not in meta:
                continue  # another writer's record sharing the collection
            doc = str(meta["hseg_doc_id"])
            cuts = meta.get(CUTS_KEY)
            cur = c.execute("INSERT OR REPLACE INTO segments(id, doc_id, cluster_id, position, tokens, cuts, record) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?)", (rid, doc, str(meta["hseg_cluster_id"]),
                                                             int(meta["hseg_index"]), int(meta["hseg_tokens"]),
                                                             None if cuts is None else str(cuts),
                                                             json.dumps(search_metadata(meta))))
            c.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (cur.lastrowid, text or ""))
            sha = meta.get("content_sha256")
            shas[doc] = None if sha is None else str(sha)
            n += 1
        return n

    # ----------------------------------------------------------------- writes (the store's)

    @contextlib.contextmanager
    def writing(self, doc_ids: Sequence[str]) -> Iterator[None]:
        """Around one store write of these documents: Chroma's records, the unit index and
        :meth:`write`/:meth:`delete` happen inside (see the module docstring for what a crash leaves)."""
        docs = sorted(set(doc_ids))
        if not self.maintained:
            open_id = self._journal_open(docs)
            try:
                yield
            except BaseException:
                with contextlib.suppress(Exception):  # the server may be what failed
                    self._journal_close(open_id)
                raise
            self._journal_close(open_id)
            return
        with self.db.writer():
            self._adopt()
            if self._meta().get("built") != "1" and int(self.collection.count()) == 0:
                with self.db.transaction() as c:
                    _set_meta(c, built="1", synced_count="0")  # nothing stored yet: the index is whole
            with self.db.transaction() as c:
                c.executemany("INSERT OR IGNORE INTO pending VALUES (?)", ((d,) for d in docs))
            try:
                yield
            except BaseException:
                # the write failed part way (a refused record, a full disk): rows as Chroma now has them
                with contextlib.suppress(Exception):
                    self._rewrite(docs)
                raise
            count = int(self.collection.count())
            with self.db.transaction() as c:
                c.executemany("DELETE FROM pending WHERE doc_id = ?", ((d,) for d in docs))
                _set_meta(c, synced_count=str(count))

    def write(self, records: Sequence[Record], doc_ids: Sequence[str]) -> int:
        """Replace the rows of these whole documents by their segment ``records`` (inside
        :meth:`writing`); returns the rows written. A cache is not written: it is rebuilt from Chroma."""
        if not self.maintained:
            return 0
        segments = [r for r in records if r.metadata.get("hseg_level") == "segment"]
        with self.db.transaction() as c:
            _delete_documents(c, doc_ids)
            shas: dict[str, str | None] = {}
            n = self._insert(c, [r.id for r in segments], [r.document for r in segments],
                             [r.metadata for r in segments], shas)
            c.executemany("INSERT OR REPLACE INTO documents VALUES (?, ?)", shas.items())
        return n

    def delete(self, doc_ids: Sequence[str]) -> None:
        """Remove the rows of these documents (inside :meth:`writing`, before Chroma's records go)."""
        if self.maintained:
            with self.db.transaction() as c:
                _delete_documents(c, doc_ids)

    def sync(self, doc_ids: Sequence[str] | None = None) -> int:
        """Rebuild the rows of these documents (default: all) from the collection; returns the
        segments the index holds afterwards."""
        if doc_ids is None:
            with self.db.writer():
                self._adopt()
                self._rebuild(self._journal_state()[0] if not self.maintained else None)
            self._count_checked = True
        else:
            with self.writing(doc_ids):
                if self.maintained:
                    self._rewrite(list(doc_ids))
        return self.count()

    def drop(self) -> None:
        """Delete the index (its file, or the in-memory database) and the journal collection."""
        if self.journal is not None:
            api = self.collection._client
            with contextlib.suppress(Exception):
                api.delete_collection(self.journal.name, tenant=self.collection.tenant,
                                      database=self.collection.database)
        if self._db is not None:
            self._db.close()
            self._db = None
        if self.location.path is None:
            drop_memory_database(self.location.key)
            return
        for suffix in ("", "-wal", "-shm", ".lock"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(f"{self.location.path}{suffix}")

    # ----------------------------------------------------------------- the journal (cache mode)

    def _journal_state(self) -> tuple[str, list[tuple[str, float, list[str]]]]:
        """The last write's token (``"-"`` before the first) and the open writes ``(record id, started,
        documents)``."""
        got = self.journal.get(include=["metadatas"])
        token = "-"
        opens: list[tuple[str, float, list[str]]] = []
        for rid, meta in zip(got["ids"], got["metadatas"]):
            meta = meta or {}
            if rid == _TOKEN_ID:
                token = str(meta.get("token"))
            elif rid.startswith(_OPEN_PREFIX):
                opens.append((rid, float(meta.get("started", 0.0)), json.loads(str(meta.get("docs") or "[]"))))
        return token, opens

    def _journal_open(self, doc_ids: list[str]) -> str:
        rid = f"{_OPEN_PREFIX}{uuid.uuid4().hex}"
        self.journal.upsert(ids=[rid], embeddings=[[1.0]],
                            metadatas=[{"docs": json.dumps(doc_ids), "started": time.time()}])
        return rid

    def _journal_close(self, open_id: str) -> None:
        # the token first: a reader between the two sees both, and re-reads a little more than needed
        self.journal.upsert(ids=[_TOKEN_ID], embeddings=[[1.0]], metadatas=[{"token": uuid.uuid4().hex}])
        _, opens = self._journal_state()
        dead = [rid for rid, started, _ in opens if time.time() - started > _JOURNAL_KEEP_S]
        self.journal.delete(ids=[open_id, *dead])


def _set_meta(c: sqlite3.Connection, **values: str) -> None:
    c.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", values.items())


def _delete_documents(c: sqlite3.Connection, doc_ids: Sequence[str]) -> None:
    for part in batched(list(doc_ids), _SQL_IDS):
        marks = ",".join("?" * len(part))
        c.execute(f"DELETE FROM fts WHERE rowid IN (SELECT rowid FROM segments WHERE doc_id IN ({marks}))", part)
        c.execute(f"DELETE FROM segments WHERE doc_id IN ({marks})", part)
        c.execute(f"DELETE FROM documents WHERE doc_id IN ({marks})", part)
