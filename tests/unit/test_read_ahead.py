"""``hseg.store.paging.read_ahead``: pages drawn by a thread while the caller writes the last one
(the lexical index's rebuild): the same items in the same order, errors where the caller reads,
and no thread left drawing after the caller stops."""

from __future__ import annotations

import itertools
import threading

import pytest

from hseg.store.paging import READ_AHEAD_THREAD, read_ahead


def test_the_items_come_as_they_are_in_order():
    assert list(read_ahead(iter(range(50)), depth=2)) == list(range(50))
    assert list(read_ahead(iter([]))) == []


def test_an_error_of_the_pages_is_raised_where_the_caller_reads_it():
    def pages():
        yield 1
        yield 2
        raise ConnectionError("server gone")

    got = []
    with pytest.raises(ConnectionError, match="server gone"):
        for page in read_ahead(pages()):
            got.append(page)
    assert got == [1, 2]


def test_a_caller_that_stops_early_stops_the_thread():
    drawn = itertools.count()
    before = set(threading.enumerate())
    pages = read_ahead((next(drawn) for _ in itertools.count()), depth=1)
    assert [next(pages) for _ in range(3)] == [0, 1, 2]
    started = [t for t in set(threading.enumerate()) - before if t.name.startswith(READ_AHEAD_THREAD)]
    assert len(started) == 1
    pages.close()
    assert not started[0].is_alive()
    assert next(drawn) <= 6  # at most the depth and the one in hand were drawn past what was read


@pytest.mark.parametrize("depth", [0, -1, 1.5, True])
def test_a_depth_that_is_not_a_positive_int_is_refused(depth):
    with pytest.raises(ValueError, match="depth must be a positive int"):
        read_ahead(iter(()), depth=depth)  # at the call, not at the first page


def test_a_rebuild_that_fails_stops_its_reading_thread_at_once(monkeypatch):
    # a thread still drawing pages would hold the collection's pages (and a server connection) in memory
    import uuid

    import chromadb

    import hseg.store.lexical.table as table
    from hseg.store import HierarchicalStore
    from hseg_testing.chunkers import small_chunker
    from hseg_testing.fakes import HashingEncoder, synthetic_book

    store = HierarchicalStore(f"ahead-{uuid.uuid4().hex[:8]}", client=chromadb.EphemeralClient(),
                              encoder=HashingEncoder(64))
    store.add([small_chunker().chunk(synthetic_book(1500, seed=i), f"book{i}.md") for i in range(3)])
    monkeypatch.setattr(table, "_PAGE", 2)

    def failing(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(table, "insert_rows", failing)
    before = set(threading.enumerate())
    with pytest.raises(RuntimeError, match="disk full"):
        store.sync_lexical_index()
    assert not [t for t in set(threading.enumerate()) - before if t.name.startswith(READ_AHEAD_THREAD) and t.is_alive()]
