"""When each document was indexed (``hseg_indexed_at``): every record of a write carries its write's
time; adding a document again unchanged keeps the time it had (the store is left as it was), any
change of its text, chunks or metadata stamps the new write's; the agent tools list it as ISO 8601
UTC. Over a ``chroma run`` server the time is the server's: ``tests/e2e/test_tools_server.py``."""

from __future__ import annotations

import pytest

from hseg.chunking.schema import DOC_ID_KEY, INDEXED_AT_KEY
from hseg.retrieval.results import result_for
from hseg.store import indexed_at
from hseg.tools import StoreTools
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import ephemeral_store, synthetic_book

T0 = 1_800_000_000  # 2027-01-15T08:00:00Z


class Clock:
    """This machine's clock as the store reads it, set by the test."""

    def __init__(self) -> None:
        self.now = T0 + 0.75

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(indexed_at, "time", clock)
    return clock


def times(store, doc_id: str) -> set:
    return {m.get(INDEXED_AT_KEY) for _, m in store.iter_metadatas({DOC_ID_KEY: doc_id})}


def test_a_write_stamps_its_documents_and_an_unchanged_one_keeps_its_time(clock):
    store, chunker = ephemeral_store(), small_chunker()
    a, b = chunker.chunk(synthetic_book(1_500, seed=1), "a"), chunker.chunk(synthetic_book(1_200, seed=2), "b")
    store.add([a, b], [{"source": "a.md", "weight": 0.1}, {"source": "b.md"}])
    assert times(store, "a") == times(store, "b") == {T0}  # whole seconds, every record

    clock.now += 100
    store.add(a, {"source": "a.md", "weight": 0.1})  # the same again: nothing changes
    assert times(store, "a") == {T0}
    store.add_records({"a": store.get_records("a")})  # its records read back and written again (a node round trip)
    assert times(store, "a") == {T0}

    store.add(a, {"source": "a.md", "weight": 0.2})  # its metadata changed
    assert times(store, "a") == {T0 + 100} and times(store, "b") == {T0}
    clock.now += 100
    store.add(chunker.chunk(synthetic_book(1_500, seed=1) + "\n\nOne more line.", "a"), {"source": "a.md"})
    assert times(store, "a") == {T0 + 200}  # its text changed: every record, the new and the kept, is stamped
    assert times(store, "b") == {T0}
    assert store.stats()["last_indexed"] == "2027-01-15T08:03:20Z"  # hseg stats: when the store was last written


def test_the_time_stays_out_of_results_and_the_tools_list_it(clock):
    store = ephemeral_store()
    store.add(small_chunker().chunk(synthetic_book(1_500, seed=3), "a"), {"source": "a.md"})
    _, meta = result_for(store.search("river", k=1)[0])
    assert INDEXED_AT_KEY not in meta and meta["source"] == "a.md"
    listed = StoreTools(store).list_documents()
    assert [(d.source, d.indexed_at) for d in listed.documents] == [("a", "2027-01-15T08:00:00Z")]
    assert indexed_at.iso_utc(T0) == "2027-01-15T08:00:00Z"


def test_a_document_written_before_the_time_was_kept_lists_none(clock):
    """Records without the key (a store written by an earlier hseg): the document is listed, its time
    ``None``, until a write changes it."""
    store = ephemeral_store()
    store.add(small_chunker().chunk(synthetic_book(1_500, seed=4), "a"), {"source": "a.md"})
    ids = [rid for rid, _ in store.iter_metadatas({DOC_ID_KEY: "a"})]
    store.collection.update(ids=ids, metadatas=[{INDEXED_AT_KEY: None}] * len(ids))
    store.sync_lexical_index()
    assert times(store, "a") == {None}
    assert [d.indexed_at for d in StoreTools(store).list_documents().documents] == [None]
