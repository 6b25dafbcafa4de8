"""Reliability (issue 7), faults in one process: a broken chunking, a write lost mid-``add``, a crash
between upserts and deletes, records of two chunkings, a newer schema (hashing encoder, in-memory and
embedded Chroma).

The same faults from a process killed with ``kill -9`` are ``tests/stress/test_faults_kill_9.py``;
a ``chroma run`` server going away is ``tests/e2e/test_faults_server.py``. See ``docs/reliability.md``.
"""

from __future__ import annotations

import chromadb
import numpy as np
import pytest

from hseg.chunking.chunks import Chunking, Cluster, Segment
from hseg.store import SCHEMA_VERSION, HierarchicalStore, records_for
from hseg_testing.checks import document_problems, stored_documents, stored_documents_of
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import FAKE_CLI, HashingEncoder, ephemeral_store, fake_cli, synthetic_book


@pytest.fixture(scope="module")
def chunker():
    return small_chunker()



def _nan_chunking(chunking: Chunking) -> Chunking:
    """The same document with one segment vector replaced by NaN (a failed encoding)."""
    seg = chunking.segments[-1]
    broken = Segment(seg.id, seg.doc_id, seg.index, seg.start, seg.end, seg.text, seg.token_count,
                     seg.sentence_start, seg.sentence_end, np.full_like(seg.embedding, np.nan))
    last = chunking.clusters[-1]
    clusters = (*chunking.clusters[:-1],
                Cluster(last.id, last.doc_id, last.index, last.start, last.end, last.text, last.token_count,
                        (*last.segments[:-1], broken), last.embedding))
    return Chunking(chunking.doc_id, chunking.text, (*chunking.segments[:-1], broken), clusters)


def test_a_document_whose_chunking_is_broken_writes_nothing(chunker):
    store = ephemeral_store()
    good = chunker.chunk("First good document. It has two sentences. " * 5, "good")
    bad = _nan_chunking(chunker.chunk("The broken one. Its last vector is NaN. " * 5, "bad"))
    with pytest.raises(ValueError, match="not finite"):
        store.add([good, bad])
    assert store.count() == 0  # all records are built and checked before the first write
    store.add(good)
    before = store.count()
    with pytest.raises(ValueError, match="not finite"):
        store.add(bad)
    assert store.count() == before and store.doc_ids() == ["good"]


def test_documents_are_never_split_across_upsert_calls(chunker, monkeypatch):
    """Crash safety of ``add``: each upsert call holds whole documents, and a document larger than
    one call goes alone with its cluster records (whole parents) first."""
    store = ephemeral_store()
    texts = {f"d{i}": synthetic_book(2_000 + 300 * i, seed=i) for i in range(12)}
    results = chunker.chunk_many(list(texts.values()), list(texts))
    big = chunker.chunk(synthetic_book(20_000, seed=99), "big")
    sizes = {r.doc_id: len(r.segments) + len(r.clusters) for r in (*results, big)}
    limit = max(sizes[d] for d in texts) + 5
    assert sizes["big"] > limit
    calls: list[list[dict]] = []
    real_upsert = store.collection.upsert

    def upsert(**kwargs):
        calls.append(kwargs["metadatas"])
        return real_upsert(**kwargs)

    monkeypatch.setattr(store._parts, "batch_size", lambda: limit)
    monkeypatch.setattr(store.collection, "upsert", upsert)
    store.add([*results[:6], big, *results[6:]])
    assert len(calls) > 3 and all(len(c) <= limit for c in calls)
    per_call = [{m["hseg_doc_id"] for m in c} for c in calls]
    for doc_id in texts:  # a small document lies in exactly one call, with all its records
        holding = [i for i, docs in enumerate(per_call) if doc_id in docs]
        assert len(holding) == 1
        assert sum(m["hseg_doc_id"] == doc_id for m in calls[holding[0]]) == sizes[doc_id]
    big_calls = [c for c, docs in zip(calls, per_call) if "big" in docs]
    assert len(big_calls) > 1 and all(docs == {"big"} for docs in per_call if "big" in docs)
    levels = [m["hseg_level"] for c in big_calls for m in c]
    assert levels == sorted(levels)  # every "cluster" record before any "segment" record
    docs = stored_documents(store.collection)
    assert all(document_problems(docs[d], t) == [] for d, t in texts.items())


def test_a_write_lost_mid_add_names_the_server_and_what_was_written(chunker, monkeypatch):
    import httpx

    store = ephemeral_store()
    results = chunker.chunk_many([synthetic_book(2_000, seed=i) for i in range(6)], [f"d{i}" for i in range(6)])
    per_doc = max(len(r.segments) + len(r.clusters) for r in results)
    monkeypatch.setattr(store._parts, "batch_size", lambda: 2 * per_doc)  # two documents per call
    real_upsert = store.collection.upsert
    calls = []

    def upsert(**kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise httpx.ConnectError("[Errno 111] Connection refused")
        return real_upsert(**kwargs)

    monkeypatch.setattr(store.collection, "upsert", upsert)
    monkeypatch.setattr(store._parts.backend, "address", "10.1.2.3:8123")  # as if HTTP: the backend names the server
    with pytest.raises(ConnectionError, match=r"Chroma server at 10\.1\.2\.3:8123: writing 6 documents "
                                              r"\(2 written completely before the failure; no document is partly"):
        store.add(results)
    docs = stored_documents(store.collection)
    assert set(docs) == {"d0", "d1"} and all(document_problems(r) == [] for r in docs.values())


def test_a_crash_between_upserts_and_stale_deletes_is_cleaned_by_the_next_add(chunker, monkeypatch):
    """``add`` of a changed document upserts first and deletes the old records its new chunking
    lacks afterwards; when it dies in between, the next ``add`` of that document removes them."""
    store = ephemeral_store()
    old, new = synthetic_book(3_000, seed=1), synthetic_book(2_600, seed=2)
    store.add(chunker.chunk(old, "d"))
    changed = chunker.chunk(new, "d")
    real_delete = store.collection.delete

    def killed(**kwargs):
        raise KeyboardInterrupt  # as if the process died right after the upserts

    monkeypatch.setattr(store.collection, "delete", killed)
    with pytest.raises(KeyboardInterrupt):
        store.add(changed)
    left = stored_documents_of(store, "d")
    assert len(left) > len(changed.segments) + len(changed.clusters)  # both versions are there
    assert document_problems(left, new) != []

    monkeypatch.setattr(store.collection, "delete", real_delete)
    store.add(changed)  # the same chunking again: nothing to upsert that is not there already
    final = stored_documents_of(store, "d")
    assert set(final) == {u.id for u in (*changed.clusters, *changed.segments)}
    assert document_problems(final, new) == []
    assert all(h.text == new[h.start : h.end] for h in store.search("river flood water", k=20, unit="cluster"))


def test_is_complete_refuses_a_document_holding_records_of_two_chunkings():
    """Same text and settings fingerprint but another chunking (e.g. a new hseg version): records
    left over from the older one make the document incomplete, so ``hseg index`` redoes it."""
    from hseg.ingest import is_complete

    text = synthetic_book(3_000, seed=3)
    meta = {"content_sha256": "sha", "chunk_settings": "settings"}
    other = small_chunker(target_tokens=200, max_segment_tokens=32)  # other segments, other clusters
    first = {r.id: r.metadata for r in records_for(small_chunker().chunk(text, "d"), meta)}
    second = {r.id: r.metadata for r in records_for(other.chunk(text, "d"), meta)}
    assert set(first) != set(second)
    assert is_complete(first, "sha", "settings", len(text)) and is_complete(second, "sha", "settings", len(text))
    # what a crash between the upserts of `second` and the deletes of `first` leaves behind
    assert not is_complete({**first, **second}, "sha", "settings", len(text))
    stale_segment = next(rid for rid, m in first.items() if rid not in second and m["hseg_level"] == "segment")
    assert not is_complete({**second, stale_segment: first[stale_segment]}, "sha", "settings", len(text))


def test_a_newer_schema_is_refused_with_a_clear_message(tmp_path, chunker, monkeypatch, capsys):
    client = chromadb.PersistentClient(path=str(tmp_path / "db"))
    store = HierarchicalStore("hseg", client=client, encoder=HashingEncoder())
    store.add(chunker.chunk("Some stored text. Two sentences.", "d"))
    meta = {k: v for k, v in (store.collection.metadata or {}).items() if not k.startswith("hnsw:")}
    store.collection.modify(metadata={**meta, "hseg_schema": SCHEMA_VERSION + 1})
    newer = f"hseg schema {SCHEMA_VERSION + 1}, newer"
    with pytest.raises(ValueError, match=f"{newer}.*upgrade hseg"):
        HierarchicalStore("hseg", client=client, encoder=HashingEncoder())
    with pytest.raises(ValueError, match=newer):
        HierarchicalStore.from_collection(client.get_collection("hseg"), encoder=HashingEncoder())
    store.collection.modify(metadata={**meta, "hseg_schema": "two"})
    with pytest.raises(ValueError, match="unreadable hseg_schema"):
        HierarchicalStore("hseg", client=client, encoder=HashingEncoder())
    store.collection.modify(metadata={**meta, "hseg_schema": SCHEMA_VERSION + 1})
    main = fake_cli(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.md").write_text("More text to index. Into a newer collection.")
    for argv in (["query", "stored text", "--db", "db"], ["stats", "--db", "db"],
                 ["index", "a.md", "--db", "db", *FAKE_CLI]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert newer in err and "Traceback" not in err, argv
