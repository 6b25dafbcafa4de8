"""Max-over-vectors parent retrieval on a Chroma collection (Nguyen et al. 2025, §3.1 eq. 2).

A parent (cluster) is scored by the best cosine similarity among its vectors:

    score(q, C) = max(cos(q, E_s1), ..., cos(q, E_sm), cos(q, E_c))

``mode`` picks which vectors take part: ``"segment+cluster"`` (eq. 2), ``"cluster"`` (the paper's
"Cluster Only" ablation) or ``"segment"``.

This module holds the read path only; :mod:`hseg.store` owns collections and writes.

Why the collapse is exact, and how the hybrid score keeps it so: :func:`parents_plan`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hseg.chunking.schema import (
    CLUSTER,
    CLUSTER_ID_KEY,
    CLUSTER_TOKENS_KEY,
    END_KEY,
    SEGMENT,
    START_KEY,
    TOKENS_KEY,
    ClusterMeta,
    level_is,
    level_of,
)
from hseg.errors import IndexOutOfStepError
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.lexical_query import LexicalQuery
from hseg.retrieval.plans import Get, Knn, Plan
from hseg.retrieval.settings import DEFAULT_K, SearchSettings

logger = logging.getLogger(__name__)

#: the first Chroma request asks for ``ceil(oversample * k)`` records. Each returned record costs its
#: metadata and document reads, and an extra round trip costs a whole query; 1.5 (8 records for k=5)
#: keeps ``search(k=5)`` close to a bare ``query(n_results=5)`` (benchmarks/query_latency.py,
#: benchmarks/RESULTS.md). When a first request falls short,
#: the next one is sized from the parents-per-record rate it saw, so a low default costs at most
#: one extra round trip. Raise it when many vectors of one parent usually sit close together.
DEFAULT_OVERSAMPLE = 1.5
#: a widened request larger than this in mode "segment"/"cluster" lets Chroma filter the level
#: (a metadata scan) instead of returning and discarding the other level's records
SERVER_LEVEL_FILTER_AT = 1024

_LEVELS = {"segment+cluster": (SEGMENT, CLUSTER), "cluster": (CLUSTER,), "segment": (SEGMENT,)}


@dataclass
class _Parent:
    cluster_id: str
    score: float
    matched_id: str
    matched_level: str
    matched_start: int
    matched_end: int
    tokens: int | None
    segment_scores: dict[str, float] = field(default_factory=dict)
    cluster_meta: dict[str, Any] | None = None
    cluster_doc: str | None = None


def level_where(mode: str, where: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The Chroma ``where`` for a mode, ANDed with the user's filter.

    Used only once a request has grown large (see ``SERVER_LEVEL_FILTER_AT``); ``"segment+cluster"``
    never filters by level, records of other writers (no ``hseg_*`` keys) are skipped client-side.

    Example:
        >>> level_where("cluster", {"source": "a"})
        {'$and': [{'hseg_level': 'cluster'}, {'source': 'a'}]}
    """
    levels = _LEVELS[mode]
    level = level_is(levels[0]) if len(levels) == 1 else None
    user = dict(where) if where else None
    if level and user:
        return {"$and": [level, user]}
    return level or user


def _collapse(ids: list[str], metas: list[Any], dists: list[Any], docs: list[Any] | None, mode: str) -> list[_Parent]:
    """Parents in first-hit order (= score order) from one ranked Chroma result."""
    allowed = _LEVELS[mode]
    parents: dict[str, _Parent] = {}
    for i, rid in enumerate(ids):
        meta = metas[i]
        level = level_of(meta)
        if level is None or level not in allowed:
            continue  # a record written by someone else sharing the collection
        dist = dists[i]
        if dist is None or not np.isfinite(dist):
            continue
        sim = 1.0 - float(dist)
        cid = meta[CLUSTER_ID_KEY]
        parent = parents.get(cid)
        if parent is None:
            parent = _first_hit(cid, sim, rid, level, meta)
            parents[cid] = parent
        if level == SEGMENT:
            parent.segment_scores.setdefault(rid, sim)
        else:
            parent.cluster_meta = dict(meta)
            parent.cluster_doc = docs[i] if docs is not None else None
            parent.tokens = int(meta[TOKENS_KEY])
    return list(parents.values())


def _first_hit(cluster_id: str, sim: float, rid: str, level: str, meta: Mapping[str, Any]) -> _Parent:
    """A parent scored by its record ``rid`` (of ``level``, with ``meta``): the first of its records
    in rank order; its tokens are the cluster's, which a segment record carries too."""
    tokens = meta.get(TOKENS_KEY) if level == CLUSTER else meta.get(CLUSTER_TOKENS_KEY)
    return _Parent(cluster_id, sim, rid, level, int(meta[START_KEY]), int(meta[END_KEY]),
                   None if tokens is None else int(tokens))


def _select(parents: list[_Parent], k: int | None, budget: int | None, exhausted: bool) -> list[_Parent] | None:
    """The final parents, or ``None`` when more records are needed to decide."""
    if k is not None:
        if len(parents) >= k or exhausted:
            return parents[:k]
        return None
    assert budget is not None
    cut = _budget_cut(parents, budget)
    if cut is not None:
        return cut
    return parents if exhausted else None


def _budget_cut(ranked: list[_Parent], budget: int, decided: Callable[[_Parent], bool] | None = None
                ) -> list[_Parent] | None:
    """The parents in rank order while their tokens fit ``budget`` (always at least one), or ``None``
    when the list ends before the budget does or reaches a parent that is not ``decided``."""
    total = 0
    for i, p in enumerate(ranked):
        if decided is not None and not decided(p):
            return None
        if p.tokens is None:
            raise IndexOutOfStepError(f"record of parent {p.cluster_id!r} lacks {CLUSTER_TOKENS_KEY}; "
                                      "re-ingest its document")
        if i and total + p.tokens > budget:
            return ranked[:i]
        total += p.tokens
        if i == 0 and total > budget:
            return ranked[:1]  # at least one parent, even when it alone exceeds the budget
    return None


def parents_plan(collection: Any, query_vector: np.ndarray, settings: SearchSettings, *,
                 oversample: float = DEFAULT_OVERSAMPLE, lexical: LexicalQuery | None = None) -> Plan[list[SearchHit]]:
    """Top parents of ``collection`` for a unit query vector (see the module docstring), as a plan
    of reads (:mod:`hseg.retrieval.plans`): :func:`~hseg.retrieval.plans.run_one` answers it, and
    :func:`~hseg.retrieval.plans.run_many` answers many with shared round trips.

    Chroma cannot group by parent on a local or ``chroma run`` server (its ``GroupBy`` search is Chroma
    Cloud only), so the collapse happens here: ask Chroma for ``n`` nearest records, keep the first hit
    of every parent and, when fewer parents than needed were seen and Chroma returned a full page, ask
    again with at least twice ``n``. Records of the level a mode excludes, and records without ``hseg_*`` metadata
    (other writers sharing the collection), are skipped client-side; this keeps the argument below
    intact because skipping records never reorders the rest.

    Why this is exact with respect to Chroma's neighbours: Chroma returns records in decreasing
    similarity. A parent's first hit in that list is its best vector, so its score is final; and any
    parent not in the list has every vector below the last returned one, hence below every parent that
    was seen. The seen parents, in first-hit order, are therefore exactly the top parents.

    With ``lexical_weight`` λ > 0 a parent scores eq. 2's max cosine ``+ λ ·`` the best lexical score of
    its segments (the lexical analogue of eq. 2: its best unit), by the threshold algorithm of
    :func:`_hybrid_parents`, exact with respect to the kNN and the lexical index as this path is with
    respect to the kNN.

    ``settings.unit`` is not read: a parent is always a whole cluster here. ``lexical`` is the query's
    lexical side (``lexical_weight`` > 0: :func:`_hybrid_parents`), or ``None``.
    """
    if lexical is not None:
        return (yield from _hybrid_parents(collection, query_vector, settings, lexical, oversample))
    k, budget_tokens, mode = settings.effective_k, settings.budget_tokens, settings.mode
    where, where_document = settings.where, settings.where_document
    need = k if k is not None else DEFAULT_K
    n = max(1, math.ceil(oversample * need))
    server_levels = False
    while True:
        # levels are filtered client-side (_collapse) while the request is small: any Chroma
        # ``where`` costs a metadata scan of the collection, a few more results do not
        chroma_where = level_where(mode, where) if server_levels else (dict(where) if where else None)
        res = yield Knn(collection, np.asarray(query_vector, dtype=np.float32), n, chroma_where,
                        dict(where_document) if where_document else None, ("metadatas", "distances", "documents"))
        ids = res["ids"]
        parents = _collapse(ids, res["metadatas"], res["distances"], res["documents"], mode)
        # fewer records than asked for: Chroma has nothing more under this filter
        chosen = _select(parents, k, budget_tokens, exhausted=len(ids) < n)
        if chosen is not None:
            # parents whose cluster record was not in the result list need their text and
            # metadata: one get for all of them
            missing = [p.cluster_id for p in chosen if p.cluster_meta is None or p.cluster_doc is None]
            got = (yield Get(collection, tuple(missing), ("documents", "metadatas"))) if missing else None
            return _finish(chosen, got)
        grow = _widened(n, parents, k, budget_tokens)
        if not server_levels and mode != "segment+cluster" and grow > SERVER_LEVEL_FILTER_AT:
            server_levels = True  # past this size a scan is cheaper than fetching the other level
        logger.debug("search: %d parents in %d records, widening to %d", len(parents), len(ids), grow)
        n = grow


def _hybrid_parents(collection: Any, q: np.ndarray, settings: SearchSettings, lex: LexicalQuery,
                    oversample: float) -> Plan[list[SearchHit]]:
    """Parents ranked by eq. 2's max cosine ``+ λ ·`` the best lexical score of their segments.

    Fagin's threshold algorithm over two lists collapsed to parents the same way: the collection's
    kNN (a parent's first hit is its best vector) and the lexical index's best segments (a parent's
    first is its best segment). A dense parent gets its exact lex from the index. A lexical-only
    parent scores at most ``d_last + λ·`` its lex (its cosines are below the kNN's last): its
    vectors are read (all of them, in one ``get`` with the others') only where that bound could
    place it among the parents taken, which the parents scored exactly decide; the others' bounds
    join the bound on unseen parents, ``d_last + λ·lex_last``. Both lists double until the parents to
    return all score above those bounds (or nothing is unseen): exact with respect to what Chroma's
    kNN and the lexical index return. A parent scored once keeps its score for the rounds after.
    """
    k, budget, allowed = settings.effective_k, settings.budget_tokens, _LEVELS[settings.mode]
    where = dict(settings.where) if settings.where else None
    wdoc = dict(settings.where_document) if settings.where_document else None
    qv = np.asarray(q, dtype=np.float32)
    n = max(32, math.ceil(oversample * (k if k is not None else DEFAULT_K)))
    read: dict[str, _Parent] = {}  # lexical-only parents whose vectors were read, by cluster id
    asked: set[str] = set()  # ... and every one asked for (a parent whose records fail the filters has none)
    best_lex: dict[str, float] = {}  # a parent's best lexical score (exact once known)
    while True:
        res = yield Knn(collection, qv, n, where, wdoc, ("metadatas", "distances", "documents"))
        parents = {p.cluster_id: p for p in _collapse(res["ids"], res["metadatas"], res["distances"],
                                                      res["documents"], settings.mode)}
        floor_d = 1.0 - float(res["distances"][-1]) if len(res["ids"]) >= n else -np.inf
        page = yield from lex.page(n)
        rows = yield from lex.rows(page.ids)
        listed: dict[str, float] = {}
        for sid, x in zip(page.ids, page.scores.tolist()):
            if sid in rows:
                listed.setdefault(rows[sid].cluster_id, x)  # best first
        best_lex.update(listed)
        unknown = [c for c in parents if c not in best_lex]
        if unknown:
            members = yield from lex.cluster_segments(unknown)
            segs = [s for c in unknown for s in members[c]]
            score = dict(zip(segs, (yield from lex.scores(segs)).tolist()))
            for c in unknown:
                best_lex[c] = max((score[s] for s in members[c]), default=0.0)
        parents.update({c: p for c, p in read.items() if c not in parents})
        only_lexical = [c for c in listed if c not in parents and c not in asked]
        if only_lexical:
            fused = {c: lex.fused(p.score, best_lex[c]) for c, p in parents.items()}
            bar = _taking_bar(sorted(parents.values(), key=lambda p: -fused[p.cluster_id]), fused, k, budget)
            wanted = [c for c in only_lexical if lex.fused(floor_d, best_lex[c]) > bar]
            if wanted:
                members = yield from lex.cluster_segments(wanted)
                got = yield Get(collection, tuple(wanted + [s for c in wanted for s in members[c]]),
                                ("metadatas", "documents", "embeddings"), where, wdoc)
                scored = _scored_parents(got, qv, allowed)  # absent: its records fail the filters
                asked.update(wanted)
                read.update(scored)
                parents.update(scored)
        # a lexical-only parent not read scores at most its bound
        floor = max([lex.fused(floor_d, page.floor)]
                    + [lex.fused(floor_d, best_lex[c]) for c in listed if c not in parents and c not in asked])
        fused = {c: lex.fused(p.score, best_lex[c]) for c, p in parents.items()}
        ranked = sorted(parents.values(), key=lambda p: -fused[p.cluster_id])
        chosen = _select_above(ranked, fused, k, budget, floor)
        if chosen is not None:
            missing = [p.cluster_id for p in chosen if p.cluster_meta is None or p.cluster_doc is None]
            texts = (yield Get(collection, tuple(missing), ("documents", "metadatas"))) if missing else None
            hits = _finish(chosen, texts)
            for hit in hits:
                hit.score = lex.reported(fused[hit.cluster_id])
            return hits
        n *= 2


def _taking_bar(ranked: list[_Parent], fused: Mapping[str, float], k: int | None, budget: int | None) -> float:
    """The score a parent must beat to change which of ``ranked`` are taken: the ``k``-th's, or the
    one's that stops the budget (``-inf`` while ``ranked`` cannot fill them)."""
    if k is not None:
        return fused[ranked[k - 1].cluster_id] if len(ranked) >= k else -np.inf
    assert budget is not None
    total = 0
    for i, p in enumerate(ranked):
        if p.tokens is None:
            return -np.inf  # read below, where it is refused with the document to re-ingest
        if i and total + p.tokens > budget:
            return fused[p.cluster_id]
        total += p.tokens
        if i == 0 and total > budget:
            return fused[p.cluster_id]  # taken alone: only a parent above it changes that
    return -np.inf


def _scored_parents(got: Mapping[str, Any], q: np.ndarray, allowed: tuple[str, ...]) -> dict[str, _Parent]:
    """Parents from all of their records (cluster and segments): the max cosine of the levels allowed."""
    e = np.asarray(got.get("embeddings") if got.get("embeddings") is not None else [], dtype=np.float64)
    sims = (e @ q.astype(np.float64)) / np.maximum(np.linalg.norm(e, axis=1), 1e-12) if len(e) else []
    out: dict[str, _Parent] = {}
    clusters: dict[str, tuple[dict[str, Any], str]] = {}
    for rid, meta, doc, sim in zip(got["ids"], got["metadatas"], got["documents"], sims):
        meta = dict(meta or {})
        level = level_of(meta)
        if level is None:
            continue
        cid = meta[CLUSTER_ID_KEY]
        if level == CLUSTER:
            clusters[cid] = (meta, doc)
        if level not in allowed:
            continue
        p = out.get(cid)
        if p is None or float(sim) > p.score:
            best = _first_hit(cid, float(sim), rid, level, meta)
            if p is not None:
                best.segment_scores = p.segment_scores
            out[cid] = p = best
        if level == SEGMENT:
            p.segment_scores[rid] = float(sim)
    for cid, p in out.items():
        if cid in clusters:
            p.cluster_meta, p.cluster_doc = clusters[cid]
            p.tokens = int(clusters[cid][0][TOKENS_KEY])
    return out


def _select_above(ranked: list[_Parent], fused: Mapping[str, float], k: int | None, budget: int | None,
                  floor: float) -> list[_Parent] | None:
    """:func:`_select` over parents ranked by ``fused``, decided only when every parent taken (and the
    one that stops a budget) scores above ``floor``, the bound on every unseen parent."""
    if k is not None:
        top = ranked[:k]
        if floor == -np.inf or (len(top) == k and fused[top[-1].cluster_id] > floor):
            return top
        return None
    assert budget is not None
    # a parent at or below the floor is undecided: an unseen parent may rank there
    cut = _budget_cut(ranked, budget, None if floor == -np.inf else lambda p: fused[p.cluster_id] > floor)
    if cut is not None:
        return cut
    return ranked if floor == -np.inf else None


def _widened(n: int, parents: list[_Parent], k: int | None, budget: int | None) -> int:
    """The next request size: at least double, and aimed at what is still missing from the rate
    seen so far (parents per record for ``k``, parent tokens per record for a budget), with half
    again as margin: one more round trip costs more than a few extra results. At most 8x, so a
    skewed first page cannot ask for the whole collection."""
    grow = 2 * n
    if k is not None and parents:
        grow = max(grow, min(8 * n, -(-3 * n * k // (2 * len(parents)))))
    elif budget is not None:
        seen = sum(p.tokens or 0 for p in parents)
        if seen > 0:
            grow = max(grow, min(8 * n, -(-3 * n * budget // (2 * seen))))
    return grow


def _finish(chosen: list[_Parent], got: Mapping[str, list[Any]] | None) -> list[SearchHit]:
    """The hits of the chosen parents; ``got`` holds the cluster records the kNN did not return."""
    if got is not None:
        found = {rid: (meta, doc) for rid, meta, doc in zip(got["ids"], got["metadatas"], got["documents"])}
        for p in chosen:
            if p.cluster_meta is None or p.cluster_doc is None:
                if p.cluster_id not in found:
                    raise IndexOutOfStepError(
                        f"cluster record {p.cluster_id!r} is missing from the collection although its segments "
                        "are there; re-ingest its document"
                    )
                meta, doc = found[p.cluster_id]
                p.cluster_meta, p.cluster_doc = dict(meta or {}), doc
    hits = []
    for p in chosen:
        meta = p.cluster_meta or {}
        cluster = ClusterMeta.of(meta)
        hits.append(
            SearchHit(
                cluster_id=p.cluster_id,
                doc_id=cluster.doc_id,
                text=p.cluster_doc or "",
                start=cluster.start,
                end=cluster.end,
                score=p.score,
                token_count=cluster.tokens,
                matched_id=p.matched_id,
                matched_level=p.matched_level,
                matched_start=p.matched_start,
                matched_end=p.matched_end,
                metadata=meta,
                segment_scores=dict(p.segment_scores),
                heading_path=cluster.heading_path,
                pages=cluster.pages,
            )
        )
    return hits
