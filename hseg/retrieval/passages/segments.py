"""``unit="segment"``: segments ranked by cos(q, segment) alone, or with the lexical score."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hseg.chunking.chunks import is_cluster_id
from hseg.chunking.schema import CLUSTER_ID_KEY, INDEX_KEY, TOKENS_KEY, SegmentMeta, level_of
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.lexical_query import LexicalQuery, LexicalRow
from hseg.retrieval.passages.assemble import Member, passage
from hseg.retrieval.passages.candidates import bounded_walk, cosines, first_page
from hseg.retrieval.plans import Get, Knn, Plan, records
from hseg.retrieval.selection import Selection, merge_runs, walk
from hseg.retrieval.settings import SearchSettings


def search_segments(collection: Any, q: np.ndarray, settings: SearchSettings) -> Plan[list[SearchHit]]:
    """Dense ``unit="segment"``: the ranking comes from a cheap kNN of ids and distances; records are
    read in rank order, a slice at a time, until the walk is decided (reading costs per record).
    Cluster records and other writers' records in the ranking are skipped."""
    k, budget, where, wdoc = settings.effective_k, settings.budget_tokens, settings.where, settings.where_document
    n = first_page(k, budget, 32, 16)
    while True:
        res = yield Knn(collection, np.asarray(q, dtype=np.float32), n, dict(where) if where else None,
                        dict(wdoc) if wdoc else None)
        ids = res["ids"]
        if not ids:
            return []
        sims = [1.0 - float(d) for d in res["distances"]]
        rows: list[Member] = []
        read, m = 0, first_page(k, budget, 96, 8)
        while True:
            part = ids[read : read + m]
            got = yield Get(collection, tuple(part))
            found = {rid: (dict(meta or {}), doc or "") for rid, meta, doc in
                     zip(got["ids"], got["metadatas"], got["documents"])}
            for rid, sim in zip(part, sims[read : read + m]):
                meta, doc = found.get(rid, ({}, ""))  # absent: deleted since the kNN
                if level_of(meta) == "segment":
                    rows.append(Member(rid, meta, doc, sim))
            read += len(part)
            # an unread record is no closer than the first one not read (or the page's last)
            floor = sims[read] if read < len(ids) else (sims[-1] if len(ids) >= n else -np.inf)
            score = np.array([r.score for r in rows])
            sel = walk(score, [str(r.meta[CLUSTER_ID_KEY]) for r in rows],
                       [int(r.meta[TOKENS_KEY]) for r in rows], {}, budget,
                       max_units=k if budget is None else None, floor=floor)
            if sel is not None:
                keys = [(str(r.meta[CLUSTER_ID_KEY]), int(r.meta[INDEX_KEY])) for r in rows]
                return [passage([rows[i] for i in run], "segment") for run in merge_runs(keys, sel.taken, score)]
            if read >= len(ids):
                break
            m = _next_slice(rows, read, k, budget)
        n *= 2


def _next_slice(rows: list[Member], read: int, k: int | None, budget: int | None) -> int:
    """Records to read next when the walk is undecided: the segments still missing at the mean size
    and the segment share seen so far, with a quarter as margin. Usually a few records: doubling
    instead cost a 100-record read in one query of five at budget 4096 (``benchmarks/RESULTS.md``)."""
    if not rows:
        return 2 * read
    share = len(rows) / read
    if budget is None:
        missing = (k or 1) - len(rows)
    else:
        seen = sum(int(r.meta[TOKENS_KEY]) for r in rows)
        missing = math.ceil(max(0, budget - seen) * len(rows) / max(1, seen))
    return max(4, math.ceil(1.25 * (max(missing, 0) + 2) / share))


def hybrid_segments(collection: Any, q: np.ndarray, settings: SearchSettings, lex: LexicalQuery
                    ) -> Plan[list[SearchHit]]:
    """``unit="segment"`` with the lexical score: dense = cos(q, segment). A candidate's cluster,
    position and tokens come from the lexical index; a kNN record it does not hold is read (another
    writer's record, or a segment written since), cluster records are skipped by their id."""
    k, budget = settings.effective_k, settings.budget_tokens
    qv = np.asarray(q, dtype=np.float32)
    where = dict(settings.where) if settings.where else None
    wdoc = dict(settings.where_document) if settings.where_document else None
    n = first_page(k, budget, 32, 16)
    while True:
        res = yield Knn(collection, qv, n, where, wdoc)
        known = {rid: 1.0 - float(d) for rid, d in zip(res["ids"], res["distances"]) if not is_cluster_id(rid)}
        floor_d = 1.0 - float(res["distances"][-1]) if len(res["ids"]) >= n else -np.inf
        page = yield from lex.page(n)
        lexical = dict(zip(page.ids, page.scores.tolist()))
        rows = yield from lex.rows([*known, *lexical])
        unknown = [rid for rid in known if rid not in rows]
        if unknown:
            got = yield Get(collection, tuple(unknown), ("metadatas",))
            for rid, meta in zip(got["ids"], got["metadatas"]):
                if level_of(meta) == "segment":
                    view = SegmentMeta.of(meta)
                    rows[rid] = LexicalRow(rid, view.doc_id, view.cluster_id, int(meta[INDEX_KEY]), view.tokens)
        known = {sid: d for sid, d in known.items() if sid in rows}
        scores = yield from lex.scores(list(known))
        known = {sid: lex.fused(d, x) for (sid, d), x in zip(known.items(), scores.tolist())}
        bounds = {sid: lex.fused(floor_d, x) for sid, x in lexical.items() if sid not in known and sid in rows}
        floor = lex.fused(floor_d, page.floor)

        def walk_of(scores: dict[str, float], at: float, rows: dict[str, LexicalRow] = rows) -> Selection | None:
            return walk(np.array(list(scores.values())), [rows[s].cluster_id for s in scores],
                        [rows[s].tokens for s in scores], {}, budget, max_units=k if budget is None else None,
                        floor=at)

        while True:  # the bounded walk; then every candidate that may matter is read (once)
            sel, wanted = bounded_walk(known, bounds, floor, walk_of, lambda sid, rows=rows: rows[sid].cluster_id)
            if sel is not None or not wanted:
                break
            # filtered as the kNN was: a lexical candidate absent from the answer fails the filters
            got = yield Get(collection, tuple(wanted), ("embeddings",), where, wdoc)
            for sid, cos in zip(got["ids"], cosines(qv, got["embeddings"])):
                known[sid] = lex.fused(float(cos), lexical[sid])
            for sid in wanted:
                bounds.pop(sid, None)
        if sel is not None:
            order = list(known)
            reported = lex.reported(np.array([known[s] for s in order]))
            taken = [order[i] for i in sel.taken]
            got = (yield Get(collection, tuple(taken))) if taken else {"ids": []}
            found = records(got)
            members = {order[i]: Member(order[i], *found[order[i]], float(reported[i]))
                       for i in sel.taken if order[i] in found}  # absent: deleted since the kNN
            keys = [(rows[s].cluster_id, rows[s].position) for s in order]
            runs = merge_runs(keys, [i for i in sel.taken if order[i] in members], reported)
            return [passage([members[order[i]] for i in run], "segment") for run in runs]
        n *= 2
