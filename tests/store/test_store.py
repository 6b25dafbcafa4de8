"""hseg.store / hseg.retrieval.parents: multi-vector Chroma store with max-score parent retrieval.

Most tests run on the in-process clients (``chroma_client`` fixture): in-memory and on-disk; the same
tests run over HTTP to a ``chroma run`` server in ``tests/e2e/test_store_server.py``. Chunkings are
synthetic (random unit vectors); the real MiniLM is ``tests/e2e/test_store_model.py``.
"""

from __future__ import annotations

import json
import uuid

import chromadb
import numpy as np
import pytest

from hseg.store import SCHEMA_VERSION, HierarchicalStore, SearchHit, flatten_metadata, records_for

MODES = ("segment+cluster", "cluster", "segment")
LEVELS = {"segment+cluster": ("segment", "cluster"), "cluster": ("cluster",), "segment": ("segment",)}


class FakeEncoder:
    """Deterministic text → unit vector, so string queries run without a model."""

    def __init__(self, name: str = "fake-encoder", dim: int = 16) -> None:
        self._name, self.dim = name, dim

    @property
    def name(self) -> str:
        return self._name

    def encode(self, texts):
        return np.stack([self.encode_query(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def encode_query(self, text):
        rng = np.random.default_rng(abs(hash(text)) % (2**32))
        v = rng.standard_normal(self.dim).astype(np.float32)
        return v / np.linalg.norm(v)


@pytest.fixture
def new_store(chroma_client, chroma_collection_name):
    """Factory of stores on the parametrised client; drops the collections afterwards."""
    names: list[str] = []

    def make(name: str | None = None, **kwargs) -> HierarchicalStore:
        name = name or (chroma_collection_name if not names else f"t-{uuid.uuid4().hex}")
        names.append(name)
        return HierarchicalStore(name, client=chroma_client, **kwargs)

    yield make
    for name in names:
        try:
            chroma_client.delete_collection(name)
        except Exception:  # never created
            pass


@pytest.fixture
def ephemeral_store(chroma_collection_name):
    client = chromadb.EphemeralClient()
    store = HierarchicalStore(chroma_collection_name, client=client)
    yield store
    client.delete_collection(chroma_collection_name)


def corpus(make_chunking, seed: int, n_docs: int = 8, dim: int = 16):
    rng = np.random.default_rng(seed)
    docs = [make_chunking(f"doc{seed}-{i}", rng, n_clusters=int(rng.integers(1, 6)), max_segments=4, dim=dim)
            for i in range(n_docs)]
    metas = [{"group": i % 3, "source": f"file{i}.md"} for i in range(n_docs)]
    return docs, metas


def brute_force(docs, metas, query, mode, keep=lambda meta: True):
    """Reference eq. 2 scorer in numpy: {cluster_id: (score, best record id, {segment id: sim})}."""
    q = np.asarray(query, dtype=np.float64)
    q = q / np.linalg.norm(q)
    out = {}
    for doc, meta in zip(docs, metas):
        if not keep({**meta, "hseg_doc_id": doc.doc_id}):
            continue
        for c in doc.clusters:
            cand = []
            if "cluster" in LEVELS[mode]:
                cand.append((float(np.dot(q, c.embedding.astype(np.float64))), c.id))
            seg = {s.id: float(np.dot(q, s.embedding.astype(np.float64))) for s in c.segments}
            if "segment" in LEVELS[mode]:
                cand += [(v, sid) for sid, v in seg.items()]
            best = max(cand)
            out[c.id] = (best[0], best[1], seg, c)
    return out


def assert_matches_reference(hits: list[SearchHit], ref: dict, k: int, mode: str) -> None:
    ranked = sorted(ref.values(), key=lambda t: -t[0])
    assert len(hits) == min(k, len(ranked))
    assert len({h.cluster_id for h in hits}) == len(hits)
    # same scores rank by rank (ties in float32 may swap ids, never scores)
    np.testing.assert_allclose([h.score for h in hits], [t[0] for t in ranked[: len(hits)]], atol=2e-5)
    for h in hits:
        score, best_id, seg, cluster = ref[h.cluster_id]
        assert h.score == pytest.approx(score, abs=2e-5)
        assert h.matched_id == best_id or abs(score - (seg.get(h.matched_id, score))) < 2e-5
        assert h.matched_level == ("cluster" if h.matched_id == cluster.id else "segment")
        assert (h.start, h.end, h.text, h.doc_id) == (cluster.start, cluster.end, cluster.text, cluster.doc_id)
        assert h.token_count == cluster.token_count
        assert h.metadata["hseg_level"] == "cluster" and h.metadata["hseg_cluster_id"] == h.cluster_id
        for sid, sim in h.segment_scores.items():
            assert sim == pytest.approx(seg[sid], abs=2e-5)
        if mode == "cluster":
            assert h.segment_scores == {}


# --------------------------------------------------------------------------- exactness


def test_search_equals_brute_force(new_store, make_chunking):
    """k in 1..20, every mode, with and without a where filter, two random corpora."""
    for seed in (1, 2):
        store = new_store()
        docs, metas = corpus(make_chunking, seed)
        store.add(docs, metas)
        rng = np.random.default_rng(100 + seed)
        queries = rng.standard_normal((2, 16))
        for query in queries:
            for mode in MODES:
                for where, keep in ((None, lambda m: True), ({"group": 1}, lambda m: m["group"] == 1)):
                    ref = brute_force(docs, metas, query, mode, keep)
                    for k in range(1, 21):
                        hits = store.search(query, k=k, mode=mode, where=where, unit="cluster")
                        assert_matches_reference(hits, ref, k, mode)


def test_search_widens_when_one_parent_dominates(new_store, make_chunking):
    """A parent with 40 near-identical segments fills the first request: the store must widen."""
    rng = np.random.default_rng(7)
    direction = rng.standard_normal(16)
    big_vectors = direction + 0.01 * rng.standard_normal((40, 16))
    big = make_chunking("big", rng, n_clusters=1, max_segments=40, segment_vectors=big_vectors)
    docs, metas = corpus(make_chunking, 3)
    docs, metas = docs + [big], metas + [{"group": 0, "source": "big.md"}]
    store = new_store(oversample=2)
    store.add(docs, metas)
    calls = []
    query_fn = store.collection.query

    def spy(*args, **kwargs):
        calls.append(kwargs["n_results"])
        return query_fn(*args, **kwargs)

    store.collection.query = spy
    for mode in ("segment+cluster", "segment"):
        calls.clear()
        hits = store.search(direction, k=5, mode=mode, unit="cluster")
        assert hits[0].cluster_id == big.clusters[0].id
        assert len(hits[0].segment_scores) >= 10
        assert_matches_reference(hits, brute_force(docs, metas, direction, mode), 5, mode)
        assert len(calls) >= 2 and calls[1] >= 2 * calls[0]


def test_large_requests_let_chroma_filter_the_level(new_store, make_chunking, monkeypatch):
    """Past SERVER_LEVEL_FILTER_AT records the level goes into Chroma's where; same results."""
    import hseg.retrieval.parents

    docs, metas = corpus(make_chunking, 21)
    store = new_store(oversample=1)
    store.add(docs, metas)
    wheres = []
    query_fn = store.collection.query

    def spy(*args, **kwargs):
        wheres.append(kwargs.get("where"))
        return query_fn(*args, **kwargs)

    store.collection.query = spy
    q = np.random.default_rng(22).standard_normal(16)
    monkeypatch.setattr(hseg.retrieval.parents, "SERVER_LEVEL_FILTER_AT", 1)
    widened = 0
    for mode in ("cluster", "segment"):
        for where, keep in ((None, lambda m: True), ({"group": 2}, lambda m: m["group"] == 2)):
            wheres.clear()
            hits = store.search(q, k=20, mode=mode, where=where, unit="cluster")
            assert_matches_reference(hits, brute_force(docs, metas, q, mode, keep), 20, mode)
            assert wheres[0] == where  # the first request never filters the level
            level = {"hseg_level": mode}
            if len(wheres) > 1:
                widened += 1
                assert wheres[-1] == (level if where is None else {"$and": [level, where]})
    assert widened >= 2


def test_k_larger_than_parent_count_returns_all(new_store, make_chunking):
    docs, metas = corpus(make_chunking, 4, n_docs=2)
    store = new_store()
    store.add(docs, metas)
    n_parents = sum(len(d.clusters) for d in docs)
    q = np.ones(16)
    for mode in MODES:
        assert_matches_reference(store.search(q, k=50, mode=mode), brute_force(docs, metas, q, mode), 50, mode)
    assert len(store.search(q, k=50, unit="cluster")) == n_parents
    assert store.search(q, k=3, where={"source": "nowhere"}, unit="cluster") == []


def test_budget_tokens_rule(new_store, make_chunking):
    docs, metas = corpus(make_chunking, 5)
    store = new_store()
    store.add(docs, metas)
    q = np.random.default_rng(9).standard_normal(16)
    for mode in MODES:
        ranked = sorted(brute_force(docs, metas, q, mode).values(), key=lambda t: -t[0])
        tokens = [t[3].token_count for t in ranked]
        for budget in (1, tokens[0], tokens[0] + tokens[1], sum(tokens[:5]) + 1, 10**6):
            hits = store.search(q, budget_tokens=budget, mode=mode, unit="cluster")
            expected, total = 0, 0
            for t in tokens:
                if expected and total + t > budget:
                    break
                total += t
                expected += 1
            assert len(hits) == expected, (mode, budget)
            assert [h.cluster_id for h in hits] == [t[3].id for t in ranked[:expected]]
            assert len(hits) == 1 or sum(h.token_count for h in hits) <= budget


# --------------------------------------------------------------------------- writes


def all_records(store):
    got = store.collection.get(include=["metadatas", "documents", "embeddings"])
    return {rid: (meta, doc, np.asarray(emb)) for rid, meta, doc, emb in
            zip(got["ids"], got["metadatas"], got["documents"], got["embeddings"])}


def test_reingest_is_idempotent(new_store, make_chunking):
    docs, metas = corpus(make_chunking, 6)
    store = new_store()
    n = store.add(docs, metas)
    assert n == store.count() == sum(len(d.clusters) + len(d.segments) for d in docs)
    before = all_records(store)
    assert store.add(docs, metas) == n
    after = all_records(store)
    assert store.count() == n and sorted(before) == sorted(after)
    for rid, (meta, doc, emb) in before.items():
        assert after[rid][0] == meta and after[rid][1] == doc
        np.testing.assert_allclose(after[rid][2], emb, atol=1e-6)
    expected_ids = {u.id for d in docs for u in (*d.clusters, *d.segments)}
    assert set(after) == expected_ids
    assert store.doc_ids() == sorted(d.doc_id for d in docs)


def test_reingest_changed_document_leaves_no_stale_records(new_store, make_chunking):
    rng = np.random.default_rng(11)
    old = make_chunking("doc", rng, n_clusters=5)
    other = make_chunking("other", rng, n_clusters=2)
    store = new_store()
    store.add([old, other], [{"a": 1, "keep": "x"}, None])
    new = make_chunking("doc", rng, n_clusters=2)  # different text and spans, same doc id
    store.add(new, {"keep": "y"})
    recs = store.get_records("doc")
    assert {r.id for r in recs} == {u.id for u in (*new.clusters, *new.segments)}
    assert all("a" not in r.metadata and r.metadata["keep"] == "y" for r in recs)  # dropped user key is gone
    assert store.count() == len(recs) + len(other.clusters) + len(other.segments)
    # records come back in document order with exact text
    assert [r.document for r in recs if r.metadata["hseg_level"] == "cluster"] == [c.text for c in new.clusters]
    assert "".join(r.document for r in recs if r.metadata["hseg_level"] == "segment") == new.text
    # an empty re-chunking of a document removes it
    empty = type(new)("doc", "", (), ())
    store.add(empty)
    assert store.get_records("doc") == [] and store.doc_ids() == ["other"]


def test_delete_leaves_no_record(new_store, make_chunking):
    docs, metas = corpus(make_chunking, 12, n_docs=4)
    store = new_store()
    store.add(docs, metas)
    victim = docs[1]
    assert store.delete(victim.doc_id) == len(victim.clusters) + len(victim.segments)
    assert store.collection.get(where={"hseg_doc_id": victim.doc_id})["ids"] == []
    ids = {u.id for u in (*victim.clusters, *victim.segments)}
    assert not ids & set(store.collection.get(include=[])["ids"])
    assert all(h.doc_id != victim.doc_id for h in store.search(victim.clusters[0].embedding, k=20, unit="cluster"))
    assert store.delete(victim.doc_id) == 0


def test_writes_are_batched(new_store, make_chunking, monkeypatch):
    rng = np.random.default_rng(13)
    docs = [make_chunking(f"d{i}", rng, n_clusters=4) for i in range(4)]
    store = new_store()
    monkeypatch.setattr(store.client, "get_max_batch_size", lambda: 7)
    sizes: dict[str, list[int]] = {"upsert": [], "delete": []}
    for op in ("upsert", "delete"):
        original = getattr(store.collection, op)

        def spy(*args, _op=op, _orig=original, **kwargs):
            sizes[_op].append(len(kwargs["ids"]))
            return _orig(*args, **kwargs)

        monkeypatch.setattr(store.collection, op, spy)
    n = store.add(docs)
    assert n > 7 * 3 and store.count() == n
    assert max(sizes["upsert"]) <= 7 and sum(sizes["upsert"]) == n
    store.add(make_chunking("d0", rng, n_clusters=1))  # many stale records of d0 to delete
    store.delete("d1")
    assert sizes["delete"] and max(sizes["delete"]) <= 7
    assert store.count() == n - (len(docs[0].clusters) + len(docs[0].segments)) + \
        len(store.get_records("d0")) - (len(docs[1].clusters) + len(docs[1].segments))


def test_no_partial_document_on_build_error(ephemeral_store, make_chunking):
    from hseg.chunking.chunks import Chunking, Segment

    rng = np.random.default_rng(14)
    good = make_chunking("good", rng)
    bad = make_chunking("bad", rng)
    seg = bad.segments[-1]
    broken = Segment(seg.id, seg.doc_id, seg.index, seg.start, seg.end, seg.text, seg.token_count,
                     seg.sentence_start, seg.sentence_end, None)
    clusters = list(bad.clusters)
    last = clusters[-1]
    clusters[-1] = type(last)(last.id, last.doc_id, last.index, last.start, last.end, last.text, last.token_count,
                              (*last.segments[:-1], broken), last.embedding)
    bad = Chunking("bad", bad.text, (*bad.segments[:-1], broken), tuple(clusters))
    with pytest.raises(ValueError, match="no embedding"):
        ephemeral_store.add([good, bad])
    assert ephemeral_store.count() == 0
    ephemeral_store.add(good)
    with pytest.raises(ValueError, match="dimension"):
        ephemeral_store.add(make_chunking("wide", rng, dim=8))
    assert ephemeral_store.add([good, good]) == ephemeral_store.count()  # the same document twice: once
    with pytest.raises(ValueError, match="duplicate doc_id 'good'"):
        ephemeral_store.add([good, make_chunking("good", rng)])  # the same id, other content
    assert ephemeral_store.doc_ids() == ["good"]


# --------------------------------------------------------------------------- metadata


def test_flatten_metadata_rules():
    flat = flatten_metadata({
        "source": "a.md", "page": np.int64(3), "score": np.float32(0.5), "ok": np.bool_(True), "none": None,
        "tags": ["x", np.int64(2)], "empty": [], "nested": {"year": 2024, "deep": {"k": "v"}, "gone": None},
    })
    assert flat == {"source": "a.md", "page": 3, "score": 0.5, "ok": True, "tags": '["x", 2]', "empty": "[]",
                    "nested.year": 2024, "nested.deep.k": "v"}
    assert type(flat["page"]) is int and type(flat["ok"]) is bool
    assert flatten_metadata(None) == {} and flatten_metadata({}) == {}
    for bad, match in (({"hseg_level": "x"}, "reserved"), ({"#x": 1}, "#"), ({1: "x"}, "keys"),
                       ({"when": object()}, "unsupported type object"), ({"a.b": 1, "a": {"b": 2}}, "twice"),
                       ({"l": [object()]}, "JSON")):
        with pytest.raises(ValueError, match=match):
            flatten_metadata(bad)
    with pytest.raises(ValueError, match="dict"):
        flatten_metadata(["not", "a", "dict"])


def test_record_schema_and_user_metadata_in_chroma(new_store, make_chunking):
    rng = np.random.default_rng(15)
    ch = make_chunking("doc", rng, n_clusters=3)
    recs = records_for(ch, {"info": {"year": np.int32(2024)}, "tags": ["a", "b"]})
    assert len(recs) == len(ch.clusters) + len(ch.segments)
    c0 = next(r for r in recs if r.id == ch.clusters[0].id)
    assert c0.document == ch.clusters[0].text
    assert json.loads(c0.metadata["hseg_segment_ids"]) == ch.clusters[0].segment_ids
    for r in recs:
        m = r.metadata
        assert m["hseg_schema"] == SCHEMA_VERSION and m["hseg_doc_id"] == "doc"
        assert ch.text[m["hseg_start"]:m["hseg_end"]] == r.document
        assert all(isinstance(v, (str, int, float, bool)) for v in m.values())
        assert m["info.year"] == 2024 and m["tags"] == '["a", "b"]'
        cluster = ch.clusters[m["hseg_cluster_index"]]
        assert m["hseg_cluster_id"] == cluster.id and m["hseg_cluster_tokens"] == cluster.token_count
    store = new_store()
    store.add(ch, {"info": {"year": 2024}})
    hits = store.search(ch.segments[0].embedding, k=1, mode="segment", where={"info.year": 2024}, unit="cluster")
    assert hits and hits[0].matched_id == ch.segments[0].id and hits[0].metadata["info.year"] == 2024
    assert store.collection.metadata["hseg_schema"] == SCHEMA_VERSION


# --------------------------------------------------------------------------- arguments, collections, encoders


def test_bad_search_arguments(ephemeral_store, make_chunking):
    ephemeral_store.add(make_chunking("d", np.random.default_rng(16)))
    q = np.ones(16)
    for kwargs, match in (({"k": 0}, "k must be a positive int up to 100,000, got 0"), ({"k": -3}, "got -3"),
                          ({"k": 2.5}, "got 2.5"), ({"k": True}, "got True"),
                          ({"mode": "parent"}, "mode must be one of .* got 'parent'"),
                          ({"budget_tokens": 0}, "budget_tokens must be a positive int up to 10,000,000, got 0"),
                          ({"k": 3, "budget_tokens": 10}, "mutually exclusive"),
                          ({"where": "x"}, "where must be a dict")):
        with pytest.raises(ValueError, match=match):
            ephemeral_store.search(q, **kwargs)
    with pytest.raises(ValueError, match="zero"):
        ephemeral_store.search(np.zeros(16), unit="cluster")
    with pytest.raises(ValueError, match="1-D"):
        ephemeral_store.search(np.ones((2, 16)), unit="cluster")
    assert len(ephemeral_store.search(q)) == min(4, len(ephemeral_store.get_records("d")))  # default k=4 (or fewer)


def test_client_arguments_and_space_check(tmp_path, chroma_collection_name):
    with pytest.raises(ValueError, match="only one of"):
        HierarchicalStore("x", path=str(tmp_path), client=chromadb.EphemeralClient())
    with pytest.raises(ValueError, match="cosine"):
        HierarchicalStore("x", client=chromadb.EphemeralClient(), configuration={"hnsw": {"space": "l2"}})
    with pytest.raises(ValueError, match="got 'ip'"):
        HierarchicalStore("x", client=chromadb.EphemeralClient(), configuration={"space": "ip"})
    client = chromadb.EphemeralClient()
    client.create_collection(chroma_collection_name, embedding_function=None)  # default space: l2
    try:
        with pytest.raises(ValueError, match="'l2' distance space"):
            HierarchicalStore(chroma_collection_name, client=client)
        with pytest.raises(ValueError, match="'l2' distance space"):
            HierarchicalStore.from_collection(client.get_collection(chroma_collection_name))
    finally:
        client.delete_collection(chroma_collection_name)
    store = HierarchicalStore("on-disk", path=str(tmp_path / "db"), configuration={"ef_search": 321})
    assert store.collection.configuration["hnsw"]["space"] == "cosine"
    assert store.collection.configuration["hnsw"]["ef_search"] == 321
    with pytest.raises(ValueError, match="oversample"):
        HierarchicalStore("on-disk", path=str(tmp_path / "db"), oversample=0)


def test_from_collection_ignores_foreign_records(chroma_collection_name, make_chunking):
    """A collection shared with another writer (e.g. langchain_chroma, legacy cosine metadata)."""
    client = chromadb.EphemeralClient()
    col = client.create_collection(chroma_collection_name, metadata={"hnsw:space": "cosine"},
                                   embedding_function=None)
    try:
        rng = np.random.default_rng(17)
        ch = make_chunking("doc", rng, n_clusters=4)
        q = ch.segments[0].embedding
        col.add(ids=["foreign-1", "foreign-2"], embeddings=[q, -q], documents=["x", "y"],
                metadatas=[{"source": "lc"}, None])
        store = HierarchicalStore.from_collection(col, encoder=FakeEncoder())
        store.add(ch)
        assert col.metadata["hseg_encoder"] == "fake-encoder"  # recorded, hnsw:* keys dropped from metadata
        assert store.collection.configuration["hnsw"]["space"] == "cosine"
        for mode in MODES:
            hits = store.search(q, k=20, mode=mode, unit="cluster")
            assert_matches_reference(hits, brute_force([ch], [{}], q, mode), 20, mode)
        assert store.count() == len(ch.clusters) + len(ch.segments) + 2
        assert store.search("any text", k=2, unit="cluster")  # string query through the store's encoder
    finally:
        client.delete_collection(chroma_collection_name)


def test_encoder_name_is_recorded_and_checked(new_store, make_chunking):
    store = new_store(encoder=FakeEncoder("model-a"))
    store.add(make_chunking("d", np.random.default_rng(18)))
    name = store.collection.name
    assert store.encoder_name == "model-a"
    with pytest.raises(ValueError, match="built with encoder 'model-a', got 'model-b'"):
        new_store(name, encoder=FakeEncoder("model-b"))
    other = new_store(name, encoder=FakeEncoder("model-b"), allow_encoder_mismatch=True)
    assert other.search("query", k=1, unit="cluster")
    plain = new_store(name)  # lazy default encoder: checked by name before the model loads
    with pytest.raises(ValueError, match="built with encoder 'model-a'"):
        plain.search("query", unit="cluster")
    assert plain.search(np.ones(16), k=1, unit="cluster")  # vectors need no encoder


async def test_async_wrappers(ephemeral_store, make_chunking):
    docs, metas = corpus(make_chunking, 19, n_docs=3)
    assert await ephemeral_store.aadd(docs, metas) == ephemeral_store.count()
    q = np.random.default_rng(20).standard_normal(16)
    sync = ephemeral_store.search(q, k=3, mode="segment", unit="cluster")
    got = await ephemeral_store.asearch(q, k=3, mode="segment", unit="cluster")
    assert [(h.cluster_id, h.score) for h in got] == [(h.cluster_id, h.score) for h in sync]
    assert await ephemeral_store.adelete(docs[0].doc_id) > 0


def test_empty_collection(new_store):
    store = new_store()
    assert store.search(np.ones(16), k=3) == [] and store.search(np.ones(16), budget_tokens=5) == []
    assert store.count() == 0 and store.doc_ids() == [] and store.delete("nothing") == 0
