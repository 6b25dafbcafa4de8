"""``unit="auto"`` on the unit index (:mod:`hseg.retrieval.unit_vectors`), dense and with the lexical
score: one kNN of ids and distances gives segments in fused-score order with what the walk needs in
their ids; the passages' records are then read from the lexical table or the collection."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hseg.chunking.schema import ClusterMeta, SegmentMeta
from hseg.errors import IndexOutOfStepError
from hseg.retrieval.continuation import Continuation
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.lexical_query import LexicalQuery
from hseg.retrieval.passages.assemble import Member, Records, passage, whole_cluster
from hseg.retrieval.passages.candidates import bounded_walk, cosines, first_page
from hseg.retrieval.plans import Get, Knn, Plan, records
from hseg.retrieval.selection import ClusterSize, Selection, merge_runs, walk
from hseg.retrieval.settings import SearchSettings
from hseg.retrieval.unit_vectors import UnitKey, fused_scale, query_vector


def search_indexed(collection: Any, index: Any, q: np.ndarray, settings: SearchSettings) -> Plan[list[SearchHit]]:
    """Dense ``unit="auto"`` on the unit index built with the settings' cluster and neighbour weights:
    the kNN's distances are the fused scores, so the walk runs on them; only what it took is read."""
    k, budget, where = settings.effective_k, settings.budget_tokens, settings.where
    scale = fused_scale(settings.cluster_weight, settings.neighbour_weight)
    qq = query_vector(q)
    # a page of ids and distances costs about the same up to a few hundred records (metadata
    # would cost per record), so the first page is deep: 32 tokens a segment, a quarter of the usual
    n = first_page(k, budget, 32, 16)
    while True:
        res = yield Knn(index, qq, n, dict(where) if where else None)
        ids = res["ids"]
        keys = [UnitKey.parse(i) for i in ids]
        score = scale * (1.0 - np.asarray(res["distances"], dtype=np.float64))
        floor = float(score[-1]) if len(ids) >= n else -np.inf
        sizes = {key.cluster_id: ClusterSize(key.cluster_segments, key.cluster_tokens) for key in keys}
        sel = walk(score, [key.cluster_id for key in keys], [key.tokens for key in keys], sizes, budget,
                   max_units=k if budget is None else None, floor=floor,
                   whole_cluster_min=settings.whole_cluster_min, whole_cluster_share=settings.whole_cluster_share)
        if sel is not None:
            runs, fused = _indexed_runs(keys, score, sel), score / scale
            wanted = _to_read(keys, fused, runs)
            got = (yield Get(collection, tuple(wanted))) if wanted else {"ids": []}
            return _indexed_passages(keys, fused, runs, wanted, records(got))
        n *= 2


def _indexed_runs(keys: list[UnitKey], score: np.ndarray, sel: Selection) -> list[tuple[list[int], bool]]:
    """The passages of a walk on the unit index, in rank order: each one's candidates (in document
    order) and whether it is their cluster taken whole (one passage, however its scored segments lie)."""
    whole = {c for _, c in sel.expanded}
    out: list[tuple[list[int], bool]] = []
    merged: set[str] = set()
    for run in merge_runs([(key.cluster_id, key.position) for key in keys], sel.taken, score):
        cid = keys[run[0]].cluster_id
        if cid in whole:
            if cid in merged:
                continue
            merged.add(cid)
            run = sorted((i for i in sel.taken if keys[i].cluster_id == cid), key=lambda i: keys[i].position)
        out.append((run, cid in whole))
    return out


def _indexed_passages(keys: list[UnitKey], score: np.ndarray, runs: list[tuple[list[int], bool]], wanted: list[str],
                      found: Mapping[str, tuple[dict[str, Any], str]],
                      joined: Mapping[str, tuple[ClusterMeta, str]] | None = None) -> list[SearchHit]:
    """The hits of a walk's ``runs`` (:func:`_indexed_runs`) from the records ``found``
    (``{id: (metadata, text)}``; ``wanted``: the ids that must be among them), a cluster taken whole
    from ``joined`` (made of its segments' records: :func:`_from_table`) when given, else from its record."""
    missing = [rid for rid in wanted if rid not in found and (joined is None or rid not in joined)]
    if missing:
        raise IndexOutOfStepError(f"the unit index lists records the collection lacks ({missing[:3]}...); add their "
                                  "documents again, or rebuild the index with HierarchicalStore.sync_unit_index()")
    hits: list[SearchHit] = []
    for run, whole in runs:
        if whole:
            b = _best(run, score)
            best = Member(keys[b].segment_id, *found[keys[b].segment_id], float(score[b]))
            scores = {keys[i].segment_id: float(score[i]) for i in run}
            cid = keys[b].cluster_id
            if joined is not None:
                cluster, text = joined[cid]
            else:
                cluster, text = ClusterMeta.of(found[cid][0]), found[cid][1]
            hits.append(whole_cluster(best, scores, cluster, text, keys[b].cluster_tokens))
        else:
            hits.append(passage([Member(keys[i].segment_id, *found[keys[i].segment_id], float(score[i]))
                                  for i in run], "auto"))
    return hits


def _to_read(keys: list[UnitKey], score: np.ndarray, runs: list[tuple[list[int], bool]]) -> list[str]:
    """The records the hits of a walk's ``runs`` are made of: each segment of a run, and for a cluster
    taken whole its record and its best segment (whose metadata its hit carries): a ``get`` costs per
    record, and the cluster's text is its record's."""
    out: list[str] = []
    for run, whole in runs:
        out += [keys[_best(run, score)].segment_id, keys[run[0]].cluster_id] if whole else \
            [keys[i].segment_id for i in run]
    return out


def _best(run: list[int], score: np.ndarray) -> int:
    """The candidate of ``run`` with the best score, the first of equals (as :func:`max` takes them)."""
    return max(run, key=lambda i: float(score[i]))


def _read_ahead(rest: Continuation, keys: list[UnitKey], score: np.ndarray, runs: list[tuple[list[int], bool]],
                listed: Mapping[str, list[str]]) -> Plan[list[str]]:
    """What rules 5a, 5 and 6 will read after the passages of a walk's ``runs`` (:meth:`Continuation.ahead`):
    their segments and sizes from the keys, a whole cluster's segments as the lexical table ``listed``
    them (:func:`_listed_wholes`)."""
    passages = []
    for run, whole in runs:
        key = keys[run[0]]
        best = float(score[_best(run, score)])  # the score its hit will carry
        passages.append((listed[key.cluster_id], key.cluster_tokens, key.cluster_id, best) if whole else
                        ([keys[i].segment_id for i in run], sum(keys[i].tokens for i in run), key.cluster_id, best))
    return (yield from rest.ahead(passages))


def hybrid_indexed(collection: Any, index: Any, q: np.ndarray, settings: SearchSettings, lex: LexicalQuery,
                   rest: Continuation | None = None) -> Plan[list[SearchHit]]:
    """``unit="auto"`` with the lexical score, on the unit index: dense = the fused cosine
    ``fused / (1 + w + v)``, read from the kNN's distances or, for a lexical candidate, from its unit vector.
    The passages' records are read from the lexical table (:func:`_from_table`), and with ``rest``
    (rules 5 and 6 to follow) and no filter, the records the rules will use with them (a filter
    would apply to those and not to these).

    While the walk is undecided the lists deepen (:func:`_deepen`), each only where it holds the
    bound on unseen segments up; a candidate's vector read in one round is not read again, and
    the kNN is asked again only when it deepens."""
    k, budget = settings.effective_k, settings.budget_tokens
    qq = query_vector(q)
    where = dict(settings.where) if settings.where else None
    n_knn = n_lex = first_page(k, budget, 32, 16)
    res: Any = None
    asked_at = 0
    resolved: dict[str, tuple[UnitKey, float]] = {}  # lexical-only candidates whose vectors were read
    asked: set[str] = set()  # ... and every one asked for (one failing the filter has no vector)
    while True:
        if asked_at != n_knn:
            res, asked_at = (yield Knn(index, qq, n_knn, where)), n_knn
        keys: dict[str, UnitKey] = {}
        known: dict[str, float] = {}
        for uid, dist in zip(res["ids"], res["distances"]):
            key = UnitKey.parse(uid)
            keys[key.segment_id], known[key.segment_id] = key, 1.0 - float(dist)
        top_d = 1.0 - float(res["distances"][0]) if res["ids"] else -np.inf
        floor_d = 1.0 - float(res["distances"][-1]) if len(res["ids"]) >= n_knn else -np.inf
        for sid, (key, cos) in resolved.items():
            if sid not in known:
                keys[sid], known[sid] = key, cos
        page = yield from lex.page(n_lex)
        lexical = dict(zip(page.ids, page.scores.tolist()))
        for sid, x in zip(list(known), (yield from lex.scores(list(known))).tolist()):
            known[sid] = lex.fused(known[sid], x)
        bounds = {sid: lex.fused(floor_d, x) for sid, x in lexical.items() if sid not in known and sid not in asked}
        floor = lex.fused(floor_d, page.floor)

        def walk_of(scores: dict[str, float], at: float, keys: dict[str, UnitKey] = keys) -> Selection | None:
            order = [keys[sid] for sid in scores]
            sizes = {key.cluster_id: ClusterSize(key.cluster_segments, key.cluster_tokens) for key in order}
            return walk(np.array(list(scores.values())), [key.cluster_id for key in order],
                        [key.tokens for key in order], sizes, budget, max_units=k if budget is None else None,
                        floor=at, whole_cluster_min=settings.whole_cluster_min,
                        whole_cluster_share=settings.whole_cluster_share)

        while True:  # the bounded walk; then every candidate that may matter is read (once)
            sel, wanted = bounded_walk(known, bounds, floor, walk_of, lambda sid, keys=keys: keys[sid].cluster_id)
            if sel is not None or not wanted:
                break
            rows = yield from lex.rows(wanted)
            units = yield from lex.unit_keys([rows[s] for s in wanted if s in rows])
            # filtered by the where as the kNN was: a lexical candidate absent from the answer fails it
            got = yield Get(index, tuple(key.encode() for key in units), ("embeddings",), where)
            for uid, cos in zip(got["ids"], cosines(qq, got["embeddings"])):
                key = UnitKey.parse(uid)
                resolved[key.segment_id] = key, float(cos)
                keys[key.segment_id] = key
                known[key.segment_id] = lex.fused(float(cos), lexical[key.segment_id])
            asked.update(wanted)
            for sid in wanted:
                bounds.pop(sid, None)
        if sel is not None:
            order = [keys[sid] for sid in known]
            score = lex.reported(np.array(list(known.values())))
            runs = _indexed_runs(order, score, sel)
            taken = _to_read(order, score, runs)
            listed = yield from _listed_wholes(lex, order, runs)
            ahead = (yield from _read_ahead(rest, order, score, runs, listed)) \
                if rest is not None and where is None else []
            table: tuple[Records, dict[str, tuple[ClusterMeta, str]]] | None = ({}, {})
            if taken:
                from_table = yield from lex.records([*_needed(order, runs, listed), *ahead])
                table = _from_table(order, runs, listed, from_table)
            if table is None:  # the table does not hold them as the kNN's keys say: a write in flight
                found, joined = records((yield Get(collection, tuple(taken + ahead)))), None
            else:
                found, joined = table
            if ahead and rest is not None:
                rest.remember([sid for sid in ahead if sid in found], found)
            return _indexed_passages(order, score, runs, taken, found, joined)
        n_knn, n_lex = _deepen(n_knn, n_lex, top_d, floor_d, page.floor, lex.weight)


def _deepen(n_knn: int, n_lex: int, top_d: float, floor_d: float, lex_floor: float, weight: float) -> tuple[int, int]:
    """The depths of the kNN and of the lexical page for the next round of an undecided walk.

    Segments in neither list score at most ``floor_d + λ·lex_floor``; deepening a list can only
    lower its part. A list that holds everything (the kNN: ``floor_d`` is ``-inf``; the lexical
    page: no match past it, ``lex_floor`` 0) stays. Of two lists that can deepen, only the lexical
    page does while its floor has fallen less from its top (1) than the kNN's from its own, on the
    fused scale: the segments tied at the top of a rare word (copies of one text, or a word a whole
    book repeats) then cost reads of a local table, not a kNN asked again. Any depths are exact: the
    bounds hold whatever each list holds."""
    knn_left, lex_left = floor_d > -np.inf, lex_floor > 0.0
    if lex_left and (not knn_left or weight * (1.0 - lex_floor) < top_d - floor_d):
        return n_knn, 2 * n_lex
    if not knn_left and not lex_left:  # nothing is left unseen: the walk decides, whatever the depths
        return 2 * n_knn, 2 * n_lex
    return (2 * n_knn if knn_left else n_knn), (2 * n_lex if lex_left else n_lex)


def _listed_wholes(lex: LexicalQuery, keys: list[UnitKey], runs: list[tuple[list[int], bool]]
                   ) -> Plan[dict[str, list[str]]]:
    """``{cluster id: its segment ids in document order}`` for the clusters a walk's ``runs`` take
    whole, from the lexical table (read once for the rules' read ahead and the passages' read)."""
    return (yield from lex.cluster_segments(keys[run[0]].cluster_id for run, is_whole in runs if is_whole))


def _needed(keys: list[UnitKey], runs: list[tuple[list[int], bool]], listed: Mapping[str, list[str]]) -> list[str]:
    """The segments a walk's passages are made of: each run's, and every segment of a cluster taken
    whole (``listed``: :func:`_listed_wholes`)."""
    return [*(keys[i].segment_id for run, is_whole in runs if not is_whole for i in run),
            *(sid for run, is_whole in runs if is_whole for sid in listed[keys[run[0]].cluster_id])]


def _from_table(keys: list[UnitKey], runs: list[tuple[list[int], bool]], listed: Mapping[str, list[str]],
                found: Records) -> tuple[Records, dict[str, tuple[ClusterMeta, str]]] | None:
    """The records of a walk's passages (and of what rules 5 and 6 read ahead) as the lexical table
    gave them (``found``, :meth:`~hseg.store.lexical.LexicalIndex.records` of :func:`_needed` and the
    read ahead): ``{id: (metadata, text)}``, and the clusters taken whole, each made of its segments'
    records; or ``None`` when the table does not hold a passage's segment as the walk's key says (it
    lags a write in flight), and the caller reads the collection instead.

    A ``get`` of a budget's records costs about as much as a plain top-5 query; the table answers
    for much less (``benchmarks/RESULTS.md``). A cluster taken whole is read as all of its
    segments (``listed``: :func:`_listed_wholes`), its view made of theirs (:func:`_joined`),
    checked against the cluster's size in the walk's key."""
    whole = [keys[run[0]] for run, is_whole in runs if is_whole]
    segments = [keys[i] for run, is_whole in runs if not is_whole for i in run]
    for key in segments:
        got = found.get(key.segment_id)
        view = None if got is None else SegmentMeta.read(got[0])
        if view is None or view.cluster_id != key.cluster_id or view.tokens != key.tokens:
            return None
    joined: dict[str, tuple[ClusterMeta, str]] = {}
    for key in whole:
        cluster = _joined(key, listed[key.cluster_id], found)
        if cluster is None:
            return None
        joined[key.cluster_id] = cluster
    return found, joined


def _joined(key: UnitKey, segment_ids: list[str],
            found: Mapping[str, tuple[dict[str, Any], str]]) -> tuple[ClusterMeta, str] | None:
    """The view and text of ``key``'s cluster made of its segments' records (``None`` unless they are
    all in ``found``, of that cluster, as many and as long as ``key`` says, and tile it)."""
    members = [found.get(sid) for sid in segment_ids]
    if len(members) != key.cluster_segments or any(m is None for m in members):
        return None
    views = [SegmentMeta.read(m[0]) for m in members if m is not None]
    texts = [m[1] for m in members if m is not None]
    if any(v is None for v in views):
        return None
    cluster = ClusterMeta.joined(key.cluster_id, [(sid, v) for sid, v in zip(segment_ids, views) if v is not None])
    if cluster is None or cluster.tokens != key.cluster_tokens:
        return None
    return cluster, "".join(texts)
