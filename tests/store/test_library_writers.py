"""Nothing lost (issue 47, items 1 and 2), in one process: ``hseg stats`` counts a document whose vectors
are lost as incomplete, and only an embedded store's writes take the writer lock.

Writers in processes of their own (two library writers, one beside ``hseg index``, a lock file deleted
under its holder) are ``tests/stress/test_library_writers.py``; the lock on a ``chroma run`` server's
clients is ``tests/e2e/test_library_writers_server.py``."""

from __future__ import annotations

import chromadb

from hseg.chunking.chunker import HierarchicalChunker
from hseg.store import HierarchicalStore
from hseg.store.paging import ids_without_vectors
from hseg_testing.fakes import HashingEncoder, synthetic_book


def test_stats_counts_a_document_whose_vectors_are_lost_as_incomplete(tmp_path, monkeypatch):
    """``hseg stats`` judged documents by their metadata alone: a document whose records had lost
    their vectors (unserialised writers) was "complete"."""
    enc = HashingEncoder()
    store = HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=enc)
    chunker = HierarchicalChunker(encoder=enc, segmenter="texttiling")
    store.add(chunker.chunk_many([synthetic_book(1500, seed=1), synthetic_book(1500, seed=2)], ["a.md", "b.md"]))
    victim = next(iter(store.maintenance.records(["b.md"])["b.md"]))
    real_get = type(store.collection).get

    def get(self, *args, **kwargs):  # as Chroma answers for a record whose vector the HNSW index lacks
        if victim in (kwargs.get("ids") or []) and "embeddings" in (kwargs.get("include") or []):
            raise chromadb.errors.InternalError(f"Error finding id {victim}")
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(type(store.collection), "get", get)
    stats = store.stats()
    assert (stats["documents_complete"], stats["documents_incomplete"]) == (1, 1)
    assert stats["incomplete_documents"] == ["b.md"] and stats["records_without_vectors"] == 1
    assert ids_without_vectors(store.collection, [victim]) == {victim}


def test_only_an_embedded_store_takes_the_writer_lock(chroma_client, chroma_collection_name, monkeypatch):
    """An in-memory store and a server's clients have no vector index of their own to overwrite: their
    writes take no lock (a server serves any number of writers); an embedded store's all do."""
    import hseg.store.backends.embedded as store_module  # the embedded backend takes the lock

    taken: list[str] = []
    real = store_module.writer_lock

    def writer_lock_spy(db, **kwargs):
        taken.append(str(db))
        return real(db, **kwargs)

    monkeypatch.setattr(store_module, "writer_lock", writer_lock_spy)
    enc = HashingEncoder()
    store = HierarchicalStore(chroma_collection_name, client=chroma_client, encoder=enc)
    chunker = HierarchicalChunker(encoder=enc, segmenter="texttiling")
    store.add(chunker.chunk(synthetic_book(2_000, seed=3), "x.md"))
    store.sync_unit_index(["x.md"])
    store.delete("x.md")
    embedded = chroma_client.get_settings().is_persistent
    assert len(taken) == (3 if embedded else 0)
