"""A lexical cache following the write log (hseg.store.lexical.journal, .follow): readers re-read the
documents written since their last check instead of rebuilding, and rebuild only where the log
cannot say what changed. In-process: an embedded collection whose lexical index is made a cache,
as a server's clients have (the server itself: tests of the lexical index and tests/e2e)."""

from __future__ import annotations

import time
from pathlib import Path

import chromadb
import pytest

from hseg.chunking.records import records_for
from hseg.store import HierarchicalStore
from hseg.store.lexical import LexicalIndex, Location, journal_name
from hseg.store.lexical.journal import KEEP_S, MARGIN_S, Journal
from hseg.store.lexical.table import LexicalTable
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder, synthetic_book


@pytest.fixture(scope="module")
def chunker():
    return small_chunker()


@pytest.fixture
def as_cache(monkeypatch, tmp_path):
    """Every store opened in the test keeps its lexical index as a cache at ``<tmp>/cache-<n>.sqlite``
    (one file per store unless ``same_file`` is set), following the write log in Chroma."""
    made: list[int] = []
    state = {"same_file": False}

    def location(backend, collection):
        made.append(1)
        n = 0 if state["same_file"] else len(made)
        return Location("cache", tmp_path / f"cache-{n}.sqlite", str(collection.name))

    monkeypatch.setattr("hseg.store.backends.embedded.EmbeddedBackend.lexical_location", location)
    return state


def book(seed: int, n: int = 2500) -> str:
    return synthetic_book(n, seed=seed)


def open_store(path: Path, name: str) -> HierarchicalStore:
    return HierarchicalStore(name, client=chromadb.PersistentClient(path=str(path)), encoder=HashingEncoder())


def rows(index: LexicalIndex) -> dict[str, str]:
    return dict(index.db.rows("SELECT s.id, f.text FROM segments s JOIN fts f ON f.rowid = s.rowid"))


def stored(store: HierarchicalStore) -> dict[str, str]:
    got = store.collection.get(where={"hseg_level": "segment"}, include=["documents"])
    return dict(zip(got["ids"], got["documents"]))


def checked(store: HierarchicalStore) -> LexicalIndex:
    index = store._parts.lexical
    assert index is not None
    index.ensure_fresh()
    assert rows(index) == stored(store)
    return index


def test_a_reader_follows_writes_edits_and_deletes_without_rebuilding(tmp_path, chroma_collection_name, chunker,
                                                                      as_cache):
    writer = open_store(tmp_path / "db", chroma_collection_name)
    writer.add([chunker.chunk(book(i), doc_id=f"d{i}") for i in range(3)])
    reader = open_store(tmp_path / "db", chroma_collection_name)
    follower = checked(reader).follower
    assert follower is not None and follower.rebuilds == 1  # a new cache: the only rebuild
    writer.add(chunker.chunk(book(7), doc_id="d1"))  # an edit
    writer.add(chunker.chunk(book(8), doc_id="new"))
    writer.delete("d0")
    checked(reader)
    assert (follower.rebuilds, follower.applied) == (1, 3)
    checked(reader)  # nothing written since: nothing applied, nothing written to the file
    assert (follower.rebuilds, follower.applied) == (1, 3)


def test_a_reader_rereads_only_the_documents_written(tmp_path, chroma_collection_name, chunker, as_cache,
                                                     monkeypatch):
    writer = open_store(tmp_path / "db", chroma_collection_name)
    writer.add([chunker.chunk(book(i), doc_id=f"d{i}") for i in range(6)])
    reader = open_store(tmp_path / "db", chroma_collection_name)
    index = checked(reader)
    asked: list[list[str]] = []
    real = LexicalTable.rewrite

    def rewrite(self, doc_ids, **kwargs):
        asked.append(sorted(doc_ids))
        return real(self, doc_ids, **kwargs)

    monkeypatch.setattr(LexicalTable, "rewrite", rewrite)
    writer.add(chunker.chunk(book(9), doc_id="d4"))
    checked(reader)
    assert asked == [["d4"]] and index.follower is not None and index.follower.rebuilds == 1


def test_a_new_document_is_found_lexically_at_the_first_search_after_its_write(tmp_path, chroma_collection_name,
                                                                             chunker, as_cache):
    writer = open_store(tmp_path / "db", chroma_collection_name)
    writer.add(chunker.chunk(book(1), doc_id="a"))
    reader = open_store(tmp_path / "db", chroma_collection_name)
    reader.search("anything at all", k=2, lexical_weight=0.5)
    writer.add(chunker.chunk("Zyzzogeton beetles live in Peru. " * 20, doc_id="z"))
    hits = reader.search("zyzzogeton", k=1, lexical_weight=0.5, unit="segment")
    assert hits and hits[0].doc_id == "z"


def test_processes_sharing_a_cache_file_apply_each_entry_once(tmp_path, chroma_collection_name, chunker, as_cache):
    writer = open_store(tmp_path / "db", chroma_collection_name)
    writer.add([chunker.chunk(book(i), doc_id=f"d{i}") for i in range(2)])
    as_cache["same_file"] = True
    one, two = (open_store(tmp_path / "db", chroma_collection_name) for _ in range(2))
    first, second = checked(one).follower, checked(two).follower
    assert first is not None and second is not None and first.rebuilds + second.rebuilds == 1
    writer.add(chunker.chunk(book(5), doc_id="d1"))
    checked(one)
    checked(two)
    assert (first.applied, second.applied) == (1, 0) and first.rebuilds + second.rebuilds == 1


def test_a_log_compacted_past_a_readers_position_makes_it_rebuild(tmp_path, chroma_collection_name, chunker,
                                                                 as_cache):
    writer = open_store(tmp_path / "db", chroma_collection_name)
    writer.add(chunker.chunk(book(1), doc_id="a"))
    reader = open_store(tmp_path / "db", chroma_collection_name)
    follower = checked(reader).follower
    assert follower is not None
    writer.add(chunker.chunk(book(2), doc_id="b"))
    journal = writer._parts.backend.journal(writer.collection)
    # a writer long after: every entry is older than the log keeps, and goes
    assert journal.compact(time.time() + KEEP_S + 1) >= 2
    assert journal.read(since=0.0).done == [] and journal.read(since=0.0).horizon > 0
    checked(reader)  # the entry of "b" is gone from the log: only a rebuild can find it
    assert follower.rebuilds == 2
    # a compaction well before a reader's last read costs it nothing
    follower_position = follower.position(reader._parts.lexical.meta())
    writer.add(chunker.chunk(book(3), doc_id="c"))
    journal.collection.upsert(ids=["horizon"], embeddings=[[1.0]],
                              metadatas=[{"kind": "horizon", "at": follower_position - 2 * MARGIN_S}])
    checked(reader)
    assert follower.rebuilds == 2 and follower.applied >= 1


def test_records_written_without_the_log_are_found_by_the_next_reader(tmp_path, chroma_collection_name, chunker,
                                                                     as_cache):
    writer = open_store(tmp_path / "db", chroma_collection_name)
    writer.add(chunker.chunk(book(1), doc_id="a"))
    as_cache["same_file"] = True
    checked(open_store(tmp_path / "db", chroma_collection_name))
    recs = records_for(chunker.chunk(book(2), doc_id="foreign"))
    writer.collection.upsert(ids=[r.id for r in recs], embeddings=[r.embedding for r in recs],
                             documents=[r.document for r in recs], metadatas=[r.metadata for r in recs])
    later = open_store(tmp_path / "db", chroma_collection_name)  # its first check compares the record count
    follower = checked(later).follower
    assert follower is not None and follower.rebuilds == 1


def test_a_live_writers_documents_keep_their_last_version_until_its_write_ends(tmp_path, chroma_collection_name,
                                                                              chunker, as_cache, monkeypatch):
    """Re-reading a document half written would mix two versions of it in one passage; a dead
    writer's (an open entry older than OPEN_STALE_S) is re-read as Chroma holds it."""
    writer = open_store(tmp_path / "db", chroma_collection_name)
    writer.add(chunker.chunk(book(1), doc_id="a"))
    reader = open_store(tmp_path / "db", chroma_collection_name)
    index = checked(reader)
    before = rows(index)
    journal = writer._parts.backend.journal(writer.collection)
    journal.begin(["a"])
    recs = records_for(chunker.chunk(book(4), doc_id="a"))
    writer.collection.upsert(ids=[r.id for r in recs], embeddings=[r.embedding for r in recs],
                             documents=[r.document for r in recs], metadatas=[r.metadata for r in recs])
    index.ensure_fresh()
    assert rows(index) == before  # the writer is at work: the version before its write
    monkeypatch.setattr("hseg.store.lexical.follow.OPEN_STALE_S", 0.0)  # now it is taken for dead
    index.ensure_fresh()
    assert set(rows(index).values()) == {t for i, t in stored(reader).items()
                                         if i in {r.id for r in recs if r.metadata["hseg_level"] == "segment"}} | {
        t for i, t in before.items() if i in stored(reader) and i not in {r.id for r in recs}}


def test_a_failed_write_is_logged_as_ended_so_readers_reread_it(tmp_path, chroma_collection_name, chunker, as_cache,
                                                               monkeypatch):
    writer = open_store(tmp_path / "db", chroma_collection_name)
    writer.add(chunker.chunk(book(1), doc_id="a"))
    journal = writer._parts.backend.journal(writer.collection)
    real = writer.collection.upsert
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("disk full")
        return real(*args, **kwargs)

    monkeypatch.setattr(writer.collection, "upsert", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        writer.add(chunker.chunk(book(3) * 4, doc_id="a"))
    log = journal.read(since=0.0)
    assert log.opens == [] and [e.docs for e in log.done][-1] == ("a",)


def test_the_log_keeps_only_recent_entries(tmp_path, chroma_collection_name, chunker, as_cache):
    writer = open_store(tmp_path / "db", chroma_collection_name)
    for i in range(4):
        writer.add(chunker.chunk(book(i), doc_id=f"d{i}"))
    journal = writer._parts.backend.journal(writer.collection)
    assert journal.name == journal_name(chroma_collection_name)
    assert len(journal.read(since=0.0).done) == 4
    journal.compact(time.time() + KEEP_S + 1)
    assert journal.collection.count() == 1  # the horizon alone


def test_an_entry_stamped_long_before_it_landed_is_found_by_the_next_sweep(tmp_path, chroma_collection_name, chunker,
                                                                           as_cache, monkeypatch):
    """A check looks NEAR_MARGIN_S back, a sweep every SWEEP_S looks MARGIN_S back: an entry of a writer
    whose clock runs behind (stamped earlier than the near margin before it became visible) is
    applied by the next sweep, and the metadata of entries read once is not asked for again."""
    from hseg.store.lexical import journal

    writer = open_store(tmp_path / "db", chroma_collection_name)
    writer.add(chunker.chunk(book(1), doc_id="a"))
    reader = open_store(tmp_path / "db", chroma_collection_name)
    index = checked(reader)
    follower = index.follower
    assert follower is not None
    now = [time.time()]
    monkeypatch.setattr(Journal, "now", lambda self: now[0])  # the server's clock, for every journal
    index.ensure_fresh()  # a sweep: the next checks look NEAR_MARGIN_S back until SWEEP_S has passed
    writer.add(chunker.chunk("Zyzzogeton beetles live in Peru. " * 20, doc_id="z"))
    late = writer._parts.backend.journal(writer.collection)
    log = late.collection.get(include=["metadatas"])
    entry = next(i for i, m in zip(log["ids"], log["metadatas"]) if m["docs"] == '["z"]')
    stamped = now[0] - journal.NEAR_MARGIN_S - 5  # its writer's clock runs behind
    late.collection.update(ids=[entry], metadatas=[{"at": stamped}])

    asked: list[list[str]] = []
    real_get = type(late.collection).get

    def get(self, *args, **kwargs):  # the ids asked for by metadata
        if self.name == journal_name(chroma_collection_name) and kwargs.get("ids"):
            asked.append(list(kwargs["ids"]))
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(type(late.collection), "get", get)
    now[0] += 1
    index.ensure_fresh()  # a near check: the entry is older than its window
    assert rows(index) != stored(reader) and follower.applied == 0
    now[0] += journal.SWEEP_S
    index.ensure_fresh()  # the sweep finds it
    assert rows(index) == stored(reader) and follower.applied == 1
    assert any(entry in ids for ids in asked)
    asked.clear()
    now[0] += journal.SWEEP_S
    index.ensure_fresh()  # another sweep: the entry is known, its metadata not asked for again
    assert follower.applied == 1 and asked == []


def test_a_caches_check_runs_beside_the_searchs_knn_and_its_failure_leaves_a_dense_search(
        tmp_path, chroma_collection_name, chunker, as_cache, monkeypatch, caplog):
    """A cache's check reads the write log from the server: it runs in a worker while the search's
    kNN is asked, and the search's first read of the index waits for it. A check that fails with the
    index unavailable leaves the search dense, with one warning, as a check before the search did."""
    import threading

    from hseg.store.lexical import LexicalIndexUnavailable

    writer = open_store(tmp_path / "db", chroma_collection_name)
    writer.add([chunker.chunk(book(i), doc_id=f"d{i}") for i in range(3)])
    reader = open_store(tmp_path / "db", chroma_collection_name)
    expected = [(h.segment_ids, h.end) for h in reader.search("river flood", budget_tokens=300)]
    index = reader._parts.lexical
    real_check = type(index).ensure_fresh
    checking = threading.Event()
    release = threading.Event()
    seen: list[bool] = []

    def slow_check(self):  # waits for the kNN: a check before the search would wait in vain
        checking.set()
        seen.append(release.wait(5))
        return real_check(self)

    real_query = type(reader.collection).query

    def query(self, *args, **kwargs):  # the kNN: asked while the check is under way
        release.set()
        return real_query(self, *args, **kwargs)

    monkeypatch.setattr(type(index), "ensure_fresh", slow_check)
    monkeypatch.setattr(type(reader.collection), "query", query)
    assert [(h.segment_ids, h.end) for h in reader.search("river flood", budget_tokens=300)] == expected
    assert seen == [True]

    def unavailable(self):
        raise LexicalIndexUnavailable("the lexical index cannot be read")

    monkeypatch.setattr(type(index), "ensure_fresh", unavailable)
    with caplog.at_level("WARNING", logger="hseg"):
        hits = reader.search("river flood", budget_tokens=300)
        again = reader.search("river flood", budget_tokens=300)
    dense = [(h.segment_ids, h.end) for h in reader.search("river flood", budget_tokens=300, lexical_weight=0.0)]
    assert [(h.segment_ids, h.end) for h in hits] == dense == [(h.segment_ids, h.end) for h in again]
    assert sum("dense side alone" in r.getMessage() for r in caplog.records) == 1
