"""The budget-aware retrieval unit (``unit="auto"``): spend a reader budget on the best text.

Whole parents of 512+ tokens lose to 100–250-token chunks when the reader gets a fixed number of
tokens: a parent brings its relevant sentences *and* everything around them. Segments alone lose
the context the cluster gives. This rule keeps both signals:

1. every candidate segment gets a *fused* score
   ``cos(q, segment) + w · cos(q, its cluster) + v · mean(cos(q, previous), cos(q, next segment))``
   (``w = cluster_weight``, ``v = neighbour_weight``): the paper's cluster vector acts as a prior
   on its segments, so of two equally similar segments the one inside a relevant cluster ranks
   first; relevant text rarely stops at a segment boundary, so relevant neighbours lift a segment
   too (the same local-coherence signal TextTiling reads);
2. segments are taken in fused-score order while their total fits the budget (at least one);
   no character is taken twice;
3. when ``whole_cluster_min`` segments of one cluster are taken, the cluster is clearly relevant
   as a whole, so the rest of it is taken too if that costs at most ``whole_cluster_share`` of the
   remaining budget (cheap when the rest is small, never a 500-token gamble on a small budget);
4. taken segments that are adjacent in one cluster are returned as one passage, in the order of
   their best fused score.

Tuned on the three development corpora of Chroma's evaluation (``benchmarks/RESULTS.md``):
``cluster_weight=0.5`` beat 0, 0.25 and 1.0 at budgets 1024/2048; ``neighbour_weight=0.2`` added
about one recall point at 1024 and reached 100 at 4096 at target sizes 256 and 512; whole-cluster
expansion on the third segment cost recall at 1024 when unconditional, hence the budget guard.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hseg.search import ParentHit

__all__ = ["UNITS", "UnitCandidates", "select_auto", "merge_runs_of_segments", "search_units"]

#: what one search result is: the paper's parent cluster, a lone segment, or the budget-aware unit
UNITS = ("cluster", "segment", "auto")

DEFAULT_CLUSTER_WEIGHT = 0.5
DEFAULT_NEIGHBOUR_WEIGHT = 0.2
DEFAULT_WHOLE_CLUSTER_MIN = 3
DEFAULT_WHOLE_CLUSTER_SHARE = 0.25


@dataclass(frozen=True)
class UnitCandidates:
    """Candidate segments for one query, in any order.

    ``cluster[i]`` is the cluster of segment i, ``position[i]`` its index in the document,
    ``tokens[i]`` its size, ``segment_score[i]`` = cos(q, segment), ``cluster_score[i]`` =
    cos(q, its cluster). ``siblings`` maps a cluster id to the candidate indices of *all* its
    segments in document order (needed for whole-cluster expansion; clusters missing from it are
    never expanded).
    """

    ids: Sequence[str]
    cluster: Sequence[str]
    position: Sequence[int]
    tokens: Sequence[int]
    segment_score: np.ndarray
    cluster_score: np.ndarray
    siblings: dict[str, list[int]]
    neighbour_score: np.ndarray | None = None
    neighbour_weight: float = 0.0

    def fused(self, cluster_weight: float) -> np.ndarray:
        out = np.asarray(self.segment_score, dtype=np.float64) + cluster_weight * np.asarray(
            self.cluster_score, dtype=np.float64
        )
        if self.neighbour_weight and self.neighbour_score is not None:
            out = out + self.neighbour_weight * np.asarray(self.neighbour_score, dtype=np.float64)
        return out


def select_auto(
    cands: UnitCandidates,
    budget_tokens: int | None,
    *,
    max_units: int | None = None,
    cluster_weight: float = DEFAULT_CLUSTER_WEIGHT,
    whole_cluster_min: int = DEFAULT_WHOLE_CLUSTER_MIN,
    whole_cluster_share: float = DEFAULT_WHOLE_CLUSTER_SHARE,
    floor: float = -np.inf,
) -> list[int] | None:
    """Indices of the candidates to return, best first (see the module docstring).

    ``floor`` bounds the fused score of every segment that is *not* a candidate. If the walk would
    have to look at or below it before stopping, an unseen segment might belong in the answer, so
    ``None`` is returned and the caller fetches more candidates.

    Always returns at least one segment when there is a candidate, even one larger than the budget.
    ``budget_tokens=None`` takes the first ``max_units`` segments instead.
    """
    if budget_tokens is None and max_units is None:
        raise ValueError("give budget_tokens or max_units")
    if budget_tokens is not None and budget_tokens <= 0:
        raise ValueError(f"budget_tokens must be > 0, got {budget_tokens!r}")
    n = len(cands.ids)
    if n == 0:
        return []
    fused = cands.fused(cluster_weight)
    order = np.argsort(-fused, kind="stable")
    tokens = np.asarray(cands.tokens, dtype=np.int64)
    taken: list[int] = []
    is_taken = np.zeros(n, dtype=bool)
    per_cluster: dict[str, int] = {}
    left = budget_tokens if budget_tokens is not None else np.iinfo(np.int64).max
    decided = False
    for i in order:
        if max_units is not None and len(taken) >= max_units:
            decided = True
            break
        if is_taken[i]:
            continue
        if fused[i] <= floor:
            break
        if tokens[i] > left and taken:
            decided = True
            break  # the equal-reader-input rule: in rank order while the total fits
        taken.append(int(i))
        is_taken[i] = True
        left -= int(tokens[i])
        c = cands.cluster[i]
        per_cluster[c] = per_cluster.get(c, 0) + 1
        if per_cluster[c] == whole_cluster_min and c in cands.siblings:
            rest = [j for j in cands.siblings[c] if not is_taken[j]]
            cost = int(tokens[rest].sum()) if rest else 0
            if rest and cost <= whole_cluster_share * left:
                taken += rest
                is_taken[rest] = True
                left -= cost
        if left <= 0:
            decided = True
            break
    if not decided and floor > -np.inf:
        return None
    return taken


def merge_runs_of_segments(cands: UnitCandidates, taken: Sequence[int], cluster_weight: float) -> list[list[int]]:
    """Group taken segments into passages: runs adjacent in the document and in one cluster.

    Passages are ordered by their best fused score; inside a passage, by document position.
    """
    fused = cands.fused(cluster_weight)
    by_key = sorted(taken, key=lambda i: (cands.cluster[i], cands.position[i]))
    runs: list[list[int]] = []
    for i in by_key:
        if runs and cands.cluster[runs[-1][-1]] == cands.cluster[i] and cands.position[runs[-1][-1]] + 1 == cands.position[i]:
            runs[-1].append(i)
        else:
            runs.append([i])
    runs.sort(key=lambda run: -max(fused[j] for j in run))
    return runs


# --------------------------------------------------------------------------- on a Chroma collection


def _and(*parts: Mapping[str, Any] | None) -> dict[str, Any] | None:
    items = [dict(p) for p in parts if p]
    if not items:
        return None
    return items[0] if len(items) == 1 else {"$and": items}


def _cosines(query: np.ndarray, embeddings: Any) -> np.ndarray:
    e = np.asarray(embeddings, dtype=np.float64)
    if e.size == 0:
        return np.zeros(0)
    norms = np.linalg.norm(e, axis=1)
    return (e @ query.astype(np.float64)) / np.where(norms == 0, 1.0, norms)


def _query(collection: Any, q: np.ndarray, n: int, where: dict[str, Any] | None, wdoc: Any, include: list[str]):
    res = collection.query(query_embeddings=[q.astype(np.float32)], n_results=n, where=where,
                           where_document=dict(wdoc) if wdoc else None, include=include)
    ids = list(res["ids"][0]) if res["ids"] else []
    metas = list(res["metadatas"][0]) if ids else []
    dists = list(res["distances"][0]) if ids else []
    docs = list(res["documents"][0]) if ids and "documents" in include else [None] * len(ids)
    return ids, metas, dists, docs


@dataclass
class _Gathered:
    cands: UnitCandidates
    docs: list[str]
    metas: list[dict[str, Any]]
    floor: float


def _neighbour_ids(meta: Mapping[str, Any]) -> list[str]:
    return [n for n in (meta.get("hseg_prev_id"), meta.get("hseg_next_id")) if n]


def _fetch_scored(collection: Any, q: np.ndarray, ids: list[str], where: Any) -> dict[str, tuple]:
    if not ids:
        return {}
    got = collection.get(ids=ids, where=where, include=["metadatas", "documents", "embeddings"])
    return {rid: (dict(m), d, float(sim))
            for rid, m, d, sim in zip(got["ids"], got["metadatas"], got["documents"], _cosines(q, got["embeddings"]))}


def _gather(
    collection: Any, q: np.ndarray, n_seg: int, n_clu: int, where: Any, wdoc: Any, weight: float, nweight: float
) -> _Gathered:
    """Candidate segments: the ``n_seg`` nearest segments, their neighbours (when the neighbour
    term counts) and every segment of the ``n_clu`` nearest clusters (when the cluster term
    counts); plus a bound on the fused score of all other segments."""
    seg_where = _and({"hseg_level": "segment"}, where)
    ids, metas, dists, docs = _query(collection, q, n_seg, seg_where, wdoc, ["metadatas", "distances", "documents"])
    rows = {rid: (dict(m), d, 1.0 - float(dist)) for rid, m, d, dist in zip(ids, metas, docs, dists)}
    seg_floor = (1.0 - float(dists[-1])) if len(ids) >= n_seg else -np.inf
    if nweight:  # a segment next to a near one may rank high through its neighbour
        around = sorted({n for m, _, _ in rows.values() for n in _neighbour_ids(m)} - set(rows))
        rows.update(_fetch_scored(collection, q, around, seg_where))
    cluster_score: dict[str, float] = {}
    nearest: set[str] = set()
    clu_floor = -np.inf
    if weight:
        cids, _, cdists, _ = _query(collection, q, n_clu, _and({"hseg_level": "cluster"}, where), wdoc,
                                    ["metadatas", "distances"])
        cluster_score = {c: 1.0 - float(d) for c, d in zip(cids, cdists)}
        nearest = set(cids)
        clu_floor = (1.0 - float(cdists[-1])) if len(cids) >= n_clu else -np.inf
        if cids:  # all segments of the nearest clusters (they may rank high through their cluster)
            got = collection.get(where=_and({"hseg_level": "segment"}, {"hseg_cluster_id": {"$in": cids}}, where),
                                 include=["metadatas", "documents", "embeddings"])
            for rid, m, d, sim in zip(got["ids"], got["metadatas"], got["documents"], _cosines(q, got["embeddings"])):
                rows.setdefault(rid, (dict(m), d, float(sim)))
        unknown = sorted({m["hseg_cluster_id"] for m, _, _ in rows.values()} - set(cluster_score))
        if unknown:
            got = collection.get(ids=unknown, include=["embeddings"])
            cluster_score.update(zip(got["ids"], (float(s) for s in _cosines(q, got["embeddings"]))))
    # an unseen segment is not among the nearest, nor next to one, nor in a nearest cluster
    floor = seg_floor * (1.0 + nweight) + (weight * clu_floor if weight else 0.0)
    ids = list(rows)
    metas = [rows[r][0] for r in ids]
    neighbour_score = None
    if nweight:
        context = {r: v[2] for r, v in rows.items()}
        missing = sorted({n for m in metas for n in _neighbour_ids(m)} - set(context))
        context.update({r: v[2] for r, v in _fetch_scored(collection, q, missing, None).items()})
        neighbour_score = np.array([
            np.mean([context[n] for n in _neighbour_ids(m) if n in context] or [rows[r][2]])
            for r, m in zip(ids, metas)
        ])
    siblings: dict[str, list[int]] = {}
    if weight:
        for i, m in enumerate(metas):
            if m["hseg_cluster_id"] in nearest:
                siblings.setdefault(m["hseg_cluster_id"], []).append(i)
        for members in siblings.values():
            members.sort(key=lambda i: metas[i]["hseg_index"])
    cands = UnitCandidates(
        ids=ids,
        cluster=[m["hseg_cluster_id"] for m in metas],
        position=[int(m["hseg_index"]) for m in metas],
        tokens=[int(m["hseg_tokens"]) for m in metas],
        segment_score=np.array([rows[r][2] for r in ids]),
        cluster_score=np.array([cluster_score.get(m["hseg_cluster_id"], 0.0) for m in metas]),
        siblings=siblings,
        neighbour_score=neighbour_score,
        neighbour_weight=nweight,
    )
    return _Gathered(cands, [rows[r][1] or "" for r in ids], metas, floor)


def search_units(
    collection: Any,
    query_vector: np.ndarray,
    *,
    unit: str,
    k: int | None,
    budget_tokens: int | None,
    where: Mapping[str, Any] | None = None,
    where_document: Mapping[str, Any] | None = None,
    cluster_weight: float = DEFAULT_CLUSTER_WEIGHT,
    neighbour_weight: float = DEFAULT_NEIGHBOUR_WEIGHT,
) -> list[ParentHit]:
    """Passages for ``unit="auto"`` (fused scores) or ``unit="segment"`` (segment scores alone).

    Exact with respect to Chroma's neighbours: candidates are widened until the selection never
    reaches the bound on the fused score of the segments not fetched.
    """
    weight = cluster_weight if unit == "auto" else 0.0
    nweight = neighbour_weight if unit == "auto" else 0.0
    need = k if budget_tokens is None else max(8, budget_tokens // 48 + 4)
    n_seg, n_clu = 2 * need + 4, need + 2
    for _ in range(64):  # each round doubles; 64 doublings exceed any collection
        g = _gather(collection, query_vector, n_seg, n_clu, where, where_document, weight, nweight)
        taken = select_auto(g.cands, budget_tokens, max_units=k if budget_tokens is None else None,
                            cluster_weight=weight, floor=g.floor,
                            whole_cluster_min=DEFAULT_WHOLE_CLUSTER_MIN if weight else 1 << 30)
        if taken is not None:
            return _passages(g, taken, weight, unit)
        n_seg, n_clu = 2 * n_seg, 2 * n_clu
    raise RuntimeError("search_units did not converge")  # pragma: no cover - bounded by collection size


def _passages(g: _Gathered, taken: list[int], weight: float, unit: str) -> list[ParentHit]:
    fused = g.cands.fused(weight) / (1.0 + weight + g.cands.neighbour_weight)  # back on the cosine scale
    hits = []
    for run in merge_runs_of_segments(g.cands, taken, weight):
        best = max(run, key=lambda i: fused[i])
        first, last = g.metas[run[0]], g.metas[run[-1]]
        hits.append(
            ParentHit(
                cluster_id=first["hseg_cluster_id"],
                doc_id=str(first["hseg_doc_id"]),
                text="".join(g.docs[i] for i in run),  # segments tile their document, so this is exact
                start=int(first["hseg_start"]),
                end=int(last["hseg_end"]),
                score=float(fused[best]),
                token_count=int(sum(g.cands.tokens[i] for i in run)),
                matched_id=g.cands.ids[best],
                matched_level="segment",
                matched_start=int(g.metas[best]["hseg_start"]),
                matched_end=int(g.metas[best]["hseg_end"]),
                metadata={key: v for key, v in g.metas[best].items()},
                segment_scores={g.cands.ids[i]: float(g.cands.segment_score[i]) for i in run},
                unit=unit,
                segment_ids=[g.cands.ids[i] for i in run],
            )
        )
    return hits
