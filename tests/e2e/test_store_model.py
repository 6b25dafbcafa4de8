"""hseg.store with the real MiniLM encoder: the real chunker's chunkings stored on disk and searched
(the store on synthetic chunkings is ``tests/store/test_store.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from hseg.store import HierarchicalStore


def _check_real_hits(store, text, encoder, query):
    hits = store.search(query, k=3, unit="cluster", lexical_weight=0)  # eq. 2: the scores are cosines
    assert 1 <= len(hits) <= 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    for h in hits:
        assert text[h.start:h.end] == h.text
        assert h.start <= h.matched_start < h.matched_end <= h.end
    # the same ranking as numpy over the stored vectors
    q = encoder.encode_query(query)
    by_parent: dict[str, float] = {}
    for doc_id in store.doc_ids():
        for r in store.get_records(doc_id):
            cid = r.metadata["hseg_cluster_id"]
            by_parent[cid] = max(by_parent.get(cid, -2.0), float(np.dot(q, r.embedding)))
    ranked = sorted(by_parent.items(), key=lambda t: -t[1])[:3]
    np.testing.assert_allclose([h.score for h in hits], [s for _, s in ranked], atol=1e-4)
    return hits


@pytest.mark.model
def test_end_to_end_real_chunker(tmp_path, encoder, example_text):
    try:
        from hseg.chunking.chunker import HierarchicalChunker
    except ImportError as exc:  # hseg.text.sentences may not have landed yet
        pytest.skip(f"the chunker is not importable: {exc}")
    chunking = HierarchicalChunker(encoder=encoder, target_tokens=256).chunk(example_text, doc_id="example")
    store = HierarchicalStore("e2e", path=str(tmp_path / "db"), encoder=encoder)
    n = store.add(chunking, {"source": "example.md"})
    assert n == store.count() == len(chunking.clusters) + len(chunking.segments)
    assert store.add(chunking, {"source": "example.md"}) == n and store.count() == n
    target = chunking.segments[len(chunking.segments) // 2]
    hits = _check_real_hits(store, example_text, encoder, target.text)
    assert target.id in {sid for h in hits for sid in h.segment_scores} | {h.matched_id for h in hits}
    reopened = HierarchicalStore("e2e", path=str(tmp_path / "db"), encoder=encoder)
    again = reopened.search(target.text, k=3, unit="cluster", lexical_weight=0)
    assert [h.cluster_id for h in again] == [h.cluster_id for h in hits]


@pytest.mark.model
def test_end_to_end_real_model_paragraph_chunking(tmp_path, encoder, example_text):
    """Real MiniLM + on-disk Chroma with a paragraph chunking (independent of the segmenter)."""
    from hseg.chunking.chunks import Chunking, Cluster, Segment, chunk_id

    cut = example_text.find("\n\n", 12000)  # a third of the file keeps the test quick on CPU
    example_text = example_text if cut < 0 else example_text[: cut + 2]
    # paragraphs as segments (trailing blank lines belong to the earlier one), 3 per cluster
    bounds, pos = [], 0
    while pos < len(example_text):
        nxt = example_text.find("\n\n", pos)
        end = len(example_text) if nxt < 0 else len(example_text) - len(example_text[nxt:].lstrip("\n"))
        bounds.append((pos, end))
        pos = end
    texts = [example_text[a:b] for a, b in bounds]
    vecs = encoder.encode(texts)
    segs = [Segment(chunk_id("ex", "segment", a, b), "ex", i, a, b, example_text[a:b], len(example_text[a:b]) // 4,
                    i, i + 1, vecs[i]) for i, (a, b) in enumerate(bounds)]
    clusters = []
    for ci, i in enumerate(range(0, len(segs), 3)):
        members = tuple(segs[i:i + 3])
        mean = np.mean([s.embedding for s in members], axis=0)
        a, b = members[0].start, members[-1].end
        clusters.append(Cluster(chunk_id("ex", "cluster", a, b), "ex", ci, a, b, example_text[a:b],
                                sum(s.token_count for s in members), members, mean / np.linalg.norm(mean)))
    chunking = Chunking("ex", example_text, tuple(segs), tuple(clusters))
    store = HierarchicalStore("e2e", path=str(tmp_path / "db"), encoder=encoder)
    store.add(chunking)
    target = segs[len(segs) // 2]
    hits = _check_real_hits(store, example_text, encoder, target.text)
    assert hits[0].matched_id == target.id and hits[0].score > 0.9
    assert hits[0].cluster_id == next(c.id for c in clusters if target in c.segments)
