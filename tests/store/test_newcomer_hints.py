"""What a new user meets at the library's doors says how to go on (issue 57)."""

from __future__ import annotations

import uuid

import chromadb
import pytest

from hseg_testing.fakes import HashingEncoder


def test_from_vectorstore_on_an_l2_store_says_how_to_ask_langchain_chroma_for_cosine():
    from langchain_chroma import Chroma

    from langchain_hseg import HierarchicalSegmentRetriever

    client = chromadb.EphemeralClient()
    plain = Chroma(f"t-{uuid.uuid4().hex}", client=client)  # langchain_chroma's default space: l2
    with pytest.raises(ValueError, match=r"'l2'.*collection_metadata=\{'hnsw:space': 'cosine'\}"):
        HierarchicalSegmentRetriever.from_vectorstore(plain, encoder=HashingEncoder())
    # the hint works: the same call on a store made as it says
    name = f"t-{uuid.uuid4().hex}"
    cosine = Chroma(name, client=client, collection_metadata={"hnsw:space": "cosine"})
    assert HierarchicalSegmentRetriever.from_vectorstore(cosine, encoder=HashingEncoder()).store.collection.name == name
