"""The derived indexes behind one contract (issue 55 item 2), on the memory backend (an in-process
``EphemeralClient``: no server, no model): the order :class:`~hseg.store.indexes.Indexes` keeps, the
unit index's verbs, a lexical cache following the write log (:mod:`hseg.store.lexical.follow`) and a
damaged or replaced lexical file built again (:mod:`hseg.store.lexical.repair`), each helper given
the table it works on, not the index that holds it."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import chromadb
import pytest

from hseg.chunking.records import Record, records_for
from hseg.chunking.schema import CONTENT_HASH_KEY, SEGMENT, SYNCED_RECORDS_KEY, level_is
from hseg.store.backends import MemoryBackend, choose_backend
from hseg.store.connection import DEFAULT_HNSW
from hseg.store.documents import delete_documents, with_text_hashes, write_documents
from hseg.store.indexes import DerivedIndex, Indexes
from hseg.store.lexical import LexicalIndex, Location
from hseg.store.lexical.database import file_inode
from hseg.store.lexical.follow import Follower
from hseg.store.lexical.repair import check_file, repair
from hseg.store.lexical.table import LexicalTable
from hseg.store.unit_index import UnitIndex
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import synthetic_book

BATCH = 500


@pytest.fixture(scope="module")
def documents() -> dict[str, list[Record]]:
    """Four small documents as a store writes them (each record with its text's hash), ``{doc id: records}``."""
    chunker = small_chunker()
    ids = [f"d{i}" for i in range(4)]
    per_doc, _ = with_text_hashes([records_for(chunker.chunk(synthetic_book(1200, seed=i), doc_id=d), {})
                                   for i, d in enumerate(ids)], ids)
    return dict(zip(ids, per_doc))


@pytest.fixture
def collection() -> Any:
    return chromadb.EphemeralClient().create_collection(f"t-{uuid.uuid4().hex}", metadata={"hnsw:space": "cosine"},
                                                        embedding_function=None)


def write(collection: Any, indexes: Indexes, docs: dict[str, list[Record]]) -> None:
    backend = choose_backend(collection)
    write_documents(collection, indexes, list(docs.values()), list(docs), {}, BATCH, errors=backend.errors)


def segments_of(docs: dict[str, list[Record]]) -> dict[str, set[str]]:
    return {d: {r.id for r in recs if r.metadata["hseg_level"] == SEGMENT} for d, recs in docs.items()}


def stored_segments(collection: Any) -> dict[str, str]:
    got = collection.get(where=level_is(SEGMENT), include=["documents"])
    return dict(zip(got["ids"], got["documents"]))


def lexical_rows(index: LexicalIndex | LexicalTable) -> dict[str, str]:
    return dict(index.db.rows("SELECT s.id, f.text FROM segments s JOIN fts f ON f.rowid = s.rowid"))


# --------------------------------------------------------------------------- the order of Indexes


class Recording:
    """A derived index that records what it is asked, in order, into ``log``."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    @contextlib.contextmanager
    def writing(self, doc_ids: Sequence[str]) -> Iterator[None]:
        self.log.append(f"{self.name} opens")
        yield
        self.log.append(f"{self.name} closes")

    def write(self, records: Sequence[Record], doc_ids: Sequence[str]) -> int:
        self.log.append(f"{self.name} writes")
        return 0

    def forget(self, doc_ids: Sequence[str]) -> None:
        self.log.append(f"{self.name} forgets")

    def held(self, doc_ids: Sequence[str], shas: Any = None) -> dict[str, set[str]] | None:
        return None if self.name == "cache" else {d: {self.name} for d in doc_ids}

    def rebuild(self, doc_ids: Sequence[str] | None = None) -> int:
        return 0

    def drop(self) -> None:
        self.log.append(f"{self.name} drops")

    def state(self) -> dict[str, Any]:
        return {}


def test_indexes_open_the_last_bracket_first_write_in_order_and_forget_and_drop_in_reverse():
    log: list[str] = []
    first, last = Recording("units", log), Recording("lexical", log)
    indexes = Indexes(first, None, last)  # an absent index is left out
    assert list(indexes) == [first, last] and isinstance(first, DerivedIndex)
    with indexes.writing(["a"]):
        log.append("records")
        indexes.write([], ["a"])
    assert log == ["lexical opens", "units opens", "records", "units writes", "lexical writes", "units closes",
                   "lexical closes"]
    log.clear()
    with pytest.raises(RuntimeError), indexes.writing(["a"]):
        indexes.forget(["a"])
        raise RuntimeError("a write cut short")
    assert log == ["lexical opens", "units opens", "lexical forgets", "units forgets"]  # no bracket closed as done
    log.clear()
    indexes.drop()
    assert log == ["lexical drops", "units drops"]
    # what is held: only the indexes writers keep (a cache cannot miss a document)
    assert [(i.name, held) for i, held in Indexes(first, Recording("cache", log)).held(["a"])] == [("units",
                                                                                                   {"a": {"units"}})]


# --------------------------------------------------------------------------- the memory backend's indexes


def memory_indexes(collection: Any) -> tuple[UnitIndex, LexicalIndex]:
    backend = choose_backend(collection)
    assert isinstance(backend, MemoryBackend)
    units = backend.unit_index(collection, DEFAULT_HNSW, lambda: BATCH)
    lexical = backend.lexical_index(collection)
    assert units is not None and lexical is not None and lexical.maintained
    return units, lexical


def test_both_indexes_of_a_memory_store_keep_the_contract(collection, documents):
    units, lexical = memory_indexes(collection)
    assert isinstance(units, DerivedIndex) and isinstance(lexical, DerivedIndex)
    write(collection, Indexes(units, lexical), documents)
    expected = segments_of(documents)
    shas = {d: str(recs[0].metadata[CONTENT_HASH_KEY]) for d, recs in documents.items()}
    for index in (units, lexical):
        assert index.held(list(documents)) == expected
        assert index.held(list(documents), shas) == expected  # written from these texts
        assert not any(index.held(["d0"], {"d0": "another text"}).values())  # rows of another text do not count
    assert lexical_rows(lexical) == stored_segments(collection)
    assert units.state()["records"] == sum(len(s) for s in expected.values())
    assert lexical.state() == {"kind": "memory", "path": None, "segments": sum(len(s) for s in expected.values())}

    delete_documents(collection, Indexes(units, lexical), ["d1"],
                     collection.get(where={"hseg_doc_id": "d1"}, include=[])["ids"], BATCH)
    del expected["d1"]
    assert units.held(list(documents)) == {**expected, "d1": set()}
    assert lexical.held(list(documents)) == expected and lexical_rows(lexical) == stored_segments(collection)
    Indexes(units, lexical).drop()
    assert units.existing is None and units.state()["records"] == 0


def test_the_unit_index_rebuilds_what_it_lost_and_records_counts_only_after_a_write_that_ended(collection, documents):
    units, lexical = memory_indexes(collection)
    write(collection, Indexes(units, lexical), documents)
    synced = (units.existing.metadata or {})[SYNCED_RECORDS_KEY]
    assert synced == collection.count()
    lost = units.unit_ids(["d2"])["d2"]
    units.existing.delete(ids=lost)  # as a write around hseg leaves it
    assert units.held(["d2"]) == {"d2": set()}
    assert units.rebuild(["d2"]) == len(lost) and units.held(["d2"]) == {"d2": segments_of(documents)["d2"]}
    # a bracket that ends with an error records nothing; one that ends records the counts
    units.existing.modify(metadata={SYNCED_RECORDS_KEY: -1})
    with pytest.raises(RuntimeError), units.writing(["d2"]):
        raise RuntimeError("cut short")
    assert units.existing.metadata[SYNCED_RECORDS_KEY] == -1
    with units.writing(["d2"]):
        pass
    assert units.existing.metadata[SYNCED_RECORDS_KEY] == collection.count()
    # a full rebuild: every document of the collection, from an index dropped
    units.drop()
    assert units.rebuild() == sum(len(s) for s in segments_of(documents).values())
    assert units.held(list(documents)) == segments_of(documents) and units.complete()


# --------------------------------------------------------------------------- a cache following the write log


def cached_index(collection: Any, path: Path) -> LexicalIndex:
    """A lexical cache of ``collection`` at ``path``, as a server's client keeps one, over the memory backend."""
    backend = choose_backend(collection)
    index = LexicalIndex(collection, Location("cache", path, str(collection.name)), backend.journal(collection))
    assert not index.maintained and index.follower is not None
    return index


def test_a_cache_follows_the_write_log_and_rebuilds_only_where_it_cannot_say(collection, documents, tmp_path):
    writer = cached_index(collection, tmp_path / "writer.sqlite")
    units = choose_backend(collection).unit_index(collection, DEFAULT_HNSW, lambda: BATCH)
    write(collection, Indexes(units, writer), {d: documents[d] for d in ("d0", "d1")})
    assert writer.held(["d0"]) is None and writer.write(documents["d0"], ["d0"]) == 0  # a cache writes no row

    reader = cached_index(collection, tmp_path / "reader.sqlite")
    reader.ensure_fresh()
    follower = reader.follower
    assert follower is not None and follower.rebuilds == 1 and lexical_rows(reader) == stored_segments(collection)
    write(collection, Indexes(units, writer), {"d2": documents["d2"]})
    delete_documents(collection, Indexes(units, writer), ["d0"],
                     collection.get(where={"hseg_doc_id": "d0"}, include=[])["ids"], BATCH)
    reader.prepare()  # a cache's check runs beside the search: its first read of the index waits for it
    assert lexical_rows(reader) == stored_segments(collection) and (follower.rebuilds, follower.applied) == (1, 2)

    # records written around hseg (no log entry): a new object's first check sees the count change
    collection.upsert(ids=[r.id for r in documents["d3"]], embeddings=[r.embedding for r in documents["d3"]],
                      documents=[r.document for r in documents["d3"]], metadatas=[r.metadata for r in documents["d3"]])
    again = cached_index(collection, tmp_path / "reader.sqlite")
    again.ensure_fresh()
    assert again.follower is not None and again.follower.rebuilds == 1
    assert lexical_rows(again) == stored_segments(collection)


def test_a_follower_needs_only_the_table_and_the_log(collection, documents, tmp_path):
    writer = cached_index(collection, tmp_path / "writer.sqlite")
    write(collection, Indexes(writer), {d: documents[d] for d in ("d0", "d1")})
    table = LexicalTable(collection, Location("cache", tmp_path / "bare.sqlite", "bare"))
    follower = Follower(table, choose_backend(collection).journal(collection))
    follower.follow()
    assert follower.rebuilds == 1 and table.count_checked and lexical_rows(table) == stored_segments(collection)
    write(collection, Indexes(writer), {"d2": documents["d2"]})
    follower.follow()
    assert (follower.rebuilds, follower.applied) == (1, 1) and lexical_rows(table) == stored_segments(collection)


# --------------------------------------------------------------------------- a damaged or replaced file


def file_index(collection: Any, path: Path) -> LexicalIndex:
    """A maintained lexical index of ``collection`` in the file ``path`` (as an embedded store keeps one)."""
    return LexicalIndex(collection, Location("embedded", path, str(collection.name)))


def test_a_damaged_file_is_set_aside_and_built_again(collection, documents, tmp_path):
    path = tmp_path / "lexical.sqlite"
    write(collection, Indexes(file_index(collection, path)), documents)
    path.write_bytes(b"not a database" * 512)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    index = file_index(collection, path)
    index.ensure_fresh()
    assert Path(f"{path}.damaged").exists() and lexical_rows(index) == stored_segments(collection)


def test_repair_takes_the_table_and_the_rebuild_it_is_given(collection, documents, tmp_path):
    path = tmp_path / "lexical.sqlite"
    index = file_index(collection, path)
    write(collection, Indexes(index), documents)
    table = LexicalTable(collection, index.location)
    assert table.opened() == (False, None)
    table.meta()  # opened: the file it opened is the one set aside
    rebuilt: list[int] = []

    def rebuild() -> None:
        rebuilt.append(1)
        with table.db.writer():
            table.adopt()
            table.rebuild()

    repair(table, ValueError("file is not a database"), rebuild)
    assert rebuilt == [1] and table.count_checked and Path(f"{path}.damaged").exists()
    assert lexical_rows(table) == stored_segments(collection)


def test_a_file_replaced_or_missing_rows_is_opened_again_or_rebuilt(collection, documents, tmp_path):
    path = tmp_path / "lexical.sqlite"
    index = file_index(collection, path)
    write(collection, Indexes(index), documents)
    table = LexicalTable(collection, index.location)
    rebuilt: list[int] = []

    def rebuild() -> None:
        rebuilt.append(1)
        with table.db.writer():
            table.rebuild()

    check_file(table, rebuild)
    assert rebuilt == [] and not table.replaced()
    # a file that lost rows behind its bookkeeping: built again on the object's first check
    with table.db.transaction() as c:
        c.execute("DELETE FROM segments WHERE rowid = (SELECT min(rowid) FROM segments)")
    check_file(table, rebuild)
    assert rebuilt == [1] and lexical_rows(table) == stored_segments(collection)
    # the file replaced under a long-lived reader: the one at the path is opened again
    other = tmp_path / "other.sqlite"
    file_index(collection, other).rebuild()
    other.replace(path)
    assert table.replaced()
    check_file(table, rebuild)
    assert table.opened() == (True, file_inode(path)) and rebuilt == [1]
    assert lexical_rows(table) == stored_segments(collection)


# --------------------------------------------------------------------------- the upkeep loops over the indexes


def test_repair_rebuilds_in_each_index_the_documents_it_holds_out_of_step(documents):
    from hseg.store import HierarchicalStore
    from hseg_testing.fakes import HashingEncoder

    store = HierarchicalStore(f"t-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(), encoder=HashingEncoder())
    store.add_records(documents)
    units, lexical = store._parts.units, store._parts.lexical
    assert units is not None and lexical is not None
    assert store.maintenance.repair().repaired == []
    lexical.forget(["d0"])  # as a write around hseg leaves them: d0 without lexical rows ...
    units.forget(["d1"])  # ... d1 without unit records
    done = store.maintenance.repair()
    assert done.repaired == ["d0", "d1"] and done.rows == len(segments_of(documents)["d1"])
    assert units.held(list(documents)) == lexical.held(list(documents)) == segments_of(documents)
