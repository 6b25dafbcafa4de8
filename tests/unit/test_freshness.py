"""Reads that see other writers' writes, in the fast lane (issue 55 item 4): the torn-view retry every
backend shares (:meth:`hseg.store.backends.Backend.read`), on the memory backend; and an embedded
store's fresh views (:mod:`hseg.store.freshness`) in one process, "another process" being a private
client outside chromadb's per-process cache, as the fresh views open themselves. No model, no
server, no child process: the writes of two real processes are tests/store/test_writers.py's."""

from __future__ import annotations

import os
import shutil
import uuid

import chromadb
import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.errors import IndexOutOfStepError, StoreReplacedError
from hseg.store import HierarchicalStore
from hseg.store.backends import EmbeddedBackend, MemoryBackend
from hseg.store.freshness import LogPosition
from hseg_testing.fakes import HashingEncoder, synthetic_book


@pytest.fixture(scope="module")
def chunkings():
    chunker = HierarchicalChunker(encoder=HashingEncoder(), segmenter="texttiling")
    return [chunker.chunk(synthetic_book(1_200, seed=s), f"d{s}.md") for s in (1, 2, 3)]


def memory_store() -> HierarchicalStore:
    """A store on the memory backend (sqlite-utils' ``fresh_db``): no folder, no server."""
    return HierarchicalStore(f"t-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(), encoder=HashingEncoder())


def private_store(store: HierarchicalStore) -> tuple[HierarchicalStore, object]:
    """A store over ``store``'s collection through a private client of its folder: to ``store``, the
    writes of another process (its own client never reloads its vector index)."""
    from chromadb.api import ServerAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.config import System

    system = System(store.client.get_settings())
    api = system.instance(ServerAPI)  # type: ignore[type-abstract]
    system.start()
    collection = store.collection
    model = api.get_collection(collection.name, tenant=collection.tenant, database=collection.database)
    other = Collection(client=api, model=model, embedding_function=None)
    return HierarchicalStore.from_collection(other, store.encoder), system


# ----------------------------------------------------------------- every backend: reading again


def test_a_search_whose_reads_disagree_is_read_again_once_on_the_memory_backend():
    store = memory_store()
    backend = store._parts.backend
    assert isinstance(backend, MemoryBackend)
    calls = []

    def run(collection, units):
        calls.append((collection, units))
        if len(calls) == 1:  # another writer replaced a document between two reads of this search
            raise IndexOutOfStepError("a record the unit index lists is gone")
        return "answer"

    assert backend.read(run, store._parts.units, 1.0) == "answer"
    assert calls == [(store.collection, store._parts.units)] * 2  # the store's own collections, both times


def test_another_failure_or_a_missing_vector_without_views_is_raised_at_once():
    store = memory_store()
    backend = store._parts.backend
    for exc in (KeyError("boom"), RuntimeError("Error finding id 7")):  # the second: a torn view, none to discard
        calls: list[int] = []

        def run(collection, units, exc=exc, calls=calls):
            calls.append(1)
            raise exc

        with pytest.raises(type(exc)):
            backend.read(run, store._parts.units, 1.0)
        assert calls == [1]


def test_the_memory_backend_reads_the_stores_own_collections(chunkings):
    store = memory_store()
    store.add(chunkings[0])
    with store._parts.backend.reading() as (collection, units):
        assert collection is store.collection and units is store._parts.units
    assert not hasattr(store._parts.backend, "fresh") and store.writer_turn() is None


# ----------------------------------------------------------------- the embedded backend's fresh views


def test_the_write_log_position_grows_with_each_write(tmp_path, chunkings):
    assert LogPosition(str(tmp_path / "nothing")).read() is None  # no database: nothing to read
    store = HierarchicalStore("docs", path=str(tmp_path / "db"), encoder=HashingEncoder())
    log = LogPosition(str(tmp_path / "db"))
    before = log.read()
    store.add(chunkings[0])
    after = log.read()
    assert before is not None and after is not None and after > before
    log.close()


def test_an_embedded_store_sees_another_clients_write_through_a_view(tmp_path, chunkings):
    store = HierarchicalStore("docs", path=str(tmp_path / "db"), encoder=HashingEncoder())
    backend = store._parts.backend
    assert isinstance(backend, EmbeddedBackend) and backend.fresh is not None
    store.add(chunkings[0])
    query = chunkings[1].segments[1].text
    assert {h.doc_id for h in store.search(query, k=3)} == {"d1.md"}
    assert backend.fresh.reopened == 0  # its own write: no view to open
    other, system = private_store(store)
    try:
        other.add(chunkings[1])
    finally:
        system.stop()  # type: ignore[attr-defined]
    hits = store.search(query, k=3)
    assert hits and hits[0].doc_id == "d2.md"  # the other client's document, found first
    assert backend.fresh.reopened == 1
    store.search(query, k=3)
    assert backend.fresh.reopened == 1  # nothing written since: the view stays


def test_the_writers_turn_starts_the_engine_anew_only_after_another_clients_write(tmp_path, chunkings,
                                                                                   monkeypatch):
    """A write through a client whose vector index predates another process's write would save it over
    theirs (two real processes: tests/store/test_writers.py); the writer's turn starts the client's
    engine anew first (:func:`hseg.store.freshness.current_writes`), and only then."""
    store = HierarchicalStore("docs", path=str(tmp_path / "db"), encoder=HashingEncoder())
    store.add(chunkings[0])
    api = store._parts.backend.api
    starts = []
    real_start = api.start
    monkeypatch.setattr(api, "start", lambda: (starts.append(1), real_start())[1])
    store.add(chunkings[2])
    assert starts == []  # only its own writes since its last: its engine is current
    other, system = private_store(store)
    try:
        other.add(chunkings[1])
    finally:
        system.stop()  # type: ignore[attr-defined]
    store.delete("d3.md")
    assert starts == [1]
    assert store.stats()["records_without_vectors"] == 0 and store.doc_ids() == ["d1.md", "d2.md"]


def test_a_replaced_database_is_refused(tmp_path, chunkings):
    store = HierarchicalStore("docs", path=str(tmp_path / "db"), encoder=HashingEncoder())
    store.add(chunkings[0])
    database = tmp_path / "db" / "chroma.sqlite3"
    shutil.copy(database, tmp_path / "copy.sqlite3")
    os.replace(tmp_path / "copy.sqlite3", database)  # another file in its place, as a restored backup
    with pytest.raises(StoreReplacedError, match="renamed or replaced"):
        store.search("anything", k=1)
