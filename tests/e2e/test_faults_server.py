"""Reliability (issue 7), faults: a ``chroma run`` server killed under a writer, under reads and under
``hseg index --host``; the errors name it and a re-run completes (hashing encoder).

The in-process faults are ``tests/store/test_faults.py``. See ``docs/reliability.md``.
"""

from __future__ import annotations

import re
import signal
import threading

import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.store import HierarchicalStore
from hseg_testing.checks import document_problems, expected_records, stored_documents
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import FAKE_CLI, HashingEncoder, fake_cli, synthetic_book


@pytest.fixture(scope="module")
def chunker():
    return small_chunker()


def _ingest_thread(store: HierarchicalStore, chunker: HierarchicalChunker, docs: dict[str, str], errors: list,
                   five_in: threading.Event):
    try:
        for n, (doc_id, text) in enumerate(docs.items(), 1):
            store.add(chunker.chunk(text, doc_id))
            if n == 5:
                five_in.set()
    except Exception as exc:  # pragma: no cover - reported by the test
        errors.append(exc)


def test_chroma_server_going_away_mid_run_is_a_clear_error_and_leaves_no_partial_document(tmp_path, chunker):
    from hseg_testing.chroma_server import ChromaServer, chroma_binary

    if chroma_binary() is None:
        pytest.skip("the 'chroma' command is not installed")
    data = tmp_path / "server-data"
    docs = {f"doc{i:02d}": synthetic_book(3_000, seed=100 + i) for i in range(40)}
    server = ChromaServer(data).start()
    try:
        host_port = f"{server.host}:{server.port}"
        store = HierarchicalStore("gone", host=server.host, port=server.port, encoder=HashingEncoder())
        errors: list[Exception] = []
        five_in = threading.Event()
        writer = threading.Thread(target=_ingest_thread, args=(store, chunker, docs, errors, five_in))
        writer.start()
        # a few documents in, then pull the plug while the writer goes on; told by the writer, not
        # polled for a while: on a busy machine a fixed number of polls ran out before 5 were in
        assert five_in.wait(timeout=300), f"the writer did not store 5 documents: {errors}"
        server.proc.send_signal(signal.SIGKILL)  # not a clean shutdown
        server.proc.wait(timeout=30)
        writer.join(timeout=60)
        assert not writer.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], ConnectionError), errors
        message = str(errors[0])
        assert host_port in message and "failed" in message
        with pytest.raises(ConnectionError, match=host_port):
            store.search("anything", k=2, unit="cluster")
        with pytest.raises(ConnectionError, match=f"cannot reach the Chroma server at {host_port}"):
            HierarchicalStore("gone", host=server.host, port=server.port, encoder=HashingEncoder())
    finally:
        server.stop()
    # the same data, a new server: every document there is complete
    with ChromaServer(data) as again:
        after = stored_documents(again.client().get_collection("gone"))
    assert 5 <= len(after) < len(docs)
    for doc_id, records in after.items():
        assert document_problems(records, docs[doc_id]) == [], doc_id


def test_reads_from_a_killed_chroma_server_name_it(tmp_path, chunker):
    """Every read of the store turns a gone server into a ``ConnectionError`` naming host:port."""
    from hseg_testing.chroma_server import ChromaServer, chroma_binary

    if chroma_binary() is None:
        pytest.skip("the 'chroma' command is not installed")
    server = ChromaServer(tmp_path / "server-data").start()
    try:
        store = HierarchicalStore("reads", host=server.host, port=server.port, encoder=HashingEncoder())
        store.add(chunker.chunk(synthetic_book(1_500, seed=7), "d"))
        assert store.doc_ids() == ["d"] and store.get_records("d")
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(timeout=30)
        reads = {"listing the documents": store.doc_ids, "reading document 'd'": lambda: store.get_records("d"),
                 "count": store.count, "search": lambda: store.search("river", k=2, unit="cluster")}
        for action, read in reads.items():
            with pytest.raises(ConnectionError, match=re.escape(f"Chroma server at {server.host}:{server.port}: "
                                                                f"{action} failed")):
                read()
    finally:
        server.stop()


def test_cli_index_server_going_away_names_it_and_a_rerun_completes(tmp_path, monkeypatch, capsys):
    from hseg_testing.chroma_server import ChromaServer, chroma_binary

    if chroma_binary() is None:
        pytest.skip("the 'chroma' command is not installed")
    main = fake_cli(monkeypatch)
    monkeypatch.chdir(tmp_path)
    files = {f"docs/f{i:02d}.md": synthetic_book(1_200 + 50 * i, seed=200 + i) for i in range(12)}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    server = ChromaServer(tmp_path / "server-data").start()
    real_add = HierarchicalStore.add
    calls = []

    def add_then_die(self, chunkings, metadatas=None, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # the server dies before the third batch
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(timeout=30)
        return real_add(self, chunkings, metadatas, **kwargs)

    monkeypatch.setattr(HierarchicalStore, "add", add_then_die)
    try:
        args = ["index", "docs", "--host", server.host, "--port", str(server.port), "--batch-docs", "2", *FAKE_CLI]
        assert main(args) == 1
        err = capsys.readouterr().err
        assert f"{server.host}:{server.port}" in err and "Traceback" not in err
        assert "re-run" in err or "again" in err
    finally:
        server.stop()
    monkeypatch.setattr(HierarchicalStore, "add", real_add)
    with ChromaServer(tmp_path / "server-data") as again:
        args = ["index", "docs", "--host", again.host, "--port", str(again.port), "--batch-docs", "2", *FAKE_CLI]
        assert main(args) == 0
        assert "8 indexed, 4 unchanged" in capsys.readouterr().out
        col = again.client().get_collection("hseg")
        final = stored_documents(col)
        absolute = {(tmp_path / d).as_posix(): d for d in files}  # with --host, ids are absolute paths
        assert set(final) == set(absolute)
        assert all(document_problems(final[a], files[d]) == [] for a, d in absolute.items())
        assert col.count() == expected_records(files)
