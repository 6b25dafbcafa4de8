"""Text that is not valid Unicode (lone surrogates) with the real model (issue 25 item 5).

The model's tokenizer refuses such text with ``TypeError: TextEncodeInput must be Union[...]``, naming
no document and no offset. hseg checks once, where text enters it (the chunker's input and a search's
query strings), and every adapter goes through those two doors.
"""

from __future__ import annotations

import asyncio

import chromadb
import pytest
from langchain_core.documents import Document as LcDocument
from llama_index.core import Document as LiDocument
from llama_index.core.schema import QueryBundle

import langchain_hseg
import llama_index_hseg
from hseg.chunking.chunker import HierarchicalChunker
from hseg.encoders import DEFAULT_BACKEND, as_encoder
from hseg.store import HierarchicalStore
from hseg_testing.chunkers import SMALL

pytestmark = pytest.mark.model

BROKEN = "Fine text here. Broken \ud800 text. More words follow."  # the surrogate is at offset 23
ESCAPED = b"Caf\xe9 au lait, decoded with surrogateescape.".decode("utf-8", "surrogateescape")  # offset 3


@pytest.fixture(scope="module")
def model():
    assert DEFAULT_BACKEND == "onnx"
    return as_encoder(None)  # all-MiniLM-L6-v2 on the default (ONNX) backend


@pytest.fixture(scope="module")
def store(model):
    store = HierarchicalStore("unicode-input", client=chromadb.EphemeralClient(), encoder=model)
    chunker = HierarchicalChunker(encoder=model, segmenter="texttiling", **SMALL)
    store.add(chunker.chunk("The tide rises twice a day. The moon pulls the sea.", "good"))
    return store


def test_the_tokenizer_itself_names_nothing(model):
    """What users got before the check: the tokenizer's own error."""
    with pytest.raises(TypeError, match="TextEncodeInput"):
        model.encode([BROKEN])


def test_the_chunker_names_the_argument_the_document_and_the_offset(model):
    chunker = HierarchicalChunker(encoder=model, segmenter="texttiling", **SMALL)
    with pytest.raises(ValueError, match=r"texts\[1\] \(document 'broken'\): not valid Unicode \(a lone surrogate "
                                         r"'\\ud800' at offset 23\).*errors='replace'"):
        chunker.chunk_many(["A good text. It is fine.", BROKEN], ["good", "broken"])
    with pytest.raises(ValueError, match=r"texts\[0\] \(document 'doc-[0-9a-f]+'\): .*'\\udce9' at offset 3"):
        chunker.chunk(ESCAPED)


def test_the_store_search_names_the_query_and_the_offset(store):
    with pytest.raises(ValueError, match=r"^query: not valid Unicode \(a lone surrogate '\\ud800' at offset 23\)"):
        store.search(BROKEN)
    with pytest.raises(ValueError, match=r"^queries\[1\]: .*offset 3"):
        store.search_many(["tides", ESCAPED])
    with pytest.raises(ValueError, match=r"^query: .*offset 23"):
        asyncio.run(store.asearch(BROKEN, unit="auto"))
    assert store.search("tides", k=1)[0].doc_id == "good"


def test_langchain_splitter_and_retriever(model, store):
    splitter = langchain_hseg.HierarchicalSegmentTextSplitter(encoder=model, segmenter="texttiling", **SMALL)
    with pytest.raises(ValueError, match=r"\(document 'lc-broken'\): .*offset 23"):
        splitter.split_documents([LcDocument(page_content=BROKEN, id="lc-broken")])
    with pytest.raises(ValueError, match=r"offset 23"):
        splitter.split_text(BROKEN)
    retriever = langchain_hseg.HierarchicalSegmentRetriever(store=store, k=1)
    with pytest.raises(ValueError, match=r"^query: .*offset 23"):
        retriever.invoke(BROKEN)
    with pytest.raises(ValueError, match=r"^queries\[0\]: .*offset 3"):
        retriever.batch([ESCAPED, "tides"])
    with pytest.raises(ValueError, match=r"^query: .*offset 23"):
        asyncio.run(retriever.ainvoke(BROKEN))


def test_llama_index_parser_and_retriever(model, store):
    parser = llama_index_hseg.HierarchicalSegmentNodeParser(encoder=model, segmenter="texttiling", **SMALL)
    with pytest.raises(ValueError, match=r"\(document 'li-broken'\): .*offset 23"):
        parser.get_nodes_from_documents([LiDocument(text=BROKEN, id_="li-broken")])
    retriever = llama_index_hseg.HierarchicalSegmentRetriever(store)
    with pytest.raises(ValueError, match=r"^query: .*offset 23"):
        retriever.retrieve(BROKEN)
    with pytest.raises(ValueError, match=r"^query_bundle.embedding_strs\[1\]: .*offset 3"):
        retriever.retrieve(QueryBundle("tides", custom_embedding_strs=["tides", ESCAPED]))
    assert retriever.retrieve("tides")[0].node.metadata["hseg_doc_id"] == "good"
