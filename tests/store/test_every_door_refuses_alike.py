"""Bad input refused the same way by every door (issue 47 items 7 and 8): the core store, the LangChain
retriever and splitter, and the LlamaIndex retriever and ingestion path. Each refusal is one ``ValueError``
naming the argument (or the metadata key) and the fix, before anything is embedded or written.

The bag-of-words ``HashingEncoder`` and in-memory Chroma, no model.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from llama_index.core.schema import QueryBundle  # noqa: E402

from langchain_hseg import HierarchicalSegmentRetriever as LangChainRetriever  # noqa: E402
from llama_index_hseg import HierarchicalSegmentRetriever as LlamaRetriever  # noqa: E402
from tests.support.chunkers import small_chunker  # noqa: E402
from tests.support.fakes import ephemeral_store  # noqa: E402

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
