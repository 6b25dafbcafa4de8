"""``unit="segment"`` and ``unit="auto"`` searches on Chroma: candidates, the walk, passages.

Three read paths, each exact with respect to the neighbours Chroma returns (the walk of
:func:`hseg.retrieval.selection.walk` stops only once every segment not fetched scores below what it took):

* ``unit="auto"`` on a store with a unit index (:mod:`hseg.retrieval.unit_vectors`): one kNN on the index,
  asking for distances only, returns segments in fused-score order with what the walk needs in
  their ids; one ``get`` on the collection then reads the texts of what was taken. A second kNN
  (twice as deep) runs only when the first page ends before the budget is spent.
* ``unit="segment"``: one kNN of ids and distances on the collection itself, then its records read
  in rank order, a slice at a time (usually one ``get``), until the walk is decided. Levels are told
  apart client-side: a Chroma ``where`` on the level costs a metadata scan (~350 ms on 100k records).
* ``unit="auto"`` without a usable index (other weights than the index's, a ``where_document``
  filter, a collection written by another tool): the fused score is assembled from gathered
  segments, clusters and neighbours (several round trips; kept for these cases).

With ``lexical_weight`` λ > 0 each path adds ``λ · lex(s)`` to a segment's dense score on the cosine
scale (``lex``: BM25 divided by the query's best, :class:`~hseg.retrieval.lexical_query.LexicalQuery`)
and takes the lexical index's best segments as candidates beside the kNN's (Fagin's threshold
algorithm, "the lexical score" below): exact with respect to what the kNN and the lexical index
return, as the dense paths are with respect to the kNN. Approximate only where they are: the kNN
is HNSW's, and a lexical index that lags a write in flight scores that write's segments by their
previous text (or 0). With λ = 0 none of it runs: the three paths above, unchanged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hseg.chunking.chunks import is_cluster_id
from hseg.chunking.records import HEADING_PATH_KEY, encode_heading_path, heading_path, listed_segment_ids
from hseg.retrieval.continuation import Continuation, continued
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.lexical_query import LexicalQuery, LexicalRow, LexicalSource
from hseg.retrieval.plans import Get, Knn, Plan, records
from hseg.retrieval.selection import (
    DEFAULT_WHOLE_CLUSTER_MIN,
    ClusterSize,
    Selection,
    UnitCandidates,
    merge_runs,
    merge_runs_of_segments,
    select_auto,
    walk,
)
from hseg.retrieval.settings import SearchSettings
from hseg.retrieval.unit_vectors import UnitKey, fused_scale, query_vector
from hseg.text.structure import common_prefix

__all__ = ["units_plan"]


def units_plan(collection: Any, query_vector: np.ndarray, settings: SearchSettings, *,
               unit_index: Any = None, lexical: LexicalQuery | None = None,
               table: LexicalSource | None = None) -> Plan[list[SearchHit]]:
    """Passages for ``unit="auto"`` (fused scores) or ``unit="segment"`` (segment scores alone), as
    a plan of reads (:mod:`hseg.retrieval.plans`), on every path.

    ``unit_index`` is the companion collection of :mod:`hseg.retrieval.unit_vectors`, built with these weights,
    or ``None``. ``lexical`` is the query's lexical side (``lexical_weight`` > 0),
    or ``None``: the dense paths above, untouched. ``table`` is the lexical index of a search with a
    lexical side (even one whose query has no words to look up): with it, ``unit="auto"`` spends the
    rest of a budget on the segments after its passages and the first sentences of the next (rules 5
    and 6 of :mod:`hseg.retrieval.selection`, read as :mod:`hseg.retrieval.continuation` says).
    """
    rest = None
    if table is not None and settings.resolved_unit == "auto" and settings.budget_tokens is not None:
        rest = Continuation(table, settings.budget_tokens)
    hits = yield from _passages(collection, query_vector, settings, unit_index, lexical, rest)
    if rest is not None:
        hits = yield from continued(collection, hits, rest, settings.where, settings.where_document)
    return hits


def _passages(collection: Any, query_vector: np.ndarray, settings: SearchSettings, unit_index: Any,
              lexical: LexicalQuery | None, rest: Continuation | None = None) -> Plan[list[SearchHit]]:
    k, budget_tokens, where, where_document = (settings.effective_k, settings.budget_tokens, settings.where,
                                               settings.where_document)
    unit, cluster_weight, neighbour_weight = settings.resolved_unit, settings.cluster_weight, settings.neighbour_weight
    if lexical is not None:
        if unit == "segment":
            return (yield from _hybrid_segments(collection, query_vector, k, budget_tokens, where, where_document,
                                                lexical))
        if unit_index is not None and not where_document:
            return (yield from _hybrid_indexed(collection, unit_index, query_vector, k, budget_tokens, where,
                                               cluster_weight, neighbour_weight, lexical, rest))
        return (yield from _search_gathered(collection, query_vector, k, budget_tokens, where, where_document,
                                            cluster_weight, neighbour_weight, lexical))
    if unit == "segment":
        return (yield from _search_segments(collection, query_vector, k, budget_tokens, where, where_document))
    if unit_index is not None and not where_document:
        return (yield from _search_indexed(collection, unit_index, query_vector, k, budget_tokens, where,
                                           cluster_weight, neighbour_weight))
    return (yield from _search_gathered(collection, query_vector, k, budget_tokens, where, where_document,
                                        cluster_weight, neighbour_weight))


#: records read, by id: ``(metadata, text)`` (what :func:`hseg.retrieval.plans.records` gives)
_Records = dict[str, tuple[dict[str, Any], str]]


@dataclass
class _Member:
    """A taken segment: its record and its ranking score on the cosine scale."""

    id: str
    meta: dict[str, Any]
    text: str
    score: float


def _passage(members: list[_Member], unit: str) -> SearchHit:
    """One hit from segments adjacent in one cluster, in document order."""
    first, last = members[0].meta, members[-1].meta
    return _hit(max(members, key=lambda m: m.score), {m.id: m.score for m in members}, unit,
                text="".join(m.text for m in members),  # segments tile their document, so this is exact
                span=(int(first["hseg_start"]), int(last["hseg_end"])),
                tokens=sum(int(m.meta["hseg_tokens"]) for m in members),
                segment_ids=[m.id for m in members],
                path=common_prefix(heading_path(m.meta) for m in members))


def _whole_cluster(best: _Member, scores: dict[str, float], cluster: tuple[dict[str, Any], str],
                   tokens: int) -> SearchHit:
    """One ``unit="auto"`` hit from a cluster taken whole (``cluster``: its record's metadata and
    text), of which ``scores`` are the segments scored and ``best`` the best of them."""
    meta, text = cluster
    return _hit(best, scores, "auto", text=text, span=(int(meta["hseg_start"]), int(meta["hseg_end"])),
                tokens=tokens, segment_ids=listed_segment_ids(meta), path=heading_path(meta))


def _hit(best: _Member, scores: dict[str, float], unit: str, *, text: str, span: tuple[int, int], tokens: int,
         segment_ids: list[str], path: tuple[str, ...]) -> SearchHit:
    """A passage's hit: its text and span, scored and matched by its ``best`` segment."""
    return SearchHit(
        cluster_id=str(best.meta["hseg_cluster_id"]),
        doc_id=str(best.meta["hseg_doc_id"]),
        text=text,
        start=span[0],
        end=span[1],
        score=best.score,
        token_count=tokens,
        matched_id=best.id,
        matched_level="segment",
        matched_start=int(best.meta["hseg_start"]),
        matched_end=int(best.meta["hseg_end"]),
        metadata=dict(best.meta),
        segment_scores=scores,
        unit=unit,
        segment_ids=segment_ids,
        heading_path=path,
    )


# --------------------------------------------------------------------------- unit="auto" on the index


def _first_page(k: int | None, budget_tokens: int | None, per_segment: int, least: int) -> int:
    """Records asked for first: enough for ``k`` segments, or for the budget at ``per_segment``
    tokens a segment (smaller than the usual segment, so one page nearly always suffices)."""
    if budget_tokens is not None:
        return budget_tokens // per_segment + least
    if k is None:
        raise ValueError("give k or budget_tokens")
    return max(least, 2 * k + least // 2)


def _search_indexed(collection: Any, index: Any, q: np.ndarray, k: int | None, budget: int | None,
                    where: Mapping[str, Any] | None, w: float, v: float) -> Plan[list[SearchHit]]:
    scale = fused_scale(w, v)
    qq = query_vector(q)
    # a page of ids and distances costs about the same up to a few hundred records (metadata
    # would cost per record), so the first page is deep: 32 tokens a segment, a quarter of the usual
    n = _first_page(k, budget, 32, 16)
    while True:
        res = yield Knn(index, qq, n, dict(where) if where else None)
        ids = res["ids"]
        keys = [UnitKey.parse(i) for i in ids]
        score = scale * (1.0 - np.asarray(res["distances"], dtype=np.float64))
        floor = float(score[-1]) if len(ids) >= n else -np.inf
        sizes = {key.cluster_id: ClusterSize(key.cluster_segments, key.cluster_tokens) for key in keys}
        sel = walk(score, [key.cluster_id for key in keys], [key.tokens for key in keys], sizes, budget,
                   max_units=k if budget is None else None, floor=floor)
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
                      found: Mapping[str, tuple[dict[str, Any], str]]) -> list[SearchHit]:
    """The hits of a walk's ``runs`` (:func:`_indexed_runs`) from the records ``found``
    (``{id: (metadata, text)}``; ``wanted``: the ids that must be among them)."""
    missing = [rid for rid in wanted if rid not in found]
    if missing:
        raise LookupError(f"the unit index lists records the collection lacks ({missing[:3]}...); add their documents "
                          "again, or rebuild the index with HierarchicalStore.sync_unit_index()")
    hits: list[SearchHit] = []
    for run, whole in runs:
        if whole:
            b = _best(run, score)
            best = _Member(keys[b].segment_id, *found[keys[b].segment_id], float(score[b]))
            scores = {keys[i].segment_id: float(score[i]) for i in run}
            hits.append(_whole_cluster(best, scores, found[keys[b].cluster_id], keys[b].cluster_tokens))
        else:
            hits.append(_passage([_Member(keys[i].segment_id, *found[keys[i].segment_id], float(score[i]))
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


def _read_ahead(rest: Continuation, keys: list[UnitKey], runs: list[tuple[list[int], bool]],
                listed: Mapping[str, list[str]]) -> list[str]:
    """What rules 5 and 6 will read after the passages of a walk's ``runs`` (:meth:`Continuation.ahead`):
    their segments and sizes from the keys, a whole cluster's segments as the lexical table ``listed``
    them (:func:`_listed_wholes`)."""
    return rest.ahead([(listed[keys[run[0]].cluster_id], keys[run[0]].cluster_tokens) if whole else
                       ([keys[i].segment_id for i in run], sum(keys[i].tokens for i in run)) for run, whole in runs])


# --------------------------------------------------------------------------- the lexical score (lexical_weight > 0)
# Both hybrid paths below run Fagin's threshold algorithm over two ranked lists: a kNN (dense order)
# and the lexical index's best segments (lex order). A kNN candidate gets its exact lex from the
# index (local); a lexical-only candidate's dense score is at most the kNN's last, so it enters with
# the bound d_last + λ·lex until its vector is read; a segment in neither list scores at most
# d_last + λ·lex_last (0 past the last match). The walk's floor is the largest bound not yet
# resolved, so it decides only when nothing unresolved can rank where it looked: the answer is
# exact with respect to what Chroma's kNN (approximate, HNSW) and the lexical index return.
# A get costs per record (~0.02 ms a vector, ~0.065 ms a text and its metadata at 40k records), so
# the vectors of lexical-only candidates are read only when the walk cannot decide without them, and
# then only those whose bound beats the point where the known candidates stop (_bounded_walk);
# both lists double while it is still undecided.


def _stop_score(score: np.ndarray, cluster: list[str], sel: Selection) -> float:
    """The score of the first candidate a walk over all candidates left (not taken, not in a cluster
    taken whole): no candidate scoring below it can change that walk (``-inf`` when it took everything)."""
    taken, whole = set(sel.taken), {c for _, c in sel.expanded}
    for i in np.argsort(-score, kind="stable"):
        if int(i) not in taken and cluster[i] not in whole:
            return float(score[i])
    return -np.inf


def _bounded_walk(known: dict[str, float], bounds: dict[str, float], floor: float, walk_of: Any,
                  cluster_of: Any) -> tuple[Selection | None, list[str]]:
    """The walk over the ``known`` scores, decided only if neither ``floor`` nor any ``bounds`` entry
    (an unresolved candidate's upper bound) reaches where it looked; else the candidates to resolve.

    A get costs per record (~0.02 ms a vector at 40k records), so only the candidates whose bound
    beats the stop point of the known candidates alone are asked for: adding candidates can only
    make a walk stop at a higher score. The walk's own check makes it exact whatever that rule
    misses (the whole-cluster rule can break it): it stays undecided, and what is left above
    ``floor`` is read. Nothing is read when ``floor`` itself blocks: the lists must deepen."""
    sel = walk_of(known, max([floor, *bounds.values()]))
    if sel is not None:
        return sel, []
    free = walk_of(known, -np.inf)
    order = list(known)
    stop = _stop_score(np.array([known[s] for s in order]), [cluster_of(s) for s in order], free) \
        if order else -np.inf
    wanted = [sid for sid, ub in bounds.items() if ub > max(stop, floor)]
    if not wanted and walk_of(known, floor) is None:
        return None, []  # the unseen bound blocks: deepen
    return None, wanted or [sid for sid, ub in bounds.items() if ub > floor]


def _hybrid_indexed(collection: Any, index: Any, q: np.ndarray, k: int | None, budget: int | None,
                    where: Mapping[str, Any] | None, w: float, v: float, lex: LexicalQuery,
                    rest: Continuation | None = None) -> Plan[list[SearchHit]]:
    """``unit="auto"`` with the lexical score, on the unit index: dense = the fused cosine
    ``fused / (1 + w + v)``, read from the kNN's distances or, for a lexical candidate, from its unit vector.
    The passages' records are read from the lexical table (:func:`_from_table`), and with ``rest``
    (rules 5 and 6 to follow) and no filter, the records the rules will use with them (a filter
    would apply to those and not to these)."""
    qq = query_vector(q)
    where = dict(where) if where else None
    n = _first_page(k, budget, 32, 16)
    while True:
        res = yield Knn(index, qq, n, where)
        keys: dict[str, UnitKey] = {}
        known: dict[str, float] = {}
        for uid, dist in zip(res["ids"], res["distances"]):
            key = UnitKey.parse(uid)
            keys[key.segment_id], known[key.segment_id] = key, 1.0 - float(dist)
        floor_d = 1.0 - float(res["distances"][-1]) if len(res["ids"]) >= n else -np.inf
        page = lex.page(n)
        lexical = dict(zip(page.ids, page.scores.tolist()))
        for sid, x in zip(list(known), lex.scores(list(known)).tolist()):
            known[sid] += lex.weight * x
        bounds = {sid: floor_d + lex.weight * x for sid, x in lexical.items() if sid not in known}
        floor = floor_d + lex.weight * page.floor

        def walk_of(scores: dict[str, float], at: float, keys: dict[str, UnitKey] = keys) -> Selection | None:
            order = [keys[sid] for sid in scores]
            sizes = {key.cluster_id: ClusterSize(key.cluster_segments, key.cluster_tokens) for key in order}
            return walk(np.array(list(scores.values())), [key.cluster_id for key in order],
                        [key.tokens for key in order], sizes, budget, max_units=k if budget is None else None,
                        floor=at)

        while True:  # the bounded walk; then every candidate that may matter is read (once)
            sel, wanted = _bounded_walk(known, bounds, floor, walk_of, lambda sid, keys=keys: keys[sid].cluster_id)
            if sel is not None or not wanted:
                break
            rows = lex.rows(wanted)
            # filtered by the where as the kNN was: a lexical candidate absent from the answer fails it
            got = yield Get(index, tuple(key.encode() for key in lex.unit_keys([rows[s] for s in wanted if s in rows])),
                            ("embeddings",), where)
            for uid, cos in zip(got["ids"], _cosines(qq, got["embeddings"])):
                key = UnitKey.parse(uid)
                keys[key.segment_id] = key
                known[key.segment_id] = float(cos) + lex.weight * lexical[key.segment_id]
            for sid in wanted:
                bounds.pop(sid, None)
        if sel is not None:
            order = [keys[sid] for sid in known]
            score = np.array(list(known.values())) / (1.0 + lex.weight)
            runs = _indexed_runs(order, score, sel)
            taken = _to_read(order, score, runs)
            listed = _listed_wholes(lex, order, runs)
            ahead = _read_ahead(rest, order, runs, listed) if rest is not None and where is None else []
            found = _from_table(lex, order, runs, ahead, listed) if taken else {}
            if found is None:  # the table does not hold them as the kNN's keys say: a write in flight
                found = records((yield Get(collection, tuple(taken + ahead))))
            if ahead and rest is not None:
                rest.remember([sid for sid in ahead if sid in found], found)
            return _indexed_passages(order, score, runs, taken, found)
        n *= 2


def _listed_wholes(lex: LexicalQuery, keys: list[UnitKey], runs: list[tuple[list[int], bool]]) -> dict[str, list[str]]:
    """``{cluster id: its segment ids in document order}`` for the clusters a walk's ``runs`` take
    whole, from the lexical table (read once for the rules' read ahead and the passages' read)."""
    whole = [keys[run[0]].cluster_id for run, is_whole in runs if is_whole]
    return lex.index.cluster_segments(whole) if whole else {}


def _from_table(lex: LexicalQuery, keys: list[UnitKey], runs: list[tuple[list[int], bool]], ahead: list[str],
                listed: Mapping[str, list[str]]) -> _Records | None:
    """The records of a walk's passages and of what rules 5 and 6 read ahead (``ahead``), from the
    lexical table (:meth:`~hseg.store.lexical_index.LexicalIndex.records`): ``{id: (metadata, text)}``,
    or ``None`` when the table does not hold a passage's segment as the walk's key says (it lags a
    write in flight), and the caller reads the collection instead.

    A ``get`` of ~48 records costs about as much as a plain top-5 query; the table answers in a
    tenth of that (``benchmarks/RESULTS.md``, round 16). A cluster taken whole is read as all of its
    segments (``listed``: :func:`_listed_wholes`), its record made of theirs (:func:`_joined`),
    checked against the cluster's size in the walk's key."""
    whole = [keys[run[0]] for run, is_whole in runs if is_whole]
    segments = [keys[i] for run, is_whole in runs if not is_whole for i in run]
    needed = [*(key.segment_id for key in segments), *(sid for key in whole for sid in listed[key.cluster_id])]
    found = lex.index.records([*needed, *ahead])
    for key in segments:
        got = found.get(key.segment_id)
        if got is None or got[0]["hseg_cluster_id"] != key.cluster_id or got[0]["hseg_tokens"] != key.tokens:
            return None
    for key in whole:
        cluster = _joined(key, listed[key.cluster_id], found)
        if cluster is None:
            return None
        found[key.cluster_id] = cluster
    return found


def _joined(key: UnitKey, segment_ids: list[str],
            found: Mapping[str, tuple[dict[str, Any], str]]) -> tuple[dict[str, Any], str] | None:
    """The record of ``key``'s cluster made of its segments' records (``None`` unless they are all
    in ``found``, of that cluster, as many and as long as ``key`` says, and tile it)."""
    members = [found.get(sid) for sid in segment_ids]
    if len(members) != key.cluster_segments or any(m is None for m in members):
        return None
    metas = [m[0] for m in members if m is not None]
    texts = [m[1] for m in members if m is not None]
    if any(m.get("hseg_cluster_id") != key.cluster_id for m in metas) \
            or sum(int(m.get("hseg_tokens", -1)) for m in metas) != key.cluster_tokens \
            or any(int(a["hseg_end"]) != int(b["hseg_start"]) for a, b in zip(metas, metas[1:])):
        return None
    path = common_prefix(heading_path(m) for m in metas)
    meta = {"hseg_start": int(metas[0]["hseg_start"]), "hseg_end": int(metas[-1]["hseg_end"]),
            "hseg_segment_ids": json.dumps(segment_ids), HEADING_PATH_KEY: encode_heading_path(path)}
    return meta, "".join(texts)


def _hybrid_segments(collection: Any, q: np.ndarray, k: int | None, budget: int | None,
                     where: Mapping[str, Any] | None, wdoc: Mapping[str, Any] | None,
                     lex: LexicalQuery) -> Plan[list[SearchHit]]:
    """``unit="segment"`` with the lexical score: dense = cos(q, segment). A candidate's cluster,
    position and tokens come from the lexical index; a kNN record it does not hold is read (another
    writer's record, or a segment written since), cluster records are skipped by their id."""
    qv = np.asarray(q, dtype=np.float32)
    where, wdoc = (dict(where) if where else None), (dict(wdoc) if wdoc else None)
    n = _first_page(k, budget, 32, 16)
    while True:
        res = yield Knn(collection, qv, n, where, wdoc)
        known = {rid: 1.0 - float(d) for rid, d in zip(res["ids"], res["distances"]) if not is_cluster_id(rid)}
        floor_d = 1.0 - float(res["distances"][-1]) if len(res["ids"]) >= n else -np.inf
        page = lex.page(n)
        lexical = dict(zip(page.ids, page.scores.tolist()))
        rows = lex.rows([*known, *lexical])
        unknown = [rid for rid in known if rid not in rows]
        if unknown:
            got = yield Get(collection, tuple(unknown), ("metadatas",))
            for rid, meta in zip(got["ids"], got["metadatas"]):
                meta = dict(meta or {})
                if meta.get("hseg_level") == "segment" and "hseg_cluster_id" in meta:
                    rows[rid] = LexicalRow(rid, str(meta["hseg_doc_id"]), str(meta["hseg_cluster_id"]),
                                           int(meta["hseg_index"]), int(meta["hseg_tokens"]))
        known = {sid: d for sid, d in known.items() if sid in rows}
        known = {sid: d + lex.weight * x for (sid, d), x in zip(known.items(), lex.scores(list(known)).tolist())}
        bounds = {sid: floor_d + lex.weight * x for sid, x in lexical.items() if sid not in known and sid in rows}
        floor = floor_d + lex.weight * page.floor

        def walk_of(scores: dict[str, float], at: float, rows: dict[str, LexicalRow] = rows) -> Selection | None:
            return walk(np.array(list(scores.values())), [rows[s].cluster_id for s in scores],
                        [rows[s].tokens for s in scores], {}, budget, max_units=k if budget is None else None,
                        floor=at)

        while True:  # the bounded walk; then every candidate that may matter is read (once)
            sel, wanted = _bounded_walk(known, bounds, floor, walk_of, lambda sid, rows=rows: rows[sid].cluster_id)
            if sel is not None or not wanted:
                break
            # filtered as the kNN was: a lexical candidate absent from the answer fails the filters
            got = yield Get(collection, tuple(wanted), ("embeddings",), where, wdoc)
            for sid, cos in zip(got["ids"], _cosines(qv, got["embeddings"])):
                known[sid] = float(cos) + lex.weight * lexical[sid]
            for sid in wanted:
                bounds.pop(sid, None)
        if sel is not None:
            order = list(known)
            reported = np.array([known[s] for s in order]) / (1.0 + lex.weight)
            taken = [order[i] for i in sel.taken]
            got = (yield Get(collection, tuple(taken))) if taken else {"ids": []}
            found = records(got)
            members = {order[i]: _Member(order[i], *found[order[i]], float(reported[i]))
                       for i in sel.taken if order[i] in found}  # absent: deleted since the kNN
            keys = [(rows[s].cluster_id, rows[s].position) for s in order]
            runs = merge_runs(keys, [i for i in sel.taken if order[i] in members], reported)
            return [_passage([members[order[i]] for i in run], "segment") for run in runs]
        n *= 2


# --------------------------------------------------------------------------- unit="segment"


def _search_segments(collection: Any, q: np.ndarray, k: int | None, budget: int | None,
                     where: Mapping[str, Any] | None, wdoc: Mapping[str, Any] | None) -> Plan[list[SearchHit]]:
    # the ranking comes from a cheap kNN of ids and distances; records are read in rank order, a
    # slice at a time, until the walk is decided (reading costs per record, ~0.06 ms). Cluster
    # records and other writers' records in the ranking are skipped.
    n = _first_page(k, budget, 32, 16)
    while True:
        res = yield Knn(collection, np.asarray(q, dtype=np.float32), n, dict(where) if where else None,
                        dict(wdoc) if wdoc else None)
        ids = res["ids"]
        if not ids:
            return []
        sims = [1.0 - float(d) for d in res["distances"]]
        rows: list[_Member] = []
        read, m = 0, _first_page(k, budget, 96, 8)
        while True:
            part = ids[read : read + m]
            got = yield Get(collection, tuple(part))
            found = {rid: (dict(meta or {}), doc or "") for rid, meta, doc in
                     zip(got["ids"], got["metadatas"], got["documents"])}
            for rid, sim in zip(part, sims[read : read + m]):
                meta, doc = found.get(rid, ({}, ""))  # absent: deleted since the kNN
                if meta.get("hseg_level") == "segment" and "hseg_cluster_id" in meta:
                    rows.append(_Member(rid, meta, doc, sim))
            read += len(part)
            # an unread record is no closer than the first one not read (or the page's last)
            floor = sims[read] if read < len(ids) else (sims[-1] if len(ids) >= n else -np.inf)
            score = np.array([r.score for r in rows])
            sel = walk(score, [str(r.meta["hseg_cluster_id"]) for r in rows],
                       [int(r.meta["hseg_tokens"]) for r in rows], {}, budget,
                       max_units=k if budget is None else None, floor=floor)
            if sel is not None:
                keys = [(str(r.meta["hseg_cluster_id"]), int(r.meta["hseg_index"])) for r in rows]
                return [_passage([rows[i] for i in run], "segment") for run in merge_runs(keys, sel.taken, score)]
            if read >= len(ids):
                break
            m = _next_slice(rows, read, k, budget)
        n *= 2


def _next_slice(rows: list[_Member], read: int, k: int | None, budget: int | None) -> int:
    """Records to read next when the walk is undecided: the segments still missing at the mean size
    and the segment share seen so far, with a quarter as margin. Usually a few records: doubling
    instead cost a 100-record read (~10 ms) in one query of five at budget 4096."""
    if not rows:
        return 2 * read
    share = len(rows) / read
    if budget is None:
        missing = (k or 1) - len(rows)
    else:
        seen = sum(int(r.meta["hseg_tokens"]) for r in rows)
        missing = math.ceil(max(0, budget - seen) * len(rows) / max(1, seen))
    return max(4, math.ceil(1.25 * (max(missing, 0) + 2) / share))


# --------------------------------------------------------------------------- unit="auto", gathered


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


def _cosines(query: np.ndarray, embeddings: Any) -> np.ndarray:
    e = np.asarray(embeddings, dtype=np.float64)
    if e.size == 0:
        return np.zeros(0)
    norms = np.linalg.norm(e, axis=1)
    return (e @ query.astype(np.float64)) / np.where(norms == 0, 1.0, norms)


@dataclass
class _Gathered:
    cands: UnitCandidates
    docs: list[str]
    metas: list[dict[str, Any]]
    floor: float


def _neighbour_ids(meta: Mapping[str, Any]) -> list[str]:
    return [n for n in (meta.get("hseg_prev_id"), meta.get("hseg_next_id")) if n]


def _fetch_scored(collection: Any, q: np.ndarray, ids: list[str], where: Any, wdoc: Any = None
                  ) -> Plan[dict[str, tuple]]:
    if not ids:
        return {}
    got = yield Get(collection, tuple(ids), ("metadatas", "documents", "embeddings"), where, wdoc)
    return {rid: (dict(m), d, float(sim))
            for rid, m, d, sim in zip(got["ids"], got["metadatas"], got["documents"], _cosines(q, got["embeddings"]))}


def _gather(
    collection: Any, q: np.ndarray, n_seg: int, n_clu: int, where: Any, wdoc: Any, weight: float, nweight: float,
    lex: LexicalQuery | None = None,
) -> Plan[_Gathered]:
    """Candidate segments: the ``n_seg`` nearest segments, their neighbours (when the neighbour
    term counts) and every segment of the ``n_clu`` nearest clusters (when the cluster term
    counts), with ``lex`` also the ``n_seg`` best segments of the lexical index (and their
    neighbours and clusters); plus a bound on the fused score of all other segments."""
    seg_where = _and({"hseg_level": "segment"}, where)
    ids, metas, dists, docs = yield from _query(collection, q, n_seg, seg_where, wdoc,
                                                ("metadatas", "distances", "documents"))
    rows = {rid: (dict(m), d, 1.0 - float(dist)) for rid, m, d, dist in zip(ids, metas, docs, dists)}
    seg_floor = (1.0 - float(dists[-1])) if len(ids) >= n_seg else -np.inf
    lex_floor = 0.0
    if lex is not None:  # the lexical candidates, filtered as the kNN was (see "the lexical score" above)
        page = lex.page(n_seg)
        lex_floor = page.floor
        rows.update((yield from _fetch_scored(collection, q, [s for s in page.ids if s not in rows], where, wdoc)))
    if nweight:  # a segment next to a near one may rank high through its neighbour
        around = sorted({n for m, _, _ in rows.values() for n in _neighbour_ids(m)} - set(rows))
        # neighbour ids name segments (the schema), so only the caller's filters are passed: a level
        # filter on a get by ids made Chroma scan the metadata, about 30 ms a call on 2.7k records
        rows.update((yield from _fetch_scored(collection, q, around, where, wdoc)))
    cluster_score: dict[str, float] = {}
    nearest: set[str] = set()
    clu_floor = -np.inf
    if weight:
        cids, cmetas, cdists, _ = yield from _query(collection, q, n_clu, _and({"hseg_level": "cluster"}, where),
                                                    wdoc, ("metadatas", "distances"))
        cluster_score = {c: 1.0 - float(d) for c, d in zip(cids, cdists)}
        nearest = set(cids)
        clu_floor = (1.0 - float(cdists[-1])) if len(cids) >= n_clu else -np.inf
        # all segments of the nearest clusters (they may rank high through their cluster), by the ids
        # each cluster lists: a get by ids, where a filter on the cluster ids scanned the metadata
        listed = [sid for m in cmetas for sid in listed_segment_ids(m) if sid not in rows]
        rows.update((yield from _fetch_scored(collection, q, listed, where, wdoc)))
        unknown = sorted({m["hseg_cluster_id"] for m, _, _ in rows.values()} - set(cluster_score))
        if unknown:
            got = yield Get(collection, tuple(unknown), ("embeddings",))
            cluster_score.update(zip(got["ids"], (float(s) for s in _cosines(q, got["embeddings"]))))
    # an unseen segment is not among the nearest, nor next to one, nor in a nearest cluster (nor
    # among the lexical index's best); lex is added on the cosine scale: λ·M·lex on the fused one
    scale = 1.0 + weight + nweight
    floor = seg_floor * (1.0 + nweight) + (weight * clu_floor if weight else 0.0)
    ids = list(rows)
    metas = [rows[r][0] for r in ids]
    lexical_score = None
    if lex is not None:
        floor += lex.weight * scale * lex_floor
        lexical_score = lex.scores(ids)
    neighbour_score = None
    if nweight:
        context = {r: v[2] for r, v in rows.items()}
        missing = sorted({n for m in metas for n in _neighbour_ids(m)} - set(context))
        context.update({r: v[2] for r, v in (yield from _fetch_scored(collection, q, missing, None)).items()})
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
        lexical_score=lexical_score,
        lexical_weight=0.0 if lex is None else lex.weight * scale,
    )
    return _Gathered(cands, [rows[r][1] or "" for r in ids], metas, floor)


def _search_gathered(collection: Any, q: np.ndarray, k: int | None, budget: int | None,
                     where: Mapping[str, Any] | None, wdoc: Mapping[str, Any] | None, weight: float,
                     nweight: float, lex: LexicalQuery | None = None) -> Plan[list[SearchHit]]:
    need = max(8, budget // 48 + 4) if budget is not None else k
    if need is None:
        raise ValueError("give k or budget_tokens")
    n_seg, n_clu = 2 * need + 4, need + 2
    while True:  # each round doubles, so it ends once a round holds the whole collection
        g = yield from _gather(collection, q, n_seg, n_clu, where, wdoc, weight, nweight, lex)
        taken = select_auto(g.cands, budget, max_units=k if budget is None else None, cluster_weight=weight,
                            floor=g.floor, whole_cluster_min=DEFAULT_WHOLE_CLUSTER_MIN if weight else 1 << 30)
        if taken is not None:
            fused = g.cands.fused(weight) / (1.0 + weight + g.cands.neighbour_weight)  # back on the cosine scale
            if lex is not None:
                fused = fused / (1.0 + lex.weight)
            return [_passage([_Member(g.cands.ids[i], g.metas[i], g.docs[i], float(fused[i])) for i in run], "auto")
                    for run in merge_runs_of_segments(g.cands, taken, weight)]
        n_seg, n_clu = 2 * n_seg, 2 * n_clu
