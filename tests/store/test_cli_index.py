"""``hseg index`` / ``query`` / ``stats`` (hseg.cli.index, hseg.cli.query, hseg.ingest), run in-process
through ``hseg.cli.main``, on embedded stores.

The tests swap the encoder factory ``hseg.encoders.factory.load_encoder`` for the bag-of-words
``HashingEncoder`` (``--encoder test-hashing-encoder``). The real model, a ``chroma run`` server and a
read-only store opened by a child process are ``tests/e2e/test_cli_index_end_to_end.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import chromadb
import pytest

from hseg.cli import main
from hseg.cli.query import format_hit
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.unit_vectors import companion_name
from hseg.store import HierarchicalStore
from hseg.store.parts import StoreParts
from hseg_testing.chroma_server import free_port
from hseg_testing.fakes import FAKE_CLI, HashingEncoder

TIDES = ("The tide is the rise and fall of the sea. Tides are caused by the gravity of the moon and the sun. "
         "High tide and low tide alternate twice a day on most coasts.\n\n")
CATS = ("Cats are small carnivorous mammals. A cat sleeps for most of the day. Cats hunt mice and birds, "
        "and people keep cats as companions in their homes.\n\n")


def write_file(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def stats_json(capsys, *args) -> dict:
    capsys.readouterr()
    assert main(["stats", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def one_line_error(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], err


# --------------------------------------------------------------------------- fast (fake encoder)


def test_bad_files_are_reported_and_skipped(fake, capsys):
    write_file(fake / "docs" / "good.md", TIDES * 3 + CATS * 3)
    write_file(fake / "docs" / "sub" / "cats.txt", CATS * 4)
    write_file(fake / "docs" / "binary.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    write_file(fake / "docs" / "latin1.txt", "caf\xe9 au lait".encode("latin-1"))
    write_file(fake / "docs" / "image.png", b"\x00\x01")  # not a text suffix: ignored in folders
    write_file(fake / "docs" / ".hidden" / "x.md", TIDES)  # hidden folders are skipped
    code = main(["index", "docs", "--db", "db", *FAKE_CLI])
    out, err = capsys.readouterr()
    assert code == 1
    assert "docs/binary.md" in err and "binary" in err
    assert "docs/latin1.txt" in err and "UTF-8" in err
    assert "good.md" not in err and "image.png" not in err
    assert "2 indexed" in out and "2 failed" in out
    stats = stats_json(capsys, "--db", "db")
    assert stats["documents"] == 2 and stats["encoder"] == HashingEncoder.name
    assert stats["vectors"] == stats["clusters"] + stats["segments"] > 0
    assert main(["query", "moon gravity", "--db", "db", "--json", "--source", "docs/good.md"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits and {h["metadata"]["hseg_doc_id"] for h in hits} == {"docs/good.md"}


def test_rerun_skips_unchanged_and_repairs_partial_documents(fake, capsys):
    write_file(fake / "a.md", TIDES * 4 + CATS * 4)
    write_file(fake / "b.txt", CATS * 5 + TIDES * 2)
    args = ["index", "a.md", "b.txt", "--db", "db", "--batch-docs", "1", *FAKE_CLI]
    assert main(args) == 0
    first = stats_json(capsys, "--db", "db")
    assert first["documents"] == 2

    assert main(args) == 0  # unchanged: nothing chunked, same records
    assert "0 indexed, 2 unchanged" in capsys.readouterr().out
    assert stats_json(capsys, "--db", "db") == first

    # a crash mid-write: one segment record of a.md lost -> a.md is redone, b.txt skipped
    col = chromadb.PersistentClient(path=str(fake / "db")).get_collection("hseg")
    seg = col.get(where={"$and": [{"hseg_doc_id": "a.md"}, {"hseg_level": "segment"}]}, limit=1)["ids"]
    col.delete(ids=seg)
    assert main(args) == 0
    assert "1 indexed, 1 unchanged" in capsys.readouterr().out
    repaired = stats_json(capsys, "--db", "db")
    # a.md was written again, so the store's newest write time may be a second or more later
    assert repaired.pop("last_indexed") >= first["last_indexed"]
    assert repaired == {k: v for k, v in first.items() if k != "last_indexed"}

    write_file(fake / "a.md", CATS * 2)  # changed text: re-chunked, stale records removed
    assert main(args) == 0
    after = stats_json(capsys, "--db", "db")
    assert after["vectors"] < first["vectors"]
    recs = col.get(where={"hseg_doc_id": "a.md"}, include=["metadatas", "documents"])
    assert "".join(d for d, m in zip(recs["documents"], recs["metadatas"])
                   if m["hseg_level"] == "segment") == CATS * 2

    assert main([*args, "--force"]) == 0  # re-chunking everything gives the same ids
    assert "2 indexed" in capsys.readouterr().out
    assert stats_json(capsys, "--db", "db") == after


def test_an_upgraded_hseg_reindexes_what_an_older_one_wrote(fake, capsys, monkeypatch):
    import hseg

    write_file(fake / "a.md", TIDES * 3 + CATS * 3)
    args = ["index", "a.md", "--db", "db", *FAKE_CLI]
    assert main(args) == 0 and main(args) == 0
    assert "0 indexed, 1 unchanged" in capsys.readouterr().out
    monkeypatch.setattr(hseg, "__version__", "999.0.0")  # the chunking algorithm may have changed
    assert main(args) == 0
    assert "1 indexed, 0 unchanged" in capsys.readouterr().out
    assert main(args) == 0
    assert "0 indexed, 1 unchanged" in capsys.readouterr().out


def _doc_ids(db: Path) -> list[str]:
    from hseg.store import HierarchicalStore

    return HierarchicalStore("hseg", path=str(db.resolve()), encoder=HashingEncoder()).doc_ids()


def test_prune_removes_only_documents_whose_files_are_gone(fake, capsys):
    for name, text in (("docs/a.md", TIDES * 3), ("docs/sub/b.txt", CATS * 3), ("notes/n.md", TIDES + CATS)):
        write_file(fake / name, text)
    write_file(fake / "docs" / "keep.rst", CATS + TIDES)  # named explicitly: the folder walk does not see it
    loud = [a for a in FAKE_CLI if a != "--quiet"]
    assert main(["index", "docs", "notes", "docs/keep.rst", "--db", "db", *FAKE_CLI]) == 0
    assert "pruned" not in capsys.readouterr().out  # no --prune, no pruning line

    (fake / "docs" / "sub" / "b.txt").unlink()
    assert main(["index", "docs", "--db", "db", "--prune", *loud]) == 0
    out, err = capsys.readouterr()
    assert "pruned     1 document whose file is gone" in out and "1 unchanged" in out
    assert "pruned docs/sub/b.txt" in err
    assert _doc_ids(fake / "db") == ["docs/a.md", "docs/keep.rst", "notes/n.md"]

    (fake / "docs" / "a.md").rename(fake / "docs" / "renamed.md")
    assert main(["index", "docs", "--db", "db", "--prune", *FAKE_CLI]) == 0
    out, err = capsys.readouterr()
    assert "1 indexed" in out and "pruned     1 document whose file is gone" in out and "pruned" not in err  # --quiet
    assert _doc_ids(fake / "db") == ["docs/keep.rst", "docs/renamed.md", "notes/n.md"]

    # the last file a pattern matched is gone: nothing to index, but still something to prune
    (fake / "notes" / "n.md").unlink()
    assert main(["index", "notes/*.md", "--db", "db", "--prune", *FAKE_CLI]) == 1
    out, err = capsys.readouterr()
    assert "pattern matches no" in err and "0 indexed" in out and "pruned     1 document whose file is gone" in out
    assert _doc_ids(fake / "db") == ["docs/keep.rst", "docs/renamed.md"]


def test_prune_without_an_index_creates_nothing(fake, capsys):
    assert main(["index", "gone.md", "--db", "nowhere", "--prune", *FAKE_CLI]) == 1
    one_line_error(capsys.readouterr().err.splitlines()[-1], "no index at nowhere")
    assert not (fake / "nowhere").exists()
    chromadb.PersistentClient(path=str((fake / "db").resolve()))  # a database without the collection
    assert main(["index", "gone.md", "--db", "db", "--prune", *FAKE_CLI]) == 1
    one_line_error(capsys.readouterr().err.splitlines()[-1], "no collection 'hseg'", "to prune")


def test_globs_and_chunking_failure_isolated(fake, capsys, monkeypatch):
    from hseg.chunking.chunker import HierarchicalChunker

    original = HierarchicalChunker.chunk_many

    def flaky(self, texts, doc_ids=None):
        if any("BOOM" in t for t in texts):
            raise RuntimeError("simulated failure")
        return original(self, texts, doc_ids)

    monkeypatch.setattr(HierarchicalChunker, "chunk_many", flaky)
    write_file(fake / "notes" / "x" / "one.md", TIDES * 3)
    write_file(fake / "notes" / "two.markdown", CATS * 3)
    write_file(fake / "notes" / "three.md", "BOOM. " + CATS)
    write_file(fake / "notes" / "skip.rst", CATS)
    assert main(["index", "notes/**/*.m*", "--db", "db", *FAKE_CLI]) == 1
    out, err = capsys.readouterr()
    assert "notes/three.md: chunking failed" in err and "simulated failure" in err
    assert "2 indexed" in out and "1 failed" in out
    col = chromadb.PersistentClient(path=str(fake / "db")).get_collection("hseg")
    sources = {m["source"] for m in col.get(include=["metadatas"])["metadatas"]}
    assert sources == {"notes/x/one.md", "notes/two.markdown"}


@pytest.mark.parametrize("argv, needle", [
    (["query", "q", "--db", "d", "-k", "0"], "-k"),
    (["query", "q", "--db", "d", "--mode", "nearest"], "--mode"),
    (["query", "q", "--db", "d", "-k", "2", "--budget-tokens", "100"], "--budget-tokens"),
    (["query", "q", "--db", "d", "--unit", "segment", "--mode", "cluster"], "--mode"),
    (["query", "  ", "--db", "d"], "QUESTION"),
    (["query", "q"], "--db"),
    (["stats", "--db", "d", "--port", "9000"], "--port"),
    (["index", "a.md", "--db", "d", "--k", "1", "--target-tokens", "300"], "--k"),
    (["index", "a.md", "--db", "d", "--batch-docs", "0"], "--batch-docs"),
    (["index", "a.md", "--db", "d", "--k", "nan"], "--k"),
    (["index", "a.md", "--host", "h", "--port", "70000"], "--port"),
])
def test_bad_arguments_exit_2_with_one_line(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    one_line_error(capsys.readouterr().err, needle, f"hseg {argv[0]}: error")
    assert not (tmp_path / "d").exists()


def test_target_tokens_below_segment_minimum_exits_2(fake, capsys):
    write_file(fake / "a.md", TIDES)
    with pytest.raises(SystemExit) as exc:
        main(["index", "a.md", "--db", "db", "--target-tokens", "10", *FAKE_CLI])
    assert exc.value.code == 2
    one_line_error(capsys.readouterr().err, "target_tokens")


def test_query_and_stats_without_an_index_exit_1(fake, capsys):
    for argv in (["query", "anything", "--db", "nowhere"], ["stats", "--db", "nowhere"]):
        assert main(argv) == 1
        one_line_error(capsys.readouterr().err, "no index at nowhere")
    assert not (fake / "nowhere").exists()  # reading never creates a database

    chromadb.PersistentClient(path=str(fake / "db")).create_collection("hseg",
                                                                       configuration={"hnsw": {"space": "cosine"}})
    assert main(["query", "anything", "--db", "db"]) == 1
    one_line_error(capsys.readouterr().err, "'hseg'", "is empty", "hseg index")
    assert main(["query", "anything", "--db", "db", "--collection", "other"]) == 1
    one_line_error(capsys.readouterr().err, "no collection 'other'", "hseg")
    assert main(["index", "missing.md", "--db", "db", *FAKE_CLI]) == 1
    one_line_error(capsys.readouterr().err.splitlines()[0], "missing.md", "no such file")


@pytest.mark.parametrize("argv", [["index", "a.md"], ["query", "q"], ["stats"]])
def test_server_down_is_one_clear_line(argv, fake, capsys):
    write_file(fake / "a.md", TIDES)
    port = free_port()
    start = time.monotonic()
    assert main([*argv, "--host", "127.0.0.1", "--port", str(port)]) == 1
    # a guard against retrying for minutes (0.05 s measured), not a timing claim: wide enough that a
    # busy machine never trips it
    assert time.monotonic() - start < 120
    one_line_error(capsys.readouterr().err, f"127.0.0.1:{port}", "cannot reach the Chroma server")


def _hit(text: str, start: int, m_start: int, m_end: int, level: str = "segment") -> SearchHit:
    return SearchHit("clu-1", "doc.md", text, start, start + len(text), 0.5, 12, "seg-1", level, m_start, m_end,
                     {"source": "doc.md"})


def test_format_hit_marks_the_matched_segment():
    text = "First part.\n\nSecond part here.\n\nThird."
    hit = _hit(text, 100, 113, 132)  # "Second part here.\n\n"
    plain = format_hit(1, hit, tty=False)
    assert plain.splitlines()[0].startswith("#1  score 0.5000  doc.md  chars 100-")
    assert ">>> Second part here. <<<" in plain
    assert "\x1b[1;4mSecond part here.\x1b[0m" in format_hit(1, hit, tty=True)
    assert ">>>" not in format_hit(1, _hit(text, 100, 100, 139, level="cluster"), tty=False)


def test_a_document_the_store_refuses_costs_only_itself(fake, capsys, monkeypatch):
    import dataclasses

    import numpy as np

    from hseg.chunking.chunker import HierarchicalChunker

    original = HierarchicalChunker.chunk_many

    def poisoned(self, texts, doc_ids=None):
        out = original(self, texts, doc_ids)
        # a NaN vector, as a broken encoder would give for one document: the store refuses it
        return [dataclasses.replace(c, clusters=tuple(
                    dataclasses.replace(cl, embedding=np.full_like(cl.embedding, np.nan)) for cl in c.clusters))
                if "poison" in c.doc_id else c for c in out]

    monkeypatch.setattr(HierarchicalChunker, "chunk_many", poisoned)
    write_file(fake / "docs" / "a.md", TIDES * 3)
    write_file(fake / "docs" / "poison.md", CATS * 3)
    write_file(fake / "docs" / "b.md", CATS * 2 + TIDES)
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 1
    out, err = capsys.readouterr()
    assert "docs/poison.md: not written" in err
    assert "2 indexed" in out and "1 failed" in out
    col = chromadb.PersistentClient(path=str(fake / "db")).get_collection("hseg")
    sources = {m["source"] for m in col.get(include=["metadatas"])["metadatas"]}
    assert sources == {"docs/a.md", "docs/b.md"}


# --------------------------------------------------------------------------- read-only and full disks (issue 25 item 6)


def test_opening_a_store_only_to_read_it_writes_nothing(fake, capsys):
    """hseg stats and hseg query used to create the unit index of a collection that had none."""
    write_file(fake / "docs" / "tides.md", TIDES * 3)
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    client = chromadb.PersistentClient(path=str((fake / "db").resolve()))
    client.delete_collection(companion_name("hseg"))  # as a collection written by another tool
    capsys.readouterr()
    assert main(["stats", "--db", "db"]) == 0
    assert main(["query", "tides", "--db", "db", "--unit", "auto"]) == 0
    assert sorted(c.name for c in client.list_collections()) == ["hseg"]


class _DiskFills:
    """The disk fills up during the ``add``-th write of documents, after its first upsert into the
    collection: that and every later upsert fails as Chroma fails on a full disk (its own error; here
    its log took nothing), and no space is left."""

    def __init__(self, monkeypatch, add: int) -> None:
        from chromadb.api.models.Collection import Collection

        self.adds, self.calls, self.full, self.freed = 0, 0, False, False
        real_add, real_upsert = HierarchicalStore.add, Collection.upsert

        def counting_add(store, *args, **kwargs):
            self.adds += 1
            self.calls = 0
            return real_add(store, *args, **kwargs)

        def upsert(col, *args, **kwargs):
            if col.name == "hseg":
                self.calls += 1
                self.full = not self.freed and (self.full or (self.adds >= add and self.calls >= 2))
            if self.full:
                raise chromadb.errors.InternalError("Error in compaction: Failed to apply logs to the metadata "
                                                    "segment")
            return real_upsert(col, *args, **kwargs)

        monkeypatch.setattr(HierarchicalStore, "add", counting_add)
        monkeypatch.setattr(Collection, "upsert", upsert)
        real_usage, real_statvfs = shutil.disk_usage, os.statvfs
        monkeypatch.setattr(shutil, "disk_usage", lambda path: real_usage(path)._replace(free=0) if self.full
                            else real_usage(path))

        def statvfs(path):  # what root reads (the blocks kept back for it are gone too)
            st = real_statvfs(path)
            return os.statvfs_result((*st[:3], 0, 0, *st[5:])) if self.full else st

        monkeypatch.setattr(os, "statvfs", statvfs)


def test_a_disk_filling_up_mid_batch_says_how_many_documents_are_written(fake, capsys, monkeypatch):
    """The message counted only the batches that finished ('0 documents were written before it' when
    4 were); now it counts the documents of the failing batch whose records were stored, says the rest
    may be stored too, and names the full disk."""
    from hseg.ingest import run as ingest_run

    monkeypatch.setattr(ingest_run, "WRITE_RETRY_DELAYS", (0.0, 0.0))
    monkeypatch.setattr(StoreParts, "batch_size", lambda self: 4)  # about a document a write call
    for i in range(8):
        write_file(fake / "docs" / f"d{i}.md", (TIDES if i % 2 else CATS) * (1 + i % 3))
    disk = _DiskFills(monkeypatch, add=2)  # during the 2nd batch
    code = main(["index", "docs", "--db", "db", "--batch-docs", "4", *FAKE_CLI])
    err = capsys.readouterr().err
    assert code == 1
    one_line_error(err, "hseg index: error: writing a batch of 4 documents failed (InternalError: Error in "
                         "compaction", "The disk of db is full, 0 bytes free: free space first")
    said = int(re.search(r"at least (\d+) documents are written", err).group(1))
    of_batch = int(re.search(r"; (\d+) of them were written before the failure", err).group(1))
    assert said == 4 + of_batch and of_batch >= 1, err

    # stats and query while the disk is full: one line (Chroma failed every read the same way)
    from chromadb.api.models.Collection import Collection

    real_get = Collection.get

    def get(col, *args, **kwargs):
        if disk.full:
            raise chromadb.errors.InternalError("Error executing plan: Error sending backfill request to compactor: "
                                                "Failed to apply logs to the metadata segment")
        return real_get(col, *args, **kwargs)

    monkeypatch.setattr(Collection, "get", get)
    for argv in (["stats", "--db", "db"], ["query", "tides", "--db", "db"]):
        assert main(argv) == 1
        one_line_error(capsys.readouterr().err, f"hseg {argv[0]}: error: the disk of the Chroma database at db is "
                                                 "full, 0 bytes free (InternalError: ", "free space and run again")

    disk.full, disk.freed = False, True  # space freed: the store holds exactly the documents the message counted
    stored = stats_json(capsys, "--db", "db")
    assert stored["documents"] == said, (stored, err)
    # the re-run completes the failed batch: its written documents too, whose unit-index records were
    # still to come when the write failed
    assert main(["index", "docs", "--db", "db", "--batch-docs", "4", *FAKE_CLI]) == 0
    assert "4 indexed, 4 unchanged" in capsys.readouterr().out
