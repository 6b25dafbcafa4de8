"""Reliability of the lexical index (issues 7 and 26): a ``chroma run`` server restarted while a write
was under way; every client's lexical cache ends equal to the collection (hashing encoder).

See ``docs/reliability.md``.
"""

from __future__ import annotations

import signal

import pytest

from hseg.store import HierarchicalStore
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder, synthetic_book


@pytest.fixture(scope="module")
def chunker():
    return small_chunker()


def test_a_server_restart_and_a_write_it_cut_short_leave_every_clients_index_equal_to_chroma(
        tmp_path, chunker, monkeypatch):
    from hseg_testing.chroma_server import ChromaServer, chroma_binary

    if chroma_binary() is None:
        pytest.skip("the 'chroma' command is not installed")

    def cache_agrees(store: HierarchicalStore) -> bool:
        store._parts.lexical.ensure_fresh()
        rows = dict(store._parts.lexical.db.rows("SELECT s.id, f.text FROM segments s JOIN fts f ON f.rowid = s.rowid"))
        got = store.collection.get(where={"hseg_level": "segment"}, include=["documents"])
        return rows == dict(zip(got["ids"], got["documents"]))

    docs = {f"d{i}": synthetic_book(2_000, seed=900 + i) for i in range(12)}
    server = ChromaServer(tmp_path / "server-data").start()
    port = server.port
    monkeypatch.setenv("HSEG_CACHE", str(tmp_path / "reader-cache"))
    reader = HierarchicalStore("restart", host=server.host, port=port, encoder=HashingEncoder())
    monkeypatch.setenv("HSEG_CACHE", str(tmp_path / "writer-cache"))
    writer = HierarchicalStore("restart", host=server.host, port=port, encoder=HashingEncoder())
    try:
        for d in list(docs)[:4]:
            writer.add(chunker.chunk(docs[d], d))
        assert cache_agrees(reader)
        # the server is killed while a write is under way: the write's journal record stays open
        real_upsert = writer.collection.upsert

        def upsert_then_die(**kwargs):
            real_upsert(**kwargs)
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(timeout=30)

        monkeypatch.setattr(writer.collection, "upsert", upsert_then_die)
        with pytest.raises(ConnectionError):
            writer.add(chunker.chunk_many([docs["d0"][:1_500], docs["d4"]], ["d0", "d4"]))
        monkeypatch.undo()
    finally:
        server.stop()
    # the same data and port, a new server process; the clients keep their objects and caches
    monkeypatch.setattr("hseg_testing.chroma_server.free_port", lambda host="127.0.0.1": port)
    with ChromaServer(tmp_path / "server-data") as again:
        assert again.port == port
        # the open write names d0 and d4; once older than OPEN_STALE_S (here at once) it is taken for a
        # dead writer's and its documents are re-read from what the server kept
        monkeypatch.setattr("hseg.store.lexical.follow.OPEN_STALE_S", 0.0)
        assert cache_agrees(reader)
        fresh = HierarchicalStore("restart", host=again.host, port=port, encoder=HashingEncoder())
        for d in list(docs)[4:]:
            fresh.add(chunker.chunk(docs[d], d))
        assert cache_agrees(reader) and cache_agrees(writer) and cache_agrees(fresh)
        hits = reader.search("glacier ice summit", budget_tokens=500, unit="auto", lexical_weight=0.5)
        assert hits and all(h.text in docs[h.doc_id] for h in hits)
