"""The lexical index of stores on a ``chroma run`` server: every test of ``tests/store/test_lexical_index.py``
that takes ``chroma_client``, here over HTTP, and the server's clients, each with a cache of its own
derived from the server: they see one another's writes, and a writer that died mid-write is read again.
"""

from __future__ import annotations

import pytest

from hseg.chunking.records import records_for
from hseg.store import HierarchicalStore
from hseg.store.lexical import journal_name
from hseg_testing.fakes import HashingEncoder
from tests.store import test_lexical_index
from tests.store.test_lexical_index import book, in_step
from tests.support.clients import server_variants

# with the module's ``chunker`` fixture, which the tests below take too
globals().update(server_variants(test_lexical_index))


@pytest.mark.integration
def test_each_client_of_a_server_derives_its_cache_and_sees_the_others_writes(
        chroma_server, chroma_collection_name, chunker, tmp_path, monkeypatch):
    monkeypatch.setenv("HSEG_CACHE", str(tmp_path / "reader"))
    reader = HierarchicalStore(chroma_collection_name, client=chroma_server.client(), encoder=HashingEncoder())
    monkeypatch.setenv("HSEG_CACHE", str(tmp_path / "writer"))
    writer = HierarchicalStore(chroma_collection_name, client=chroma_server.client(), encoder=HashingEncoder())
    assert reader._parts.lexical.location.kind == "cache"
    assert reader._parts.lexical.location.path != writer._parts.lexical.location.path
    assert str(reader._parts.lexical.location.path).startswith(str(tmp_path / "reader"))
    writer.add([chunker.chunk(book(i), doc_id=f"d{i}") for i in range(2)])
    assert in_step(reader)
    follower = reader._parts.lexical.follower
    assert follower.rebuilds == 1  # its first check: a new cache
    writer.add(chunker.chunk(book(5), doc_id="d1"))  # another client's write: one log entry
    assert in_step(reader)
    writer.delete("d0")
    assert in_step(reader) and in_step(writer)
    # followed by the documents written, never rebuilt again; nothing written since: nothing applied
    assert (follower.rebuilds, follower.applied) == (1, 2)
    assert in_step(reader) and (follower.rebuilds, follower.applied) == (1, 2)
    assert journal_name(chroma_collection_name) in {c.name for c in chroma_server.client().list_collections()}


@pytest.mark.integration
def test_a_server_writer_that_died_mid_write_is_reread_by_every_reader(
        chroma_server, chroma_collection_name, chunker, tmp_path, monkeypatch):
    monkeypatch.setenv("HSEG_CACHE", str(tmp_path / "cache"))
    store = HierarchicalStore(chroma_collection_name, client=chroma_server.client(), encoder=HashingEncoder())
    store.add(chunker.chunk(book(1), doc_id="a"))
    assert in_step(store)
    # a writer opens its write, writes Chroma's records and dies before closing it; its open entry is
    # taken for a dead writer's once it is older than OPEN_STALE_S (here at once)
    monkeypatch.setattr("hseg.store.lexical.follow.OPEN_STALE_S", 0.0)
    store._parts.lexical.journal.begin(["a"])
    recs = records_for(chunker.chunk(book(4), doc_id="a"))
    store.collection.upsert(ids=[r.id for r in recs], embeddings=[r.embedding for r in recs],
                            documents=[r.document for r in recs], metadatas=[r.metadata for r in recs])
    stale = {r.id for r in records_for(chunker.chunk(book(1), doc_id="a"))} - {r.id for r in recs}
    store.collection.delete(ids=list(stale))
    assert in_step(store)  # no write finished, the open write names "a": it is read again
