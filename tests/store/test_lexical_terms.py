"""A connection's kept BM25 terms across writes (hseg.store.lexical.terms): brought up to date from
the file's change log instead of read again, with the rows FTS5 would give and terms within the
drift the module allows; read whole again past it, or when the log cannot say what changed."""

from __future__ import annotations

import re

import numpy as np
import pytest

from hseg.retrieval.lexical_query import fts5_match, query_terms
from hseg.store import HierarchicalStore
from hseg.store.lexical.terms import DRIFT
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder, synthetic_book


@pytest.fixture(scope="module")
def chunker():
    return small_chunker()


def fts5_terms(store: HierarchicalStore, term: str) -> dict[int, float]:
    """FTS5's own terms of one word, read now."""
    return dict(store._parts.lexical.db.rows("SELECT rowid, -bm25(fts) FROM fts WHERE fts MATCH ?",
                                            (fts5_match([term]),)))


def words(store: HierarchicalStore) -> list[str]:
    texts = [t for (t,) in store._parts.lexical.db.rows("SELECT text FROM fts")]
    return query_terms(" ".join(sorted({w.lower() for t in texts for w in re.findall(r"[a-z]+", t.lower())})))


def test_kept_terms_follow_writes_without_reading_every_word_again(tmp_path, chroma_collection_name, chunker):
    path = str(tmp_path / "db")
    store = HierarchicalStore(chroma_collection_name, path=path, encoder=HashingEncoder())
    store.add([chunker.chunk(synthetic_book(4000, seed=i), doc_id=f"d{i}") for i in range(40)]
              + [chunker.chunk(synthetic_book(600, seed=98), doc_id="small")])
    db = store._parts.lexical.db
    rows = int(db.rows("SELECT value FROM meta WHERE key = 'rows'")[0][0])
    terms = words(store)[:60]
    read_at = db.rows("SELECT max(seq) FROM changes")[0][0]
    first = db.term_scores(terms)
    for term, (rowids, scores) in zip(terms, first):  # no write since: FTS5's terms to the bit
        assert dict(zip(rowids.tolist(), scores.tolist())) == fts5_terms(store, term)

    # another store on the path (another connection) adds a small document, then this one deletes one
    HierarchicalStore(chroma_collection_name, path=path, encoder=HashingEncoder()).add(
        chunker.chunk(synthetic_book(600, seed=99), doc_id="new"))
    store.delete("small")
    changed = db.rows("SELECT count(*) FROM changes WHERE seq > ?", (read_at,))[0][0]
    assert 0 < changed <= DRIFT * rows  # small enough to be brought up to date
    patched_before = db.kept_terms.patched
    for term, (rowids, scores) in zip(terms, db.term_scores(terms)):
        expected = fts5_terms(store, term)
        assert rowids.tolist() == sorted(expected), term  # the rows: exactly FTS5's, added and deleted ones too
        assert np.allclose(scores, [expected[r] for r in rowids.tolist()], rtol=DRIFT, atol=0), term
    assert db.kept_terms.patched - patched_before == len(terms)  # none read whole again

    # past the drift every word is read whole again: FTS5's terms to the bit
    store.add([chunker.chunk(synthetic_book(4000, seed=100 + i), doc_id=f"more{i}") for i in range(3)])
    assert db.rows("SELECT count(*) FROM changes WHERE seq > ?", (read_at,))[0][0] > DRIFT * rows
    patched_before = db.kept_terms.patched
    for term, (rowids, scores) in zip(terms, db.term_scores(terms)):
        assert dict(zip(rowids.tolist(), scores.tolist())) == fts5_terms(store, term)
    assert db.kept_terms.patched == patched_before


def test_a_rebuild_or_a_compacted_log_makes_every_kept_word_read_whole(tmp_path, chroma_collection_name, chunker,
                                                                      monkeypatch):
    from hseg.store.lexical import tables

    path = str(tmp_path / "db")
    store = HierarchicalStore(chroma_collection_name, path=path, encoder=HashingEncoder())
    store.add([chunker.chunk(synthetic_book(4000, seed=i), doc_id=f"d{i}") for i in range(40)])
    db = store._parts.lexical.db
    terms = words(store)[:30]
    db.term_scores(terms)
    store.sync_lexical_index()  # a rebuild: every row again, none logged
    for term, (rowids, scores) in zip(terms, db.term_scores(terms)):
        assert dict(zip(rowids.tolist(), scores.tolist())) == fts5_terms(store, term)
    assert db.kept_terms.patched == 0

    monkeypatch.setattr(tables, "CHANGES_KEPT", 1)  # the log forgets all but the last event of a write
    store.add(chunker.chunk(synthetic_book(600, seed=99), doc_id="new"))
    floor = int(db.rows("SELECT value FROM meta WHERE key = 'changes_floor'")[0][0])
    assert db.rows("SELECT min(seq) FROM changes")[0][0] == floor + 1
    for term, (rowids, scores) in zip(terms, db.term_scores(terms)):
        assert dict(zip(rowids.tolist(), scores.tolist())) == fts5_terms(store, term)
    assert db.kept_terms.patched == 0
