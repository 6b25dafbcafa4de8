"""The budget-aware retrieval unit (``unit="auto"``): spend a reader budget on the best text.

The rule, step by step: :func:`select_auto`; how its weights were chosen: docs/design.md,
``hseg.retrieval.selection``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hseg.retrieval.lexical_query import fuse
from hseg.retrieval.settings import DEFAULT_CLUSTER_WEIGHT, DEFAULT_WHOLE_CLUSTER_MIN, DEFAULT_WHOLE_CLUSTER_SHARE


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
    #: each candidate's lexical score and its weight on this (fused) scale, ``lexical_weight`` > 0 only
    lexical_score: np.ndarray | None = None
    lexical_weight: float = 0.0

    def fused(self, cluster_weight: float) -> np.ndarray:
        out = np.asarray(self.segment_score, dtype=np.float64) + cluster_weight * np.asarray(
            self.cluster_score, dtype=np.float64
        )
        if self.neighbour_weight and self.neighbour_score is not None:
            out = out + self.neighbour_weight * np.asarray(self.neighbour_score, dtype=np.float64)
        if self.lexical_weight and self.lexical_score is not None:
            out = fuse(out, np.asarray(self.lexical_score, dtype=np.float64), self.lexical_weight)
        return out


@dataclass(frozen=True)
class ClusterSize:
    """What a whole cluster holds: its number of segments and the sum of their tokens."""

    segments: int
    tokens: int


@dataclass(frozen=True)
class Selection:
    """The outcome of :func:`walk`: candidate indices in the order taken, and the clusters taken
    whole as ``(len(taken) when it was expanded, cluster id)``."""

    taken: list[int]
    expanded: list[tuple[int, str]]


def walk(
    score: np.ndarray,
    cluster: Sequence[str],
    tokens: Sequence[int],
    sizes: Mapping[str, ClusterSize],
    budget_tokens: int | None,
    *,
    max_units: int | None = None,
    whole_cluster_min: int = DEFAULT_WHOLE_CLUSTER_MIN,
    whole_cluster_share: float = DEFAULT_WHOLE_CLUSTER_SHARE,
    floor: float = -np.inf,
) -> Selection | None:
    """Rules 2 and 3 of :func:`select_auto` over candidates ranked by ``score``.

    ``sizes`` describes the clusters that may be taken whole (others never are); a cluster taken
    whole counts all its segments towards ``max_units`` and its untaken segments' tokens
    (``size.tokens`` minus what was taken of it) against the budget, and its later candidates are
    skipped. ``floor`` bounds the score of every segment that is *not* a candidate: if the walk
    would have to look at or below it before stopping, an unseen segment might belong in the
    answer, so ``None`` is returned and the caller fetches more candidates.

    Always takes at least one segment when there is a candidate, even one larger than the budget.
    ``budget_tokens=None`` takes the first ``max_units`` segments instead.
    """
    if budget_tokens is None and max_units is None:
        raise ValueError("give budget_tokens or max_units")
    if budget_tokens is not None and budget_tokens <= 0:
        raise ValueError(f"budget_tokens must be > 0, got {budget_tokens!r}")
    score = np.asarray(score, dtype=np.float64)
    if score.size == 0:  # nothing seen: done only if nothing is unseen either
        return Selection([], []) if floor == -np.inf else None
    toks = np.asarray(tokens, dtype=np.int64)
    taken: list[int] = []
    expanded: list[tuple[int, str]] = []
    whole: set[str] = set()
    per_cluster: dict[str, tuple[int, int]] = {}  # segments and tokens taken of each cluster
    units = 0
    left = budget_tokens if budget_tokens is not None else np.iinfo(np.int64).max
    decided = False
    for i in np.argsort(-score, kind="stable"):
        if max_units is not None and units >= max_units:
            decided = True
            break
        c = cluster[i]
        if c in whole:
            continue
        if score[i] <= floor:
            break
        if toks[i] > left and taken:
            decided = True
            break  # the equal-reader-input rule: in rank order while the total fits
        taken.append(int(i))
        left -= int(toks[i])
        units += 1
        n, t = per_cluster.get(c, (0, 0))
        n, t = n + 1, t + int(toks[i])
        per_cluster[c] = (n, t)
        size = sizes.get(c)
        if n == whole_cluster_min and size is not None and n < size.segments:
            cost = size.tokens - t
            if cost <= whole_cluster_share * left:
                whole.add(c)
                expanded.append((len(taken), c))
                left -= cost
                units += size.segments - n
        if left <= 0:
            decided = True
            break
    if not decided and floor > -np.inf:
        return None
    return Selection(taken, expanded)


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
    """Indices of the candidates to return, best first (see :func:`walk`);
    a cluster taken whole brings the rest of its ``cands.siblings`` right after the segment that
    triggered it.

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
       their best fused score;
    5a. with ``read_on_share`` > 0, the best passage reads on through its parent: it takes the
       segments after it while they are of its cluster and it holds at most that share of the
       budget, a passage met on the way joining it whole (:func:`read_on`); the last passages are
       dropped while the total is over the budget (:func:`pay_for`). When a question's answer is a
       discussion, it runs on past the segment that matched, and the walk, ranking segments one by
       one, spreads the budget over many places instead;
    5. what the walk leaves of the budget (it stops at the first segment that does not fit) continues
       the passages: in rounds, each passage in rank order takes the segment after it in its document
       if it fits, until none does (:func:`continue_passages`). A reference often runs on past the
       end of the segment that matched into text that, alone, is unlike the question; the walk never
       reaches that text, and the rest of the budget would otherwise go unused;
    6. what rule 5 still leaves goes to *part* of a segment: each passage in rank order takes the
       longest run of whole sentences from the start of the (untaken) segment after it that fits
       (:func:`cut_passages`), so the budget is spent to within a sentence and a passage may end
       inside a segment. Its size is the chunker's own count of that prefix (``Segment.cuts``).
    """
    sizes = {c: ClusterSize(len(members), int(sum(int(cands.tokens[j]) for j in members)))
             for c, members in cands.siblings.items()}
    sel = walk(cands.fused(cluster_weight), cands.cluster, cands.tokens, sizes, budget_tokens, max_units=max_units,
               whole_cluster_min=whole_cluster_min, whole_cluster_share=whole_cluster_share, floor=floor)
    if sel is None:
        return None
    out: list[int] = []
    done = 0
    for at, c in sel.expanded:
        out += sel.taken[done:at]
        done = at
        seen = set(out)
        out += [j for j in cands.siblings[c] if j not in seen]
    return out + sel.taken[done:]


def merge_runs(keys: Sequence[tuple[str, int]], taken: Sequence[int], score: np.ndarray) -> list[list[int]]:
    """Group taken candidates into passages: runs adjacent in the document and in one cluster
    (``keys[i]`` = (cluster id, position)), ordered by their best score (ties by cluster id and
    position); inside a passage, by document position.

    Example:
        >>> merge_runs([("a", 0), ("a", 1), ("b", 0)], [2, 0, 1], np.array([0.1, 0.9, 0.5]))
        [[0, 1], [2]]
    """
    runs: list[list[int]] = []
    for i in sorted(taken, key=lambda i: keys[i]):
        if runs and keys[runs[-1][-1]][0] == keys[i][0] and keys[runs[-1][-1]][1] + 1 == keys[i][1]:
            runs[-1].append(i)
        else:
            runs.append([i])
    runs.sort(key=lambda run: -max(score[j] for j in run))
    return runs


def merge_runs_of_segments(cands: UnitCandidates, taken: Sequence[int], cluster_weight: float) -> list[list[int]]:
    """:func:`merge_runs` of candidates ranked by their fused score."""
    keys = list(zip(cands.cluster, cands.position))
    return merge_runs(keys, taken, cands.fused(cluster_weight))


def read_on(chain: Sequence[tuple[str, str, int]], cluster: str, size: int, cap: int,
            held: Mapping[str, tuple[int, int]],
            taken: set[str] | frozenset[str] = frozenset()) -> tuple[int, list[int]]:
    """Rule 5a of :func:`select_auto`: how far the best passage reads on through its parent.

    ``chain`` is the ``(segment id, cluster id, tokens)`` after the best passage in its document, in
    order; ``cluster`` its parent, ``size`` its tokens. It takes the segments of ``chain`` while they
    are of its parent and it stays within ``cap`` tokens; another passage met on the way (``held``:
    its first segment's id -> ``(its index, its number of segments)``) joins it whole, or not at all;
    any other segment in ``taken`` ends it. Returns the rows taken (a prefix of ``chain``) and the
    passages joined.

    Example:
        >>> read_on([("a", "c", 40), ("b", "c", 30), ("d", "c", 50), ("e", "x", 9)], "c", 20, 100,
        ...         {"b": (3, 1)})
        (2, [3])
    """
    at, joined = 0, []
    while at < len(chain):
        sid, parent, _ = chain[at]
        if parent != cluster:
            break
        run, index = 1, None
        if sid in held:
            index, run = held[sid]
        elif sid in taken:
            break
        block = chain[at:at + run]
        tokens = sum(row[2] for row in block)
        if len(block) < run or any(row[1] != cluster for row in block) or size + tokens > cap:
            break
        size += tokens
        at += run
        if index is not None:
            joined.append(index)
    return at, joined


def pay_for(sizes: Sequence[int], budget: int, keep: int = 1) -> list[int]:
    """Rule 5a's payment: the indices of the passages kept (``sizes`` in rank order) when the last ones
    are dropped, one at a time, while the total is over ``budget``; the first ``keep`` always stay.

    Example:
        >>> pay_for([300, 100, 100, 100], 480)
        [0, 1]
    """
    kept = list(range(len(sizes)))
    total = sum(sizes)
    while total > budget and len(kept) > keep:
        total -= sizes[kept.pop()]
    return kept


def continue_passages(following: Sequence[Sequence[tuple[str, int]]], left: int,
                      taken: set[str] | frozenset[str] = frozenset()) -> list[list[str]]:
    """Rule 5 of :func:`select_auto`: what each passage takes of ``following[i]``, the ``(segment
    id, tokens)`` after passage ``i`` in its document, in order, passages given in rank order.

    In rounds, every passage takes its next segment if it fits the ``left`` tokens; a passage stops
    at a segment that does not fit (``left`` only shrinks) or that is in ``taken`` (or taken by an
    earlier passage in this call), so no segment is taken twice and the total never exceeds ``left``.

    Example:
        >>> continue_passages([[("a", 5), ("b", 5)], [("c", 3)]], 9)
        [['a'], ['c']]
    """
    out: list[list[str]] = [[] for _ in following]
    done = [False] * len(following)
    seen = set(taken)
    while not all(done):
        for i, chain in enumerate(following):
            if done[i]:
                continue
            at = len(out[i])
            if at >= len(chain) or chain[at][0] in seen or chain[at][1] > left:
                done[i] = True
                continue
            sid, tokens = chain[at]
            out[i].append(sid)
            seen.add(sid)
            left -= tokens
    return out


def cut_passages(nexts: Sequence[tuple[str, Sequence[tuple[int, int]]] | None], left: int,
                 taken: set[str] | frozenset[str] = frozenset()) -> list[tuple[str, int, int] | None]:
    """Rule 6 of :func:`select_auto`: what each passage takes of the segment after it.

    ``nexts[i]`` is ``(segment id, its cuts)`` for the segment after passage ``i`` (passages in rank
    order; ``None`` when there is none), the cuts ``(offset, tokens)`` in increasing order. Passage
    ``i`` gets ``(segment id, offset, tokens)`` of the longest cut that fits what is ``left`` (which
    shrinks by each cut taken), or ``None``; a segment in ``taken`` or cut for an earlier passage is
    not cut again, so the total never exceeds ``left``.

    Example:
        >>> cut_passages([("a", [(10, 4), (25, 9)]), ("b", [(7, 3)])], 12)
        [('a', 25, 9), ('b', 7, 3)]
    """
    out: list[tuple[str, int, int] | None] = []
    seen = set(taken)
    for nxt in nexts:
        best = None
        if nxt is not None and nxt[0] not in seen:
            for offset, tokens in nxt[1]:
                if tokens > left:
                    break
                best = (nxt[0], offset, tokens)
        if best is not None:
            seen.add(best[0])
            left -= best[2]
        out.append(best)
    return out
