"""Reading candidates for a walk: how deep the first page goes, the cosine of vectors read by id,
and the threshold algorithm that merges the kNN's ranking with the lexical index's.

Why the hybrid walk is exact: :func:`bounded_walk`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hseg.retrieval.selection import Selection


def first_page(k: int | None, budget_tokens: int | None, per_segment: int, least: int) -> int:
    """Records asked for first: enough for ``k`` segments, or for the budget at ``per_segment``
    tokens a segment (smaller than the usual segment, so one page nearly always suffices)."""
    if budget_tokens is not None:
        return budget_tokens // per_segment + least
    if k is None:
        raise ValueError("give k or budget_tokens")
    return max(least, 2 * k + least // 2)


def cosines(query: np.ndarray, embeddings: Any) -> np.ndarray:
    """cos(query, e) for each row of ``embeddings`` read by id (0 for a zero vector)."""
    e = np.asarray(embeddings, dtype=np.float64)
    if e.size == 0:
        return np.zeros(0)
    norms = np.linalg.norm(e, axis=1)
    return (e @ query.astype(np.float64)) / np.where(norms == 0, 1.0, norms)


def _stop_score(score: np.ndarray, cluster: list[str], sel: Selection) -> float:
    """The score of the first candidate a walk over all candidates left (not taken, not in a cluster
    taken whole): no candidate scoring below it can change that walk (``-inf`` when it took everything)."""
    taken, whole = set(sel.taken), {c for _, c in sel.expanded}
    for i in np.argsort(-score, kind="stable"):
        if int(i) not in taken and cluster[i] not in whole:
            return float(score[i])
    return -np.inf


def bounded_walk(known: dict[str, float], bounds: dict[str, float], floor: float, walk_of: Any,
                 cluster_of: Any) -> tuple[Selection | None, list[str]]:
    """The walk over the ``known`` scores, decided only if neither ``floor`` nor any ``bounds`` entry
    (an unresolved candidate's upper bound) reaches where it looked; else the candidates to resolve.

    With the lexical score (``lexical_weight`` > 0) both hybrid paths (:func:`.indexed.hybrid_indexed`,
    :func:`.segments.hybrid_segments`) run Fagin's threshold algorithm over two ranked lists: a kNN
    (dense order) and the lexical index's best segments (lex order). A kNN candidate gets its exact lex
    from the index (local); a lexical-only candidate's dense score is at most the kNN's last, so it
    enters with the bound d_last + λ·lex until its vector is read; a segment in neither list scores at
    most d_last + λ·lex_last (0 past the last match). The walk's floor is the largest bound not yet
    resolved, so it decides only when nothing unresolved can rank where it looked: the answer is exact
    with respect to what Chroma's kNN (approximate, HNSW) and the lexical index return.

    A get costs per record (``docs/decisions.md``), so only the candidates whose bound
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
