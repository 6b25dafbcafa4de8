"""``unit="auto"`` without a usable unit index (other weights than the index's, a ``where_document``
filter, a collection written by another tool): the fused score is assembled from gathered
segments, clusters and neighbours, in several round trips."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hseg.chunking.schema import (
    CLUSTER,
    CLUSTER_ID_KEY,
    INDEX_KEY,
    SEGMENT,
    TOKENS_KEY,
    level_is,
    listed_segment_ids,
    neighbour_ids,
)
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.lexical_query import LexicalQuery, fuse
from hseg.retrieval.passages.assemble import Member, passage
from hseg.retrieval.passages.candidates import cosines
from hseg.retrieval.plans import Get, Knn, Plan
from hseg.retrieval.selection import UnitCandidates, merge_runs_of_segments, select_auto
from hseg.retrieval.settings import SearchSettings


def _query(collection: Any, q: np.ndarray, n: int, where: Any, wdoc: Any, include: tuple[str, ...]) -> Plan[tuple]:
    res = yield Knn(collection, np.asarray(q, dtype=np.float32), n, where or None, wdoc or None, include)
    ids = list(res["ids"])
    metas = [dict(m or {}) for m in res["metadatas"]]
    docs = list(res["documents"]) if "documents" in include else [None] * len(ids)
    return ids, metas, list(res["distances"]), docs


def _and(*parts: Mapping[str, Any] | None) -> dict[str, Any] | None:
    items = [dict(p) for p in parts if p]
    if not items:
        return None
    return items[0] if len(items) == 1 else {"$and": items}


@dataclass
class _Gathered:
    cands: UnitCandidates
    docs: list[str]
    metas: list[dict[str, Any]]
    floor: float


def _fetch_scored(collection: Any, q: np.ndarray, ids: list[str], where: Any, wdoc: Any = None
                  ) -> Plan[dict[str, tuple]]:
    if not ids:
        return {}
    got = yield Get(collection, tuple(ids), ("metadatas", "documents", "embeddings"), where, wdoc)
    return {rid: (dict(m), d, float(sim))
            for rid, m, d, sim in zip(got["ids"], got["metadatas"], got["documents"], cosines(q, got["embeddings"]))}


def _gather(
    collection: Any, q: np.ndarray, n_seg: int, n_clu: int, where: Any, wdoc: Any, weight: float, nweight: float,
    lex: LexicalQuery | None = None, whole_cluster_min: int = 1 << 30,
) -> Plan[_Gathered]:
    """Candidate segments: the ``n_seg`` nearest segments, their neighbours (when the neighbour
    term counts) and every segment of the ``n_clu`` nearest clusters (when the cluster term
    counts), with ``lex`` also the ``n_seg`` best segments of the lexical index (and their
    neighbours and clusters), and every segment of a cluster with ``whole_cluster_min`` candidates
    (rule 3 may take it whole: the walk needs its size and its other segments); plus a bound on the
    fused score of all other segments."""
    seg_where = _and(level_is(SEGMENT), where)
    ids, metas, dists, docs = yield from _query(collection, q, n_seg, seg_where, wdoc,
                                                ("metadatas", "distances", "documents"))
    rows = {rid: (dict(m), d, 1.0 - float(dist)) for rid, m, d, dist in zip(ids, metas, docs, dists)}
    seg_floor = (1.0 - float(dists[-1])) if len(ids) >= n_seg else -np.inf
    lex_floor = 0.0
    if lex is not None:  # the lexical candidates, filtered as the kNN was (see "the lexical score" above)
        page = yield from lex.page(n_seg)
        lex_floor = page.floor
        rows.update((yield from _fetch_scored(collection, q, [s for s in page.ids if s not in rows], where, wdoc)))
    if nweight:  # a segment next to a near one may rank high through its neighbour
        around = sorted({n for m, _, _ in rows.values() for n in neighbour_ids(m)} - set(rows))
        # neighbour ids name segments (the schema), so only the caller's filters are passed: a level
        # filter on a get by ids made Chroma scan the metadata (docs/decisions.md, the gathered path)
        rows.update((yield from _fetch_scored(collection, q, around, where, wdoc)))
    cluster_score: dict[str, float] = {}
    complete: set[str] = set()  # clusters all of whose segments are candidates: rule 3 may take them
    clu_floor = -np.inf
    if weight:
        cids, cmetas, cdists, _ = yield from _query(collection, q, n_clu, _and(level_is(CLUSTER), where),
                                                    wdoc, ("metadatas", "distances"))
        cluster_score = {c: 1.0 - float(d) for c, d in zip(cids, cdists)}
        complete = set(cids)
        clu_floor = (1.0 - float(cdists[-1])) if len(cids) >= n_clu else -np.inf
        # all segments of the nearest clusters (they may rank high through their cluster), by the ids
        # each cluster lists: a get by ids, where a filter on the cluster ids scanned the metadata
        listed = [sid for m in cmetas for sid in listed_segment_ids(m) if sid not in rows]
        rows.update((yield from _fetch_scored(collection, q, listed, where, wdoc)))
        unknown = sorted({m[CLUSTER_ID_KEY] for m, _, _ in rows.values()} - set(cluster_score))
        if unknown:
            got = yield Get(collection, tuple(unknown), ("embeddings", "metadatas"))
            cluster_score.update(zip(got["ids"], (float(s) for s in cosines(q, got["embeddings"]))))
            # a cluster of which rule 3 may take enough segments to take it whole: all of its
            # segments are candidates, as those of the nearest clusters are (they are scored anyway:
            # a cluster taken whole is returned whole)
            counts = Counter(m[CLUSTER_ID_KEY] for m, _, _ in rows.values())
            more = [sid for cid, m in zip(got["ids"], got["metadatas"]) if counts[cid] >= whole_cluster_min
                    for sid in listed_segment_ids(m) if sid not in rows]
            rows.update((yield from _fetch_scored(collection, q, more, where, wdoc)))
            complete |= {cid for cid in got["ids"] if counts[cid] >= whole_cluster_min}
    # an unseen segment is not among the nearest, nor next to one, nor in a nearest cluster (nor
    # among the lexical index's best); lex is added on the cosine scale: λ·M·lex on the fused one
    scale = 1.0 + weight + nweight
    floor = seg_floor * (1.0 + nweight) + (weight * clu_floor if weight else 0.0)
    ids = list(rows)
    metas = [rows[r][0] for r in ids]
    lexical_score = None
    if lex is not None:
        floor = fuse(floor, lex_floor, lex.weight * scale)
        lexical_score = yield from lex.scores(ids)
    neighbour_score = None
    if nweight:
        context = {r: v[2] for r, v in rows.items()}
        missing = sorted({n for m in metas for n in neighbour_ids(m)} - set(context))
        context.update({r: v[2] for r, v in (yield from _fetch_scored(collection, q, missing, None)).items()})
        neighbour_score = np.array([
            np.mean([context[n] for n in neighbour_ids(m) if n in context] or [rows[r][2]])
            for r, m in zip(ids, metas)
        ])
    siblings: dict[str, list[int]] = {}
    if weight:
        for i, m in enumerate(metas):
            if m[CLUSTER_ID_KEY] in complete:
                siblings.setdefault(m[CLUSTER_ID_KEY], []).append(i)
        for members in siblings.values():
            members.sort(key=lambda i: metas[i][INDEX_KEY])
    cands = UnitCandidates(
        ids=ids,
        cluster=[m[CLUSTER_ID_KEY] for m in metas],
        position=[int(m[INDEX_KEY]) for m in metas],
        tokens=[int(m[TOKENS_KEY]) for m in metas],
        segment_score=np.array([rows[r][2] for r in ids]),
        cluster_score=np.array([cluster_score.get(m[CLUSTER_ID_KEY], 0.0) for m in metas]),
        siblings=siblings,
        neighbour_score=neighbour_score,
        neighbour_weight=nweight,
        lexical_score=lexical_score,
        lexical_weight=0.0 if lex is None else lex.weight * scale,
    )
    return _Gathered(cands, [rows[r][1] or "" for r in ids], metas, floor)


def search_gathered(collection: Any, q: np.ndarray, settings: SearchSettings, lex: LexicalQuery | None = None
                    ) -> Plan[list[SearchHit]]:
    """``unit="auto"`` with the settings' cluster and neighbour weights (and ``lex``, the lexical
    side), from gathered candidates (:func:`_gather`), deepened until the walk is decided."""
    k, budget, where, wdoc = settings.effective_k, settings.budget_tokens, settings.where, settings.where_document
    weight, nweight = settings.cluster_weight, settings.neighbour_weight
    need = max(8, budget // 48 + 4) if budget is not None else k
    if need is None:
        raise ValueError("give k or budget_tokens")
    n_seg, n_clu = 2 * need + 4, need + 2
    while True:  # each round doubles, so it ends once a round holds the whole collection
        g = yield from _gather(collection, q, n_seg, n_clu, where, wdoc, weight, nweight, lex,
                               settings.whole_cluster_min)
        taken = select_auto(g.cands, budget, max_units=k if budget is None else None, cluster_weight=weight,
                            floor=g.floor, whole_cluster_min=settings.whole_cluster_min if weight else 1 << 30,
                            whole_cluster_share=settings.whole_cluster_share)
        if taken is not None:
            fused = g.cands.fused(weight) / (1.0 + weight + g.cands.neighbour_weight)  # back on the cosine scale
            if lex is not None:
                fused = lex.reported(fused)
            return [passage([Member(g.cands.ids[i], g.metas[i], g.docs[i], float(fused[i])) for i in run], "auto")
                    for run in merge_runs_of_segments(g.cands, taken, weight)]
        n_seg, n_clu = 2 * n_seg, 2 * n_clu
