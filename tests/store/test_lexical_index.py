"""The lexical index (hseg.store.lexical_index): where it lives, how writes keep it in step with the
collection, how a cut-short write and foreign writes are repaired, and hseg index's completeness.

The in-process clients here; a ``chroma run`` server's clients are ``tests/e2e/test_lexical_index_server.py``."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import platform
import re
import uuid

import chromadb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hseg.chunking.records import decode_cuts, records_for
from hseg.ingest.run import ingest_batch
from hseg.retrieval.lexical_query import fts5_match, lexical_query, query_terms
from hseg.retrieval.plans import run_one
from hseg.store import HierarchicalStore
from hseg.store.completeness import is_complete
from hseg.store.lexical import FOLDER
from hseg.store.lexical.reads import summed_terms
from hseg.store.lexical.tables import FORMAT
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder, synthetic_book


@pytest.fixture(scope="module")
def chunker():
    return small_chunker()


def book(seed: int, n: int = 2500) -> str:
    return synthetic_book(n, seed=seed)


def lexical_rows(store: HierarchicalStore) -> dict[str, str]:
    """``{segment id: text}`` as the lexical index holds them."""
    db = store._parts.lexical.db
    return dict(db.rows("SELECT s.id, f.text FROM segments s JOIN fts f ON f.rowid = s.rowid"))


def chroma_segments(store: HierarchicalStore) -> dict[str, str]:
    got = store.collection.get(where={"hseg_level": "segment"}, include=["documents"])
    return dict(zip(got["ids"], got["documents"]))


def in_step(store: HierarchicalStore) -> bool:
    store._parts.lexical.ensure_fresh()
    return lexical_rows(store) == chroma_segments(store)


def test_where_each_kind_of_store_keeps_its_index(tmp_path, chroma_collection_name, chunker):
    embedded = HierarchicalStore(chroma_collection_name, path=str(tmp_path / "db"), encoder=HashingEncoder())
    assert embedded._parts.lexical.location.kind == "embedded"
    assert embedded._parts.lexical.location.path == tmp_path / "db" / FOLDER / f"{chroma_collection_name}.sqlite"
    memory = HierarchicalStore(chroma_collection_name, client=chromadb.EphemeralClient(), encoder=HashingEncoder())
    assert memory._parts.lexical.location.kind == "memory" and memory._parts.lexical.location.path is None
    wrapped = HierarchicalStore.from_collection(memory.collection, HashingEncoder())
    assert wrapped._parts.lexical.location == memory._parts.lexical.location  # one in-memory index per collection
    embedded.add(chunker.chunk(book(1), doc_id="a"))
    assert embedded._parts.lexical.location.path.is_file()


def test_writes_keep_the_rows_in_step(chroma_client, chroma_collection_name, chunker):
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=HashingEncoder())
    store.add([chunker.chunk(book(i), doc_id=f"d{i}") for i in range(3)], [{"source": f"s{i}"} for i in range(3)])
    assert in_step(store) and len(lexical_rows(store)) > 10
    store.add(chunker.chunk(book(7, 1800), doc_id="d1"), {"source": "s1"})  # another text: old segments go
    assert in_step(store)
    store.delete("d0")
    assert in_step(store) and not any(i.startswith("d0") for i in store._parts.lexical.documents(["d0"]))
    store.delete_where({"source": "s2"})
    assert in_step(store)
    assert set(store._parts.lexical.documents(["d0", "d1", "d2"])) == {"d1"}


def test_an_edit_that_keeps_every_boundary_replaces_the_text(tmp_path, chroma_collection_name, chunker):
    store = HierarchicalStore(chroma_collection_name, path=str(tmp_path / "db"), encoder=HashingEncoder())
    text = book(3)
    first = chunker.chunk(text, doc_id="a")
    store.add(first)
    # a same-length edit chunked on the same boundaries: the same segment ids, another text
    edited = re.sub("(?i)nebula", "zzzzzz", text)
    assert edited != text and len(edited) == len(text)
    segments = [dataclasses.replace(s, text=edited[s.start:s.end]) for s in first.segments]
    by_id = {s.id: s for s in segments}
    clusters = [dataclasses.replace(c, text=edited[c.start:c.end], segments=tuple(by_id[s.id] for s in c.segments))
                for c in first.clusters]
    store.add(dataclasses.replace(first, text=edited, segments=tuple(segments), clusters=tuple(clusters)))
    assert set(chroma_segments(store)) == {s.id for s in first.segments}
    assert in_step(store)
    assert not store._parts.lexical.top(["nebula"], 5) and store._parts.lexical.top(["zzzzzz"], 5)


def test_top_and_lookup_give_the_same_bm25(chroma_collection_name, chunker):
    store = HierarchicalStore(chroma_collection_name, client=chromadb.EphemeralClient(), encoder=HashingEncoder())
    store.add([chunker.chunk(book(i), doc_id=f"d{i}") for i in range(4)])
    index = store._parts.lexical
    match = query_terms("What moves the glacier and the river delta?")
    top = index.top(match, 1000)
    assert top and all(a[1] >= b[1] for a, b in zip(top, top[1:]))
    looked = index.lookup(match, [row.segment_id for row, _ in top] + ["no-such-segment"])
    assert "no-such-segment" not in looked
    for row, score in top:
        assert looked[row.segment_id][1] == pytest.approx(score, rel=1e-12)
    unmatched = set(lexical_rows(store)) - {row.segment_id for row, _ in top}
    assert unmatched and all(index.lookup(match, unmatched)[s][1] == 0.0 for s in unmatched)
    sizes = index.cluster_sizes({row.cluster_id for row, _ in top})
    for cid, (n, tokens) in sizes.items():
        records = store.collection.get(where={"hseg_cluster_id": cid}, include=["metadatas"])["metadatas"]
        segs = [m for m in records if m["hseg_level"] == "segment"]
        assert (n, tokens) == (len(segs), sum(m["hseg_tokens"] for m in segs))
        assert index.cluster_segments([cid])[cid] == [m for m in json.loads(
            next(m for m in records if m["hseg_level"] == "cluster")["hseg_segment_ids"])]


@pytest.fixture(scope="module")
def six_books(chunker):
    store = HierarchicalStore(f"six-{uuid.uuid4().hex[:8]}", client=chromadb.EphemeralClient(),
                              encoder=HashingEncoder())
    store.add([chunker.chunk(book(i), doc_id=f"d{i}") for i in range(6)])
    store._parts.lexical.ensure_fresh()
    return store


def _vocabulary(store: HierarchicalStore) -> list[str]:
    words = {w.lower() for text in lexical_rows(store).values() for w in re.findall(r"\w+", text)}
    return sorted(words)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_scored_is_fts5s_own_ranking_of_the_or_query_to_the_bit(six_books, data):
    """The index sums a query's words one at a time; FTS5 scores the OR of them in one go. Same
    rows, same order (ties by rowid), equal floats: what a search ranks cannot have moved."""
    index = six_books._parts.lexical
    vocabulary = _vocabulary(six_books)
    # corpus words (stems shared by several of them included), words nowhere in it, and words the
    # tokenizer turns into nothing or into two tokens (a phrase)
    word = st.one_of(st.sampled_from(vocabulary), st.sampled_from(["zzzzzz", "_", "a_b", "nebulae", "running"]))
    terms = list(dict.fromkeys(data.draw(st.lists(word, min_size=1, max_size=18))))
    rowids, scores = index.scored(terms)
    expected = index.db.rows("SELECT rowid, -bm25(fts) FROM fts WHERE fts MATCH ? ORDER BY bm25(fts), rowid",
                             (fts5_match(terms),))
    if platform.machine().lower() in ("x86_64", "amd64"):
        # exact, not approx: x86-64 builds of SQLite have no fused multiply-add to round FTS5's sum differently
        assert rowids.tolist() == [r for r, _ in expected]
        assert scores.tolist() == [x for _, x in expected]
    else:
        assert dict(zip(rowids.tolist(), scores.tolist())) == pytest.approx(dict(expected), rel=1e-12)


@settings(max_examples=80, deadline=None)
@given(words=st.lists(st.dictionaries(st.integers(1, 60), st.one_of(st.floats(1e-6, 20.0), st.sampled_from([0.5, 1.5])),
                                      max_size=40), max_size=6),
       spread=st.sampled_from([1, 10**9]))
def test_summed_adds_each_words_terms_in_order_and_ranks_ties_by_rowid(words, spread):
    """Both ways of adding up (rowids dense or sparse: ``spread``) give the reference's floats and order."""
    parts = [(np.array(sorted(w), dtype=np.int64) * spread, np.array([w[r] for r in sorted(w)])) for w in words]
    total: dict[int, float] = {}
    for rowids, terms in parts:
        for r, x in zip(rowids.tolist(), terms.tolist()):
            total[r] = total.get(r, 0.0) + x
    expected = sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))
    rowids, scores = summed_terms(parts)
    assert list(zip(rowids.tolist(), scores.tolist())) == expected


def _or_ranking(index, terms):
    return index.db.rows("SELECT rowid, -bm25(fts) FROM fts WHERE fts MATCH ? ORDER BY bm25(fts), rowid",
                         (fts5_match(terms),))


def test_a_querys_pages_and_scores_are_the_or_rankings_normalised_by_its_best(six_books):
    index = six_books._parts.lexical
    terms = query_terms(" ".join(_vocabulary(six_books)[5:200:9]))
    expected = _or_ranking(index, terms)
    names = index.ids_at([r for r, _ in expected])
    ranked = [(names[r], x / expected[0][1]) for r, x in expected]
    lq = run_one(lexical_query(index, " ".join(terms), 0.3))
    assert lq is not None and lq.terms == tuple(terms)
    for n in (1, 5, 17, len(ranked), len(ranked) + 3):  # deeper pages, as later rounds ask
        page = run_one(lq.page(n))
        assert list(zip(page.ids, page.scores.tolist())) == ranked[:n]
        assert page.floor == (ranked[n - 1][1] if n <= len(ranked) else 0.0)
    every = list(lexical_rows(six_books)) + ["no-such-segment"]
    score = dict(ranked)
    assert run_one(lq.scores(every)).tolist() == [score.get(sid, 0.0) for sid in every]
    assert run_one(lq.score(ranked[0][0])) == 1.0 and run_one(lq.score("no-such-segment")) == 0.0
    assert run_one(lexical_query(index, "the of and", 0.0)) is None


def test_words_kept_from_an_earlier_query_are_read_again_after_any_write(tmp_path, chroma_collection_name, chunker):
    """A word's terms depend on every row (IDF, average length): a write by this store or by another
    connection to the same file, even one the word is not in, must not leave old terms in use."""
    path = str(tmp_path / "db")
    reader = HierarchicalStore(chroma_collection_name, path=path, encoder=HashingEncoder())
    reader.add([chunker.chunk(book(i), doc_id=f"d{i}") for i in range(2)])
    index = reader._parts.lexical
    terms = query_terms(" ".join(_vocabulary(reader)[:40:4]))
    before = index.scored(terms)
    assert [r for r, _ in _or_ranking(index, terms)] == before[0].tolist()
    # another connection (another store on the same path) adds a document, then this store deletes one
    HierarchicalStore(chroma_collection_name, path=path, encoder=HashingEncoder()).add(
        chunker.chunk(book(7), doc_id="d7"))
    for step in ("other connection", "this connection"):
        rowids, scores = index.scored(terms)
        expected = _or_ranking(index, terms)
        assert rowids.tolist() == [r for r, _ in expected], step
        assert scores.tolist() == [x for _, x in expected], step
        assert step == "this connection" or not np.array_equal(scores[:len(before[1])], before[1][:len(scores)])
        reader.delete("d0")


def test_the_kept_terms_are_counted_and_can_be_forgotten(tmp_path, chroma_collection_name, chunker):
    """What a benchmark of a process's first question relies on: ``forget_terms`` empties the kept
    words (the next read goes to the file) and the answer is the same either way."""
    store = HierarchicalStore(chroma_collection_name, path=str(tmp_path / "db"), encoder=HashingEncoder())
    store.add([chunker.chunk(book(i), doc_id=f"d{i}") for i in range(2)])
    index = store._parts.lexical
    terms = query_terms(" ".join(_vocabulary(store)[:40:4]))
    assert index.db.kept_term_pairs == 0
    first = index.scored(terms)
    kept = index.db.kept_term_pairs
    assert kept == sum(len(r) for r, _ in index.db.term_scores(terms)) > 0
    index.db.forget_terms()
    assert index.db.kept_term_pairs == 0
    again = index.scored(terms)
    assert index.db.kept_term_pairs == kept
    assert again[0].tolist() == first[0].tolist() and again[1].tolist() == first[1].tolist()


def test_a_persisted_index_is_not_rebuilt_on_open(tmp_path, chroma_collection_name, chunker, monkeypatch):
    path = str(tmp_path / "db")
    HierarchicalStore(chroma_collection_name, path=path, encoder=HashingEncoder()).add(
        [chunker.chunk(book(i), doc_id=f"d{i}") for i in range(2)])
    from hseg.store.lexical.table import LexicalTable

    rebuilt = []
    original = LexicalTable.rebuild
    monkeypatch.setattr(LexicalTable, "rebuild", lambda self, **m: rebuilt.append(1) or original(self, **m))
    reopened = HierarchicalStore(chroma_collection_name, path=path, encoder=HashingEncoder())
    assert in_step(reopened) and rebuilt == []


def test_an_unfinished_write_is_repaired_on_the_next_check(tmp_path, chroma_collection_name, chunker):
    """What a process killed between Chroma and the lexical rows leaves: the documents stay pending,
    and the next object to check re-reads them (the kill -9 itself: tests/stress/test_lexical_kill_9.py)."""
    path = str(tmp_path / "db")
    store = HierarchicalStore(chroma_collection_name, path=path, encoder=HashingEncoder())
    store.add([chunker.chunk(book(i), doc_id=f"d{i}") for i in range(2)])
    new = records_for(chunker.chunk(book(9), doc_id="d1"))
    index = store._parts.lexical
    with index.db.transaction() as c:  # the first commit of a write, then Chroma's records, then death
        c.execute("INSERT INTO pending VALUES ('d1')")
    store.collection.upsert(ids=[r.id for r in new], embeddings=[r.embedding for r in new],
                            documents=[r.document for r in new], metadatas=[r.metadata for r in new])
    assert lexical_rows(store) != chroma_segments(store)
    reopened = HierarchicalStore(chroma_collection_name, path=path, encoder=HashingEncoder())
    assert in_step(reopened)
    assert reopened._parts.lexical.db.rows("SELECT * FROM pending") == []


def test_a_failed_write_leaves_the_rows_as_chroma_has_them(chroma_collection_name, chunker, monkeypatch):
    store = HierarchicalStore(chroma_collection_name, client=chromadb.EphemeralClient(), encoder=HashingEncoder())
    store.add(chunker.chunk(book(1), doc_id="a"))

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(store._parts.lexical, "write", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        store.add(chunker.chunk(book(2), doc_id="a"))
    monkeypatch.undo()
    assert lexical_rows(store) == chroma_segments(store)  # repaired on the way out, before any check


def test_records_written_without_hseg_are_found_by_the_next_object(chroma_collection_name, chunker, caplog):
    client = chromadb.EphemeralClient()
    store = HierarchicalStore(chroma_collection_name, client=client, encoder=HashingEncoder())
    store.add(chunker.chunk(book(1), doc_id="a"))
    assert in_step(store)
    recs = records_for(chunker.chunk(book(2), doc_id="b"))
    store.collection.add(ids=[r.id for r in recs], embeddings=[r.embedding for r in recs],
                         documents=[r.document for r in recs], metadatas=[r.metadata for r in recs])
    other = HierarchicalStore(chroma_collection_name, client=client, encoder=HashingEncoder())
    with caplog.at_level(logging.WARNING, logger="hseg.store"):
        assert in_step(other)
    assert "written without hseg" in caplog.text
    assert other.sync_lexical_index() == len(chroma_segments(other))


def test_a_collection_created_again_under_its_name_gets_a_new_index(tmp_path, chroma_collection_name, chunker):
    path = str(tmp_path / "db")
    store = HierarchicalStore(chroma_collection_name, path=path, encoder=HashingEncoder())
    store.add(chunker.chunk(book(1), doc_id="a"))
    store.drop()
    assert not store._parts.lexical.location.path.exists()
    again = HierarchicalStore(chroma_collection_name, path=path, encoder=HashingEncoder())
    again.add(chunker.chunk(book(2), doc_id="b"))
    assert in_step(again) and set(again._parts.lexical.documents(["a", "b"])) == {"b"}


# --------------------------------------------------------------------------- hseg index's completeness


def test_is_complete_checks_the_lexical_rows_and_their_hash():
    text = book(2)
    recs = records_for(small_chunker().chunk(text, doc_id="a"), {"content_sha256": "h", "chunk_settings": "s"})
    stored = {r.id: r.metadata for r in recs}
    segments = {r.id for r in recs if r.metadata["hseg_level"] == "segment"}
    assert is_complete(stored, "h", "s", len(text), lexical=(segments, "h"))
    assert not is_complete(stored, "h", "s", len(text), lexical=(segments, "old"))  # rows of the previous text
    assert not is_complete(stored, "h", "s", len(text), lexical=(segments - {min(segments)}, "h"))
    assert not is_complete(stored, "h", "s", len(text), lexical=(set(), None))


def test_hseg_index_redoes_a_document_whose_lexical_rows_are_missing(tmp_path, chroma_collection_name, chunker):
    store = HierarchicalStore(chroma_collection_name, path=str(tmp_path / "db"), encoder=HashingEncoder())
    texts = {"a": book(1), "b": book(2)}
    assert ingest_batch(texts, chunker, store).documents == 2
    assert ingest_batch(texts, chunker, store).unchanged == 2
    with store._parts.lexical.db.transaction() as c:  # as if the rows of "b" had never been written
        c.execute("DELETE FROM fts WHERE rowid IN (SELECT rowid FROM segments WHERE doc_id = 'b')")
        c.execute("DELETE FROM segments WHERE doc_id = 'b'")
        c.execute("DELETE FROM documents WHERE doc_id = 'b'")
    again = ingest_batch(texts, chunker, store)
    assert (again.documents, again.unchanged) == (1, 1)
    assert in_step(store)


# --------------------------------------------------------------------------- property


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["add", "delete", "delete_where"]), st.integers(0, 3),
                              st.integers(0, 5)), min_size=1, max_size=8))
def test_any_sequence_of_writes_leaves_both_sides_equal(chunker, ops):
    store = HierarchicalStore(f"p-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(), encoder=HashingEncoder())
    for op, doc, seed in ops:
        if op == "add":
            store.add(chunker.chunk(book(seed, 800 + 400 * seed), doc_id=f"d{doc}"), {"source": f"s{doc % 2}"})
        elif op == "delete":
            store.delete(f"d{doc}")
        else:
            store.delete_where({"source": f"s{doc % 2}"})
        assert lexical_rows(store) == chroma_segments(store)
    store.drop()


def test_query_terms_drop_english_stop_words_but_keep_other_languages():
    assert query_terms("What is the river delta?") == ["river", "delta"]
    assert query_terms("Qu'est-ce que la dérive des continents ?") == ["qu", "est", "ce", "que", "la", "dérive",
                                                                        "des", "continents"]
    assert query_terms("to be or not to be") == ["to", "be", "or", "not"]  # nothing else: all kept
    assert fts5_match(['a"b', "c"]) == '"a""b" OR "c"'
    with pytest.raises(ValueError, match="text"):
        query_terms(None)  # type: ignore[arg-type]
    assert np.isfinite(0.0)


def test_opening_the_index_waits_for_a_writer_instead_of_failing_on_the_journal_mode(tmp_path):
    """Two stores opening one fresh index file while one of them writes: switching a file to WAL
    during another connection's write fails at once ("database is locked", SQLite's busy timeout does
    not apply), which failed 7 of 40 loops of the two-writers test. The set-up now waits on the writer lock."""
    import sqlite3
    import threading

    from hseg.store.lexical.database import Database
    from hseg.store.lock import lock_descriptor

    path = tmp_path / "index.sqlite"
    other = sqlite3.connect(str(path), isolation_level=None)  # a file not yet in WAL, being written
    other.execute("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT)")
    lock_fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    lock_descriptor(lock_fd)  # as a writer of the index holds it
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO meta VALUES ('k', 'v')")
    opened: list[object] = []

    def open_index() -> None:
        try:
            opened.append(Database(path))
        except Exception as exc:  # pragma: no cover - the failure this test guards against
            opened.append(exc)

    thread = threading.Thread(target=open_index)
    thread.start()
    thread.join(timeout=0.5)
    still_waiting = thread.is_alive()
    other.execute("COMMIT")
    other.close()
    os.close(lock_fd)  # releases the writer lock
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert still_waiting, f"the open did not wait for the writer: {opened}"
    db = opened[0]
    assert isinstance(db, Database), db
    assert db.rows("PRAGMA journal_mode")[0][0] == "wal"
    assert db.rows("SELECT value FROM meta WHERE key = 'k'") == [("v",)]
    db.close()


def test_following_lists_the_segments_after_one_while_their_tokens_fit_then_the_next(chroma_collection_name,
                                                                                     chunker):
    store = HierarchicalStore(chroma_collection_name, client=chromadb.EphemeralClient(), encoder=HashingEncoder())
    chunking = chunker.chunk(book(3, 12_000), doc_id="d")
    store.add([chunking, chunker.chunk(book(4), doc_id="e")])
    segs = chunking.segments
    assert len(segs) > 12  # longer than one page of positions (8)
    index = store._parts.lexical
    everything = sum(s.token_count for s in segs)
    assert [r.segment_id for r in index.following([segs[0].id], everything)[segs[0].id]] == [s.id for s in segs[1:]]
    assert index.following([segs[-1].id], everything) == {segs[-1].id: []}  # the end of its document
    fits = segs[2].token_count + segs[3].token_count
    got = index.following([segs[1].id, "seg-unknown"], fits)
    assert list(got) == [segs[1].id]  # an id the index lacks has no entry
    assert [(r.segment_id, r.doc_id, r.position, r.tokens) for r in got[segs[1].id]] == \
        [(s.id, "d", s.index, s.token_count) for s in segs[2:5]]  # the two that fit, then the first that does not
    assert index.following([segs[1].id], fits - 1)[segs[1].id] == got[segs[1].id][:2]
    assert index.following([segs[1].id], 0) == {segs[1].id: []}  # nothing left: nothing to cut either
    # each row carries its record's sentence cuts, so rule 6 is decided without reading the record
    assert [decode_cuts(r.cuts) for r in got[segs[1].id]] == [list(s.cuts) for s in segs[2:5]]
    assert any(s.cuts for s in segs[2:5])


@pytest.mark.parametrize("old_format", ["1", "2", "3"])
def test_an_index_of_an_earlier_layout_is_rebuilt_in_this_one(tmp_path, chroma_collection_name, chunker, old_format):
    """Layout 1 had no cuts column, layout 2 no record column, layout 3 no change log (its writers kept
    none): a store opened by this version rebuilds the file in its own layout, instead of failing on
    the missing column or reading rows without them."""
    path = str(tmp_path / "db")
    store = HierarchicalStore(chroma_collection_name, path=path, encoder=HashingEncoder())
    chunking = chunker.chunk(book(5, 6000), doc_id="d")
    store.add([chunking])
    db = store._parts.lexical.db
    with db.transaction() as c:  # the file as version 0.4 left it
        c.execute("DROP TABLE segments")
        c.execute("CREATE TABLE segments(rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, doc_id TEXT NOT NULL, "
                  "cluster_id TEXT NOT NULL, position INTEGER NOT NULL, tokens INTEGER NOT NULL"
                  + {"1": ")", "2": ", cuts TEXT)", "3": ", cuts TEXT, record TEXT NOT NULL)"}[old_format])
        c.execute("DELETE FROM fts")
        c.execute("UPDATE meta SET value = ? WHERE key = 'format'", (old_format,))
    again = HierarchicalStore(chroma_collection_name, path=path, encoder=HashingEncoder())
    hits = again.search("river delta", budget_tokens=400, unit="auto")
    assert hits and in_step(again)
    segs = chunking.segments
    rows = again._parts.lexical.following([segs[0].id], 10**6)[segs[0].id]
    assert [(r.segment_id, decode_cuts(r.cuts)) for r in rows] == [(s.id, list(s.cuts)) for s in segs[1:]]
    assert again._parts.lexical.db.rows("SELECT value FROM meta WHERE key = 'format'") == [(FORMAT,)]
    records = again._parts.lexical.records(s.id for s in segs)
    assert [(records[s.id][1], records[s.id][0]["hseg_start"], records[s.id][0]["hseg_end"]) for s in segs] == \
        [(s.text, s.start, s.end) for s in segs]
