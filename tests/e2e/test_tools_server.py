"""The retrieval tools over a ``chroma run`` server: every test of ``tests/store/test_tools.py`` that takes
``chroma_client``, here over HTTP, where the lexical index the tools read is a client-side cache; and
the time each document was indexed, which a server's client takes from the server's clock."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from hseg.chunking.schema import DOC_ID_KEY, INDEXED_AT_KEY
from hseg.store import HierarchicalStore, indexed_at
from hseg.tools import StoreTools
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder
from tests.store import test_tools
from tests.support.clients import server_variants

globals().update(server_variants(test_tools))


@pytest.mark.integration
def test_a_server_store_stamps_the_servers_clock(chroma_server, chroma_collection_name, monkeypatch):
    """A document's time is the server's clock (read through the write log's ``ServerClock``), not the
    writing client's: a client whose own clock runs 30 days slow stamps the server's time, keeps it when
    the same document is added again, and another client lists it through its own lexical cache."""
    monkeypatch.setattr(indexed_at, "time", SimpleNamespace(time=lambda: time.time() - 30 * 86400))
    store = HierarchicalStore(chroma_collection_name, client=chroma_server.client(), encoder=HashingEncoder(64))
    chunking = small_chunker().chunk(test_tools.OTHER, doc_id="notes.md")

    def stamped() -> set:
        return {m.get(INDEXED_AT_KEY) for _, m in store.iter_metadatas({DOC_ID_KEY: "notes.md"})}

    before = time.time()
    store.add(chunking, {"source": "notes.md"})
    (first,) = stamped()
    assert before - 2 <= first <= time.time() + 2  # the server's clock (this machine's, unpatched)
    time.sleep(1.1)
    store.add(chunking, {"source": "notes.md"})
    assert stamped() == {first}  # unchanged: kept
    store.add(chunking, {"source": "notes.md", "edited": True})
    (second,) = stamped()
    assert second > first
    reader = HierarchicalStore(chroma_collection_name, client=chroma_server.client(), encoder=HashingEncoder(64),
                               create=False)
    listed = StoreTools(reader).list_documents()
    assert [(d.source, d.indexed_at, d.metadata) for d in listed.documents] == \
        [("notes.md", indexed_at.iso_utc(second), {"source": "notes.md", "edited": True})]
