"""``hseg index`` / ``query`` / ``stats`` (hseg.cli.index, hseg.cli.query, hseg.ingest), run in-process
through ``hseg.cli.main``.

Fast tests swap the encoder factory ``hseg.encoders.factory.load_encoder`` for the bag-of-words
``HashingEncoder`` (``--encoder test-hashing-encoder``); the ``model`` tests share one index built
with the real MiniLM encoder (loaded once per session by the ``encoder`` fixture).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import chromadb
import pytest

from hseg.cli import main
from hseg.cli.query import format_hit
from hseg.encoders import factory
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.unit_vectors import companion_name
from hseg.store import HierarchicalStore
from tests.chroma_server import free_port
from tests.fakes import HashingEncoder

REPO = Path(__file__).resolve().parents[1]
FAKE = ["--encoder", HashingEncoder.name, "--segmenter", "texttiling", "--quiet"]

TIDES = ("The tide is the rise and fall of the sea. Tides are caused by the gravity of the moon and the sun. "
         "High tide and low tide alternate twice a day on most coasts.\n\n")
CATS = ("Cats are small carnivorous mammals. A cat sleeps for most of the day. Cats hunt mice and birds, "
        "and people keep cats as companions in their homes.\n\n")


def _load_fake(name=None, backend=None, threads=None):
    assert name == HashingEncoder.name, name
    return HashingEncoder()


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """Fake encoder, cwd = tmp_path (so document ids are short relative paths)."""
    monkeypatch.setattr(factory, "load_encoder", _load_fake)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def _stats(capsys, *args) -> dict:
    capsys.readouterr()
    assert main(["stats", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _one_line_error(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], err


# --------------------------------------------------------------------------- fast (fake encoder)


def test_bad_files_are_reported_and_skipped(fake, capsys):
    _write(fake / "docs" / "good.md", TIDES * 3 + CATS * 3)
    _write(fake / "docs" / "sub" / "cats.txt", CATS * 4)
    _write(fake / "docs" / "binary.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    _write(fake / "docs" / "latin1.txt", "caf\xe9 au lait".encode("latin-1"))
    _write(fake / "docs" / "image.png", b"\x00\x01")  # not a text suffix: ignored in folders
    _write(fake / "docs" / ".hidden" / "x.md", TIDES)  # hidden folders are skipped
    code = main(["index", "docs", "--db", "db", *FAKE])
    out, err = capsys.readouterr()
    assert code == 1
    assert "docs/binary.md" in err and "binary" in err
    assert "docs/latin1.txt" in err and "UTF-8" in err
    assert "good.md" not in err and "image.png" not in err
    assert "2 indexed" in out and "2 failed" in out
    stats = _stats(capsys, "--db", "db")
    assert stats["documents"] == 2 and stats["encoder"] == HashingEncoder.name
    assert stats["vectors"] == stats["clusters"] + stats["segments"] > 0
    assert main(["query", "moon gravity", "--db", "db", "--json", "--source", "docs/good.md"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits and {h["metadata"]["hseg_doc_id"] for h in hits} == {"docs/good.md"}


def test_rerun_skips_unchanged_and_repairs_partial_documents(fake, capsys):
    _write(fake / "a.md", TIDES * 4 + CATS * 4)
    _write(fake / "b.txt", CATS * 5 + TIDES * 2)
    args = ["index", "a.md", "b.txt", "--db", "db", "--batch-docs", "1", *FAKE]
    assert main(args) == 0
    first = _stats(capsys, "--db", "db")
    assert first["documents"] == 2

    assert main(args) == 0  # unchanged: nothing chunked, same records
    assert "0 indexed, 2 unchanged" in capsys.readouterr().out
    assert _stats(capsys, "--db", "db") == first

    # a crash mid-write: one segment record of a.md lost -> a.md is redone, b.txt skipped
    col = chromadb.PersistentClient(path=str(fake / "db")).get_collection("hseg")
    seg = col.get(where={"$and": [{"hseg_doc_id": "a.md"}, {"hseg_level": "segment"}]}, limit=1)["ids"]
    col.delete(ids=seg)
    assert main(args) == 0
    assert "1 indexed, 1 unchanged" in capsys.readouterr().out
    assert _stats(capsys, "--db", "db") == first

    _write(fake / "a.md", CATS * 2)  # changed text: re-chunked, stale records removed
    assert main(args) == 0
    after = _stats(capsys, "--db", "db")
    assert after["vectors"] < first["vectors"]
    recs = col.get(where={"hseg_doc_id": "a.md"}, include=["metadatas", "documents"])
    assert "".join(d for d, m in zip(recs["documents"], recs["metadatas"])
                   if m["hseg_level"] == "segment") == CATS * 2

    assert main([*args, "--force"]) == 0  # re-chunking everything gives the same ids
    assert "2 indexed" in capsys.readouterr().out
    assert _stats(capsys, "--db", "db") == after


def test_an_upgraded_hseg_reindexes_what_an_older_one_wrote(fake, capsys, monkeypatch):
    import hseg

    _write(fake / "a.md", TIDES * 3 + CATS * 3)
    args = ["index", "a.md", "--db", "db", *FAKE]
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
        _write(fake / name, text)
    _write(fake / "docs" / "keep.rst", CATS + TIDES)  # named explicitly: the folder walk does not see it
    loud = [a for a in FAKE if a != "--quiet"]
    assert main(["index", "docs", "notes", "docs/keep.rst", "--db", "db", *FAKE]) == 0
    assert "pruned" not in capsys.readouterr().out  # no --prune, no pruning line

    (fake / "docs" / "sub" / "b.txt").unlink()
    assert main(["index", "docs", "--db", "db", "--prune", *loud]) == 0
    out, err = capsys.readouterr()
    assert "pruned     1 documents whose files are gone" in out and "1 unchanged" in out
    assert "pruned docs/sub/b.txt" in err
    assert _doc_ids(fake / "db") == ["docs/a.md", "docs/keep.rst", "notes/n.md"]

    (fake / "docs" / "a.md").rename(fake / "docs" / "renamed.md")
    assert main(["index", "docs", "--db", "db", "--prune", *FAKE]) == 0
    out, err = capsys.readouterr()
    assert "1 indexed" in out and "pruned     1 documents" in out and "pruned" not in err  # --quiet
    assert _doc_ids(fake / "db") == ["docs/keep.rst", "docs/renamed.md", "notes/n.md"]

    # the last file a pattern matched is gone: nothing to index, but still something to prune
    (fake / "notes" / "n.md").unlink()
    assert main(["index", "notes/*.md", "--db", "db", "--prune", *FAKE]) == 1
    out, err = capsys.readouterr()
    assert "pattern matches no" in err and "0 indexed" in out and "pruned     1 documents" in out
    assert _doc_ids(fake / "db") == ["docs/keep.rst", "docs/renamed.md"]


def test_prune_without_an_index_creates_nothing(fake, capsys):
    assert main(["index", "gone.md", "--db", "nowhere", "--prune", *FAKE]) == 1
    _one_line_error(capsys.readouterr().err.splitlines()[-1], "no index at nowhere")
    assert not (fake / "nowhere").exists()
    chromadb.PersistentClient(path=str((fake / "db").resolve()))  # a database without the collection
    assert main(["index", "gone.md", "--db", "db", "--prune", *FAKE]) == 1
    _one_line_error(capsys.readouterr().err.splitlines()[-1], "no collection 'hseg'", "to prune")


def test_globs_and_chunking_failure_isolated(fake, capsys, monkeypatch):
    from hseg.chunking.chunker import HierarchicalChunker

    original = HierarchicalChunker.chunk_many

    def flaky(self, texts, doc_ids=None):
        if any("BOOM" in t for t in texts):
            raise RuntimeError("simulated failure")
        return original(self, texts, doc_ids)

    monkeypatch.setattr(HierarchicalChunker, "chunk_many", flaky)
    _write(fake / "notes" / "x" / "one.md", TIDES * 3)
    _write(fake / "notes" / "two.markdown", CATS * 3)
    _write(fake / "notes" / "three.md", "BOOM. " + CATS)
    _write(fake / "notes" / "skip.rst", CATS)
    assert main(["index", "notes/**/*.m*", "--db", "db", *FAKE]) == 1
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
    _one_line_error(capsys.readouterr().err, needle, f"hseg {argv[0]}: error")
    assert not (tmp_path / "d").exists()


def test_target_tokens_below_segment_minimum_exits_2(fake, capsys):
    _write(fake / "a.md", TIDES)
    with pytest.raises(SystemExit) as exc:
        main(["index", "a.md", "--db", "db", "--target-tokens", "10", *FAKE])
    assert exc.value.code == 2
    _one_line_error(capsys.readouterr().err, "target_tokens")


def test_query_and_stats_without_an_index_exit_1(fake, capsys):
    for argv in (["query", "anything", "--db", "nowhere"], ["stats", "--db", "nowhere"]):
        assert main(argv) == 1
        _one_line_error(capsys.readouterr().err, "no index at nowhere")
    assert not (fake / "nowhere").exists()  # reading never creates a database

    chromadb.PersistentClient(path=str(fake / "db")).create_collection("hseg")
    assert main(["query", "anything", "--db", "db"]) == 1
    _one_line_error(capsys.readouterr().err, "'hseg'", "is empty", "hseg index")
    assert main(["query", "anything", "--db", "db", "--collection", "other"]) == 1
    _one_line_error(capsys.readouterr().err, "no collection 'other'", "hseg")
    assert main(["index", "missing.md", "--db", "db", *FAKE]) == 1
    _one_line_error(capsys.readouterr().err.splitlines()[0], "missing.md", "no such file")


@pytest.mark.parametrize("argv", [["index", "a.md"], ["query", "q"], ["stats"]])
def test_server_down_is_one_clear_line(argv, fake, capsys):
    _write(fake / "a.md", TIDES)
    port = free_port()
    start = time.monotonic()
    assert main([*argv, "--host", "127.0.0.1", "--port", str(port)]) == 1
    # a guard against retrying for minutes (0.05 s measured), not a timing claim: wide enough that a
    # busy machine never trips it
    assert time.monotonic() - start < 120
    _one_line_error(capsys.readouterr().err, f"127.0.0.1:{port}", "cannot reach the Chroma server")


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


# --------------------------------------------------------------------------- real model


@pytest.fixture(scope="module")
def real_db(tmp_path_factory, encoder):
    """example.md and a tiny file indexed once with the real encoder; cwd is the corpus folder."""
    root = tmp_path_factory.mktemp("cli-index")
    shutil.copy(REPO / "examples" / "data" / "example.md", _write(root / "docs" / "example.md", ""))
    _write(root / "docs" / "tiny.txt", TIDES + CATS)
    with pytest.MonkeyPatch.context() as mp:
        # the session's model, loaded once
        mp.setattr(factory, "load_encoder", lambda name=None, backend=None, threads=None: encoder)
        mp.chdir(root)
        yield root


@pytest.mark.model
def test_end_to_end_index_query_stats(real_db, capsys):
    argv = ["index", "docs", "--db", "db", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "documents  2 indexed, 0 unchanged (skipped), 0 failed" in out
    summary = {line.split()[0]: line.split()[1] for line in out.splitlines()}
    stats = _stats(capsys, "--db", "db")
    assert stats["encoder"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert (stats["documents"], str(stats["segments"]), str(stats["clusters"])) == \
        (2, summary["segments"], summary["clusters"])
    assert stats["vectors"] == stats["segments"] + stats["clusters"] == int(summary["vectors"])
    assert 0 < stats["mean_segment_tokens"] < stats["mean_cluster_tokens"]

    sources = {d: (real_db / d).read_text(encoding="utf-8") for d in ("docs/example.md", "docs/tiny.txt")}
    for extra in ([], ["--unit", "segment"]):
        assert main(["query", "What causes the tides?", "--db", "db", "-k", "3", "--json", *extra]) == 0
        hits = json.loads(capsys.readouterr().out)
        assert len(hits) == 3 and hits[0]["metadata"]["hseg_doc_id"] == "docs/tiny.txt"
        for h in hits:
            m = h["metadata"]
            assert h["text"] == sources[m["hseg_doc_id"]][m["hseg_start"] : m["hseg_end"]]
            assert m["hseg_start"] <= m["hseg_matched_start"] < m["hseg_matched_end"] <= m["hseg_end"]
            assert m["source"] == m["hseg_doc_id"]
        scores = [h["metadata"]["hseg_score"] for h in hits]
        assert scores == sorted(scores, reverse=True)

    assert main(["query", "precession of the equinoxes", "--db", "db", "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("#1  score ") and "#2  score " in out and "docs/example.md" in out

    assert main(argv) == 0  # idempotent re-run: skipped, same records
    assert "0 indexed, 2 unchanged" in capsys.readouterr().out
    assert _stats(capsys, "--db", "db") == stats
    assert main([*argv, "--force", "--batch-docs", "1"]) == 0  # re-chunked: same ids, same count
    assert "2 indexed" in capsys.readouterr().out
    assert _stats(capsys, "--db", "db") == stats


MOON = ("The moon orbits the earth once a month. Its phases run from new moon to full moon and back. "
        "Astronauts first walked on the moon in 1969.\n\n")


@pytest.mark.model
def test_prune_end_to_end_forgets_deleted_files_only(tmp_path, monkeypatch, encoder, capsys):
    from hseg.chunking.chunker import HierarchicalChunker
    from hseg.store import HierarchicalStore

    monkeypatch.setattr(factory, "load_encoder", lambda name=None, backend=None, threads=None: encoder)
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "docs" / "tides.txt", TIDES * 3)
    _write(tmp_path / "docs" / "cats.txt", CATS * 3)
    _write(tmp_path / "other" / "moon.md", MOON * 3)
    assert main(["index", "docs", "--db", "db", "--quiet"]) == 0
    assert main(["index", "other", "--db", "db", "--quiet"]) == 0
    store = HierarchicalStore("hseg", path=str((tmp_path / "db").resolve()), encoder=encoder)
    # other writers: an hseg document under docs/ without 'source', and a plain Chroma record
    ghost = HierarchicalChunker(encoder=encoder).chunk("Bread is baked from flour, water and yeast. " * 5,
                                                       doc_id="docs/ghost.md")
    store.add([ghost])
    store.collection.add(ids=["raw-1"], embeddings=[encoder.encode(["a note"])[0].tolist()],
                         documents=["a note of another writer"], metadatas=[{"source": "docs/raw.md"}])
    assert store.doc_ids() == ["docs/cats.txt", "docs/ghost.md", "docs/tides.txt", "other/moon.md"]
    capsys.readouterr()

    def cat_hits() -> list[dict]:
        hits = []
        for unit in ("cluster", "segment"):
            assert main(["query", "Why do cats hunt mice and birds?", "--db", "db", "-k", "10", "--json",
                         "--unit", unit]) == 0
            hits += json.loads(capsys.readouterr().out)
        return hits

    (tmp_path / "docs" / "cats.txt").unlink()
    assert main(["index", "docs", "--db", "db", "--quiet"]) == 0  # without --prune: kept, still found
    assert "pruned" not in capsys.readouterr().out
    assert "docs/cats.txt" in store.doc_ids()
    assert any(h["metadata"]["hseg_doc_id"] == "docs/cats.txt" for h in cat_hits())

    assert main(["index", "docs", "--db", "db", "--quiet", "--prune"]) == 0
    assert "0 indexed, 1 unchanged" in (out := capsys.readouterr().out) and "pruned     1 documents" in out
    assert store.doc_ids() == ["docs/ghost.md", "docs/tides.txt", "other/moon.md"]
    assert store.collection.get(where={"source": "docs/cats.txt"})["ids"] == []
    assert store.collection.get(ids=["raw-1"])["ids"] == ["raw-1"]
    hits = cat_hits()
    assert hits and not any(h["metadata"]["hseg_doc_id"] == "docs/cats.txt" or "Cats" in h["text"] for h in hits)

    assert main(["index", "docs", "--db", "db", "--quiet", "--prune"]) == 0
    assert "pruned     0 documents" in capsys.readouterr().out


@pytest.mark.integration
def test_server_mode_index_query_stats(chroma_server, fake, capsys):
    _write(fake / "docs" / "a.md", TIDES * 3 + CATS * 3)
    _write(fake / "docs" / "b.txt", CATS * 4)
    where = ["--host", chroma_server.host, "--port", str(chroma_server.port), "--collection", "cli-index-test"]
    assert main(["index", "docs", *where, *FAKE]) == 0
    assert "2 indexed" in capsys.readouterr().out
    stats = _stats(capsys, *where)
    assert stats["documents"] == 2 and stats["location"] == f"{chroma_server.host}:{chroma_server.port}"
    assert main(["query", "moon and sea", *where, "--json", "-k", "1"]) == 0
    hit = json.loads(capsys.readouterr().out)[0]
    m = hit["metadata"]
    assert hit["text"] == (fake / m["hseg_doc_id"]).read_text(encoding="utf-8")[m["hseg_start"] : m["hseg_end"]]


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
    _write(fake / "docs" / "a.md", TIDES * 3)
    _write(fake / "docs" / "poison.md", CATS * 3)
    _write(fake / "docs" / "b.md", CATS * 2 + TIDES)
    assert main(["index", "docs", "--db", "db", *FAKE]) == 1
    out, err = capsys.readouterr()
    assert "docs/poison.md: not written" in err
    assert "2 indexed" in out and "1 failed" in out
    col = chromadb.PersistentClient(path=str(fake / "db")).get_collection("hseg")
    sources = {m["source"] for m in col.get(include=["metadatas"])["metadatas"]}
    assert sources == {"docs/a.md", "docs/b.md"}


# --------------------------------------------------------------------------- read-only and full disks (issue 25 item 6)

CHILD = r"""
import sys
sys.path.insert(0, {repo!r})
from hseg.cli import main
from hseg.encoders import factory
from tests.fakes import HashingEncoder

factory.load_encoder = lambda name=None, backend=None, threads=None: HashingEncoder()
sys.exit(main(sys.argv[1:]))
"""

#: run as root, a process ignores file modes unless it gives up these capabilities
NO_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def _as_reader(argv: list[str]) -> list[str]:
    """``argv`` run so that ``chmod a-w`` binds it: as is, or (as root) without root's file overrides."""
    if os.geteuid() != 0:
        return argv
    if shutil.which("setpriv") is None or subprocess.run([*NO_OVERRIDE, "true"]).returncode != 0:
        pytest.skip("running as root, and setpriv cannot drop the capabilities that ignore file modes")
    return [*NO_OVERRIDE, *argv]


def test_a_read_only_store_is_one_clear_line_for_stats_query_and_index(fake, capsys):
    """chromadb 1.5.9 cannot open a PersistentClient it cannot write (it raised InternalError: attempt to
    write a readonly database, a 31-line traceback); the CLI says what it is and how to read the store."""
    _write(fake / "docs" / "tides.md", TIDES * 3)
    assert main(["index", "docs", "--db", "db", *FAKE]) == 0
    script = _write(fake / "child.py", CHILD.format(repo=str(REPO)))
    subprocess.run(["chmod", "-R", "a-w", "db"], check=True)
    try:
        for argv, needles in ((["stats", "--db", "db"], ["the Chroma database at db is read-only", "cp -r db COPY"]),
                              (["query", "tides", "--db", "db"], ["the Chroma database at db is read-only"]),
                              (["index", "docs", "--db", "db", *FAKE], ["db: cannot create the writer lock file",
                                                                         "the store is read-only"])):
            done = subprocess.run(_as_reader([sys.executable, str(script), *argv]), capture_output=True, text=True,
                                  timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
            assert done.returncode == 1, (argv, done.stderr[-3000:])
            _one_line_error(done.stderr, f"hseg {argv[0]}: error: ", *needles)
    finally:
        subprocess.run(["chmod", "-R", "u+w", "db"], check=True)
    with pytest.raises(PermissionError, match="the Chroma database at .* is read-only"):  # the library says so too
        import chromadb.errors

        real = chromadb.PersistentClient
        try:  # the error chromadb raised above, for a path this process may write
            chromadb.PersistentClient = lambda path, **kw: (_ for _ in ()).throw(chromadb.errors.InternalError(
                "error returned from database: (code: 8) attempt to write a readonly database"))
            HierarchicalStore("hseg", path=str(fake / "db"))
        finally:
            chromadb.PersistentClient = real


def test_opening_a_store_only_to_read_it_writes_nothing(fake, capsys):
    """hseg stats and hseg query used to create the unit index of a collection that had none."""
    _write(fake / "docs" / "tides.md", TIDES * 3)
    assert main(["index", "docs", "--db", "db", *FAKE]) == 0
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
        real_usage = shutil.disk_usage
        monkeypatch.setattr(shutil, "disk_usage", lambda path: real_usage(path)._replace(free=0) if self.full
                            else real_usage(path))


def test_a_disk_filling_up_mid_batch_says_how_many_documents_are_written(fake, capsys, monkeypatch):
    """The message counted only the batches that finished ('0 documents were written before it' when
    4 were); now it counts the documents of the failing batch whose records were stored, says the rest
    may be stored too, and names the full disk."""
    from hseg.ingest import run as ingest_run

    monkeypatch.setattr(ingest_run, "WRITE_RETRY_DELAYS", (0.0, 0.0))
    monkeypatch.setattr(HierarchicalStore, "max_batch_size", lambda self: 4)  # about a document a write call
    for i in range(8):
        _write(fake / "docs" / f"d{i}.md", (TIDES if i % 2 else CATS) * (1 + i % 3))
    disk = _DiskFills(monkeypatch, add=2)  # during the 2nd batch
    code = main(["index", "docs", "--db", "db", "--batch-docs", "4", *FAKE])
    err = capsys.readouterr().err
    assert code == 1
    _one_line_error(err, "hseg index: error: writing a batch of 4 documents failed (InternalError: Error in "
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
        _one_line_error(capsys.readouterr().err, f"hseg {argv[0]}: error: the disk of the Chroma database at db is "
                                                 "full, 0 bytes free (InternalError: ", "free space and run again")

    disk.full, disk.freed = False, True  # space freed: the store holds exactly the documents the message counted
    stored = _stats(capsys, "--db", "db")
    assert stored["documents"] == said, (stored, err)
    # the re-run completes the failed batch: its written documents too, whose unit-index records were
    # still to come when the write failed
    assert main(["index", "docs", "--db", "db", "--batch-docs", "4", *FAKE]) == 0
    assert "4 indexed, 4 unchanged" in capsys.readouterr().out
