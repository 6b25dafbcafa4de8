"""Bad input refused the same way by every door (issue 47 items 7 and 8): the core store, the LangChain
retriever and splitter, and the LlamaIndex retriever and ingestion path. Each refusal is one ``ValueError``
naming the argument (or the metadata key) and the fix, before anything is embedded or written.

The bag-of-words ``HashingEncoder`` and in-memory Chroma, no model.
"""

from __future__ import annotations

import asyncio
import uuid

import numpy as np
import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from llama_index.core.schema import QueryBundle  # noqa: E402

from hseg_testing.chunkers import small_chunker  # noqa: E402
from hseg_testing.fakes import ephemeral_store  # noqa: E402
from langchain_hseg import HierarchicalSegmentRetriever as LangChainRetriever  # noqa: E402
from llama_index_hseg import HierarchicalSegmentRetriever as LlamaRetriever  # noqa: E402

TEXT = "The tide is the rise and fall of the sea. Tides are caused by the moon. Cats sleep all day."


@pytest.fixture(scope="module")
def store():
    store = ephemeral_store()
    store.add(small_chunker().chunk(TEXT, "tides"), {"source": "tides.md"})
    return store


# --------------------------------------------------------------------------- queries (item 7)

BYTES = "query must be a str or a vector of numbers, got bytes; decode it first"


@pytest.mark.parametrize("call, message", [
    (lambda s: s.search(b"tide"), BYTES),  # was numpy's "could not convert string to float: b'tide'"
    (lambda s: s.search(bytearray(b"tide")), "got bytearray; decode it first"),  # was a 4-d vector of byte values
    (lambda s: s.search_many(["tide", b"tide"]), "queries[1] must be a str or a vector of numbers, got bytes"),
    (lambda s: s.search(["tide", "moon"]), "query must be a str or a vector of numbers, got list ['tide', 'moon']"),
    (lambda s: s.search(None), "query must be a str or a 1-D vector of numbers, got NoneType None"),
    (lambda s: asyncio.run(s.asearch(b"tide")), BYTES),
    (lambda s: LangChainRetriever(store=s).invoke(b"tide"), BYTES),
    (lambda s: LangChainRetriever(store=s).batch(["tide", b"tide"]), "queries[1] must be a str or a vector"),
    (lambda s: LlamaRetriever(s).retrieve(b"tide"),  # was LlamaIndex's AttributeError: ... no attribute 'query_str'
     "str_or_query_bundle must be a str or a QueryBundle, got bytes; decode it first"),
    (lambda s: asyncio.run(LlamaRetriever(s).aretrieve(b"tide")), "str_or_query_bundle must be a str or a QueryBundle"),
    (lambda s: LlamaRetriever(s).retrieve(QueryBundle(b"tide")),  # was "query_text must be a string or None"
     "query_bundle.query_str must be a str, got bytes; decode it first"),
])
def test_a_query_that_is_not_text_nor_numbers_is_one_value_error_naming_it(store, call, message):
    with pytest.raises(ValueError) as err:
        call(store)
    assert message in str(err.value), err.value
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("query", ["", "   ", QueryBundle("")])
def test_a_blank_llama_index_query_is_the_stores_own_refusal(store, query):
    """LlamaIndex gives ``""`` no embedding string: ``retrieve("")`` raised ``got shape ()`` after numpy's
    "Mean of empty slice" warnings. It is refused like a blank query at every other door (a blank question
    is a bug upstream; LlamaIndex's own vector retriever would answer it with nodes ranked by nothing)."""
    with pytest.raises(ValueError, match=r"^query must be a non-blank string or a vector, got '\s*'$"):
        LlamaRetriever(store).retrieve(query)
    with pytest.raises(ValueError, match="query must be a non-blank string"):
        LangChainRetriever(store=store).invoke(query if isinstance(query, str) else "")


def test_vectors_still_search(store):
    vector = store.encoder.encode_query("tide moon")
    assert store.search(vector, k=1)[0].doc_id == "tides"
    assert store.search(np.asarray([vector]), k=1)[0].doc_id == "tides"  # one row of a 2-D array
    assert LlamaRetriever(store).retrieve(QueryBundle("tide", embedding=list(vector)))[0].node.metadata[
        "hseg_doc_id"] == "tides"


# --------------------------------------------------------------------------- metadata (item 8)


def _door_errors(metadata: dict) -> dict[str, str]:
    """What each door says of one document with ``metadata``, and that none of them wrote it."""
    import chromadb
    from langchain_core.documents import Document as LangChainDocument
    from llama_index.core import Document as LlamaDocument
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from hseg_testing.chunkers import SMALL
    from hseg_testing.fakes import HashingEncoder
    from langchain_hseg import HierarchicalSegmentTextSplitter
    from llama_index_hseg import HierarchicalSegmentNodeParser

    said = {}
    store = ephemeral_store()
    with pytest.raises(ValueError) as err:
        store.add(small_chunker().chunk(TEXT, "d"), metadata)
    said["store.add"] = str(err.value)
    splitter = HierarchicalSegmentTextSplitter(encoder=HashingEncoder(), segmenter="texttiling", **SMALL)
    client, name = chromadb.EphemeralClient(), f"door-{uuid.uuid4().hex}"
    with pytest.raises(ValueError) as err:
        LangChainRetriever.from_documents([LangChainDocument(TEXT, id="d", metadata=metadata)], splitter=splitter,
                                          client=client, collection_name=f"{name}-lc")
    said["LangChain from_documents"] = str(err.value)
    parser = HierarchicalSegmentNodeParser(encoder=HashingEncoder(), segmenter="texttiling", **SMALL)
    collection = client.get_or_create_collection(f"{name}-li", configuration={"hnsw": {"space": "cosine"}})
    pipeline = IngestionPipeline(transformations=[parser], vector_store=ChromaVectorStore(chroma_collection=collection))
    with pytest.raises(ValueError) as err:  # the README's pipeline: the parser is hseg's only step in it
        pipeline.run(documents=[LlamaDocument(text=TEXT, id_="d", metadata=metadata)])
    said["LlamaIndex IngestionPipeline"] = str(err.value)
    assert store.count() == client.get_collection(f"{name}-lc").count() == collection.count() == 0
    return said


@pytest.mark.parametrize("metadata, message", [
    # LlamaIndex's ChromaVectorStore stored these altered: NaN as '', 2**63 as 9.223372036854776e+18, a
    # datetime as '2024-01-02T00:00:00'
    ({"x": float("nan")}, "document 'd': metadata['x']: nan cannot be stored (Chroma reads NaN/inf back as None)"),
    ({"big": 2**63}, "document 'd': metadata['big']: int 9223372036854775808 does not fit Chroma's 64 bits"),
    ({"when": __import__("datetime").datetime(2024, 1, 2)}, "document 'd': metadata['when']: unsupported type "
                                                               "datetime"),
    # LangChain and LlamaIndex dropped it silently, store.add refused it
    ({"source": "a.md", "hseg_doc_id": "mine"}, "document 'd': metadata key 'hseg_doc_id' uses the reserved prefix "
                                                 "'hseg_' (hseg writes its own hseg_* keys on every chunk"),
])
def test_metadata_chroma_would_alter_is_refused_alike_by_every_door(metadata, message):
    said = _door_errors(metadata)
    assert all(text.startswith(message) for text in said.values()), said
    assert len(set(said.values())) == 1, said  # one rule, one message


def test_a_chunk_or_result_chunked_again_loses_its_hseg_keys_at_every_door(store):
    """hseg's own output (it carries every key that chunks and results share) is no user's hseg_* key: a
    result added again keeps its user metadata and gets fresh hseg keys, at every door."""
    from llama_index.core import Document as LlamaDocument

    from hseg.retrieval.results import result_for
    from hseg_testing.chunkers import SMALL
    from hseg_testing.fakes import HashingEncoder
    from llama_index_hseg import HierarchicalSegmentNodeParser

    _, result = result_for(store.search("tide", k=1)[0])
    again = ephemeral_store()
    again.add(small_chunker().chunk(result["hseg_matched_text"], "again"), result)
    record = again.get_records("again", include_embeddings=False)[0].metadata
    assert record["source"] == "tides.md" and record["hseg_doc_id"] == "again" and "hseg_score" not in record
    parser = HierarchicalSegmentNodeParser(encoder=HashingEncoder(), segmenter="texttiling", **SMALL)
    node = parser.get_nodes_from_documents([LlamaDocument(text=TEXT, id_="again", metadata=result)])[0]
    assert node.metadata["source"] == "tides.md" and node.metadata["hseg_doc_id"] == "again"
    assert "hseg_score" not in node.metadata
