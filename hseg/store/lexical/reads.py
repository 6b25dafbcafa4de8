"""What a search reads of the lexical index: BM25 scores of a query's words, and the rows of the
segments it names (their place in the document, size, sentence cuts, and what a search reads of
the record beside its exact text), so that the hybrid ``unit="auto"`` search needs no Chroma read
for its passages; and the documents it holds, a page at a time (what the agent tools list).

These are reads of one file; keeping that file in step with Chroma is
:mod:`hseg.store.lexical.index`'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from hseg.retrieval.lexical_query import LexicalRow
from hseg.retrieval.unit_vectors import with_derived
from hseg.store.lexical.database import Database
from hseg.store.lexical.tables import SQL_IDS
from hseg.store.listing import DocumentPage, from_last_segment
from hseg.store.paging import batched

#: positions :meth:`TableReads.following` reads at a time, for all open chains in one statement: a
#: chain is rarely longer (``benchmarks/RESULTS.md``), and every row read costs time in Python
FOLLOWING_PAGE = 2

#: :func:`summed_terms` adds a query's words up in an array indexed by rowid while the largest rowid is at
#: most this many times the (rowid, term) pairs: zeroing that array then costs about what sorting
#: the pairs would
_DENSE_ROWIDS = 16

# a page of the documents, sorted by id (after a given one: {after}), with each one's segments, tokens,
# clusters and last position: one range of the documents table's key, then the page's segment rows
# (index segments_doc)
DOCUMENT_PAGE = ("SELECT d.doc_id, d.sha, count(*), sum(s.tokens), count(DISTINCT s.cluster_id), max(s.position) "
                 "FROM (SELECT doc_id, sha FROM documents {after} ORDER BY doc_id LIMIT ? OFFSET ?) d "
                 "JOIN segments s ON s.doc_id = d.doc_id GROUP BY d.doc_id ORDER BY d.doc_id")
# the last segment of each (document, position) named, with its text: where the document ends, its user
# metadata and its time (every record of a document carries the same); index segments_doc_position
DOCUMENT_ENDS = ("WITH last(doc_id, position) AS (VALUES {pairs}) SELECT s.doc_id, s.record, f.text FROM last "
                 "JOIN segments s ON s.doc_id = last.doc_id AND s.position = last.position "
                 "JOIN fts f ON f.rowid = s.rowid")
# the ids either side of one in the documents table's order
IDS_FROM = "SELECT doc_id FROM documents WHERE doc_id >= ? ORDER BY doc_id LIMIT ?"
IDS_BEFORE = "SELECT doc_id FROM documents WHERE doc_id < ? ORDER BY doc_id DESC LIMIT ?"


class TableReads:
    """The reads of the lexical index's file ``db`` (a property: the file is opened at first use)."""

    @property
    def db(self) -> Database:
        raise NotImplementedError

    def scored(self, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Every segment holding any of ``terms`` as ``(rowids, BM25 scores)`` (higher is better), best
        first, ties by rowid: the ranking of FTS5's ``-bm25()`` for ``fts5_match(terms)``, to the bit.

        It is summed here, one word at a time, so that each word's terms can be kept and reused
        (:meth:`~hseg.store.lexical.database.Database.term_scores`): FTS5's cost is per matching row
        scored, mostly in a long question's common words, which other questions ask too
        (``benchmarks/RESULTS.md``). Exact:
        FTS5's ``bm25()`` is a sum over the query's phrases, in their order, starting from 0.0; a
        phrase's term depends only on the phrase (its IDF), the row (its size, the phrase's
        occurrences) and the table's totals, and a row without the phrase adds 0.0. So a one-word
        query scores each row with exactly that word's term, and adding those terms in the query's
        order gives FTS5's own sum (the lexical index's tests compare both on every bit; a
        SQLite compiled to fuse FTS5's multiply and add, as compilers may on ARM, rounds its own sum
        differently in the last bit).
        All words are read in one snapshot of the index, as one statement would be."""
        return summed_terms(self.db.term_scores(terms))

    def scored_many(self, queries: Sequence[Sequence[str]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`scored` of each of ``queries``: every word of them read once, all in one snapshot, then
        each query's sum made of its own words' terms in its order, as :meth:`scored` makes it (so each
        answer is :meth:`scored`'s to the bit). The lexical side of a batch of searches in one pass."""
        words = list(dict.fromkeys(word for terms in queries for word in terms))
        parts = dict(zip(words, self.db.term_scores(words))) if words else {}
        return [summed_terms([parts[word] for word in terms]) for terms in queries]

    def ids_at(self, rowids: Iterable[int]) -> dict[int, str]:
        """``{rowid: segment id}`` for those of ``rowids`` the index holds."""
        out: dict[int, str] = {}
        for part in batched([int(r) for r in rowids], SQL_IDS):
            out.update(self.db.rows(f"SELECT rowid, id FROM segments WHERE rowid IN ({','.join('?' * len(part))})",
                                    part))
        return out

    def rowids_of(self, segment_ids: Iterable[str]) -> dict[str, int]:
        """``{segment id: rowid}`` for those of ``segment_ids`` the index holds."""
        out: dict[str, int] = {}
        for part in batched(list(dict.fromkeys(segment_ids)), SQL_IDS):
            out.update(self.db.rows(f"SELECT id, rowid FROM segments WHERE id IN ({','.join('?' * len(part))})",
                                    list(part)))
        return out

    def rows(self, segment_ids: Iterable[str]) -> dict[str, LexicalRow]:
        """``{segment id: row}`` for those of ``segment_ids`` the index holds."""
        out: dict[str, LexicalRow] = {}
        for part in batched(list(dict.fromkeys(segment_ids)), SQL_IDS):
            for fields in self.db.rows(f"SELECT id, doc_id, cluster_id, position, tokens FROM segments "
                                       f"WHERE id IN ({','.join('?' * len(part))})", list(part)):
                out[fields[0]] = LexicalRow(*fields)
        return out

    def records(self, segment_ids: Iterable[str]) -> dict[str, tuple[dict[str, Any], str]]:
        """``{segment id: (metadata, text)}`` for those of ``segment_ids`` the index holds: each as its
        segment record reads to a search (:func:`~hseg.retrieval.unit_vectors.search_metadata` with the
        derived keys put back), its text exactly the record's document."""
        out: dict[str, tuple[dict[str, Any], str]] = {}
        for part in batched(list(dict.fromkeys(segment_ids)), SQL_IDS):
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
        page = FOLLOWING_PAGE
        while last:
            rows = []
            for wanted in batched(list(last.items()), SQL_IDS // 3):
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
        for part in batched(ids, SQL_IDS):
            for cid, n, t in self.db.rows(f"SELECT cluster_id, count(*), sum(tokens) FROM segments WHERE cluster_id "
                                          f"IN ({','.join('?' * len(part))}) GROUP BY cluster_id", part):
                out[cid] = (int(n), int(t))
        return out

    def cluster_segments(self, cluster_ids: Iterable[str]) -> dict[str, list[str]]:
        """``{cluster id: its segment ids in document order}``."""
        ids = list(dict.fromkeys(cluster_ids))
        out: dict[str, list[str]] = {c: [] for c in ids}
        for part in batched(ids, SQL_IDS):
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
        for part in batched(list(doc_ids), SQL_IDS):
            marks = ",".join("?" * len(part))
            for doc, sha in self.db.rows(f"SELECT doc_id, sha FROM documents WHERE doc_id IN ({marks})", part):
                out[doc] = (set(), sha)
            for doc, sid in self.db.rows(f"SELECT doc_id, id FROM segments WHERE doc_id IN ({marks})", part):
                out.setdefault(doc, (set(), None))[0].add(sid)
        return out

    def document_page(self, offset: int, limit: int, after: str | None = None) -> DocumentPage:
        """The documents sorted by id (only those after id ``after``, where given), ``limit`` of them
        from ``offset``, in one snapshot of the file: a page after an id costs the same however deep
        it lies; one from an offset skips that many ids first."""
        with self.db.snapshot() as conn:
            total = int(conn.execute("SELECT count(*) FROM documents").fetchone()[0])
            page = conn.execute(DOCUMENT_PAGE.format(after="" if after is None else "WHERE doc_id > ?"),
                                ([] if after is None else [after]) + [limit + 1, offset]).fetchall()
            more, page = len(page) > limit, page[:limit]  # one more row read: whether another page follows
            last = conn.execute(DOCUMENT_ENDS.format(pairs=",".join(["(?, ?)"] * len(page))),
                                [x for row in page for x in (row[0], row[5])]).fetchall() if page else []
        ends = {doc: (json.loads(record), text) for doc, record, text in last}
        return DocumentPage(total, offset, [from_last_segment(doc, sha, tokens, clusters, *ends.get(doc, ({}, "")))
                                            for doc, sha, _, tokens, clusters, _ in page], more)

    def ids_near(self, doc_id: str, n: int) -> list[str]:
        """Up to ``n`` document ids before ``doc_id`` in sorted order (nearest first), then up to ``n``
        from it on, in one snapshot of the file."""
        with self.db.snapshot() as conn:
            return [d for (d,) in conn.execute(IDS_BEFORE, (doc_id, n)).fetchall()] + \
                [d for (d,) in conn.execute(IDS_FROM, (doc_id, n)).fetchall()]


def summed_terms(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-word ``(rowids, terms)`` added up in the order given (FTS5's), as ``(rowids, totals)`` best
    first, ties by rowid (FTS5's ``ORDER BY bm25(fts), rowid``).

    The totals are kept in an array indexed by rowid where the rowids are dense enough for it to
    cost no more than sorting them would (3× faster for a long question over 40k segments), else
    in one indexed by the sorted distinct rowids. Either way each row gets one addition per word
    that it holds, in the words' order."""
    pairs = sum(len(r) for r, _ in parts)
    if not pairs:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    top = max(int(r.max()) for r, _ in parts if len(r)) + 1
    if top <= _DENSE_ROWIDS * pairs:
        total, held = np.zeros(top), np.zeros(top, dtype=bool)
        for r, x in parts:  # a word's rowids are distinct: one addition per row and word, in order
            total[r] += x
            held[r] = True
        rowids = np.flatnonzero(held)
        total = total[rowids]
    else:
        rowids = np.unique(np.concatenate([r for r, _ in parts]))
        total = np.zeros(len(rowids))
        for r, x in parts:
            total[np.searchsorted(rowids, r)] += x
    order = np.lexsort((rowids, -total))
    return rowids[order], total[order]
