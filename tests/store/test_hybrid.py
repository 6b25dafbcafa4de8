"""The lexical score in every unit (lexical_weight > 0): each search path against brute force over
every segment, the settings' doors, and lexical_weight=0 leaving the dense search as it was."""

from __future__ import annotations

import asyncio

import chromadb
import numpy as np
import pytest

from hseg.chunking.records import RESERVED_PREFIX, SETTINGS_KEY
from hseg.retrieval.lexical_query import fts5_match, query_terms
from hseg.retrieval.selection import UnitCandidates, merge_runs, merge_runs_of_segments, select_auto, walk
from hseg.retrieval.settings import DEFAULT_READ_ON_MARGIN, DEFAULT_READ_ON_SHARE
from hseg.store import HierarchicalStore, SearchSettings
from hseg_testing.fakes import HashingEncoder, read_in_small_pages, siblings_and_neighbours
from tests.support.chunkings import build_synthetic_chunking

VOCAB = ("tide moon river delta glacier comet orbit valve piston court verdict yeast dough vaccine market "
         "price ridge summit crust silt").split()
QUESTIONS = ["tide moon river", "glacier ridge summit crust", "court verdict", "comet orbit moon tide delta",
             "yeast", "market price vaccine silt piston valve"]


def make_store(client, name, seed=7, docs=4):
    rng = np.random.default_rng(seed)
    chunkings = [build_synthetic_chunking(f"doc{i}", rng, n_clusters=6, max_segments=5, vocabulary=VOCAB)
                 for i in range(docs)]
    store = HierarchicalStore(name, client=client, encoder=HashingEncoder(16))
    store.add(chunkings, [{"source": f"s{i}"} for i in range(docs)])
    return store, chunkings, rng


def lexical_scores(store, chunkings, text):
    """lex(s) for every segment: its BM25 divided by the query's best over the whole collection, as
    FTS5 itself ranks the query's words (one OR query, not the index's word-at-a-time sum)."""
    index = store._parts.lexical
    index.ensure_fresh()
    found = dict(index.db.rows("SELECT s.id, -bm25(fts) FROM fts JOIN segments s ON s.rowid = fts.rowid "
                               "WHERE fts MATCH ?", (fts5_match(query_terms(text)),)))
    raw = {s.id: found.get(s.id, 0.0) for ch in chunkings for s in ch.segments}
    best = max(raw.values())
    return {sid: x / best for sid, x in raw.items()} if best > 0 else {sid: 0.0 for sid in raw}


def cos(v, q):
    return float(v @ q) / float(np.linalg.norm(v))


def expected_passages(chunkings, kept, q, lex, lam, unit, budget, k, read_on=DEFAULT_READ_ON_SHARE,
                      margin=DEFAULT_READ_ON_MARGIN):
    segs = [s for ch in chunkings if ch.doc_id in kept for c in ch.clusters for s in c.segments]
    by_id = {s.id: s for s in segs}
    parent = {s.id: c for ch in chunkings for c in ch.clusters for s in c.segments}
    seg = np.array([cos(s.embedding, q) for s in segs])
    lexical = np.array([lex[s.id] for s in segs])
    if unit == "segment":
        score = seg + lam * lexical
        sel = walk(score, [parent[s.id].id for s in segs], [s.token_count for s in segs], {}, budget, max_units=k)
        keys = [(parent[s.id].id, s.index) for s in segs]
        runs = [[segs[i] for i in run] for run in merge_runs(keys, sel.taken, score)]
        return [[s.id for s in run] for run in runs], [run[-1].end for run in runs]
    siblings, neighbour = siblings_and_neighbours(segs, parent, seg)
    scale = 1.0 + 0.5 + 0.2
    cands = UnitCandidates(
        ids=[s.id for s in segs], cluster=[parent[s.id].id for s in segs], position=[s.index for s in segs],
        tokens=[s.token_count for s in segs], segment_score=seg,
        cluster_score=np.array([cos(parent[s.id].embedding, q) for s in segs]), siblings=siblings,
        neighbour_score=np.array(neighbour), neighbour_weight=0.2, lexical_score=lexical, lexical_weight=lam * scale)
    taken = select_auto(cands, budget, max_units=k, cluster_weight=0.5)
    runs = merge_runs_of_segments(cands, taken, 0.5)
    passages = [[cands.ids[i] for i in run] for run in runs]
    if budget is None:
        return passages, [by_id[p[-1]].end for p in passages]
    fused = cands.fused(0.5)
    reported = [max(fused[i] for i in run) / (scale * (1.0 + lam)) for run in runs]  # as hits report them
    cap = int(read_on * budget)
    return continued(segs, read_on_by_hand(segs, parent, passages, budget, cap, reported, margin), budget)


def read_on_by_hand(segs, parent, passages, budget, cap, scores, margin):
    """Rule 5a by hand: when the first passage's score leads the second's by more than ``margin``, it
    takes the segments after it while they are of its parent and it holds at most ``cap`` tokens,
    another passage met on the way joining it whole (or ending it); then the last passages are
    dropped while the total is over the budget."""
    if not cap or not passages or (len(passages) > 1 and scores[0] - scores[1] <= margin):
        return passages
    at = {(s.doc_id, s.index): s for s in segs}
    by_id = {s.id: s for s in segs}
    tokens = lambda ids: sum(by_id[sid].token_count for sid in ids)  # noqa: E731
    out = [list(p) for p in passages]
    lead, size, joined = out[0], tokens(out[0]), set()
    starts = {p[0]: i for i, p in enumerate(out) if i}
    while True:
        last = by_id[lead[-1]]
        after = at.get((last.doc_id, last.index + 1))
        if after is None or parent[after.id].id != parent[lead[0]].id:
            break
        block = out[starts[after.id]] if after.id in starts else [after.id]
        if any(sid in p for p in out[1:] for sid in block) and after.id not in starts:
            break
        if size + tokens(block) > cap:
            break
        lead += block
        size += tokens(block)
        joined.add(starts.get(after.id))
    out = [p for i, p in enumerate(out) if i not in joined]
    if len(out[0]) > len(passages[0]):
        while len(out) > 1 and sum(tokens(p) for p in out) > budget:
            out.pop()
    return out


def continued(segs, passages, budget):
    """Rules 5 and 6 by hand: in rounds, each passage in order takes the segment after it in its
    document while that fits the rest of the budget and is not taken already; then each, in order,
    takes the longest prefix of the untaken segment after it that ends at one of its cuts and fits."""
    at = {(s.doc_id, s.index): s for s in segs}
    by_id = {s.id: s for s in segs}
    taken = {sid for p in passages for sid in p}
    left = budget - sum(by_id[sid].token_count for sid in taken)
    out = [list(p) for p in passages]
    stopped = [False] * len(out)
    while not all(stopped):
        for i, passage in enumerate(out):
            last = by_id[passage[-1]]
            after = at.get((last.doc_id, last.index + 1))
            if stopped[i] or after is None or after.id in taken or after.token_count > left:
                stopped[i] = True
                continue
            passage.append(after.id)
            taken.add(after.id)
            left -= after.token_count
    ends = [by_id[p[-1]].end for p in out]
    for i, passage in enumerate(out):
        last = by_id[passage[-1]]
        after = at.get((last.doc_id, last.index + 1))
        fitting = [(offset, tokens) for offset, tokens in (after.cuts if after else ()) if tokens <= left]
        if after is None or after.id in taken or not fitting:
            continue
        passage.append(after.id)
        taken.add(after.id)
        ends[i] = after.start + fitting[-1][0]
        left -= fitting[-1][1]
    return out, ends
def expected_parents(chunkings, kept, q, lex, lam, mode, budget, k):
    out = []
    for ch in chunkings:
        if ch.doc_id not in kept:
            continue
        for c in ch.clusters:
            vectors = ([c.embedding] if mode != "segment" else []) + \
                ([s.embedding for s in c.segments] if mode != "cluster" else [])
            dense = max(cos(v, q) for v in vectors)
            out.append((dense + lam * max(lex[s.id] for s in c.segments), c.id, c.token_count))
    out.sort(key=lambda t: -t[0])
    if k is not None:
        return [cid for _, cid, _ in out[:k]]
    chosen, total = [], 0
    for i, (_, cid, tokens) in enumerate(out):
        if i and total + tokens > budget:
            break
        chosen.append(cid)
        total += tokens
    return chosen


SIZES = [(None, 1), (None, 5), (40, None), (150, None), (10_000, None)]


def questions(store, chunkings, rng):
    """``(text, a unit query vector, the brute-force lexical scores of text)`` for each of QUESTIONS."""
    for text in QUESTIONS:
        q = rng.standard_normal(16).astype(np.float32)
        yield text, q / np.linalg.norm(q), lexical_scores(store, chunkings, text)


@pytest.mark.parametrize(("unit", "path"), [("auto", "unit index"), ("auto", "gathered"), ("segment", "kNN"),
                                           ("auto", "small pages"), ("segment", "small pages"),
                                           ("auto", "unit index, filtered"), ("segment", "filtered"),
                                           ("auto", "gathered, filtered")])
@pytest.mark.parametrize(("lam", "read_on"), [(0.3, 0.0), (2.0, 0.0), (0.3, 0.6)])
def test_hybrid_passages_equal_brute_force(chroma_client, chroma_collection_name, unit, path, lam, read_on,
                                           monkeypatch):
    if "small pages" in path:  # every widening of both lists runs
        read_in_small_pages(monkeypatch)
    store, chunkings, rng = make_store(chroma_client, chroma_collection_name)
    if path.startswith("gathered"):
        store._parts.units = None
    where = {"hseg_doc_id": {"$in": ["doc0", "doc2"]}} if path.endswith("filtered") else None
    kept = {"doc0", "doc2"} if where else {ch.doc_id for ch in chunkings}
    by_id = {s.id: s for ch in chunkings for s in ch.segments}
    cut_short = read_on_changed = 0
    for text, q, lex in questions(store, chunkings, rng):
        for budget, k in SIZES:
            hits = store.search(q, k=k, budget_tokens=budget, unit=unit, where=where, lexical_weight=lam,
                                query_text=text, read_on_share=read_on, read_on_margin=0.0)  # no ties here
            passages, ends = expected_passages(chunkings, kept, q, lex, lam, unit, budget, k, read_on, 0.0)
            assert [h.segment_ids for h in hits] == passages, (text, budget, k)
            read_on_changed += read_on > 0 and passages != expected_passages(chunkings, kept, q, lex, lam, unit,
                                                                             budget, k, 0.0)[0]
            assert [h.end for h in hits] == ends, (text, budget, k)  # rule 6: some end inside a segment
            cut_short += sum(h.end != by_id[h.segment_ids[-1]].end for h in hits)
            for h in hits:
                assert h.unit == unit and -1.0 <= h.score <= 1.0
                assert h.text == next(ch.text for ch in chunkings if ch.doc_id == h.doc_id)[h.start:h.end]
    assert (cut_short > 0) == (unit == "auto")  # rule 6 ran, and only where it applies
    assert (read_on_changed > 0) == (unit == "auto" and read_on > 0)  # rule 5a ran, and only where it applies


@pytest.mark.parametrize("mode", ["segment+cluster", "cluster", "segment"])
@pytest.mark.parametrize("filtered", [False, True])
def test_hybrid_parents_equal_brute_force(chroma_client, chroma_collection_name, mode, filtered):
    store, chunkings, rng = make_store(chroma_client, chroma_collection_name)
    where = {"source": {"$in": ["s1", "s3"]}} if filtered else None
    kept = {"doc1", "doc3"} if filtered else {ch.doc_id for ch in chunkings}
    for text, q, lex in questions(store, chunkings, rng):
        for budget, k in SIZES:
            hits = store.search(q, k=k, budget_tokens=budget, mode=mode, where=where, lexical_weight=0.5,
                                query_text=text, unit="cluster")
            assert [h.cluster_id for h in hits] == expected_parents(chunkings, kept, q, lex, 0.5, mode, budget, k), \
                (text, budget, k)
            texts = {ch.doc_id: ch.text for ch in chunkings}
            for h in hits:
                assert texts[h.doc_id][h.start:h.end] == h.text and h.unit == "cluster"


def test_a_document_filter_applies_to_the_lexical_candidates(chroma_collection_name):
    store, chunkings, rng = make_store(chromadb.EphemeralClient(), chroma_collection_name)
    lex = lexical_scores(store, chunkings, "tide moon")
    q = rng.standard_normal(16).astype(np.float32)
    q /= np.linalg.norm(q)
    hits = store.search(q, budget_tokens=10_000, unit="segment", lexical_weight=1.0, query_text="tide moon",
                        where_document={"$contains": "glacier"})
    taken = [s for h in hits for s in h.segment_ids]
    texts = {s.id: s.text for ch in chunkings for s in ch.segments}
    assert taken and all("glacier" in texts[s] for s in taken)
    assert sorted(taken) == sorted(s for s in texts if "glacier" in texts[s])
    assert any(lex[s] > 0 for s in taken)
    # the auto unit obeys it too, in its neighbours and clusters' segments (the gathered path; these two
    # reads once left it out) and in its continuations (rule 5): a budget this size takes every match
    for lam in (1.0, 0.0):
        hits = store.search(q, budget_tokens=10_000, unit="auto", lexical_weight=lam, query_text="tide moon",
                            where_document={"$contains": "glacier"})
        assert sorted(s for h in hits for s in h.segment_ids) == sorted(s for s in texts if "glacier" in texts[s])


def test_weight_zero_is_the_dense_search_and_the_weight_moves_lexical_matches_up(chroma_collection_name):
    store, chunkings, rng = make_store(chromadb.EphemeralClient(), chroma_collection_name)
    q = rng.standard_normal(16).astype(np.float32)
    for unit in ("cluster", "segment", "auto"):
        dense = store.search(q, budget_tokens=200, unit=unit)
        off = store.search(q, budget_tokens=200, unit=unit, lexical_weight=0.0, query_text="yeast")
        assert [(h.segment_ids, h.cluster_id, h.score) for h in off] == [(h.segment_ids, h.cluster_id, h.score)
                                                                          for h in dense]
    # a large weight ranks the segments holding the query's rarest word first
    hits = store.search(q, k=3, unit="segment", lexical_weight=10.0, query_text="yeast")
    texts = {s.id: s.text for ch in chunkings for s in ch.segments}
    assert "yeast" in texts[hits[0].matched_id]


def test_a_vector_query_needs_its_text_and_a_string_query_is_its_own(chroma_collection_name, caplog):
    store, _, rng = make_store(chromadb.EphemeralClient(), chroma_collection_name, docs=1)
    q = rng.standard_normal(16).astype(np.float32)
    with caplog.at_level("WARNING", logger="hseg.store.store"):  # a vector has no words: dense, said once
        for _ in range(2):
            hybrid = store.search(q, lexical_weight=0.5, unit="cluster")
    assert [h.cluster_id for h in hybrid] == [h.cluster_id for h in store.search(q, lexical_weight=0, unit="cluster")]
    assert caplog.text.count("without query_text= is searched densely") == 1
    with pytest.raises(ValueError, match="query_text: give it only beside a vector"):
        store.search("tide", lexical_weight=0.5, query_text="moon", unit="cluster")
    with pytest.raises(ValueError, match="query_texts must be a list"):
        store.search_many([q, q], lexical_weight=0.5, query_texts=["tide"], unit="cluster")
    with pytest.raises(ValueError, match="lexical_weight must be a number in"):
        store.search(q, lexical_weight=-1, query_text="tide", unit="cluster")
    assert store.search("tide moon", k=2, lexical_weight=0.5)  # embedded by the store's encoder, words read
    assert store.search(q, k=2, lexical_weight=0.5, query_text="!!!", unit="cluster")  # no words: the dense side alone


def test_search_many_and_async_answer_as_search_does(chroma_client, chroma_collection_name, monkeypatch):
    read_in_small_pages(monkeypatch)
    store, _, rng = make_store(chroma_client, chroma_collection_name)
    queries = [q / np.linalg.norm(q) for q in rng.standard_normal((len(QUESTIONS), 16)).astype(np.float32)]
    for setting in (dict(k=3), dict(budget_tokens=150, mode="segment"), dict(k=4, unit="segment"),
                    dict(budget_tokens=150, unit="auto"), dict(budget_tokens=150, unit="auto", cluster_weight=0.3),
                    dict(budget_tokens=400, unit="auto", where={"hseg_doc_id": "doc2"}),
                    dict(budget_tokens=150, unit="auto", lexical_weighting="coverage"),
                    dict(k=3, unit="segment", lexical_weighting="coverage")):
        setting = {**setting, "lexical_weight": 0.4}
        one = [[(h.segment_ids, h.cluster_id, h.score) for h in store.search(q, query_text=t, **setting)]
               for q, t in zip(queries, QUESTIONS)]
        many = [[(h.segment_ids, h.cluster_id, h.score) for h in hits]
                for hits in store.search_many(queries, query_texts=QUESTIONS, **setting)]
        assert many == one, setting
        later = asyncio.run(store.asearch_many(queries, query_texts=QUESTIONS, **setting))
        assert [[(h.segment_ids, h.cluster_id, h.score) for h in hits] for hits in later] == one
    settings = SearchSettings(budget_tokens=150, unit="auto", lexical_weight=0.4)
    assert [h.segment_ids for h in asyncio.run(store.asearch(queries[0], settings=settings,
                                                               query_text=QUESTIONS[0]))] == \
        [h.segment_ids for h in store.search(queries[0], settings=settings, query_text=QUESTIONS[0])]


# --------------------------------------------------------------------------- rules 5 and 6, decided on the table

_SEGMENTS = ["Alpha one. Alpha two. ", "Bravo one. Bravo two. ", "Charlie one. Charlie two. ",
             "Delta one. Delta two. ", "Echo one. Echo two. ", "Fox one. Fox two. ", "Golf one. Golf two. "]


class _Records:
    """A collection's ``get`` over one document's segment records (4 tokens each, cut after the first
    sentence at 2), keeping the ids of every call."""

    def __init__(self, keep=lambda i: True):
        self.records, self.calls, start = {}, [], 0
        for i, text in enumerate(_SEGMENTS):
            cut = text.index(". ") + 2
            self.records[f"s{i}"] = ({"hseg_doc_id": "d", "hseg_cluster_id": f"c{i}", "hseg_start": start,
                                      "hseg_end": start + len(text),
                                      "hseg_tokens": 4, "hseg_cuts": f"[[{cut}, 2]]", "keep": keep(i)}, text)
            start += len(text)

    def get(self, ids, where=None, where_document=None, include=()):
        self.calls.append(list(ids))
        got = [i for i in ids if i in self.records and (not where or self.records[i][0]["keep"] == where["keep"])]
        return {"ids": got, "metadatas": [self.records[i][0] for i in got],
                "documents": [self.records[i][1] for i in got]}


class _Table:
    """``following`` over the table's view of the document: ``sizes`` per position (a stale size where
    the table lags a rewrite), positions in ``missing`` absent."""

    def __init__(self, sizes=None, missing=()):
        from hseg.retrieval.lexical_query import LexicalRow

        cuts = {sid: meta["hseg_cuts"] for sid, (meta, _) in _Records().records.items()}  # as first written
        self.rows = [LexicalRow(f"s{i}", "d", f"c{i}", i, (sizes or {}).get(i, 4), cuts[f"s{i}"])
                     for i in range(len(_SEGMENTS)) if i not in missing]

    def following(self, segment_ids, max_tokens):
        out = {}
        for sid in segment_ids:
            at = int(sid[1:])
            chain, total = [], 0
            for row in self.rows:
                if row.position <= at:
                    continue
                if row.position != at + len(chain) + 1:
                    break  # a gap ends the list
                chain.append(row)
                total += row.tokens
                if total > max_tokens:
                    break
            out[sid] = chain
        return out


def _hit(records, i):
    from hseg.retrieval.hits import SearchHit

    meta, text = records.records[f"s{i}"]
    return SearchHit(cluster_id=f"c{i}", doc_id="d", text=text, start=meta["hseg_start"], end=meta["hseg_end"],
                     score=1.0, token_count=4, matched_id=f"s{i}", matched_level="segment", matched_start=0,
                     matched_end=0, unit="auto", segment_ids=[f"s{i}"])


def _continue(records, table, budget, where=None):
    from hseg.retrieval.continuation import Continuation, continued
    from hseg.retrieval.plans import run_one

    hits = [_hit(records, 0), _hit(records, 3)]  # passages s0 (ranked first) and s3
    return [(h.segment_ids, h.end, h.token_count) for h in
            run_one(continued(records, hits, Continuation(table, budget), where, None))]


def _read_on(budget, cap, margin, scores=(0.9, 0.5, 0.4)):
    """Rule 5a on the table: passages s0, s3, s5 (scored ``scores``), s0 to s3 of one parent."""
    import dataclasses

    from hseg.retrieval.continuation import Continuation, continued
    from hseg.retrieval.plans import run_one

    records, table = _Records(), _Table()
    table.rows = [dataclasses.replace(row, cluster_id="c" if row.position <= 3 else row.cluster_id)
                  for row in table.rows]
    hits = [dataclasses.replace(_hit(records, i), cluster_id="c" if i <= 3 else f"c{i}", score=x)
            for i, x in zip((0, 3, 5), scores)]
    got = run_one(continued(records, hits, Continuation(table, budget, cap, margin), None, None))
    return [h.segment_ids for h in got], records.calls


def test_the_best_passage_reads_on_through_its_parent_and_the_last_passages_pay():
    # s0 reads on s1 (8 of the 9 it may hold); 16 tokens for a budget of 12: s5 is dropped
    assert _read_on(12, 9, 0.0)[0] == [["s0", "s1"], ["s3"]]
    # up to 16: s1, s2, then passage s3 joins it whole; s5 is dropped; s3's record is read with s1 and s2
    got, calls = _read_on(16, 16, 0.0)
    assert got == [["s0", "s1", "s2", "s3"]] and [sorted(c) for c in calls] == [["s1", "s2", "s3"]]
    # the best passage does not lead the next by more than the margin: no reading on, nothing dropped
    assert _read_on(12, 9, 0.5)[0] == [["s0"], ["s3"], ["s5"]]
    assert _read_on(12, 9, 0.0, scores=(0.5, 0.5, 0.4))[0] == [["s0"], ["s3"], ["s5"]]  # a tie
    assert _read_on(12, 0, 0.0)[0] == [["s0"], ["s3"], ["s5"]]  # off


def test_the_rest_of_a_budget_is_decided_on_the_table_and_reads_only_what_it_uses():
    records = _Records()
    source = "".join(_SEGMENTS)
    # 10 tokens left: s1 and s4 whole (round 1), then s2 does not fit the 2 left, its first sentence does
    got = _continue(records, _Table(), 18)
    cut_end = records.records["s2"][0]["hseg_start"] + _SEGMENTS[2].index(". ") + 2
    assert got == [(["s0", "s1", "s2"], cut_end, 10), (["s3", "s4"], records.records["s4"][0]["hseg_end"], 8)]
    assert [sorted(c) for c in records.calls] == [["s1", "s2", "s4"]]  # one read, of the used records only
    assert source[0:cut_end].endswith("Charlie one. ")


@pytest.mark.parametrize("stale", ["size", "start", "cut", "filtered"])
def test_a_record_that_does_not_continue_as_the_table_says_ends_its_passage_there(stale):
    """A table that lags a rewrite (another size, start or cut), or a record the filters exclude: the
    passage stops before that segment and the budget goes where a table without it would send it."""
    records, where = _Records(keep=lambda i: stale != "filtered" or i != 1), {"keep": True}
    if stale == "start":
        records.records["s1"][0]["hseg_start"] += 1
    if stale == "cut":
        records.records["s1"][0]["hseg_cuts"] = "[[3, 1]]"
    sizes = {1: 3} if stale == "size" else None
    for budget in (10,) if stale == "cut" else (10, 12, 18, 30):  # another cut matters only where s1 is cut
        expected = _continue(_Records(), _Table(missing={1}), budget)
        assert _continue(records, _Table(sizes=sizes), budget, where) == expected, budget


@pytest.mark.parametrize("from_table", [True, False])
def test_the_records_rules_5_and_6_use_come_in_the_passages_own_read(chroma_collection_name, monkeypatch,
                                                                       from_table):
    """On the unit index without a filter, the passages' records and those the rest of the budget adds
    to them come in one read: from the lexical table, with no ``get`` at all, or (the table lagging a
    write) from the collection in one ``get`` (vector reads aside). The same answers as reading those
    after the passages (and as brute force, above)."""
    import hseg.retrieval.passages.indexed as indexed
    import hseg.retrieval.plans as plans

    if not from_table:
        monkeypatch.setattr(indexed, "_from_table", lambda *args: None)
    store, chunkings, _ = make_store(chromadb.EphemeralClient(), chroma_collection_name)
    reads: list[str] = []
    real = plans._get

    def counted(batch):
        reads.extend("records" for r in batch if "embeddings" not in r.include)
        return real(batch)

    monkeypatch.setattr(plans, "_get", counted)

    def run():
        out = []
        for text, q, _ in questions(store, chunkings, np.random.default_rng(3)):
            for budget in (40, 120, 300):
                reads.clear()
                hits = store.search(q, budget_tokens=budget, unit="auto", lexical_weight=0.3, query_text=text)
                out.append(([(h.segment_ids, h.start, h.end, h.text) for h in hits], len(reads)))
        return out

    ahead = run()

    def nothing_ahead(*args):  # a plan that reads nothing ahead
        return []
        yield

    monkeypatch.setattr(indexed, "_read_ahead", nothing_ahead)
    after = run()
    assert [hits for hits, _ in ahead] == [hits for hits, _ in after]
    one = 0 if from_table else 1
    assert {n for _, n in ahead} == {one}
    assert any(n == one + 1 for _, n in after)  # without reading ahead, the rules read again: they were used


def test_passages_read_from_the_lexical_table_equal_the_collections(chroma_collection_name, monkeypatch):
    """The hybrid ``unit="auto"`` search reads its passages, a cluster taken whole as all of its
    segments, and what rules 5 and 6 read ahead from the lexical table, with no ``get`` of records;
    each hit equals the one read from the collection, its metadata the collection record's but for
    the keys no search reads (:func:`~hseg.retrieval.unit_vectors.search_metadata`), and so does
    what both adapters return (``result_for``). Where the table names a cluster's segments otherwise
    than the walk's keys, or holds a segment of another size (a write in flight), the collection is read."""
    import dataclasses

    import hseg.retrieval.passages.indexed as indexed
    import hseg.retrieval.plans as plans
    from hseg.retrieval.results import result_for
    from hseg.store.lexical import LexicalIndex

    store, chunkings, _ = make_store(chromadb.EphemeralClient(), chroma_collection_name)
    reads: list[str] = []
    real_get = plans._get

    def recorded(batch):
        reads.extend(r.collection.name for r in batch if "embeddings" not in r.include)
        return real_get(batch)

    joined: list[str] = []
    real_joined = indexed._joined

    def counted(key, segment_ids, found):
        joined.append(key.cluster_id)
        return real_joined(key, segment_ids, found)

    monkeypatch.setattr(plans, "_get", recorded)
    monkeypatch.setattr(indexed, "_joined", counted)

    def run():
        answers, read = [], []
        for text, q, _ in questions(store, chunkings, np.random.default_rng(5)):
            for budget in (40, 120, 300, 600):
                reads.clear()
                answers.append(store.search(q, budget_tokens=budget, unit="auto", lexical_weight=0.3,
                                            query_text=text))
                read.append(list(reads))
        return answers, read

    def same(a, b):
        assert len(a) == len(b)
        for hits, others in zip(a, b):
            assert [dataclasses.replace(h, metadata={}) for h in hits] == \
                [dataclasses.replace(h, metadata={}) for h in others]
            assert [result_for(h) for h in hits] == [result_for(h) for h in others]

    from_table, read = run()
    assert joined, "no search took a cluster whole"
    assert all(names == [] for names in read)
    with monkeypatch.context() as m:
        m.setattr(indexed, "_from_table", lambda *args: None)
        from_collection, read = run()
        assert all(names == [store.collection.name] for names in read)
    same(from_table, from_collection)
    dropped = set()
    for hits, others in zip(from_table, from_collection):
        for h, o in zip(hits, others):
            assert h.metadata["hseg_doc_id"] == h.doc_id and "source" in h.metadata
            assert h.metadata == {k: o.metadata[k] for k in h.metadata}
            dropped |= set(o.metadata) - set(h.metadata)
    assert dropped and all(k.startswith(RESERVED_PREFIX) or k == SETTINGS_KEY for k in dropped)

    real_segments = LexicalIndex.cluster_segments
    with monkeypatch.context() as m:
        m.setattr(LexicalIndex, "cluster_segments",
                  lambda self, cids: {c: ids[:-1] for c, ids in real_segments(self, cids).items()})
        lagging, read = run()
        assert any(store.collection.name in names for names in read)
        same(lagging, from_collection)
    real_records = LexicalIndex.records
    with monkeypatch.context() as m:
        m.setattr(LexicalIndex, "records", lambda self, ids: {
            sid: ({**meta, "hseg_tokens": meta["hseg_tokens"] + 1}, text)
            for sid, (meta, text) in real_records(self, ids).items()})
        resized, read = run()
        assert all(names == [store.collection.name] for names in read if names)
        assert sum(bool(names) for names in read) > len(read) // 2
        same(resized, from_collection)


def test_the_lists_deepen_apart_and_the_knn_is_asked_again_only_when_it_deepens(chroma_client,
                                                                                 chroma_collection_name, monkeypatch):
    # at a million records, segments tied at the top of a rare word (copies of one text) kept the walk
    # undecided for rounds, and each round asked the kNN again at twice the depth and read again the
    # vectors the round before had read
    import hseg.retrieval.passages.indexed as indexed

    read_in_small_pages(monkeypatch)
    deepened, knn_reads = [], []
    real_deepen, real_knn = indexed._deepen, indexed.Knn

    def deepen(*args):
        depths = real_deepen(*args)
        deepened.append((args[:2], depths))
        return depths

    def knn(*args, **kwargs):
        knn_reads.append(args[2])
        return real_knn(*args, **kwargs)

    monkeypatch.setattr(indexed, "_deepen", deepen)
    monkeypatch.setattr(indexed, "Knn", knn)
    store, chunkings, rng = make_store(chroma_client, chroma_collection_name)
    kept = {ch.doc_id for ch in chunkings}
    searches = 0
    for lam in (0.3, 2.0):
        for text, q, lex in questions(store, chunkings, rng):
            for budget, k in SIZES:
                hits = store.search(q, k=k, budget_tokens=budget, unit="auto", lexical_weight=lam, query_text=text)
                assert [h.segment_ids for h in hits] == expected_passages(chunkings, kept, q, lex, lam, "auto",
                                                                          budget, k)[0]
                searches += 1
    knn_deeper = sum(after[0] != before[0] for before, after in deepened)
    assert len(knn_reads) == searches + knn_deeper
    assert any(after[0] == before[0] and after[1] > before[1] for before, after in deepened)  # the page alone
    assert any(after[0] > before[0] and after[1] == before[1] for before, after in deepened)  # the kNN alone
