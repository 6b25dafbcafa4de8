"""llama_index_hseg: the node parser, ClusterVectorizer and the retriever.

The deterministic ``HashingEncoder`` and in-memory Chroma. The real MiniLM, and the issue's equivalence
(the LlamaIndex path returns the same parents and scores as the core store), are
``tests/e2e/test_llama_index_model.py``.
"""

from __future__ import annotations

import json
import pickle
import uuid

import chromadb
import numpy as np
import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("llama_index.vector_stores.chroma")

from llama_index.core import Document, StorageContext, VectorStoreIndex  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402
from llama_index.core.ingestion import IngestionCache, IngestionPipeline  # noqa: E402
from llama_index.core.ingestion.pipeline import get_transformation_hash  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeRelationship, NodeWithScore, QueryBundle, TextNode  # noqa: E402
from llama_index.vector_stores.chroma import ChromaVectorStore  # noqa: E402

from hseg.segmentation.segmenters import TextTilingSegmenter  # noqa: E402
from hseg.store import DEFAULT_HNSW, HierarchicalStore, records_for  # noqa: E402
from hseg.store.parts import StoreParts  # noqa: E402
from hseg_testing.chunkers import SMALL, hashing_chunker  # noqa: E402
from hseg_testing.fakes import HashingEncoder  # noqa: E402
from llama_index_hseg import (  # noqa: E402
    ClusterVectorizer,
    HierarchicalSegmentNodeParser,
    HierarchicalSegmentRetriever,
)

R = NodeRelationship


def make_parser(**kwargs) -> HierarchicalSegmentNodeParser:
    return HierarchicalSegmentNodeParser(encoder=kwargs.pop("encoder", None) or HashingEncoder(), **{**SMALL, **kwargs})


@pytest.fixture(scope="module")
def docs(example_text) -> list[Document]:
    cut = example_text.find("\n\n", 6000)
    repeated = "Alpha beta gamma.\n\nDelta epsilon.\n\n" * 12 + "Alpha beta gamma.\n"  # duplicate texts
    return [
        Document(text=example_text[: cut + 2], id_="ex-a", metadata={"source": "a.md", "year": 2024},
                 excluded_llm_metadata_keys=["year"]),
        Document(text=example_text[cut + 2 : cut + 6000], id_="ex-b", metadata={"source": "b.md"}),
        Document(text=repeated, id_="rep", metadata={"source": "rep.md"}),
    ]


@pytest.fixture(scope="module")
def parsed(docs):
    parser = make_parser()
    return parser, parser.get_nodes_from_documents(docs)


def by_level(nodes, doc_id, level):
    return [n for n in nodes if n.metadata["hseg_doc_id"] == doc_id and n.metadata["hseg_level"] == level]


def signature(nodes):
    return [(n.id_, n.text, n.start_char_idx, n.end_char_idx, n.embedding, n.metadata) for n in nodes]


def cosine_collection(client, name=None):
    return client.create_collection(name or f"t-{uuid.uuid4().hex}", configuration={"hnsw": dict(DEFAULT_HNSW)},
                                    embedding_function=None)


# --------------------------------------------------------------------------- parser: nodes


def test_offsets_are_absolute_and_exact(parsed, docs):
    _, nodes = parsed
    assert all(isinstance(n, TextNode) and not isinstance(n, Document) for n in nodes)
    for doc in docs:
        for level in ("cluster", "segment"):
            units = by_level(nodes, doc.id_, level)
            assert units, (doc.id_, level)
            assert units[0].start_char_idx == 0 and units[-1].end_char_idx == len(doc.text)
            for a, b in zip(units, units[1:]):
                assert a.end_char_idx == b.start_char_idx  # the units tile the document
            for n in units:
                assert doc.text[n.start_char_idx : n.end_char_idx] == n.text
                assert (n.metadata["hseg_start"], n.metadata["hseg_end"]) == (n.start_char_idx, n.end_char_idx)


def test_nodes_are_the_store_records(parsed, docs):
    """Ids, texts, vectors and hseg metadata equal what hseg.store.records_for writes."""
    parser, nodes = parsed
    chunkings = hashing_chunker(**SMALL).chunk_many([d.text for d in docs],
                                                                                 [d.id_ for d in docs])
    records = [r for ch in chunkings for r in records_for(ch)]
    assert [n.id_ for n in nodes] == [r.id for r in records]  # cluster, its segments, next cluster, ...
    for n, r, in zip(nodes, records):
        assert n.text == r.document
        np.testing.assert_array_equal(np.asarray(n.embedding, dtype=np.float32), r.embedding)
        assert {k: v for k, v in n.metadata.items() if k.startswith("hseg_")} == r.metadata
    # deterministic: a second run gives the same nodes
    assert signature(parser.get_nodes_from_documents(docs)) == signature(nodes)


def test_relationships(parsed, docs):
    _, nodes = parsed
    by_id = {n.id_: n for n in nodes}
    for doc in docs:
        clusters, segments = by_level(nodes, doc.id_, "cluster"), by_level(nodes, doc.id_, "segment")
        for level in (clusters, segments):
            for i, n in enumerate(level):
                assert n.relationships[R.SOURCE].node_id == doc.id_ == n.ref_doc_id
                prev, nxt = n.relationships.get(R.PREVIOUS), n.relationships.get(R.NEXT)
                assert (prev.node_id if prev else None) == (level[i - 1].id_ if i else None)
                assert (nxt.node_id if nxt else None) == (level[i + 1].id_ if i + 1 < len(level) else None)
        for c in clusters:
            children = [info.node_id for info in c.relationships[R.CHILD]]
            assert children == json.loads(c.metadata["hseg_segment_ids"])
            assert "".join(by_id[s].text for s in children) == c.text
            for s in children:
                assert by_id[s].relationships[R.PARENT].node_id == c.id_ == by_id[s].metadata["hseg_cluster_id"]
            assert R.PARENT not in c.relationships
        assert all(R.CHILD not in s.relationships for s in segments)
        assert sum(len(c.relationships[R.CHILD]) for c in clusters) == len(segments)


def test_metadata_merged_and_hseg_keys_excluded(parsed, docs):
    _, nodes = parsed
    for n in nodes:
        doc = next(d for d in docs if d.id_ == n.metadata["hseg_doc_id"])
        assert all(n.metadata[k] == v for k, v in doc.metadata.items())
        for mode in (MetadataMode.EMBED, MetadataMode.LLM):
            assert "hseg_" not in n.get_content(mode)
        assert f"source: {doc.metadata['source']}" in n.get_content(MetadataMode.EMBED)
        assert all(k in n.excluded_llm_metadata_keys for k in doc.excluded_llm_metadata_keys)
    assert "year" not in nodes[0].get_content(MetadataMode.LLM)  # the document's own exclusions are kept
    assert all(isinstance(v, (str, int, float, bool)) for n in nodes for v in n.metadata.values())


def test_embeddings_are_unit_vectors_and_cluster_means(parsed):
    _, nodes = parsed
    seg = {n.id_: np.asarray(n.embedding) for n in nodes if n.metadata["hseg_level"] == "segment"}
    tokens = {n.id_: n.metadata["hseg_tokens"] for n in nodes if n.metadata["hseg_level"] == "segment"}
    for c in (n for n in nodes if n.metadata["hseg_level"] == "cluster"):
        ids = json.loads(c.metadata["hseg_segment_ids"])
        mean = np.average([seg[s] for s in ids], axis=0, weights=[tokens[s] for s in ids])
        np.testing.assert_allclose(c.embedding, mean / np.linalg.norm(mean), atol=1e-6)
    assert all(abs(np.linalg.norm(n.embedding) - 1) < 1e-5 for n in nodes)


def test_textnode_input_and_options(docs):
    node = TextNode(text=docs[1].text, id_="chunk-1", metadata={"k": "v"})
    node.relationships[R.SOURCE] = docs[1].as_related_node_info()
    out = make_parser(include_segments=False, include_prev_next_rel=False).get_nodes_from_documents([node])
    assert out and all(n.metadata["hseg_level"] == "cluster" for n in out)
    assert all(n.ref_doc_id == docs[1].id_ and n.metadata["hseg_doc_id"] == "chunk-1" for n in out)
    assert all(set(n.relationships) == {R.SOURCE} for n in out)
    assert make_parser(include_metadata=False).get_nodes_from_documents([docs[1]])[0].metadata.get("source") is None


def test_custom_id_func_is_followed_consistently(docs):
    out = make_parser(id_func=lambda i, doc: f"{doc.id_}-n{i}").get_nodes_from_documents([docs[1]])
    assert [n.id_ for n in out] == [f"ex-b-n{i}" for i in range(len(out))]
    ids = {n.id_ for n in out}
    for n in out:
        assert n.metadata["hseg_cluster_id"] in ids
        assert set(json.loads(n.metadata.get("hseg_segment_ids", "[]"))) <= ids
        assert {n.metadata.get("hseg_prev_id", ""), n.metadata.get("hseg_next_id", "")} <= ids | {""}
        assert all(info.node_id in ids for rel, info in n.relationships.items() if rel in (R.PARENT, R.NEXT))


def test_invalid_settings_fail_at_construction():
    with pytest.raises(ValueError, match="not both"):
        HierarchicalSegmentNodeParser(encoder=HashingEncoder(), k=0.5, target_tokens=128)
    with pytest.raises(ValueError, match="unknown name"):
        HierarchicalSegmentNodeParser(encoder=HashingEncoder(), segmenter="nope")
    with pytest.raises(ValueError, match="segment_vector"):
        HierarchicalSegmentNodeParser(encoder=HashingEncoder(), segment_vector="max")


# --------------------------------------------------------------------------- parser: async


async def test_async_paths_give_the_sync_nodes(parsed, docs):
    parser, nodes = parsed
    expected = signature(nodes)
    assert signature(await parser.aget_nodes_from_documents(docs)) == expected
    assert signature(await parser.acall(docs)) == expected
    out = await IngestionPipeline(transformations=[parser]).arun(documents=docs)
    assert signature(out) == expected and not any(isinstance(n, Document) for n in out)
    col = cosine_collection(chromadb.EphemeralClient())
    await IngestionPipeline(transformations=[parser], vector_store=ChromaVectorStore(chroma_collection=col)).arun(
        documents=docs)
    assert sorted(col.get(include=[])["ids"]) == sorted(n.id_ for n in nodes)


def test_pipeline_with_docstore_upserts_documents(docs):
    """With a docstore the pipeline deletes a changed document's records by ref_doc_id first."""
    from llama_index.core.storage.docstore import SimpleDocumentStore

    col = cosine_collection(chromadb.EphemeralClient())
    pipeline = IngestionPipeline(transformations=[make_parser()], docstore=SimpleDocumentStore(),
                                 vector_store=ChromaVectorStore(chroma_collection=col))
    first = pipeline.run(documents=docs[:2])
    assert col.count() == len(first) and pipeline.run(documents=docs[:2]) == []  # unchanged: skipped
    changed = Document(text=docs[1].text[:3000], id_=docs[1].id_, metadata=docs[1].metadata)
    second = pipeline.run(documents=[docs[0], changed])
    kept = [n for n in first if n.ref_doc_id == docs[0].id_]
    assert sorted(col.get(include=[])["ids"]) == sorted([n.id_ for n in kept] + [n.id_ for n in second])


# --------------------------------------------------------------------------- parser: serialisation


def test_class_names_and_from_defaults():
    parser = HierarchicalSegmentNodeParser.from_defaults(embed_model=MockEmbedding(embed_dim=8), **SMALL)
    name = "HierarchicalSegmentNodeParser"
    assert HierarchicalSegmentNodeParser.class_name() == parser.to_dict()["class_name"] == name
    assert ClusterVectorizer.class_name() == ClusterVectorizer().to_dict()["class_name"] == "ClusterVectorizer"
    assert parser.encoder_name == "unknown"  # MockEmbedding's model name; the object itself is not dumped
    assert "encoder" not in parser.to_dict() and "callback_manager" not in parser.to_dict()
    by_name = HierarchicalSegmentNodeParser(encoder="some/model")
    assert by_name.encoder is None and by_name.encoder_name == "some/model" and by_name._chunker is None


def test_cache_keys_follow_every_setting(docs):
    base = make_parser()
    others = [
        make_parser(target_tokens=96),
        make_parser(segment_vector="encode"),
        make_parser(segmenter=TextTilingSegmenter(window=3)),
        make_parser(tokenizer=lambda s: len(s.split())),
        make_parser(include_segments=False),
    ]
    renamed = HashingEncoder()
    renamed.name = "another-encoder"
    others.append(make_parser(encoder=renamed))
    keys = [get_transformation_hash(docs, p) for p in [base, *others]]
    assert len(set(keys)) == len(keys)
    assert get_transformation_hash(docs, make_parser()) == keys[0]
    json.loads(others[2].to_json())  # object-valued settings still serialise
    assert "TextTilingSegmenter(window=3" in others[2].to_dict()["segmenter"]


def test_pipeline_cache_does_not_mix_parsers(docs):
    cache = IngestionCache()
    a = IngestionPipeline(transformations=[make_parser()], cache=cache).run(documents=docs[1:2])
    b = IngestionPipeline(transformations=[make_parser(target_tokens=128)], cache=cache).run(documents=docs[1:2])
    a2 = IngestionPipeline(transformations=[make_parser()], cache=cache).run(documents=docs[1:2])
    assert signature(a2) == signature(a)  # a cache hit, embeddings included
    assert [n.id_ for n in a] != [n.id_ for n in b]


def test_pickle_round_trip(parsed, docs):
    parser, nodes = parsed
    clone = pickle.loads(pickle.dumps(parser))
    assert clone.to_dict() == parser.to_dict() and clone._chunker is None  # rebuilt lazily
    assert signature(clone.get_nodes_from_documents(docs)) == signature(nodes)
    lazy = HierarchicalSegmentNodeParser(target_tokens=200)  # model name only: nothing loaded to pickle
    assert pickle.loads(pickle.dumps(lazy)).to_dict() == lazy.to_dict()


def test_settings_change_rebuilds_the_chunker(docs):
    parser = make_parser()
    first = parser.chunker
    parser.target_tokens = 128
    assert parser._chunker is None and parser.chunker is not first and parser.chunker.target_tokens == 128


# --------------------------------------------------------------------------- embeddings kept / restored


def test_cluster_vectorizer_after_an_embed_model(docs):
    dim = 8
    out = IngestionPipeline(transformations=[make_parser(), MockEmbedding(embed_dim=dim), ClusterVectorizer()]).run(
        documents=docs[1:2])
    for n in out:
        expected = [0.5] * dim if n.metadata["hseg_level"] == "segment" else [1 / np.sqrt(dim)] * dim
        np.testing.assert_allclose(n.embedding, expected, atol=1e-6)


def test_cluster_vectorizer_means(parsed):
    _, nodes = parsed
    nodes = [n.model_copy(deep=True) for n in nodes]
    rng = np.random.default_rng(0)
    for n in nodes:
        n.embedding = (rng.standard_normal(5) * 3).tolist()  # not unit length, like some embed models
    ClusterVectorizer()(nodes)
    seg = {n.id_: np.asarray(n.embedding) for n in nodes if n.metadata["hseg_level"] == "segment"}
    tokens = {n.id_: n.metadata["hseg_tokens"] for n in nodes if n.metadata["hseg_level"] == "segment"}
    for c in (n for n in nodes if n.metadata["hseg_level"] == "cluster"):
        ids = json.loads(c.metadata["hseg_segment_ids"])
        unit = [seg[s] / np.linalg.norm(seg[s]) for s in ids]
        mean = np.average(unit, axis=0, weights=[tokens[s] for s in ids])  # weighted by tokens, as the core
        np.testing.assert_allclose(c.embedding, mean / np.linalg.norm(mean), atol=1e-6)


def test_vector_store_index_keeps_preset_embeddings(parsed):
    _, nodes = parsed
    col = cosine_collection(chromadb.EphemeralClient())
    ctx = StorageContext.from_defaults(vector_store=ChromaVectorStore(chroma_collection=col))
    index_nodes = [n.model_copy(deep=True) for n in nodes]
    VectorStoreIndex(index_nodes, storage_context=ctx, embed_model=MockEmbedding(embed_dim=64))
    got = col.get(ids=[n.id_ for n in nodes], include=["embeddings"])
    stored = dict(zip(got["ids"], got["embeddings"]))
    for n in nodes:
        np.testing.assert_allclose(stored[n.id_], n.embedding, atol=1e-6)


# --------------------------------------------------------------------------- retriever (fast)


@pytest.fixture(scope="module")
def li_setup(parsed, docs):
    """The parsed nodes ingested through an IngestionPipeline into a ChromaVectorStore."""
    parser, _ = parsed
    col = cosine_collection(chromadb.EphemeralClient())
    vs = ChromaVectorStore(chroma_collection=col)
    IngestionPipeline(transformations=[parser], vector_store=vs).run(documents=docs)
    return parser, vs


QUERY = "telescope observations of the planets and their moons"


def test_retrieve_returns_scored_parents(li_setup, docs):
    parser, vs = li_setup
    texts = {d.id_: d.text for d in docs}
    for k in (1, 3, 6):
        got = HierarchicalSegmentRetriever(vs, encoder=parser.hseg_encoder, similarity_top_k=k).retrieve(QUERY)
        assert len(got) == k and all(isinstance(n, NodeWithScore) for n in got)
        assert [n.score for n in got] == sorted((n.score for n in got), reverse=True)
        for n in got:
            meta = n.node.metadata
            assert n.node.id_ == meta["hseg_cluster_id"] and meta["hseg_unit"] == "cluster"
            assert texts[meta["hseg_doc_id"]][n.node.start_char_idx : n.node.end_char_idx] == n.node.text
            assert meta["source"] and n.node.ref_doc_id == meta["hseg_doc_id"]
            assert not any(key.startswith("_") or key == "document_id" for key in meta)
            assert "hseg_" not in n.node.get_content(MetadataMode.LLM)
    core = HierarchicalStore.from_collection(vs._collection, parser.hseg_encoder).search(QUERY, k=6)
    assert [(n.node.id_, n.score) for n in got] == [(h.cluster_id, h.score) for h in core]


def test_retrieve_with_a_query_embedding_and_other_sources(li_setup, parsed):
    parser, vs = li_setup
    target = next(n for n in parsed[1] if n.metadata["hseg_level"] == "segment" and n.metadata["hseg_index"] == 5)
    for source in (vs, vs._collection, HierarchicalStore.from_collection(vs._collection, parser.hseg_encoder)):
        top = HierarchicalSegmentRetriever(source, similarity_top_k=1, lexical_weight=0).retrieve(  # dense: cos 1
            QueryBundle(query_str="unused", embedding=target.embedding))[0]
        assert top.node.id_ == target.metadata["hseg_cluster_id"] and top.score == pytest.approx(1.0, abs=1e-5)
        assert top.node.metadata["hseg_matched_id"] == target.id_


def test_budgeted_auto_unit(li_setup, docs):
    parser, vs = li_setup
    texts = {d.id_: d.text for d in docs}
    for budget in (60, 200):
        got = HierarchicalSegmentRetriever(vs, encoder=parser.hseg_encoder, unit="auto",
                                           budget_tokens=budget).retrieve(QUERY)
        assert got and (sum(n.node.metadata["hseg_tokens"] for n in got) <= budget or len(got) == 1)
        assert len({n.node.id_ for n in got}) == len(got)
        for n in got:
            assert texts[n.node.metadata["hseg_doc_id"]][n.node.start_char_idx : n.node.end_char_idx] == n.node.text
            assert n.node.metadata["hseg_unit"] == "auto"


async def test_aretrieve_and_query_engine(li_setup):
    parser, vs = li_setup
    retriever = HierarchicalSegmentRetriever(vs, encoder=parser.hseg_encoder, similarity_top_k=3)
    sync = [(n.node.id_, n.score) for n in retriever.retrieve(QUERY)]
    assert [(n.node.id_, n.score) for n in await retriever.aretrieve(QUERY)] == sync
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query(QUERY)
    assert str(response) and [(n.node.id_, n.score) for n in response.source_nodes] == sync
    assert [n.node.id_ for n in (await engine.aquery(QUERY)).source_nodes] == [i for i, _ in sync]


def test_retriever_rejects_bad_arguments(li_setup):
    _, vs = li_setup
    with pytest.raises(ValueError, match="unit"):
        HierarchicalSegmentRetriever(vs, unit="page")
    with pytest.raises(ValueError, match="mode"):
        HierarchicalSegmentRetriever(vs, mode="best")
    with pytest.raises(ValueError, match="vector_store"):
        HierarchicalSegmentRetriever(object())
    l2 = chromadb.EphemeralClient().create_collection(f"t-{uuid.uuid4().hex}", embedding_function=None)
    with pytest.raises(ValueError, match="cosine"):
        HierarchicalSegmentRetriever(ChromaVectorStore(chroma_collection=l2))


def test_from_documents_batches_and_is_idempotent(docs, monkeypatch):
    """from_documents writes through the store's add (HierarchicalSegmentVectorStore): its upserts hold
    at most the client's batch size."""
    from chromadb.api.models.Collection import Collection

    adds: list[int] = []
    original_upsert = Collection.upsert
    client, name = chromadb.EphemeralClient(), f"t-{uuid.uuid4().hex}"

    def counting_upsert(self, *args, **kwargs):
        if self.name == name:
            adds.append(len(kwargs["ids"]))
        return original_upsert(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "upsert", counting_upsert)
    monkeypatch.setattr(StoreParts, "batch_size", lambda self: 7)
    parser = make_parser()
    retriever = HierarchicalSegmentRetriever.from_documents(docs, parser=parser, client=client, collection_name=name,
                                                            similarity_top_k=2)
    n_nodes = len(parser.get_nodes_from_documents(docs))
    col = client.get_collection(name)
    assert col.count() == n_nodes and max(adds) == 7 and sum(adds) == n_nodes
    assert col.metadata["hseg_encoder"] == "test-hashing-encoder"
    first = [(n.node.id_, n.score) for n in retriever.retrieve(QUERY)]
    again = HierarchicalSegmentRetriever.from_documents(docs, parser=parser, client=client, collection_name=name,
                                                        similarity_top_k=2)
    assert col.count() == n_nodes and [(n.node.id_, n.score) for n in again.retrieve(QUERY)] == first


# --------------------------------------------------------------------------- one collection, one encoder


class OtherEncoder(HashingEncoder):
    """Another model of the same dimension, as far as any name check can tell."""

    name = "other-hashing-encoder"


def test_a_pipeline_writing_another_encoders_nodes_into_a_collection_is_refused_where_hseg_reads(docs):
    """Issue 25 item 7: a ChromaVectorStore filled by an IngestionPipeline (the README's path) lets a parser
    of another 384-d model write into a MiniLM collection; hseg cannot stop that write, so the records name
    their encoder and every read that ranks or indexes them refuses vectors of two models."""
    col = cosine_collection(chromadb.EphemeralClient())  # made by chromadb: no encoder recorded
    vs = ChromaVectorStore(chroma_collection=col)
    IngestionPipeline(transformations=[make_parser()], vector_store=vs).run(documents=docs[:1])
    store = HierarchicalStore.from_collection(col, HashingEncoder())
    store.sync_unit_index()  # checks the records, and records the one encoder they name
    assert store.encoder_name == "test-hashing-encoder"
    nodes = IngestionPipeline(transformations=[make_parser(encoder=OtherEncoder())], vector_store=vs).run(
        documents=docs[1:2])
    assert {n.metadata["hseg_encoder"] for n in nodes} == {"other-hashing-encoder"}

    stats = HierarchicalStore.from_collection(col).stats()
    assert stats["encoder"] == "test-hashing-encoder"
    assert set(stats["record_encoders"]) == {"test-hashing-encoder", "other-hashing-encoder"}
    with pytest.raises(ValueError, match="built with encoder 'test-hashing-encoder', got 'other-hashing-encoder'"):
        HierarchicalSegmentRetriever(vs, encoder=OtherEncoder())  # the collection's recorded encoder
    query = docs[1].text[:300]  # ranks the other encoder's document first
    mixed = "document 'ex-b' holds vectors of encoder 'other-hashing-encoder', but this store embeds queries with " \
            "'test-hashing-encoder'"
    for unit in ("cluster", "segment", "auto"):
        with pytest.raises(ValueError, match=mixed):
            HierarchicalSegmentRetriever(vs, encoder=HashingEncoder(), unit=unit).retrieve(query)
    with pytest.raises(ValueError, match=mixed):
        store.search_many(["tides", query])
    with pytest.raises(ValueError, match="document 'ex-b' holds vectors of encoder 'other-hashing-encoder'"):
        store.sync_unit_index()
    # the same model under another name: the caller says so
    assert HierarchicalSegmentRetriever(vs, encoder=HashingEncoder(), allow_encoder_mismatch=True).retrieve(query)
    # the fix the message names: the document goes, and what is left is one model's again
    store.delete("ex-b")
    assert HierarchicalSegmentRetriever(vs, encoder=HashingEncoder()).retrieve(query)
    assert store.sync_unit_index() > 0


def test_cluster_vectorizer_names_the_embedding_models_vectors(docs):
    """After an embedding model replaced the parser's vectors, hseg_encoder names that model, or nothing."""
    for given, expected in ((None, set()), ("mock-embedding", {"mock-embedding"})):
        out = IngestionPipeline(transformations=[make_parser(), MockEmbedding(embed_dim=8),
                                                 ClusterVectorizer(encoder_name=given)]).run(documents=docs[1:2])
        assert {n.metadata["hseg_encoder"] for n in out if "hseg_encoder" in n.metadata} == expected
