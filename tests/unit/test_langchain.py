"""langchain_hseg: the TextSplitter and the retriever.

The hashing encoder (no model) and in-memory Chroma. The retriever on the real MiniLM, equal to the
core store on the ``chroma_eval`` corpora (issue 4's equivalence test), is
``tests/e2e/test_langchain_model.py``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from functools import cache
from typing import Any

import chromadb
import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from hseg.chunking.chunks import default_doc_id
from hseg.chunking.records import metadata_keys
from hseg.store import HierarchicalStore
from hseg_testing.chunkers import SMALL, hashing_chunker
from hseg_testing.fakes import HashingEncoder
from langchain_hseg import HierarchicalSegmentRetriever, HierarchicalSegmentTextSplitter

#: every key a result Document carries besides the source metadata: the core's result schema
RESULT_KEYS = set(metadata_keys("result"))

TOPICS = {
    "alpha": "Alpha beta gamma delta epsilon. Alpha beta gamma again here. ",
    "tides": "Ocean tides follow the moon and its gravity. Tides rise and fall twice daily. ",
    "cats": "Cats purr and sleep in the sun. A cat hunts mice at night. ",
    "bread": "Bakers knead dough and bake bread in hot ovens. Fresh bread smells of yeast. ",
}


def topic_text(*names: str, repeat: int = 3) -> str:
    """Paragraphs of repeated topic sentences: identical paragraphs recur, which fools ``str.find``."""
    return "".join(TOPICS[n] * repeat + "\n\n" for n in names)


REPEATED = topic_text("alpha", "tides", "alpha", "tides", "alpha", "cats")


def small_splitter(**kwargs) -> HierarchicalSegmentTextSplitter:
    return HierarchicalSegmentTextSplitter(encoder=HashingEncoder(), **{**SMALL, **kwargs})


class HashingEmbeddings(Embeddings):
    """The hashing encoder as a LangChain ``Embeddings`` (for the Chroma vector store tests)."""

    def __init__(self) -> None:
        self._enc = HashingEncoder()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._enc.encode(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self._enc.encode_query(text).tolist()


def corpus_docs() -> list[Document]:
    return [
        Document(topic_text("alpha", "tides", "cats"), id="doc-a", metadata={"source": "a.md", "year": 2024}),
        Document(topic_text("bread", "cats", "bread"), id="doc-b", metadata={"source": "b.md", "year": 2023}),
        Document(topic_text("tides", "bread"), metadata={"source": "c.md", "tags": ["x", "y"]}),  # no id
    ]


def new_name() -> str:
    return f"t-{uuid.uuid4().hex}"


def assert_same_hits(docs: list[Document], hits) -> None:
    assert [d.metadata["hseg_cluster_id"] for d in docs] == [h.cluster_id for h in hits]
    assert [(d.metadata["hseg_start"], d.metadata["hseg_end"]) for d in docs] == [(h.start, h.end) for h in hits]
    assert [d.metadata["hseg_score"] for d in docs] == pytest.approx([h.score for h in hits], abs=1e-6)
    assert [d.page_content for d in docs] == [h.text for h in hits]


# =========================================================================== the splitter


def test_split_text_returns_the_cluster_texts():
    splitter = small_splitter()
    expected = [c.text for c in splitter.chunker.chunk(REPEATED).clusters]
    got = splitter.split_text(REPEATED)
    assert got == expected and len(got) > 2
    assert "".join(got) == REPEATED  # never stripped: the clusters tile the text


def test_create_documents_offsets_are_exact_on_repeated_text():
    # a cap of about one paragraph keeps clusters inside paragraphs, so identical paragraphs give
    # identical cluster texts whatever the clustering decides
    splitter = small_splitter(target_tokens=40, max_cluster_tokens=48)
    docs = splitter.create_documents([REPEATED, "Alpha.\n\nBeta.\n\nAlpha."])
    by_doc: dict[str, list[Document]] = {}
    for d in docs:
        by_doc.setdefault(d.metadata["hseg_doc_id"], []).append(d)
    for text, parts in zip([REPEATED, "Alpha.\n\nBeta.\n\nAlpha."], by_doc.values()):
        slices = [text[d.metadata["hseg_start"] : d.metadata["hseg_end"]] for d in parts]
        assert slices == [d.page_content for d in parts]
        ends = [0] + [d.metadata["hseg_end"] for d in parts]
        assert [d.metadata["hseg_start"] for d in parts] == ends[:-1] and ends[-1] == len(text)
    # the pattern str.find gets wrong: the same cluster text at two offsets
    contents = [d.page_content for d in by_doc[default_doc_id(REPEATED)]]
    repeated = {c for c in contents if contents.count(c) > 1}
    assert repeated
    starts = {d.metadata["hseg_start"] for d in docs if d.page_content in repeated}
    assert len(starts) > len(repeated)


def test_cluster_metadata_and_ids():
    splitter = small_splitter()
    chunking = splitter.chunker.chunk(REPEATED, "rep")
    docs = splitter.create_documents([REPEATED], [{"source": "rep.md"}], ids=["rep"])
    assert [d.id for d in docs] == [c.id for c in chunking.clusters]
    for d, c in zip(docs, chunking.clusters):
        m = d.metadata
        assert m["source"] == "rep.md" and m["hseg_doc_id"] == "rep" and m["hseg_cluster_id"] == c.id
        assert json.loads(m["hseg_segment_ids"]) == c.segment_ids and m["hseg_n_segments"] == len(c.segments)
        assert m["hseg_tokens"] == c.token_count
        assert all(isinstance(v, (str, int, float, bool)) for v in m.values())  # Chroma-safe
    # stable: the same input gives the same ids again, another document id gives other ids
    assert [d.id for d in small_splitter().create_documents([REPEATED], ids=["rep"])] == [d.id for d in docs]
    assert not {d.id for d in splitter.create_documents([REPEATED], ids=["other"])} & {d.id for d in docs}


def test_split_documents_keeps_metadata_deep_copied_and_ids():
    source = corpus_docs()
    originals = [json.dumps(d.metadata) for d in source]
    docs = small_splitter().split_documents(source)
    assert {d.metadata["hseg_doc_id"] for d in docs} == {"doc-a", "doc-b", default_doc_id(source[2].page_content)}
    for d in docs:
        src = next(s for s in source if d.metadata["source"] == s.metadata["source"])
        assert src.page_content[d.metadata["hseg_start"] : d.metadata["hseg_end"]] == d.page_content
        assert {k: d.metadata[k] for k in src.metadata} == src.metadata
    tagged = [d for d in docs if "tags" in d.metadata]
    assert len(tagged) > 1
    tagged[0].metadata["tags"].append("mutated")
    assert tagged[1].metadata["tags"] == ["x", "y"]
    assert [json.dumps(d.metadata) for d in source] == originals
    assert len({d.id for d in docs}) == len(docs)


def test_segment_documents_link_to_their_parents():
    splitter = small_splitter()
    source = corpus_docs()
    parents, children = splitter.split_documents_hierarchical(source)
    assert [d.id for d in children] == [d.id for d in splitter.split_segments(source)]
    by_id = {p.id: p for p in parents}
    for parent in parents:
        kids = [c for c in children if c.metadata["hseg_cluster_id"] == parent.id]
        assert [c.id for c in kids] == json.loads(parent.metadata["hseg_segment_ids"])
        assert "".join(c.page_content for c in kids) == parent.page_content
        assert kids[0].metadata["hseg_start"] == parent.metadata["hseg_start"]
        assert kids[-1].metadata["hseg_end"] == parent.metadata["hseg_end"]
    for c in children:
        assert c.metadata["hseg_level"] == "segment" and c.metadata["hseg_cluster_id"] in by_id
        src = next(s for s in source if s.metadata["source"] == c.metadata["source"])
        assert src.page_content[c.metadata["hseg_start"] : c.metadata["hseg_end"]] == c.page_content


def test_add_start_index_adds_langchains_key_only_on_request():
    source = corpus_docs()
    plain = small_splitter().split_documents_hierarchical(source)
    marked = small_splitter(add_start_index=True).split_documents_hierarchical(source)
    for plain_docs, marked_docs in zip(plain, marked):
        assert all("start_index" not in d.metadata and "end_index" not in d.metadata for d in plain_docs)
        assert [d.metadata.pop("start_index") for d in marked_docs] == [d.metadata["hseg_start"] for d in plain_docs]
        assert [d.metadata for d in marked_docs] == [d.metadata for d in plain_docs]  # nothing else differs


def test_resplitting_drops_the_sources_stale_hseg_keys():
    splitter = small_splitter()
    segment = splitter.split_segments(corpus_docs()[:1])[1]  # a segment Document: hseg_prev_id, hseg_next_id
    again = splitter.split_documents([Document(segment.page_content, id="part", metadata=segment.metadata)])
    for d in again:
        assert d.metadata["hseg_doc_id"] == "part" and d.metadata["source"] == "a.md"
        assert {k for k in d.metadata if k.startswith("hseg_")} == set(metadata_keys("cluster", vector=False))


def test_length_function_is_the_chunker_tokenizer():
    calls = []

    def words(text: str) -> int:
        calls.append(text)
        return len(text.split())

    splitter = small_splitter(length_function=words)
    assert splitter.chunker.count_tokens is words
    docs = splitter.create_documents([REPEATED])
    assert calls and all(d.metadata["hseg_tokens"] == words(d.page_content) for d in docs)
    assert all(d.metadata["hseg_tokens"] <= splitter.chunker.max_cluster_tokens for d in docs)
    with pytest.raises(ValueError, match="length_function"):
        small_splitter(length_function=words, tokenizer=len)


def test_langchain_embeddings_and_a_prebuilt_chunker_are_accepted():
    emb_docs = HierarchicalSegmentTextSplitter(encoder=HashingEmbeddings(), **SMALL).create_documents([REPEATED])
    chunker = hashing_chunker(**SMALL)
    splitter = HierarchicalSegmentTextSplitter(chunker=chunker)
    assert splitter.chunker is chunker
    assert [d.page_content for d in splitter.create_documents([REPEATED])] == [d.page_content for d in emb_docs]
    with pytest.raises(ValueError, match="chunker"):
        HierarchicalSegmentTextSplitter(chunker=chunker, target_tokens=100)


def test_splitter_arguments_checked_at_construction_model_built_lazily():
    splitter = HierarchicalSegmentTextSplitter(target_tokens=300)  # default model: not loaded yet
    assert splitter._chunker is None
    for kwargs, name in [({"target_tokens": 0}, "target_tokens"), ({"k": 1.0, "target_tokens": 64}, "k"),
                         ({"segment_vector": "max"}, "segment_vector"), ({"segmenter": "nope"}, "segmenter"),
                         ({"max_segment_tokens": -1}, "max_segment_tokens"), ({"batch_size": 0}, "batch_size")]:
        with pytest.raises(ValueError, match=name):
            HierarchicalSegmentTextSplitter(**kwargs)
    with pytest.warns(UserWarning, match="chunk_size"):
        small_splitter(chunk_size=50)  # small sizes do not raise: chunk_overlap defaults to 0


async def test_atransform_documents_matches_the_sync_path():
    splitter = small_splitter()
    source = corpus_docs()
    got = await splitter.atransform_documents(source)
    assert [(d.id, d.page_content, d.metadata) for d in got] == \
        [(d.id, d.page_content, d.metadata) for d in splitter.transform_documents(source)]


# =========================================================================== the retriever


@pytest.fixture(scope="module")
def fast_retriever():
    """A retriever over ``corpus_docs()`` on an in-memory client, shared by the module."""
    client = chromadb.EphemeralClient()
    name = new_name()
    retriever = HierarchicalSegmentRetriever.from_documents(corpus_docs(), splitter=small_splitter(),
                                                            client=client, collection_name=name)
    yield retriever
    client.delete_collection(name)


def test_invoke_returns_k_parents_with_scores_and_matched_segment(fast_retriever):
    docs = fast_retriever.invoke("moon tides gravity", k=2)
    assert len(docs) == 2 and all(isinstance(d, Document) for d in docs)
    assert docs[0].metadata["hseg_score"] >= docs[1].metadata["hseg_score"]
    source = {s.metadata["source"]: s.page_content for s in corpus_docs()}
    for d in docs:
        m = d.metadata
        assert d.id == m["hseg_cluster_id"] and m["hseg_unit"] == "cluster"
        assert source[m["source"]][m["hseg_start"] : m["hseg_end"]] == d.page_content
        assert set(m) - {"source", "year", "tags"} == RESULT_KEYS  # internals stripped
        assert source[m["source"]][m["hseg_matched_start"] : m["hseg_matched_end"]] == m["hseg_matched_text"]
        assert "tides" in d.page_content.lower()
    assert len(fast_retriever.invoke("moon tides gravity")) == 4  # the k field


def test_results_equal_the_core_store(fast_retriever):
    store = fast_retriever.store
    for q in ("bread yeast", "cats hunting mice at night"):
        assert_same_hits(fast_retriever.invoke(q, k=3), store.search(q, k=3))
        assert_same_hits(fast_retriever.invoke(q, unit="auto", budget_tokens=60),
                         store.search(q, unit="auto", budget_tokens=60))
    filtered = fast_retriever.invoke("bread", k=5, where={"source": "b.md"})
    assert filtered and {d.metadata["source"] for d in filtered} == {"b.md"}


async def test_ainvoke_with_kwargs(fast_retriever):
    docs = await fast_retriever.ainvoke("moon tides", k=1)
    assert len(docs) == 1 and docs[0].id == fast_retriever.invoke("moon tides", k=1)[0].id
    auto = await fast_retriever.ainvoke("moon tides", unit="auto", budget_tokens=50)
    assert auto and all(d.metadata["hseg_unit"] == "auto" for d in auto)
    both = await asyncio.gather(fast_retriever.ainvoke("cats", k=2), fast_retriever.ainvoke("bread", k=3))
    assert [len(b) for b in both] == [2, 3]


class RecordingHandler(BaseCallbackHandler):
    """Remembers the retriever runs it is told about."""

    def __init__(self) -> None:
        self.started: list[tuple[str, Any, list[str], dict]] = []
        self.ended: list[tuple[Any, list[str]]] = []
        self.errors: list[tuple[Any, BaseException]] = []

    def on_retriever_start(self, serialized, query, *, run_id, tags=None, metadata=None, **kwargs):
        self.started.append((query, run_id, tags or [], metadata or {}))

    def on_retriever_end(self, documents, *, run_id, **kwargs):
        self.ended.append((run_id, [d.id for d in documents]))

    def on_retriever_error(self, error, *, run_id, **kwargs):
        self.errors.append((run_id, error))


def test_batch_answers_as_invoke_does_in_one_batched_search(fast_retriever, monkeypatch):
    queries = ["moon tides gravity", "bread yeast", "cats hunting mice at night"]
    for kwargs in ({}, {"k": 2}, {"unit": "auto", "budget_tokens": 60}, {"where": {"source": "b.md"}, "k": 5}):
        one = [fast_retriever.invoke(q, **kwargs) for q in queries]
        many = fast_retriever.batch(queries, **kwargs)
        assert [[(d.id, d.page_content, d.metadata) for d in docs] for docs in many] == \
            [[(d.id, d.page_content, d.metadata) for d in docs] for docs in one], kwargs
        assert asyncio.run(fast_retriever.abatch(queries, **kwargs)) == many
    calls: list[int] = []
    store = fast_retriever.store
    search_many = store.search_many
    monkeypatch.setattr(store, "search_many", lambda qs, **kw: calls.append(len(qs)) or search_many(qs, **kw))
    monkeypatch.setattr(store, "search", lambda *a, **kw: pytest.fail("batch must not search one query at a time"))
    fast_retriever.batch(queries)
    assert calls == [3] and fast_retriever.batch([]) == []


def test_batch_reports_each_query_as_its_own_run(fast_retriever):
    handler = RecordingHandler()
    first = uuid.uuid4()
    configs = [{"callbacks": [handler], "tags": ["t1"], "metadata": {"n": 1}, "run_id": first},
               {"callbacks": [handler], "tags": ["t2"], "metadata": {"n": 2}}]
    docs = fast_retriever.batch(["moon tides", "bread"], configs, k=1)
    assert [(q, tags, meta["n"]) for q, _, tags, meta in handler.started] == [("moon tides", ["t1"], 1),
                                                                              ("bread", ["t2"], 2)]
    assert handler.started[0][1] == first and handler.started[1][1] != first
    assert [ids for _, ids in handler.ended] == [[d.id for d in ds] for ds in docs]
    assert [run for run, _ in handler.ended] == [run for _, run, _, _ in handler.started]
    # one search for the batch: a bad argument fails every query's run
    failing = RecordingHandler()
    with pytest.raises(ValueError, match="unit"):
        fast_retriever.batch(["a", "b"], {"callbacks": [failing]}, unit="page")
    assert len(failing.errors) == 2 and not failing.ended
    out = fast_retriever.batch(["a", "b"], unit="page", return_exceptions=True)
    assert len(out) == 2 and all(isinstance(e, ValueError) for e in out)
    with pytest.raises(TypeError):
        fast_retriever.batch(["a"], colour="blue")  # as invoke: an unknown keyword is an error


@pytest.mark.parametrize("budget", [30, 60, 150])
def test_auto_unit_respects_the_budget(fast_retriever, budget):
    retriever = fast_retriever.model_copy(update={"unit": "auto", "budget_tokens": budget})
    docs = retriever.invoke("tides moon cats")
    total = sum(d.metadata["hseg_tokens"] for d in docs)
    assert docs and (total <= budget or len(docs) == 1)
    for d in docs:
        assert d.id.startswith("pas-") and json.loads(d.metadata["hseg_segment_ids"])
        assert d.metadata["hseg_matched_text"] in d.page_content
    assert [d.id for d in retriever.invoke("tides moon cats")] == [d.id for d in docs]  # stable passage ids


def test_bad_arguments_raise_value_errors_naming_them(fast_retriever):
    store = fast_retriever.store
    for kwargs, name in [({"k": 0}, "k"), ({"k": "3"}, "k"), ({"unit": "page"}, "unit"), ({"mode": "max"}, "mode"),
                         ({"budget_tokens": 0}, "budget_tokens"), ({"cluster_weight": -1.0}, "cluster_weight"),
                         ({"unit": "auto", "mode": "cluster"}, "mode"), ({"store": object()}, "store")]:
        with pytest.raises(ValueError, match=name):
            HierarchicalSegmentRetriever(**{"store": store, **kwargs})
    for kwargs, name in [({"k": 0}, "k"), ({"unit": "page"}, "unit"), ({"k": 2, "budget_tokens": 10}, "budget_tokens")]:
        with pytest.raises(ValueError, match=name):
            fast_retriever.invoke("tides", **kwargs)
    with pytest.raises(ValueError, match="k"):
        asyncio.run(fast_retriever.ainvoke("tides", k=-1))


def test_from_texts_reingest_and_delete():
    client, name = chromadb.EphemeralClient(), new_name()
    texts = [topic_text("alpha", "cats"), topic_text("bread", "tides")]
    retriever = HierarchicalSegmentRetriever.from_texts(texts, [{"source": "x"}, None], ids=["x", "y"],
                                                        splitter=SMALL | {"encoder": HashingEncoder()},
                                                        client=client, collection_name=name, k=2)
    count = retriever.store.count()
    assert {d.metadata["hseg_doc_id"] for d in retriever.invoke("cats bread", k=10)} == {"x", "y"}
    ids = retriever.add_documents([Document(texts[0], id="x", metadata={"source": "x"})])
    assert retriever.store.count() == count and set(ids) <= {r.id for r in retriever.store.get_records("x")}
    assert retriever.delete("x") > 0
    assert {d.metadata["hseg_doc_id"] for d in retriever.invoke("cats bread", k=10)} == {"y"}
    client.delete_collection(name)


def test_on_a_langchain_chroma_vector_store():
    from langchain_chroma import Chroma

    emb = HashingEmbeddings()
    vs = Chroma(new_name(), embedding_function=emb, client=chromadb.EphemeralClient(),
                collection_configuration={"hnsw": {"space": "cosine"}})
    vs.add_texts(["A record written by someone else about moon tides."], metadatas=[{"source": "other"}])
    retriever = HierarchicalSegmentRetriever.from_vectorstore(vs, splitter=SMALL, k=3)
    cluster_ids = retriever.add_documents(corpus_docs()[:2])
    splitter = HierarchicalSegmentTextSplitter(encoder=emb, **SMALL)  # the collection's model
    cluster_ids += splitter.add_to_vectorstore(vs, corpus_docs()[2:])  # the splitter can write there too
    # the vector store still reads the collection, hseg records included
    found = vs.similarity_search_by_vector(emb.embed_query("moon tides gravity"), k=5)
    assert len(found) == 5 and all(isinstance(d.page_content, str) and d.page_content for d in found)
    assert any(d.metadata.get("hseg_level") == "segment" for d in found)
    # the retriever equals the core store on that collection and ignores the foreign record
    store = HierarchicalStore.from_collection(vs._collection, encoder=emb)
    for q in ("moon tides gravity", "bread"):
        docs = retriever.invoke(q)
        assert_same_hits(docs, store.search(q, k=3))
        assert {d.metadata["hseg_cluster_id"] for d in docs} <= set(cluster_ids)
    # an l2 collection (Chroma's default) is refused with the reason
    l2 = Chroma(new_name(), embedding_function=emb, client=chromadb.EphemeralClient())
    with pytest.raises(ValueError, match="cosine"):
        HierarchicalSegmentRetriever.from_vectorstore(l2)


# --------------------------------------------------------------------------- langchain-tests standard suite

try:
    from langchain_tests.integration_tests import RetrieversIntegrationTests
except ImportError:  # pragma: no cover - the suite is a dev dependency
    RetrieversIntegrationTests = None


@cache
def _standard_store() -> HierarchicalStore:
    store = HierarchicalStore(new_name(), client=chromadb.EphemeralClient(), encoder=HashingEncoder())
    store.add(small_splitter().chunk_documents(corpus_docs()))
    return store


if RetrieversIntegrationTests is not None:

    class TestStandardRetriever(RetrieversIntegrationTests):
        """langchain-tests' contract: a ``k`` field, ``invoke(q, k=n)`` → n Documents, ``ainvoke``."""

        @property
        def retriever_constructor(self) -> type[HierarchicalSegmentRetriever]:
            return HierarchicalSegmentRetriever

        @property
        def retriever_constructor_params(self) -> dict:
            return {"store": _standard_store()}

        @property
        def retriever_query_example(self) -> str:
            return "moon tides"
