"""Segment clustering, as in Nguyen et al. 2025 §3.2 (after Glavaš et al.'s GraphSeg).

How and why: docs/design.md, ``hseg.chunking.clustering``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Ranges = list[range]
#: how steps 1–2 are computed: from edges, from networkx's maximal cliques, or not at all (``"none"``:
#: every segment starts alone, so parents come from step 3's neighbour-joining and the cap)
METHODS = ("edges", "cliques", "none")


@dataclass(frozen=True)
class ClusterPlan:
    """Clusters of one document as ranges of segment indices, with the parameters that made them."""

    ranges: tuple[range, ...]
    #: ``None`` without a graph (``method="none"``)
    k: float | None
    tau: float | None
    #: per cluster: True when it was cut by the token cap rather than by the graph rule
    split_by_cap: tuple[bool, ...]
    #: segments that steps 1–2 (the graph) put in a cluster with another; 0: every parent came from
    #: step 3's neighbour-joining and the cap
    joined: int = 0


def similarity_stats(vectors: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation of the off-diagonal cosine similarities of unit vectors.

    Uses ``Σ_ij s_ij = ‖Σ_i v_i‖²`` and ``Σ_ij s_ij² = ‖VᵀV‖_F²``, O(n·d²) time and O(d²) memory.
    """
    v = np.asarray(vectors, dtype=np.float64)
    n = len(v)
    if n < 2:
        return 1.0, 0.0
    diag = np.einsum("ij,ij->i", v, v)
    total = float(np.sum(v.sum(axis=0) ** 2) - diag.sum())
    gram = v.T @ v
    total_sq = float(np.sum(gram * gram) - np.sum(diag**2))
    pairs = n * (n - 1)
    mean = total / pairs
    var = max(total_sq / pairs - mean * mean, 0.0)
    return mean, math.sqrt(var)


def _break_set(breaks: Sequence[int] | None, n: int) -> frozenset[int]:
    if breaks is None:
        return frozenset()
    if any(isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 0 <= b <= n for b in breaks):
        raise ValueError(f"breaks must be segment indices in [0, {n}], got {list(breaks)[:5]!r}")
    return frozenset(int(b) for b in breaks)


def merge_runs(n: int, adjacent_edge: Sequence[bool] | np.ndarray, linked: Callable[[range, range], bool],
               breaks: Sequence[int] | None = None) -> Ranges:
    """Steps 1–2 of the rule, given the edges between neighbours and a test for any edge
    between two ranges of segments; no range crosses a break (a segment index that starts one)."""
    if n == 0:
        return []
    cut = _break_set(breaks, n)
    initial: Ranges = []
    start = 0
    for i in range(n - 1):
        if not adjacent_edge[i] or i + 1 in cut:
            initial.append(range(start, i + 1))
            start = i + 1
    initial.append(range(start, n))
    # decide every merge on the initial pairs first, then apply them together
    joins = [b.start not in cut and linked(a, b) for a, b in zip(initial, initial[1:])]
    merged: Ranges = [initial[0]]
    for join, nxt in zip(joins, initial[1:]):
        if join:
            merged[-1] = range(merged[-1].start, nxt.stop)
        else:
            merged.append(nxt)
    return merged


def clusters_from_adjacency(adjacency: np.ndarray, breaks: Sequence[int] | None = None) -> Ranges:
    """Steps 1–2 from a boolean adjacency matrix via edges (the clique-free path)."""
    a = np.asarray(adjacency, dtype=bool)
    n = len(a)
    adjacent = [bool(a[i, i + 1]) for i in range(n - 1)]
    return merge_runs(n, adjacent, lambda x, y: bool(a[x.start : x.stop, y.start : y.stop].any()), breaks)


def clusters_from_cliques(adjacency: np.ndarray, breaks: Sequence[int] | None = None) -> Ranges:
    """Steps 1–2 literally: enumerate maximal cliques with networkx and test clique membership."""
    import networkx as nx

    a = np.asarray(adjacency, dtype=bool)
    n = len(a)
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from((i, j) for i, j in zip(*np.nonzero(np.triu(a, 1))))
    cliques = [frozenset(c) for c in nx.find_cliques(graph)]
    member: list[list[int]] = [[] for _ in range(n)]
    for idx, clique in enumerate(cliques):
        for v in clique:
            member[v].append(idx)

    def share(x: range, y: range) -> bool:
        left = {c for v in x for c in member[v]}
        return any(c in left for v in y for c in member[v])

    adjacent = [share(range(i, i + 1), range(i + 1, i + 2)) for i in range(n - 1)]
    return merge_runs(n, adjacent, share, breaks)


def mean_vector(vectors: np.ndarray, weights: Sequence[float] | np.ndarray | None = None) -> np.ndarray:
    """L2-normalised (weighted) mean of unit vectors: a segment's or a cluster's vector.

    ``weights`` are the members' token counts in the chunker: all-MiniLM-L6-v2 (like most
    sentence-transformers) mean-pools its token vectors, so the vector of a joined text weighs every
    token alike, and a two-word sentence should not pull a unit's vector as hard as a long one.
    Non-positive weights count as 1.

    When the vectors cancel out exactly (two opposite sentence vectors), the mean has no direction;
    the first non-zero member stands in, so a unit never gets a zero vector a store must refuse.

    Example:
        >>> mean_vector(np.eye(2), weights=np.array([3, 1])).round(3).tolist()
        [0.949, 0.316]
    """
    v = np.asarray(vectors, dtype=np.float64)
    if weights is None:
        m = v.mean(axis=0)
    else:
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.shape[0] != v.shape[0]:
            raise ValueError(f"weights: {w.shape[0]} weights for {v.shape[0]} vectors")
        w = np.where(w > 0, w, 1.0)
        m = (w[:, None] * v.reshape(len(v), -1)).sum(axis=0) / w.sum()
    norm = np.linalg.norm(m)
    if norm == 0 and len(v):
        norms = np.linalg.norm(v.reshape(len(v), -1), axis=1)
        nonzero = np.flatnonzero(norms > 0)
        if len(nonzero):
            return (v[nonzero[0]] / norms[nonzero[0]]).astype(np.float32)
    return (m / norm if norm > 0 else m).astype(np.float32)


#: clusters longer than this many segments get their mean vector from prefix sums in
#: :func:`absorb_singletons` (O(d) instead of O(size·d)); shorter ones, which is every cluster of a
#: normal document, exactly as :func:`mean_vector` computes it
PREFIX_MEAN_FROM = 64
#: the most similarities computed at once when testing two neighbouring clusters for an edge
#: (16 MB of float32); larger blocks are scanned in tiles with an early exit
EDGE_BLOCK_ELEMENTS = 1 << 22


class _RangeMeans:
    """Mean vectors of ranges of segments, memoised. A singleton that keeps joining the cluster on
    its left grows it one segment at a time; recomputing that mean from scratch made step 3
    quadratic on long documents, so long ranges use prefix sums."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = vectors
        self.prefix: np.ndarray | None = None
        self.memo: dict[tuple[int, int], np.ndarray] = {}

    def __call__(self, r: range) -> np.ndarray:
        key = (r.start, r.stop)
        m = self.memo.get(key)
        if m is None:
            if len(r) <= PREFIX_MEAN_FROM:
                m = mean_vector(self.vectors[r.start : r.stop])
            else:
                if self.prefix is None:
                    v = np.asarray(self.vectors, dtype=np.float64)
                    self.prefix = np.concatenate([np.zeros((1, v.shape[1])), np.cumsum(v, axis=0)])
                total = (self.prefix[r.stop] - self.prefix[r.start]) / len(r)
                norm = np.linalg.norm(total)
                m = (total / norm if norm > 0 else total).astype(np.float32)
            self.memo[key] = m
        return m


def absorb_singletons(ranges: Ranges, vectors: np.ndarray, breaks: Sequence[int] | None = None) -> Ranges:
    """Step 3: each single-segment cluster joins the more cosine-similar neighbouring cluster
    that no break separates it from (none: it stays alone).

    Processed left to right on the current clusters, so a singleton next to a singleton forms a pair.
    """
    out = list(ranges)
    cut = _break_set(breaks, len(vectors))
    means = _RangeMeans(vectors)
    i = 0
    while i < len(out) and len(out) > 1:
        if len(out[i]) != 1:
            i += 1
            continue
        v = vectors[out[i].start]
        left = float(means(out[i - 1]) @ v) if i > 0 and out[i].start not in cut else -np.inf
        right = float(means(out[i + 1]) @ v) if i + 1 < len(out) and out[i + 1].start not in cut else -np.inf
        if left == right == -np.inf:
            i += 1
            continue
        if left >= right:
            out[i - 1] = range(out[i - 1].start, out[i].stop)
            del out[i]
        else:
            out[i + 1] = range(out[i].start, out[i + 1].stop)
            del out[i]
    return out


def _weakest_cut(piece: range, csum: np.ndarray, adjacent_sim: np.ndarray, cap: int) -> int:
    """Index where ``piece`` is cut: the weakest adjacent similarity among cuts that leave at least
    a quarter of the cap on both sides (a cut at the global weakest link tends to shave off a sliver
    and leave a long remainder to cut again, which skews sizes far below the cap)."""
    cuts = np.arange(piece.start + 1, piece.stop)
    left = csum[cuts] - csum[piece.start]
    right = csum[piece.stop] - csum[cuts]
    ok = (left >= cap / 4) & (right >= cap / 4)
    if not ok.any():
        ok[:] = True
    sims = adjacent_sim[cuts - 1]
    return int(cuts[ok][np.argmin(sims[ok])])


def split_over_cap(ranges: Ranges, tokens: np.ndarray, adjacent_sim: np.ndarray,
                   cap: int | None) -> tuple[Ranges, list[bool]]:
    """Cut every cluster above ``cap`` tokens at its weakest adjacent similarity, recursively
    (among cuts that keep a quarter of the cap on both sides, when there are such cuts)."""
    if cap is None:
        return list(ranges), [False] * len(ranges)
    csum = np.concatenate([[0], np.cumsum(tokens)])
    out: Ranges = []
    flags: list[bool] = []
    for r in ranges:
        stack, pieces = [r], []
        while stack:
            piece = stack.pop()
            if len(piece) == 1 or csum[piece.stop] - csum[piece.start] <= cap:
                pieces.append(piece)
                continue
            cut = _weakest_cut(piece, csum, adjacent_sim, cap)
            stack += [range(cut, piece.stop), range(piece.start, cut)]
        pieces.sort(key=lambda p: p.start)
        out += pieces
        flags += [len(pieces) > 1] * len(pieces)
    return out, flags


def _any_edge(v: np.ndarray, a: range, b: range, tau: float) -> bool:
    """True if some segment of ``a`` and some segment of ``b`` are more similar than ``tau``.

    One matrix product when the block is at most :data:`EDGE_BLOCK_ELEMENTS` (every normal
    document); otherwise tiles of that size, stopping at the first edge, so two huge neighbouring
    clusters cost bounded memory."""
    rows, cols = len(a), len(b)
    if rows * cols <= EDGE_BLOCK_ELEMENTS:
        return bool((v[a.start : a.stop] @ v[b.start : b.stop].T).max() > tau)
    col_step = min(cols, EDGE_BLOCK_ELEMENTS)
    row_step = max(1, EDGE_BLOCK_ELEMENTS // col_step)
    for c in range(b.start, b.stop, col_step):
        right = v[c : min(c + col_step, b.stop)].T
        for r in range(a.start, a.stop, row_step):
            if (v[r : min(r + row_step, a.stop)] @ right).max() > tau:
                return True
    return False


def cluster_segments(
    vectors: np.ndarray,
    k: float,
    *,
    tokens: Sequence[int] | None = None,
    max_cluster_tokens: int | None = None,
    method: str = "edges",
    stats: tuple[float, float] | None = None,
    breaks: Sequence[int] | None = None,
) -> ClusterPlan:
    """Cluster the segments of one document with threshold parameter ``k``.

    Args:
        vectors: ``(n, d)`` unit segment vectors, in document order.
        k: τ = μ + k·σ; larger k, fewer edges, smaller clusters.
        tokens: tokens per segment, needed for ``max_cluster_tokens``.
        max_cluster_tokens: hard cap; a larger cluster is cut at its weakest adjacent similarity.
        method: ``"edges"`` (default) or ``"cliques"`` (literal networkx path, same result).
        stats: ``similarity_stats(vectors)`` when the caller already has it (:func:`search_k`
            clusters the same vectors dozens of times).
        breaks: segment indices that must start a cluster (no cluster spans one).

    Example:
        >>> import numpy as np
        >>> v = np.repeat(np.eye(2, dtype=np.float32), 3, axis=0)
        >>> [list(r) for r in cluster_segments(v, 0.5).ranges]
        [[0, 1, 2], [3, 4, 5]]
        >>> [list(r) for r in cluster_segments(v, 0.5, breaks=[2]).ranges]  # 2 may not join its left
        [[0, 1], [2, 3, 4, 5]]
    """
    v = np.asarray(vectors, dtype=np.float32)
    n = len(v)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if max_cluster_tokens is not None and tokens is None:
        raise ValueError("tokens are required with max_cluster_tokens")
    cut = sorted(_break_set(breaks, n))
    if n == 0:
        return ClusterPlan((), k, float("nan"), ())
    adjacent_sim = np.einsum("ij,ij->i", v[:-1], v[1:]) if n > 1 else np.zeros(0, np.float32)
    if method == "none":
        return _plan(v, [range(i, i + 1) for i in range(n)], tokens, adjacent_sim, max_cluster_tokens, cut,
                     None, None)
    mean, std = stats if stats is not None else similarity_stats(v)
    tau = mean + k * std
    if method == "edges":
        ranges = merge_runs(n, adjacent_sim > tau, lambda a, b: _any_edge(v, a, b, tau), cut)
    else:
        sims = v @ v.T
        np.fill_diagonal(sims, -np.inf)
        ranges = clusters_from_cliques(sims > tau, cut)
    return _plan(v, ranges, tokens, adjacent_sim, max_cluster_tokens, cut, float(k), float(tau))


def _plan(v: np.ndarray, ranges: Ranges, tokens: Sequence[int] | None, adjacent_sim: np.ndarray,
          max_cluster_tokens: int | None, cut: Sequence[int], k: float | None, tau: float | None) -> ClusterPlan:
    """Steps 3 and the cap, after the graph's ranges."""
    joined = sum(len(r) for r in ranges if len(r) > 1)
    ranges = absorb_singletons(ranges, v, cut)
    tok = np.asarray(tokens if tokens is not None else np.ones(len(v)), dtype=np.int64)
    ranges, flags = split_over_cap(ranges, tok, adjacent_sim, max_cluster_tokens)
    return ClusterPlan(tuple(ranges), k, tau, tuple(flags), joined)


def search_k(
    vectors: np.ndarray,
    tokens: Sequence[int],
    target_tokens: int,
    *,
    max_cluster_tokens: int | None = None,
    k_range: tuple[float, float] = (-3.0, 6.0),
    iterations: int = 30,
    method: str = "edges",
    breaks: Sequence[int] | None = None,
) -> ClusterPlan:
    """Find the k whose graph clusters have a mean size closest to ``target_tokens``, and cluster with it.

    k is judged by the graph's own clusters, steps 1–2 with every segment the graph leaves alone
    counted as a cluster of its own, before step 3 and the cap. Judged after step 3, the graph did
    nothing on most documents: joining each lone segment to its neighbour already makes parents
    near the target from segments of a third of it, so the emptiest graph always looked right
    (``docs/decisions.md``, "Chunking"). Judged on its own clusters, relatedness decides the parents
    and step 3 places only the segments it leaves alone; the cap then cuts what is too long. The
    search bisects k between ``k_range[0]`` and the k at which no adjacent pair is related any more
    (so τ is always a cosine some adjacent pair passes) and keeps the best k seen: the mean size falls
    as k rises, not strictly. The paper's k table (1.2 ≈ 512 tokens, ...) does not transfer across
    encoders and corpora, hence the search. ``breaks`` as in :func:`cluster_segments`.
    """
    if target_tokens <= 0:
        raise ValueError(f"target_tokens must be > 0, got {target_tokens!r}")
    v = np.asarray(vectors, dtype=np.float32)
    if method == "none":  # no graph, no k to search
        return cluster_segments(v, 0.0, tokens=tokens, max_cluster_tokens=max_cluster_tokens, method=method,
                                breaks=breaks)
    stats = similarity_stats(v)  # the same for every k: computed once, not ~30 times
    lo, hi = k_range[0], max(k_range[0], min(k_range[1], _empty_graph_k(v, stats)))
    total = float(np.sum(tokens))
    best_k, best_err = hi, math.inf
    for _ in range(iterations if len(v) > 1 and total > 0 else 0):
        mid = (lo + hi) / 2
        mean_size = total / max(len(graph_clusters(v, mid, stats, breaks)), 1)
        err = abs(math.log(mean_size / target_tokens))
        if err < best_err:
            best_k, best_err = mid, err
        if mean_size > target_tokens:
            lo = mid
        else:
            hi = mid
        if err < 0.02:
            break
    return cluster_segments(v, best_k, tokens=tokens, max_cluster_tokens=max_cluster_tokens, method=method,
                            stats=stats, breaks=breaks)


def graph_clusters(vectors: np.ndarray, k: float, stats: tuple[float, float] | None = None,
                   breaks: Sequence[int] | None = None) -> Ranges:
    """Steps 1–2 alone at threshold ``k`` (every segment the graph leaves alone is a range of its own):
    what :func:`search_k` sizes."""
    v = np.asarray(vectors, dtype=np.float32)
    mean, std = stats if stats is not None else similarity_stats(v)
    tau = mean + k * std
    adjacent = np.einsum("ij,ij->i", v[:-1], v[1:]) if len(v) > 1 else np.zeros(0, np.float32)
    return merge_runs(len(v), adjacent > tau, lambda a, b: _any_edge(v, a, b, tau), breaks)


def _empty_graph_k(vectors: np.ndarray, stats: tuple[float, float]) -> float:
    """The smallest k at which no two adjacent segments are joined (τ = their largest cosine);
    infinity when there is no such pair or no spread."""
    mean, std = stats
    if len(vectors) < 2 or std <= 0:
        return math.inf
    # a hair above the largest cosine: float32 products of the same pair differ in the last bits
    return (float(np.einsum("ij,ij->i", vectors[:-1], vectors[1:]).max()) + 1e-6 - mean) / std
