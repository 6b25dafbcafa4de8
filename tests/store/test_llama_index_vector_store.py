"""LlamaIndex writes through hseg (issue 54, findings 1, 3, 4): an ``IngestionPipeline`` into
:class:`~llama_index_hseg.HierarchicalSegmentVectorStore` writes through the store's own write path
(unit-index and lexical rows with the records, a document's old version replaced as one unit, re-runs
idempotent), and ``HierarchicalSegmentRetriever.from_documents`` deletes by hseg's document key only
and never before the new version is stored. On every in-process client, the hashing encoder; with
the real model and processes: ``tests/e2e/test_llama_index_writes_through_hseg.py``."""

from __future__ import annotations

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from hseg.store import HierarchicalStore
from hseg_testing.chunkers import SMALL
from hseg_testing.fakes import HashingEncoder
from llama_index_hseg import HierarchicalSegmentNodeParser, HierarchicalSegmentRetriever, HierarchicalSegmentVectorStore
from tests.store.test_one_version_per_document import TEXTS, versions_of


@pytest.fixture
def parser():
    return HierarchicalSegmentNodeParser(encoder=HashingEncoder(), **SMALL, segmenter="texttiling")


@pytest.fixture
def vector_store(chroma_client, chroma_collection_name, parser):
    return HierarchicalSegmentVectorStore(client=chroma_client, collection_name=chroma_collection_name,
                                          encoder=parser.hseg_encoder)


def whole(store: HierarchicalStore, doc_id: str) -> dict:
    """The store's own account of a document: complete, with unit-index and lexical rows."""
    stats = store.stats()
    assert stats["documents_incomplete"] == 0, stats
    assert stats["unit_index_segments"] == stats["segments_total"], stats
    assert store._parts.lexical is not None
    lexical = store._parts.lexical.documents([doc_id])
    segments = {rid for rid, m in store.iter_metadatas({"hseg_doc_id": doc_id}) if m["hseg_level"] == "segment"}
    assert lexical[doc_id][0] == segments
    return stats


def test_a_pipeline_writes_records_and_index_rows_and_replaces_an_edited_document(vector_store, parser):
    pipeline = IngestionPipeline(transformations=[parser], vector_store=vector_store)
    pipeline.run(documents=[Document(text=TEXTS[0], id_="report")])
    store = vector_store.store
    whole(store, "report")
    assert versions_of(store, "report") == {0}
    pipeline.run(documents=[Document(text=TEXTS[1], id_="report")])  # edited: the old version goes
    whole(store, "report")
    assert versions_of(store, "report") == {1}
    hits = store.search("tides moon coast", k=3)
    assert hits and all(h.text in TEXTS[1] for h in hits)
    records = store.count()
    pipeline.run(documents=[Document(text=TEXTS[1], id_="report")])  # the same again: nothing changes
    assert store.count() == records and versions_of(store, "report") == {1}


@pytest.mark.parametrize("strategy", [DocstoreStrategy.DUPLICATES_ONLY, DocstoreStrategy.UPSERTS])
def test_a_pipeline_with_a_docstore_reruns_idempotently(vector_store, parser, strategy):
    pipeline = IngestionPipeline(transformations=[parser], vector_store=vector_store,
                                 docstore=SimpleDocumentStore(), docstore_strategy=strategy)
    # a docstore tells documents apart by their text's hash alone: b's text is not a's next one
    docs = [Document(text=TEXTS[0], id_="a"), Document(text=TEXTS[1] + "\n\nThe end of b.", id_="b")]
    pipeline.run(documents=docs)
    store = vector_store.store
    records = store.count()
    assert pipeline.run(documents=docs) == []  # unchanged: skipped
    assert store.count() == records
    pipeline.run(documents=[Document(text=TEXTS[1], id_="a"), docs[1]])
    assert versions_of(store, "a") == {1} and store.count({"hseg_doc_id": "b"}) > 0
    whole(store, "a")


def test_the_retriever_and_a_vector_store_index_read_it(vector_store, parser):
    IngestionPipeline(transformations=[parser], vector_store=vector_store).run(
        documents=[Document(text=TEXTS[0], id_="report", metadata={"source": "r.md"}),
                   Document(text=TEXTS[1], id_="other", metadata={"source": "o.md"})])
    by_retriever = HierarchicalSegmentRetriever(vector_store, similarity_top_k=2).retrieve("tides moon")
    index = VectorStoreIndex.from_vector_store(vector_store, embed_model=MockEmbedding(embed_dim=8))
    by_index = index.as_retriever(similarity_top_k=2).retrieve("tides moon")
    assert [n.node.node_id for n in by_index] == [n.node.node_id for n in by_retriever]
    assert [round(n.score, 6) for n in by_index] == [round(n.score, 6) for n in by_retriever]
    only_o = index.as_retriever(similarity_top_k=5, filters=MetadataFilters(
        filters=[MetadataFilter(key="source", value="o.md", operator=FilterOperator.EQ)])).retrieve("tides")
    assert only_o and {n.node.metadata["hseg_doc_id"] for n in only_o} == {"other"}
    vector_store.delete("report")
    assert vector_store.store.doc_ids() == ["other"]
    vector_store.clear()
    assert vector_store.store.count() == 0


def test_nodes_of_another_parser_or_part_of_a_document_are_refused_before_any_write(vector_store, parser):
    with pytest.raises(ValueError, match="not a node of HierarchicalSegmentNodeParser"):
        vector_store.add(SentenceSplitter().get_nodes_from_documents([Document(text=TEXTS[0], id_="x")]))
    nodes = parser.get_nodes_from_documents([Document(text=TEXTS[0], id_="report")])
    with pytest.raises(ValueError, match="not a whole document"):
        vector_store.add(nodes[:-1])
    assert vector_store.store.count() == 0
    with pytest.raises(ValueError, match="HierarchicalSegmentNodeParser"):
        VectorStoreIndex.from_vector_store(vector_store, embed_model=MockEmbedding(embed_dim=8)).insert(
            Document(text="Plain text.", id_="plain"))


def test_from_documents_deletes_by_hsegs_own_document_key_only(chroma_client, chroma_collection_name, parser):
    """Finding 3: a document another door wrote with user metadata ``document_id: "report"`` survives
    ``from_documents`` of a Document ``id_="report"``."""
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=parser.hseg_encoder)
    store.add(parser.chunker.chunk(TEXTS[1], doc_id="notes"), {"document_id": "report"})
    before = store.count()
    HierarchicalSegmentRetriever.from_documents([Document(text=TEXTS[0], id_="report")], parser=parser,
                                                client=chroma_client, collection_name=chroma_collection_name)
    assert store.count({"hseg_doc_id": "notes"}) == before
    assert versions_of(store, "notes") == {1} and versions_of(store, "report") == {0}


def test_a_failed_from_documents_leaves_the_old_version(chroma_client, chroma_collection_name, parser, monkeypatch):
    """Finding 4: the old version is deleted only after the new one is stored; a write that fails
    leaves it as it was."""
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=parser.hseg_encoder)
    HierarchicalSegmentRetriever.from_documents([Document(text=TEXTS[0], id_="report")], parser=parser,
                                                vector_store=HierarchicalSegmentVectorStore(store))
    before = store.count()
    from chromadb.api.models.Collection import Collection

    def refuse(self, *args, **kwargs):
        raise RuntimeError("the server refused the write")

    monkeypatch.setattr(Collection, "upsert", refuse)
    monkeypatch.setattr(Collection, "add", refuse)
    with pytest.raises(RuntimeError, match="refused"):
        HierarchicalSegmentRetriever.from_documents([Document(text=TEXTS[1], id_="report")], parser=parser,
                                                    vector_store=HierarchicalSegmentVectorStore(store))
    monkeypatch.undo()
    assert store.count() == before and versions_of(store, "report") == {0}
    whole(store, "report")


def test_an_async_pipeline_writes_through_the_same_path(vector_store, parser):
    """``IngestionPipeline.arun`` calls ``async_add`` (and a docstore's ``adelete``): the same write, in a thread."""
    import asyncio

    pipeline = IngestionPipeline(transformations=[parser], vector_store=vector_store)
    asyncio.run(pipeline.arun(documents=[Document(text=TEXTS[0], id_="report")]))
    asyncio.run(pipeline.arun(documents=[Document(text=TEXTS[1], id_="report")]))
    whole(vector_store.store, "report")
    assert versions_of(vector_store.store, "report") == {1}
    asyncio.run(vector_store.adelete("report"))
    assert vector_store.store.count() == 0
