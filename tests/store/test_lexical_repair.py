"""A damaged lexical file (issue 47, item 3): truncated, overwritten or with damaged FTS5 blocks, it
is set aside and built again from the collection, and a search never fails on it: it repairs it,
or ranks by the dense side alone with one warning when it cannot."""

from __future__ import annotations

import logging
import os
import sqlite3

import pytest

from hseg.store import HierarchicalStore
from hseg_testing.chunkers import hashing_chunker
from hseg_testing.fakes import HashingEncoder, synthetic_book


def built(path, name: str) -> HierarchicalStore:
    store = HierarchicalStore(name, path=str(path), encoder=HashingEncoder())
    chunker = hashing_chunker()
    store.add([chunker.chunk(synthetic_book(1500, seed=i), doc_id=f"d{i}") for i in range(3)])
    return store


def rows_agree(store: HierarchicalStore) -> bool:
    index = store._parts.lexical
    assert index is not None
    index.ensure_fresh()
    rows = dict(index.db.rows("SELECT s.id, f.text FROM segments s JOIN fts f ON f.rowid = s.rowid"))
    got = store.collection.get(where={"hseg_level": "segment"}, include=["documents"])
    return rows == dict(zip(got["ids"], got["documents"]))


def truncate(path) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) // 3)


def overwrite(path) -> None:
    with open(path, "wb") as fh:
        fh.write(os.urandom(8192))


DAMAGES = {"truncated": truncate, "random bytes": overwrite}


def damaged_and_reopened(store: HierarchicalStore, damage) -> HierarchicalStore:
    """``damage`` done to the store's lexical file (its WAL folded in first), and a new store on it."""
    store._parts.lexical.db.rows("PRAGMA wal_checkpoint(TRUNCATE)")
    damage(store._parts.lexical.location.path)
    return HierarchicalStore(store.collection.name, path=str(store._parts.lexical.location.path.parents[1]),
                             encoder=HashingEncoder())


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_file_is_built_again_by_the_next_search(tmp_path, chroma_collection_name, damage, caplog):
    store = built(tmp_path / "db", chroma_collection_name)
    expected = [(h.doc_id, h.start, h.end) for h in store.search("glacier summit ice", k=3, lexical_weight=0.5)]
    path = store._parts.lexical.location.path
    store._parts.lexical.db.rows("PRAGMA wal_checkpoint(TRUNCATE)")
    DAMAGES[damage](path)
    again = HierarchicalStore(chroma_collection_name, path=str(tmp_path / "db"), encoder=HashingEncoder())
    with caplog.at_level(logging.WARNING, logger="hseg"):
        hits = again.search("glacier summit ice", k=3, lexical_weight=0.5)
    assert [(h.doc_id, h.start, h.end) for h in hits] == expected  # repaired, then searched hybrid as before
    assert "cannot be read" in caplog.text and os.path.exists(f"{path}.damaged")
    assert rows_agree(again)


def test_damaged_fts5_blocks_under_an_open_store_are_repaired_mid_search(tmp_path, chroma_collection_name, caplog):
    store = built(tmp_path / "db", chroma_collection_name)
    expected = [(h.doc_id, h.start, h.end) for h in store.search("glacier summit ice", k=3, lexical_weight=0.5)]
    with sqlite3.connect(store._parts.lexical.location.path) as raw:  # FTS5's own blocks, behind its back
        raw.execute("UPDATE fts_data SET block = randomblob(length(block)) WHERE id > 10")
    store._parts.lexical.db.forget_terms()
    with caplog.at_level(logging.WARNING, logger="hseg"):
        hits = store.search("glacier summit ice", k=3, lexical_weight=0.5)
    assert [(h.doc_id, h.start, h.end) for h in hits] == expected and "cannot be read" in caplog.text
    assert rows_agree(store)


def test_a_write_repairs_a_damaged_file_first(tmp_path, chroma_collection_name):
    again = damaged_and_reopened(built(tmp_path / "db", chroma_collection_name), overwrite)
    again.add(hashing_chunker().chunk(synthetic_book(1500, seed=9), doc_id="d9"))
    assert rows_agree(again) and "d9" in again._parts.lexical.documents(["d9"])


def test_sync_lexical_index_repairs_a_damaged_file(tmp_path, chroma_collection_name):
    again = damaged_and_reopened(built(tmp_path / "db", chroma_collection_name), truncate)
    assert again.sync_lexical_index() > 0 and rows_agree(again)


def test_a_file_that_cannot_be_built_again_leaves_the_search_dense_with_one_warning(
        tmp_path, chroma_collection_name, caplog, monkeypatch):
    store = built(tmp_path / "db", chroma_collection_name)
    dense = [(h.doc_id, h.start, h.end) for h in store.search("glacier summit ice", k=3, lexical_weight=0.0)]
    path = store._parts.lexical.location.path
    store._parts.lexical.db.rows("PRAGMA wal_checkpoint(TRUNCATE)")
    overwrite(path)

    def refuse(path):  # a read-only folder: the damaged file cannot be set aside
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("hseg.store.lexical.repair._set_aside", refuse)
    again = HierarchicalStore(chroma_collection_name, path=str(tmp_path / "db"), encoder=HashingEncoder())
    with caplog.at_level(logging.WARNING, logger="hseg"):
        first = again.search("glacier summit ice", k=3, lexical_weight=0.5)
        second = again.search("glacier summit ice", k=3, lexical_weight=0.5)
    assert [(h.doc_id, h.start, h.end) for h in first] == [(h.doc_id, h.start, h.end) for h in second] == dense
    assert caplog.text.count("by the dense side alone") == 1


def test_a_file_that_lost_rows_but_kept_its_bookkeeping_is_built_again(tmp_path, chroma_collection_name, caplog):
    """Issue 47 item 4: the same query scored 0.7052 instead of 0.8719 until a rebuild happened."""
    store = built(tmp_path / "db", chroma_collection_name)
    expected = [(h.doc_id, h.start, h.end, h.score) for h in store.search("glacier summit ice", k=3,
                                                                           lexical_weight=0.5)]
    with sqlite3.connect(store._parts.lexical.location.path) as raw:  # rows gone, meta and pending untouched
        raw.execute("DELETE FROM fts WHERE rowid IN (SELECT rowid FROM segments WHERE doc_id = 'd1')")
        raw.execute("DELETE FROM segments WHERE doc_id = 'd1'")
    again = HierarchicalStore(chroma_collection_name, path=str(tmp_path / "db"), encoder=HashingEncoder())
    with caplog.at_level(logging.WARNING, logger="hseg"):
        hits = again.search("glacier summit ice", k=3, lexical_weight=0.5)
    assert [(h.doc_id, h.start, h.end, h.score) for h in hits] == expected
    assert "other rows than its bookkeeping" in caplog.text and rows_agree(again)


def test_a_file_deleted_under_a_long_lived_reader_is_opened_again(tmp_path, chroma_collection_name):
    store = built(tmp_path / "db", chroma_collection_name)
    expected = [(h.doc_id, h.start, h.end) for h in store.search("glacier summit ice", k=3, lexical_weight=0.5)]
    path = store._parts.lexical.location.path
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.remove(f"{path}{suffix}")
    hits = store.search("glacier summit ice", k=3, lexical_weight=0.5)
    assert [(h.doc_id, h.start, h.end) for h in hits] == expected and path.exists() and rows_agree(store)


def test_stats_report_the_lexical_index_after_checking_it(tmp_path, chroma_collection_name):
    store = built(tmp_path / "db", chroma_collection_name)
    stats = store.stats()
    assert stats["lexical_index"]["kind"] == "embedded" and stats["lexical_index"]["segments"] == stats["segments"]
    store._parts.lexical.db.rows("PRAGMA wal_checkpoint(TRUNCATE)")
    overwrite(store._parts.lexical.location.path)
    again = HierarchicalStore(chroma_collection_name, path=str(tmp_path / "db"), encoder=HashingEncoder())
    assert again.stats()["lexical_index"]["segments"] == stats["segments"]  # built again by the check
