"""The budget-aware retrieval unit: the pure rule, and the Chroma path against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hseg.retrieval.selection import (
    UnitCandidates,
    continue_passages,
    cut_passages,
    merge_runs_of_segments,
    pay_for,
    read_on,
    select_auto,
)
from hseg.retrieval.settings import DEFAULT_WHOLE_CLUSTER_MIN
from hseg.store import HierarchicalStore
from hseg_testing.fakes import HashingEncoder, read_in_small_pages, siblings_and_neighbours


def candidates(seg_scores, clu_of, clu_scores, tokens, positions=None, with_siblings=True):
    n = len(seg_scores)
    positions = positions if positions is not None else list(range(n))
    siblings: dict[str, list[int]] = {}
    if with_siblings:
        for i, c in enumerate(clu_of):
            siblings.setdefault(c, []).append(i)
    return UnitCandidates(
        ids=[f"s{i}" for i in range(n)], cluster=list(clu_of), position=positions, tokens=list(tokens),
        segment_score=np.asarray(seg_scores, float), cluster_score=np.asarray([clu_scores[c] for c in clu_of], float),
        siblings=siblings,
    )


def test_cluster_score_lifts_segments_of_relevant_clusters():
    # s1 and s2 are equally similar; s2 sits in the more relevant cluster
    c = candidates([0.9, 0.5, 0.5], ["a", "a", "b"], {"a": 0.1, "b": 0.6}, [10, 10, 10])
    assert select_auto(c, None, max_units=2, whole_cluster_min=99) == [0, 2]


def test_budget_stops_at_first_unit_that_does_not_fit_but_keeps_one():
    c = candidates([0.9, 0.8, 0.7], ["a", "b", "c"], {"a": 0, "b": 0, "c": 0}, [60, 50, 10])
    assert select_auto(c, 100, cluster_weight=0) == [0]  # 60 + 50 > 100: stop, do not skip ahead
    assert select_auto(c, 10, cluster_weight=0) == [0]  # at least one, even over the budget


def test_whole_cluster_is_taken_when_cheap_and_several_segments_qualify():
    c = candidates([0.9, 0.89, 0.88, 0.1, 0.2], ["a"] * 4 + ["b"], {"a": 0.5, "b": 0.0}, [10, 10, 10, 5, 10])
    got = select_auto(c, 1000)
    assert got[:4] == [0, 1, 2, 3]  # the third qualifying segment brings the rest of cluster a
    assert select_auto(c, 34) == [0, 1, 2]  # the rest would cost more than a quarter of what is left


def test_floor_makes_the_walk_ask_for_more():
    c = candidates([0.9, 0.3], ["a", "b"], {"a": 0, "b": 0}, [10, 10])
    assert select_auto(c, 100, cluster_weight=0, floor=0.5) is None
    assert select_auto(c, 10, cluster_weight=0, floor=0.5) == [0]


def test_adjacent_segments_of_one_cluster_merge_into_a_passage():
    c = candidates([0.9, 0.8, 0.1, 0.7], ["a", "a", "a", "b"], {"a": 0, "b": 0}, [1, 1, 1, 1])
    assert merge_runs_of_segments(c, [0, 3, 1], 0.0) == [[0, 1], [3]]


def test_the_rest_of_the_budget_continues_passages_in_rounds_in_rank_order():
    following = [[("a1", 30), ("a2", 30)], [("b1", 20)], [("c1", 50)]]
    # round 1: a1 (30), b1 (20), c1 does not fit (50 > 20 left) and stops; round 2: a2 does not fit (30 > 20)
    assert continue_passages(following, 70) == [["a1"], ["b1"], []]
    assert continue_passages(following, 90) == [["a1", "a2"], ["b1"], []]  # round 2: a2 fits the 40 left
    assert continue_passages(following, 200) == [["a1", "a2"], ["b1"], ["c1"]]
    assert continue_passages(following, 0) == [[], [], []]
    # a segment already taken (the start of the next passage) ends a continuation
    assert continue_passages([[("x", 5), ("y", 5)]], 100, taken={"y"}) == [["x"]]


@given(st.lists(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(1, 40)), max_size=5), max_size=5),
       st.integers(0, 150), st.sets(st.sampled_from("abcdefgh"), max_size=3))
def test_continuations_fit_take_nothing_twice_and_follow_their_chains(following, left, taken):
    size = {}
    for chain in following:  # one size per segment id, as in a store
        for sid, tokens in chain:
            size.setdefault(sid, tokens)
    following = [[(sid, size[sid]) for sid, _ in chain] for chain in following]
    added = continue_passages(following, left, taken)
    flat = [sid for more in added for sid in more]
    assert len(flat) == len(set(flat)) and not set(flat) & taken
    assert sum(size[sid] for sid in flat) <= left
    for chain, more in zip(following, added):
        assert [sid for sid, _ in chain[:len(more)]] == more  # a prefix of its own chain
        if len(more) < len(chain):  # it stopped for a reason: taken, or too big for what was left at the end
            sid, tokens = chain[len(more)]
            assert sid in taken or sid in flat or tokens > left - sum(size[s] for s in flat)


def test_the_best_passage_reads_on_through_its_parent_joining_passages_whole():
    chain = [("a", "c", 40), ("b", "c", 30), ("b2", "c", 10), ("d", "c", 50), ("e", "x", 9)]
    held = {"b": (3, 2)}  # passage 3 is b, b2
    assert read_on(chain, "c", 20, 100, held) == (3, [3])  # a, then passage 3 whole (90); d would pass 100
    assert read_on(chain, "c", 20, 80, held) == (1, [])  # passage 3 whole would make 100: it ends there
    assert read_on(chain, "c", 20, 1000, held) == (4, [3])  # e is of another parent
    assert read_on(chain, "c", 20, 1000, {}, frozenset({"b2"})) == (2, [])  # a segment held otherwise ends it
    assert read_on(chain, "c", 20, 20, held) == (0, [])
    assert read_on(chain, "other", 20, 1000, held) == (0, [])


@given(st.lists(st.tuples(st.sampled_from("cx"), st.integers(1, 60)), max_size=8), st.integers(1, 60),
       st.integers(0, 300), st.sets(st.integers(0, 7), max_size=3))
def test_reading_on_takes_a_prefix_of_its_parent_within_the_cap(rows, size, cap, starts):
    chain = [(f"s{i}", parent, tokens) for i, (parent, tokens) in enumerate(rows)]
    held = {f"s{i}": (10 + i, 1) for i in starts}
    n, joined = read_on(chain, "c", size, cap, held)
    took = chain[:n]
    assert all(parent == "c" for _, parent, _ in took)
    assert size + sum(t for *_, t in took) <= max(cap, size) and (n == 0 or size + sum(t for *_, t in took) <= cap)
    assert joined == [10 + i for i in starts if i < n]
    if n < len(chain):  # it stopped for a reason: another parent, or the cap
        _, parent, tokens = chain[n]
        assert parent != "c" or size + sum(t for *_, t in took) + tokens > cap


def test_reading_on_is_paid_for_by_the_last_passages():
    assert pay_for([300, 100, 100, 100], 480) == [0, 1]
    assert pay_for([300, 100, 100, 100], 600) == [0, 1, 2, 3]
    assert pay_for([700, 100], 480) == [0]  # the best passage stays, however large
    assert pay_for([], 10) == []


def test_what_rule_5_leaves_goes_to_the_longest_cut_that_fits_in_rank_order():
    nexts = [("a", [(10, 4), (25, 9), (40, 15)]), None, ("b", [(7, 3), (20, 8)]), ("c", [(5, 2)])]
    # a: 25 chars (9 tokens) of the 12 left; b's first cut (3) then fits the 3 left; c: nothing left
    assert cut_passages(nexts, 12) == [("a", 25, 9), None, ("b", 7, 3), None]
    assert cut_passages(nexts, 3) == [None, None, ("b", 7, 3), None]  # a's first cut is too big; b's is not
    assert cut_passages(nexts, 0) == [None] * 4
    assert cut_passages([("a", [(10, 4)]), ("a", [(10, 4)])], 50) == [("a", 10, 4), None]  # never cut twice
    assert cut_passages([("a", [(10, 4)])], 50, taken={"a"}) == [None]
    assert cut_passages([("a", [])], 50) == [None]  # one sentence: no cut


@given(st.lists(st.one_of(st.none(), st.tuples(st.sampled_from("abcdef"),
                                                 st.lists(st.integers(1, 30), max_size=4))), max_size=5),
       st.integers(0, 100), st.sets(st.sampled_from("abcdef"), max_size=2))
def test_cuts_fit_cut_nothing_twice_and_take_the_longest_that_fitted_then(nexts, left, taken):
    cuts = {}
    for nxt in nexts:  # one set of cuts per segment id, as in a store: offsets and tokens increasing
        if nxt is not None:
            cuts.setdefault(nxt[0], [(10 * (j + 1), t) for j, t in enumerate(np.cumsum(nxt[1]).tolist())])
    nexts = [None if nxt is None else (nxt[0], cuts[nxt[0]]) for nxt in nexts]
    got = cut_passages(nexts, left, taken)
    flat = [c[0] for c in got if c is not None]
    assert len(flat) == len(set(flat)) and not set(flat) & taken
    assert sum(c[2] for c in got if c is not None) <= left
    spent, earlier = 0, set()
    for nxt, cut in zip(nexts, got):
        if cut is not None:
            assert cut[:1] == nxt[:1] and (cut[1], cut[2]) in nxt[1]
            bigger = [t for o, t in nxt[1] if o > cut[1]]
            assert not bigger or bigger[0] > left - spent  # the longest that fitted what was left then
            spent += cut[2]
            earlier.add(cut[0])
        elif nxt is not None and nxt[0] not in taken and nxt[1]:  # not cut for a reason: cut already, or too big
            assert nxt[0] in earlier or nxt[1][0][1] > left - spent


def brute_force(chunkings, q, budget, k, weight):
    segs = [s for ch in chunkings for c in ch.clusters for s in c.segments]
    parent = {s.id: c for ch in chunkings for c in ch.clusters for s in c.segments}
    seg_score = np.array([float(s.embedding @ q) / float(np.linalg.norm(s.embedding)) for s in segs])
    clu_score = {c.id: float(c.embedding @ q) / float(np.linalg.norm(c.embedding))
                 for ch in chunkings for c in ch.clusters}
    siblings, neighbour = siblings_and_neighbours(segs, parent, seg_score)
    cands = UnitCandidates(
        ids=[s.id for s in segs], cluster=[parent[s.id].id for s in segs], position=[s.index for s in segs],
        tokens=[s.token_count for s in segs], segment_score=seg_score,
        cluster_score=np.array([clu_score[parent[s.id].id] for s in segs]), siblings=siblings,
        neighbour_score=np.array(neighbour), neighbour_weight=0.2 if weight else 0.0,
    )
    taken = select_auto(cands, budget, max_units=k, cluster_weight=weight,
                        whole_cluster_min=DEFAULT_WHOLE_CLUSTER_MIN if weight else 1 << 30)
    return [[cands.ids[i] for i in run] for run in merge_runs_of_segments(cands, taken, weight)]


@pytest.mark.parametrize(("unit", "path"), [("auto", "unit index"), ("auto", "gathered"), ("segment", "kNN"),
                                           ("auto", "small pages"), ("segment", "small pages"),
                                           ("auto", "gathered, filtered"), ("auto", "unit index, filtered")])
def test_store_units_equal_brute_force(chroma_client, chroma_collection_name, make_chunking, unit, path,
                                       monkeypatch):
    if path == "small pages":  # every widening and every further read of the segment path runs
        read_in_small_pages(monkeypatch)
    rng = np.random.default_rng(7)
    chunkings = [make_chunking(f"doc{i}", rng, n_clusters=6, max_segments=5) for i in range(4)]
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=HashingEncoder(16))
    store.add(chunkings)
    assert store._parts.units.count() == sum(len(ch.segments) for ch in chunkings)
    if path.startswith("gathered"):
        store._parts.units = None  # as for a collection written by another tool
    if unit == "auto":
        usable = store._parts.units is not None and store._parts.units.usable(0.5, 0.2) is not None
        assert usable == (not path.startswith("gathered"))
    weight = 0.5 if unit == "auto" else 0.0
    # a filter keeps whole documents, so the brute force over those documents is the answer
    where = {"hseg_doc_id": {"$in": ["doc0", "doc2"]}} if path.endswith("filtered") else None
    kept = [ch for ch in chunkings if where is None or ch.doc_id in ("doc0", "doc2")]
    for trial in range(4):
        q = rng.standard_normal(16).astype(np.float32)
        q /= np.linalg.norm(q)
        for budget, k in [(None, 1), (None, 7), (40, None), (150, None), (10_000, None)]:
            hits = store.search(q, k=k, budget_tokens=budget, unit=unit, where=where)
            expected = brute_force(kept, q, budget, k, weight)
            assert [h.segment_ids for h in hits] == expected, (trial, budget, k)
            texts = {ch.doc_id: ch.text for ch in chunkings}
            spans = sorted((h.doc_id, h.start, h.end) for h in hits)
            for h in hits:
                assert texts[h.doc_id][h.start : h.end] == h.text and h.unit == unit
            for (d1, _, e1), (d2, s2, _) in zip(spans, spans[1:]):
                assert d1 != d2 or e1 <= s2  # never the same characters twice


@pytest.mark.parametrize("lexical_weight", [0.0, 0.3])
def test_a_cluster_taken_whole_is_read_as_its_record_and_its_best_segment(chroma_client, chroma_collection_name,
                                                                           make_chunking, monkeypatch, lexical_weight):
    """Its text and span are the cluster record's, its metadata the best segment's: the other scored
    segments' records are not read, and the hits equal those built from every scored segment's.
    (The collection's records: the lexical table serves the hybrid search otherwise, tested in
    ``test_hybrid.py``.)"""
    import hseg.retrieval.passages.indexed as indexed
    import hseg.retrieval.plans as plans

    monkeypatch.setattr(indexed, "_from_table", lambda *args: None)

    rng = np.random.default_rng(11)
    words = ["alpha", "beta", "gamma", "delta", "kappa", "omega", "sigma"]
    chunkings = [make_chunking(f"doc{i}", rng, n_clusters=6, max_segments=5, vocabulary=words) for i in range(4)]
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=HashingEncoder(16))
    store.add(chunkings)
    clusters = {c.id: c for ch in chunkings for c in ch.clusters}
    read: list[str] = []
    real_get = plans._get

    def recorded(batch):
        read.extend(rid for r in batch if r.collection.name == store.collection.name for rid in r.ids)
        return real_get(batch)

    monkeypatch.setattr(plans, "_get", recorded)
    queries = [q / np.linalg.norm(q) for q in rng.standard_normal((12, 16)).astype(np.float32)]
    searches = [(q, budget) for q in queries for budget in (150, 400)]
    lexical = {"lexical_weight": lexical_weight, "query_text": "alpha kappa"} if lexical_weight else {}
    answers, reads = [], []
    for q, budget in searches:
        read.clear()
        answers.append(store.search(q, budget_tokens=budget, unit="auto", **lexical))
        reads.append(set(read))
    wholes = 0
    for hits, got in zip(answers, reads):
        for h in hits:
            if h.cluster_id in got:  # taken whole: its record and its best segment, no other of its segments
                wholes += 1
                cluster = clusters[h.cluster_id]
                # (with the lexical side, rules 5 and 6 may continue it past the cluster's end)
                assert h.start == cluster.start and h.text.startswith(cluster.text)
                assert h.segment_ids[:len(cluster.segments)] == [s.id for s in cluster.segments]
                assert got & {s.id for s in cluster.segments} == {h.matched_id}
                assert h.score == max(h.segment_scores.values()) == h.segment_scores[h.matched_id]
                assert len(h.segment_scores) >= 2
    assert wholes > 0

    def every_scored_segment(keys, score, runs):  # what was read before: each scored segment's record too
        whole = sorted({keys[run[0]].cluster_id for run, w in runs if w})
        return [keys[i].segment_id for run, _ in runs for i in run] + whole

    monkeypatch.setattr(indexed, "_to_read", every_scored_segment)
    assert [store.search(q, budget_tokens=b, unit="auto", **lexical) for q, b in searches] == answers


class CountingCollection:
    """A collection that counts the Chroma calls made through it."""

    def __init__(self, collection):
        self._collection = collection
        self.calls = 0

    def __getattr__(self, name):
        attr = getattr(self._collection, name)
        if name in ("query", "get"):
            def counted(*args, **kwargs):
                self.calls += 1
                return attr(*args, **kwargs)
            return counted
        return attr


def test_searches_returning_records_are_batched_by_their_results():
    """A call's searches return at most RESULTS_PER_CALL records' contents (SQLite bounds the variables
    of the statement that reads them); distance-only searches and gets go READS_PER_CALL at a time."""
    from hseg.retrieval.plans import READS_PER_CALL, RESULTS_PER_CALL, Get, Knn, _per_call

    v = np.zeros(4, dtype=np.float32)
    assert _per_call(Knn(None, v, 500)) == READS_PER_CALL == _per_call(Get(None, ("a",)))
    assert _per_call(Knn(None, v, 500, include=("metadatas", "distances"))) == RESULTS_PER_CALL // 500
    assert _per_call(Knn(None, v, 10, include=("documents",))) == READS_PER_CALL
    assert _per_call(Knn(None, v, 10 * RESULTS_PER_CALL, include=("documents",))) == 1


def _summary(hits):
    return [(h.cluster_id, h.unit, h.segment_ids, h.start, h.end, h.text, h.score, h.token_count, h.matched_id)
            for h in hits]


@pytest.mark.parametrize("small_pages", [False, True])
def test_search_many_answers_each_query_as_search_does(chroma_client, chroma_collection_name, make_chunking,
                                                       small_pages, monkeypatch):
    if small_pages:  # widening rounds and further reads run, at a different step for each query
        import hseg.retrieval.plans

        read_in_small_pages(monkeypatch)
        monkeypatch.setattr(hseg.retrieval.plans, "READS_PER_CALL", 4)  # groups split over several calls
        monkeypatch.setattr(hseg.retrieval.plans, "RESULTS_PER_CALL", 9)  # and searches of records by results
    rng = np.random.default_rng(11)
    chunkings = [make_chunking(f"doc{i}", rng, n_clusters=5, max_segments=5) for i in range(4)]
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=HashingEncoder(16))
    store.add(chunkings)
    queries = [q / np.linalg.norm(q) for q in rng.standard_normal((9, 16)).astype(np.float32)]
    settings = [dict(k=1), dict(k=6), dict(budget_tokens=60), dict(budget_tokens=400), dict(k=3, mode="cluster"),
                dict(budget_tokens=200, mode="segment"), dict(k=2, where={"hseg_doc_id": "doc1"}),
                dict(k=4, unit="segment"), dict(budget_tokens=150, unit="segment"), dict(k=4, unit="auto"),
                dict(budget_tokens=150, unit="auto"),
                dict(budget_tokens=150, unit="auto", where={"hseg_doc_id": "doc2"}),
                # weights other than the unit index's: the gathered path
                dict(k=3, unit="auto", cluster_weight=0.3), dict(budget_tokens=150, unit="auto", cluster_weight=0.3),
                dict(budget_tokens=150, unit="auto", cluster_weight=0.0, neighbour_weight=0.0,
                     where={"hseg_doc_id": "doc1"})]
    for setting in settings:
        one = [_summary(store.search(q, **setting)) for q in queries]
        many = [_summary(hits) for hits in store.search_many(queries, **setting)]
        assert many == one, setting
    import asyncio

    assert [_summary(h) for h in asyncio.run(store.asearch_many(queries[:3], budget_tokens=150, unit="auto"))] == \
        [_summary(store.search(q, budget_tokens=150, unit="auto")) for q in queries[:3]]
    counting = CountingCollection(store.collection)
    store._parts.collection = counting
    for setting in (dict(budget_tokens=400), dict(budget_tokens=150, unit="auto", cluster_weight=0.3)):
        counting.calls = 0
        store.search_many(queries, **setting)
        batched, counting.calls = counting.calls, 0
        for q in queries:
            store.search(q, **setting)
        assert batched < counting.calls, setting


def test_search_many_checks_its_arguments(chroma_collection_name):
    import chromadb

    store = HierarchicalStore(chroma_collection_name, client=chromadb.EphemeralClient(), encoder=HashingEncoder(16))
    with pytest.raises(ValueError, match="queries must be a list"):
        store.search_many("one question", unit="cluster")
    with pytest.raises(ValueError, match="k must be a positive int"):
        store.search_many([np.ones(16, np.float32)], k=0, unit="cluster")
    assert store.search_many([], unit="cluster") == []


def test_unit_arguments_are_checked(chroma_collection_name):
    import chromadb

    store = HierarchicalStore(chroma_collection_name, client=chromadb.EphemeralClient(), encoder=HashingEncoder(16))
    q = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="unit"):
        store.search(q, unit="sentence")
    with pytest.raises(ValueError, match="mode"):
        store.search(q, unit="auto", mode="cluster")
    with pytest.raises(ValueError, match="cluster_weight"):
        store.search(q, unit="auto", cluster_weight=-1)
    with pytest.raises(ValueError, match="neighbour_weight"):
        store.search(q, unit="auto", neighbour_weight="a")
