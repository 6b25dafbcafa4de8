"""The harness's caches (benchmarks/harness/vector_cache.py) and the RRF peer, on the hashing encoder."""

from __future__ import annotations

import numpy as np

from benchmarks.harness.evaluation import Query
from benchmarks.harness.vector_cache import DiskCachingEncoder, MemoSegmenter
from hseg_testing.fakes import HashingEncoder


class CountingEncoder(HashingEncoder):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def encode(self, texts):
        self.seen += list(texts)
        return super().encode(texts)


def test_vectors_come_back_from_disk_and_only_new_texts_are_encoded(tmp_path):
    first = CountingEncoder()
    enc = DiskCachingEncoder(first, tmp_path)
    a = enc.encode(["one sentence", "two sentences", "one sentence"])
    q = enc.encode_query("a question")
    enc.save()
    second = CountingEncoder()
    again = DiskCachingEncoder(second, tmp_path)
    b = again.encode(["two sentences", "one sentence", "three"])
    assert second.seen == ["three"]  # the others came from the file
    assert np.array_equal(b[0], a[1]) and np.array_equal(b[1], a[0])
    assert np.array_equal(again.encode_query("a question"), q)


class CountingSegmenter:
    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def boundaries(self, sentences, vectors):
        self.calls += 1
        return [len(sentences) - 1]

    def gap_scores(self, sentences, vectors):
        self.calls += 1
        return np.linspace(0, 1, len(sentences) - 1)


def test_memo_segmenter_answers_each_document_once_and_keeps_it_on_disk(tmp_path):
    inner = CountingSegmenter()
    memo = MemoSegmenter(inner, tmp_path)
    v = np.zeros((3, 4))
    first = memo.boundaries(["a", "b", "c"], v), list(memo.gap_scores(["a", "b", "c"], v))
    assert (memo.boundaries(["a", "b", "c"], v), list(memo.gap_scores(["a", "b", "c"], v))) == first
    assert inner.calls == 2 and memo.name == "counting"
    memo.boundaries(["a", "b"], v[:2])  # another document: asked
    assert inner.calls == 3
    memo.save()
    later = CountingSegmenter()
    from benchmarks.harness import vector_cache

    vector_cache._MEMOS.clear()  # a later run: from the file
    assert MemoSegmenter(later, tmp_path).boundaries(["a", "b", "c"], v) == first[0] and later.calls == 0

    class NoGaps:
        name = "nogaps"

        def boundaries(self, sentences, vectors):
            return []

    assert getattr(MemoSegmenter(NoGaps()), "gap_scores", None) is None  # the chunker's test for one


def test_rrf_peer_fuses_dense_and_bm25_ranks():
    from benchmarks.harness.peers import dense_ranking, li_bm25, li_nodes, li_rrf_method, units_of

    corpora = {"d": "Tides rise twice a day.\n\nThe moon pulls the sea.\n\n" * 3 + "Volcanoes erupt lava.\n\n" * 2}
    queries = [Query("What pulls the sea?", "d", [(0, 5)])]
    encoder = HashingEncoder()
    ranked, units = li_rrf_method(corpora, queries, encoder)
    assert all(corpora["d"][c.start:c.end] == c.text for c in ranked[0])
    order, _ = dense_ranking(units, queries, encoder)
    lexical = [int(n.node.node_id) for n in li_bm25(li_nodes(units)).retrieve(queries[0].question)]
    score: dict[str, float] = {}
    for ranks in ([int(i) for i in order[0]], lexical):
        for r, i in enumerate(ranks):
            score[units[i].text] = score.get(units[i].text, 0.0) + 1 / (60 + r)
    best = max(score.values())
    assert score[ranked[0][0].text] == best  # LlamaIndex's fusion: 1 / (60 + rank), summed
    assert units_of(corpora) == units
