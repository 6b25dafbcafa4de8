"""One metadata schema (issue 12) with the real MiniLM: the store, LangChain and LlamaIndex return the
same results, with the same metadata (the declaration, the chunks and the results on the hashing
encoder are ``tests/unit/test_metadata_schema.py``).
"""

from __future__ import annotations

import uuid

import chromadb
import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.store import HierarchicalStore
from tests.unit.test_metadata_schema import check_result_metadata, same_results


@pytest.mark.model
def test_both_retrievers_agree_on_the_real_model(encoder, example_text):
    store = HierarchicalStore(f"t-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(), encoder=encoder)
    text = example_text[:12000]
    store.add(HierarchicalChunker(encoder=encoder, target_tokens=256).chunk(text, "example"), {"source": "example.md"})
    for unit, size in [("cluster", {"k": 3}), ("auto", {"budget_tokens": 512})]:
        docs = same_results(store, "What did Galileo see through his telescope?", unit, size)
        check_result_metadata(docs, {"example": text}, unit)
