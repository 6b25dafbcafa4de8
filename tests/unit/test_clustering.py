"""Clustering rule (§3.2): the edge path equals the literal clique path; the paper's worked example."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hseg.chunking.clustering import (
    absorb_singletons,
    cluster_segments,
    clusters_from_adjacency,
    clusters_from_cliques,
    graph_clusters,
    search_k,
    similarity_stats,
    split_over_cap,
)


def adjacency_from_cliques(n: int, cliques: list[set[int]]) -> np.ndarray:
    a = np.zeros((n, n), dtype=bool)
    for c in cliques:
        for i in c:
            for j in c:
                if i != j:
                    a[i, j] = True
    return a


def test_paper_table1_follows_the_rule_as_written():
    # Table 1, segments 1..7 → indices 0..6. The paper prints {1..5}, {6,7}; its own rule links
    # {3,4,5} and {6,7} through the clique {2,4,7}, so the rule gives a single cluster.
    cliques = [{1, 2, 6}, {2, 4, 7}, {3, 4, 5}, {1, 6, 7}]
    a = adjacency_from_cliques(7, [{i - 1 for i in c} for c in cliques])
    expected = [list(range(7))]
    assert [list(r) for r in clusters_from_cliques(a)] == expected
    assert [list(r) for r in clusters_from_adjacency(a)] == expected


def test_initial_clusters_without_cross_links_stay_apart():
    # cliques {1,2}, {3,4,5}, {6,7} only: nothing links the initial clusters
    a = adjacency_from_cliques(7, [{0, 1}, {2, 3, 4}, {5, 6}])
    assert [list(r) for r in clusters_from_adjacency(a)] == [[0, 1], [2, 3, 4], [5, 6]]


@st.composite
def random_graphs(draw):
    n = draw(st.integers(1, 14))
    p = draw(st.floats(0.0, 1.0))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < p, 1)
    return upper | upper.T


@settings(max_examples=300, deadline=None)
@given(random_graphs())
def test_edge_path_equals_clique_path_on_random_graphs(adjacency):
    assert clusters_from_adjacency(adjacency) == clusters_from_cliques(adjacency)


@st.composite
def unit_vectors(draw):
    n = draw(st.integers(1, 40))
    d = draw(st.integers(2, 16))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    v = rng.normal(size=(n, d)).astype(np.float32)
    # drift so neighbours are related, as in real documents
    v = np.cumsum(v, axis=0) if draw(st.booleans()) else v
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


@settings(max_examples=150, deadline=None)
@given(unit_vectors(), st.floats(-2.0, 3.0), st.integers(0, 2**16))
def test_plans_are_contiguous_and_equal_across_methods(v, k, seed):
    tokens = np.random.default_rng(seed).integers(10, 200, size=len(v))
    cap = int(tokens.max()) + 150
    a = cluster_segments(v, k, tokens=tokens, max_cluster_tokens=cap, method="edges")
    b = cluster_segments(v, k, tokens=tokens, max_cluster_tokens=cap, method="cliques")
    assert a.ranges == b.ranges
    flat = [i for r in a.ranges for i in r]
    assert flat == list(range(len(v)))  # ordered, contiguous, complete, non-overlapping
    for r in a.ranges:
        assert tokens[r.start : r.stop].sum() <= cap or len(r) == 1
    if len(v) > 1 and cap >= tokens.sum():
        assert all(len(r) > 1 for r in a.ranges)  # no singleton survives without the cap


def test_similarity_stats_match_brute_force():
    rng = np.random.default_rng(1)
    v = rng.normal(size=(50, 8))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    s = v @ v.T
    off = s[~np.eye(50, dtype=bool)]
    mean, std = similarity_stats(v)
    assert mean == pytest.approx(off.mean(), abs=1e-9)
    assert std == pytest.approx(off.std(), abs=1e-9)


def test_singleton_joins_more_similar_neighbour():
    v = np.array([[1, 0], [1, 0], [0.6, 0.8], [0, 1], [0, 1]], dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    out = absorb_singletons([range(0, 2), range(2, 3), range(3, 5)], v)
    assert out == [range(0, 2), range(2, 5)]


def test_cap_cuts_at_weakest_similarity():
    tokens = np.array([100, 100, 100, 100])
    sims = np.array([0.9, 0.1, 0.8])
    out, flags = split_over_cap([range(0, 4)], tokens, sims, 250)
    assert out == [range(0, 2), range(2, 4)] and flags == [True, True]


def test_larger_k_gives_no_larger_clusters_on_average():
    rng = np.random.default_rng(3)
    v = np.cumsum(rng.normal(size=(120, 16)), axis=0)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    counts = [len(cluster_segments(v, k).ranges) for k in (-1.0, 0.0, 1.0, 2.0)]
    assert counts == sorted(counts)


def test_search_k_lands_near_target():
    # topic runs of 2-11 segments with noise, like sections of a document
    rng = np.random.default_rng(4)
    topics = rng.normal(size=(60, 32))
    labels = np.repeat(np.arange(60), rng.integers(2, 12, size=60))[:400]
    v = topics[labels] + 0.8 * rng.normal(size=(len(labels), 32))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    tokens = rng.integers(60, 140, size=len(v))
    for target in (256, 512, 1024):
        plan = search_k(v, tokens, target, max_cluster_tokens=3 * target // 2)
        # the graph's own clusters are sized to the target; joining the segments it leaves alone and
        # the cap's cuts keep the parents near it
        graph_mean = tokens.sum() / len(graph_clusters(v, plan.k))
        assert 0.8 * target <= graph_mean <= 1.2 * target, (target, graph_mean)
        mean = tokens.sum() / len(plan.ranges)
        assert 0.6 * target <= mean <= 1.3 * target, (target, mean)
        assert plan.joined > len(v) / 2  # relatedness, not neighbour-joining, shapes the clusters
        assert not all(plan.split_by_cap)  # the graph, not the cap, shapes the clusters


def test_bad_arguments_raise():
    v = np.eye(3, dtype=np.float32)
    with pytest.raises(ValueError, match="method"):
        cluster_segments(v, 1.0, method="louvain")
    with pytest.raises(ValueError, match="target_tokens"):
        search_k(v, [1, 1, 1], 0)


def test_method_none_is_neighbour_joining_and_the_cap_alone():
    # the graph off: the same parents as a threshold no cosine passes, and no k or tau to report
    rng = np.random.default_rng(5)
    v = np.cumsum(rng.normal(size=(80, 16)), axis=0)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    tokens = rng.integers(40, 130, size=len(v))
    plan = search_k(v, tokens, 256, max_cluster_tokens=384, method="none", breaks=[10, 50])
    empty = cluster_segments(v, 1e9, tokens=tokens, max_cluster_tokens=384, breaks=[10, 50])
    assert plan.ranges == empty.ranges and plan.split_by_cap == empty.split_by_cap
    assert plan.k is None and plan.tau is None
    assert [r.start for r in plan.ranges if r.start in (10, 50)] == [10, 50]


def test_search_k_never_reports_a_tau_no_adjacent_cosine_can_pass():
    rng = np.random.default_rng(6)
    v = rng.normal(size=(60, 32))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    adjacent = np.einsum("ij,ij->i", v[:-1], v[1:])
    tokens = np.full(len(v), 90)
    # even unrelated segments: the graph's clusters are sized to the target, with a tau pairs pass
    plan = search_k(v, tokens, 256, max_cluster_tokens=384)
    assert plan.joined > 0 and plan.tau < adjacent.max()
    # a target below one segment: the search stops where the graph empties, tau the largest adjacent
    # cosine, and the plan of any larger k
    plan = search_k(v, tokens, 40, max_cluster_tokens=384)
    assert plan.joined == 0
    assert adjacent.max() <= plan.tau < adjacent.max() + 1e-5
    assert plan.ranges == cluster_segments(v, 6.0, tokens=tokens, max_cluster_tokens=384).ranges


def test_plan_counts_the_segments_the_graph_joined():
    v = np.repeat(np.eye(2, dtype=np.float32), 3, axis=0)
    assert cluster_segments(v, 0.5).joined == 6
    assert cluster_segments(v, 0.5, method="none").joined == 0
