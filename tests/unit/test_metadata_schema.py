"""One metadata schema (issue 12): the core declares the ``hseg_*`` keys once, the table of
``docs/api.md`` is that declaration, and a chunk or a result looks the same in the store, in LangChain
and in LlamaIndex.

The hashing encoder and in-memory Chroma; the retriever comparison on the real MiniLM is
``tests/e2e/test_metadata_schema_model.py``.
"""

from __future__ import annotations

import json
import uuid

import chromadb
import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")
pytest.importorskip("llama_index.vector_stores.chroma")

from langchain_core.documents import Document as LCDocument  # noqa: E402
from llama_index.core import Document as LIDocument  # noqa: E402
from llama_index.core.ingestion import IngestionPipeline  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeRelationship  # noqa: E402
from llama_index.vector_stores.chroma import ChromaVectorStore  # noqa: E402

from hseg.chunking.chunker import HierarchicalChunker  # noqa: E402
from hseg.chunking.chunks import chunk_id  # noqa: E402
from hseg.chunking.records import (  # noqa: E402
    ENCODER_KEY,
    KINDS,
    METADATA_KEYS,
    RESERVED_PREFIX,
    chunk_metadata,
    listed_segment_ids,
    metadata_keys,
    metadata_table,
    records_for,
    user_metadata,
)
from hseg.retrieval.hits import SearchHit  # noqa: E402
from hseg.retrieval.results import result_for  # noqa: E402
from hseg.store import DEFAULT_HNSW, HierarchicalStore  # noqa: E402
from hseg_testing.chunkers import SMALL, hashing_chunker  # noqa: E402
from hseg_testing.fakes import HashingEncoder, synthetic_book  # noqa: E402
from langchain_hseg import HierarchicalSegmentRetriever as LCRetriever  # noqa: E402
from langchain_hseg import HierarchicalSegmentTextSplitter  # noqa: E402
from llama_index_hseg import HierarchicalSegmentNodeParser  # noqa: E402
from llama_index_hseg import HierarchicalSegmentRetriever as LIRetriever  # noqa: E402
from tests.support import REPO

DOCS = (REPO / "README.md", REPO / "docs" / "api.md")
USER = {"source": "book.md", "year": 2024, "lang": "en"}
QUERIES = ["river delta sediment flood", "court judge appeal verdict", "orbit planet comet telescope"]
#: (unit, size) pairs every retriever comparison runs
SEARCHES = [("cluster", {"k": 4}), ("segment", {"k": 5}), ("auto", {"budget_tokens": 120})]


def hseg_part(meta):
    return {k: v for k, v in meta.items() if k.startswith(RESERVED_PREFIX)}


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return {"book": synthetic_book(6000, seed=3), "other": synthetic_book(4000, seed=8)}


# --------------------------------------------------------------------------- the declaration


def test_the_documented_table_is_the_declared_schema():
    table = metadata_table()
    readme, api = (doc.read_text(encoding="utf-8") for doc in DOCS)
    assert table in api, "docs/api.md's metadata table is stale: paste metadata_table()"
    # and it is the only hseg key table of the docs: every hseg_* row of a table there is one of its rows
    rows = {line for text in (readme, api) for line in text.splitlines() if line.startswith("| `hseg_")}
    assert rows == {line for line in table.splitlines() if line.startswith("| `hseg_")}


def test_declaration_is_well_formed():
    names = [k.name for k in METADATA_KEYS]
    assert len(names) == len(set(names)) and all(n.startswith(RESERVED_PREFIX) for n in names)
    assert all(k.kinds and set(k.kinds) <= set(KINDS) and k.meaning for k in METADATA_KEYS)
    assert {"hseg_score", "hseg_matched_text"} <= set(metadata_keys("result"))
    assert "score" not in names and not any(k.startswith("hseg_") for k in ("start_index", "end_index"))
    with pytest.raises(ValueError, match="kind"):
        metadata_keys("passage")


def test_chunk_metadata_names_a_foreign_chunk(texts):
    chunker = hashing_chunker(**SMALL)
    a, b = chunker.chunk(texts["book"], "a"), chunker.chunk(texts["other"], "b")
    assert chunk_metadata(a, a.segments[0])["hseg_prev_id"] == ""
    for chunk in (b.segments[0], b.clusters[0], "seg-1"):
        with pytest.raises(ValueError, match="chunk must be a cluster or segment"):
            chunk_metadata(a, chunk)


def test_user_metadata_drops_only_hseg_keys():
    assert user_metadata({"source": "a", "hseg_score": 1.0, "hsegx": 2}) == {"source": "a", "hsegx": 2}
    assert user_metadata(None) == {}
    with pytest.raises(ValueError, match="metadata"):
        user_metadata(["source"])


# --------------------------------------------------------------------------- chunks


def test_chunks_are_the_same_in_the_store_langchain_and_llama_index(texts):
    """Ids, texts and metadata of one document's chunks: store records == LangChain == LlamaIndex."""
    encoder = HashingEncoder()
    chunking = HierarchicalChunker(encoder=encoder, **SMALL).chunk(texts["book"], "book")
    records = records_for(chunking, USER)
    assert len(records) > 6
    for r in records:
        assert set(hseg_part(r.metadata)) == set(metadata_keys(r.metadata["hseg_level"]))
        assert {k: v for k, v in r.metadata.items() if not k.startswith(RESERVED_PREFIX)} == USER

    splitter = HierarchicalSegmentTextSplitter(encoder=encoder, **SMALL)
    clusters, segments = splitter.split_documents_hierarchical([LCDocument(texts["book"], id="book", metadata=USER)])
    by_id = {d.id: d for d in clusters + segments}
    nodes = HierarchicalSegmentNodeParser(encoder=encoder, **SMALL).get_nodes_from_documents(
        [LIDocument(text=texts["book"], id_="book", metadata=USER)])

    assert [n.id_ for n in nodes] == [r.id for r in records]
    assert sorted(by_id) == sorted(r.id for r in records)
    for r, n in zip(records, nodes):
        d = by_id[r.id]
        assert r.document == n.text == d.page_content
        assert r.metadata == n.metadata  # same hseg_* keys and values, same user metadata
        assert r.metadata[ENCODER_KEY] == "test-hashing-encoder"
        # ... and so a Document's, but for the key of the vector's model: a Document carries no vector
        assert d.metadata == {k: v for k, v in r.metadata.items() if k != ENCODER_KEY}
        assert set(hseg_part(d.metadata)) == set(metadata_keys(r.metadata["hseg_level"], vector=False))


# --------------------------------------------------------------------------- results


def same_results(store: HierarchicalStore, query: str, unit: str, size: dict) -> list:
    """LangChain Documents and LlamaIndex nodes for one query: ids, texts, metadata identical."""
    lc = LCRetriever(store=store, unit=unit, **size).invoke(query)
    li_size = {"similarity_top_k": size["k"]} if "k" in size else size
    li = LIRetriever(store, unit=unit, **li_size).retrieve(query)
    hits = store.search(query, unit=unit, **size)
    assert lc and len(lc) == len(li) == len(hits)
    for doc, scored, hit in zip(lc, li, hits):
        node = scored.node
        assert doc.id == node.id_ == result_for(hit)[0]
        assert doc.page_content == node.text == hit.text
        assert doc.metadata == node.metadata == result_for(hit)[1]
        assert set(hseg_part(doc.metadata)) == set(metadata_keys("result"))
        assert scored.score == doc.metadata["hseg_score"] == pytest.approx(hit.score)
        assert (node.start_char_idx, node.end_char_idx) == (doc.metadata["hseg_start"], doc.metadata["hseg_end"])
        assert "hseg_" not in node.get_content(MetadataMode.LLM) and "hseg_" not in node.get_content(MetadataMode.EMBED)
        assert node.relationships[NodeRelationship.SOURCE].node_id == doc.metadata["hseg_doc_id"]
    return lc


def check_result_metadata(docs, texts: dict[str, str], unit: str) -> None:
    for d in docs:
        m = d.metadata
        text = texts[m["hseg_doc_id"]]
        assert text[m["hseg_start"] : m["hseg_end"]] == d.page_content
        assert text[m["hseg_matched_start"] : m["hseg_matched_end"]] == m["hseg_matched_text"]
        assert m["hseg_unit"] == unit and m["source"] == f"{m['hseg_doc_id']}.md"
        segment_ids = json.loads(m["hseg_segment_ids"])
        assert segment_ids and (m["hseg_matched_level"] == "cluster" or m["hseg_matched_id"] in segment_ids)
        if unit == "cluster":
            assert d.id == m["hseg_cluster_id"]
        else:  # a passage, one segment or many: its id follows from its span alone
            assert d.id == chunk_id(m["hseg_doc_id"], "passage", m["hseg_start"], m["hseg_end"])


@pytest.fixture(scope="module")
def core_store(texts):
    """Both texts written by the core store."""
    encoder = HashingEncoder()
    store = HierarchicalStore(f"t-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(), encoder=encoder)
    chunker = HierarchicalChunker(encoder=encoder, **SMALL)
    store.add(chunker.chunk_many(list(texts.values()), list(texts)), [{"source": f"{k}.md"} for k in texts])
    return store


@pytest.fixture(scope="module")
def llama_store(texts):
    """Both texts written by an IngestionPipeline into a ChromaVectorStore (its storage keys and all)."""
    encoder = HashingEncoder()
    col = chromadb.EphemeralClient().create_collection(f"t-{uuid.uuid4().hex}", embedding_function=None,
                                                       configuration={"hnsw": dict(DEFAULT_HNSW)})
    docs = [LIDocument(text=t, id_=k, metadata={"source": f"{k}.md"}) for k, t in texts.items()]
    IngestionPipeline(transformations=[HierarchicalSegmentNodeParser(encoder=encoder, **SMALL)],
                      vector_store=ChromaVectorStore(chroma_collection=col)).run(documents=docs)
    assert "_node_content" in col.get(limit=1, include=["metadatas"])["metadatas"][0]
    return HierarchicalStore.from_collection(col, encoder)


@pytest.mark.parametrize("unit, size", SEARCHES)
@pytest.mark.parametrize("writer", ["core_store", "llama_store"])
def test_both_retrievers_return_the_same_results(request, texts, writer, unit, size):
    store = request.getfixturevalue(writer)
    for q in QUERIES:
        docs = same_results(store, q, unit, size)
        check_result_metadata(docs, texts, unit)
        assert not {"_node_content", "_node_type", "document_id", "doc_id", "ref_doc_id"} & set(docs[0].metadata)


def test_results_of_both_writers_are_equal(core_store, llama_store):
    """The same chunks written by the core and by LlamaIndex give the same results."""
    for unit, size in SEARCHES:
        for q in QUERIES:
            a = [result_for(h) for h in core_store.search(q, unit=unit, **size)]
            b = [result_for(h) for h in llama_store.search(q, unit=unit, **size)]
            assert [(i, {k: v for k, v in m.items() if k != "hseg_score"}) for i, m in a] == \
                [(i, {k: v for k, v in m.items() if k != "hseg_score"}) for i, m in b]
            assert [m["hseg_score"] for _, m in a] == pytest.approx([m["hseg_score"] for _, m in b], abs=1e-6)


def test_one_segment_passage_gets_a_passage_id(core_store):
    hits = core_store.search(QUERIES[0], unit="segment", k=8)
    single = [h for h in hits if len(h.segment_ids) == 1]
    assert single
    for h in single:
        rid, meta = result_for(h)
        assert rid == chunk_id(h.doc_id, "passage", h.start, h.end) != h.segment_ids[0]
        assert json.loads(meta["hseg_segment_ids"]) == h.segment_ids


def test_result_for_rejects_what_is_not_a_hit(core_store):
    with pytest.raises(ValueError, match="hit"):
        result_for({"cluster_id": "clu-1"})
    hit = core_store.search(QUERIES[0], k=1)[0]
    broken = SearchHit(**{**hit.__dict__, "matched_start": hit.end + 5, "matched_end": hit.end + 9})
    with pytest.raises(ValueError, match="hit"):
        result_for(broken)


def test_listed_segment_ids_reads_a_cluster_record_and_names_the_key_when_it_cannot():
    assert listed_segment_ids({"hseg_segment_ids": '["s1", "s2"]'}) == ["s1", "s2"]
    for bad in ({}, {"hseg_segment_ids": "s1,s2"}, {"hseg_segment_ids": "[1, 2]"}, {"hseg_segment_ids": ["s1"]}):
        with pytest.raises(ValueError, match="hseg_segment_ids"):
            listed_segment_ids(bad)


def test_sentence_cuts_read_back_and_bad_values_name_the_key():
    from hseg.chunking.records import CUTS_KEY, sentence_cuts

    meta = {"hseg_start": 100, "hseg_end": 140}
    assert sentence_cuts(meta) == []  # a record written before the key existed is never cut
    assert sentence_cuts({**meta, CUTS_KEY: "[]"}) == []
    assert sentence_cuts({**meta, CUTS_KEY: "[[12,3],[30,8]]"}) == [(12, 3), (30, 8)]
    for bad in ("[[12,3],[50,8]]", "[[30,3],[12,8]]", "[12, 3]", "{", "[[1,2,3]]", 7):
        with pytest.raises(ValueError, match=CUTS_KEY):
            sentence_cuts({**meta, CUTS_KEY: bad})
