"""``hseg index`` / ``query`` / ``stats`` end to end: with the real MiniLM (the ``model`` tests share one
index, the model loaded once per session by the ``encoder`` fixture), on a ``chroma run`` server, and
on a read-only store opened by ``hseg`` in a process of its own. The CLI on the hashing encoder,
in-process, is ``tests/store/test_cli_index.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from hseg.cli import main
from hseg.encoders import factory
from hseg.store import HierarchicalStore
from hseg_testing.fakes import FAKE_CLI, HASHING_CLI_CHILD
from tests.store.test_cli_index import CATS, TIDES, one_line_error, stats_json, write_file
from tests.support import REPO

# --------------------------------------------------------------------------- real model


@pytest.fixture(scope="module")
def real_db(tmp_path_factory, encoder):
    """example.md and a tiny file indexed once with the real encoder; cwd is the corpus folder."""
    root = tmp_path_factory.mktemp("cli-index")
    shutil.copy(REPO / "examples" / "data" / "example.md", write_file(root / "docs" / "example.md", ""))
    write_file(root / "docs" / "tiny.txt", TIDES + CATS)
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
    stats = stats_json(capsys, "--db", "db")
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
    assert stats_json(capsys, "--db", "db") == stats
    assert main([*argv, "--force", "--batch-docs", "1"]) == 0  # re-chunked: same ids, same count
    assert "2 indexed" in capsys.readouterr().out
    assert stats_json(capsys, "--db", "db") == stats


MOON = ("The moon orbits the earth once a month. Its phases run from new moon to full moon and back. "
        "Astronauts first walked on the moon in 1969.\n\n")


@pytest.mark.model
def test_prune_end_to_end_forgets_deleted_files_only(tmp_path, monkeypatch, encoder, capsys):
    from hseg.chunking.chunker import HierarchicalChunker
    from hseg.store import HierarchicalStore

    monkeypatch.setattr(factory, "load_encoder", lambda name=None, backend=None, threads=None: encoder)
    monkeypatch.chdir(tmp_path)
    write_file(tmp_path / "docs" / "tides.txt", TIDES * 3)
    write_file(tmp_path / "docs" / "cats.txt", CATS * 3)
    write_file(tmp_path / "other" / "moon.md", MOON * 3)
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
    out = capsys.readouterr().out
    assert "0 indexed, 1 unchanged" in out and "pruned     1 document whose file is gone" in out
    assert store.doc_ids() == ["docs/ghost.md", "docs/tides.txt", "other/moon.md"]
    assert store.collection.get(where={"source": "docs/cats.txt"})["ids"] == []
    assert store.collection.get(ids=["raw-1"])["ids"] == ["raw-1"]
    hits = cat_hits()
    assert hits and not any(h["metadata"]["hseg_doc_id"] == "docs/cats.txt" or "Cats" in h["text"] for h in hits)

    assert main(["index", "docs", "--db", "db", "--quiet", "--prune"]) == 0
    assert "pruned     0 documents" in capsys.readouterr().out


# --------------------------------------------------------------------------- a chroma run server


@pytest.mark.integration
def test_server_mode_index_query_stats(chroma_server, fake, capsys):
    write_file(fake / "docs" / "a.md", TIDES * 3 + CATS * 3)
    write_file(fake / "docs" / "b.txt", CATS * 4)
    where = ["--host", chroma_server.host, "--port", str(chroma_server.port), "--collection", "cli-index-test"]
    assert main(["index", "docs", *where, *FAKE_CLI]) == 0
    assert "2 indexed" in capsys.readouterr().out
    stats = stats_json(capsys, *where)
    assert stats["documents"] == 2 and stats["location"] == f"{chroma_server.host}:{chroma_server.port}"
    assert main(["query", "moon and sea", *where, "--json", "-k", "1"]) == 0
    hit = json.loads(capsys.readouterr().out)[0]
    m = hit["metadata"]
    assert hit["text"] == (fake / m["hseg_doc_id"]).read_text(encoding="utf-8")[m["hseg_start"] : m["hseg_end"]]


# --------------------------------------------------------------------------- read-only disks (issue 25 item 6)

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
    write_file(fake / "docs" / "tides.md", TIDES * 3)
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    script = write_file(fake / "child.py", HASHING_CLI_CHILD.format(repo=str(REPO)))
    subprocess.run(["chmod", "-R", "a-w", "db"], check=True)
    try:
        for argv, needles in ((["stats", "--db", "db"], ["the Chroma database at db is read-only", "cp -r db COPY"]),
                              (["query", "tides", "--db", "db"], ["the Chroma database at db is read-only"]),
                              (["index", "docs", "--db", "db", *FAKE_CLI], ["db: cannot create the writer lock file",
                                                                         "the store is read-only"])):
            done = subprocess.run(_as_reader([sys.executable, str(script), *argv]), capture_output=True, text=True,
                                  timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
            assert done.returncode == 1, (argv, done.stderr[-3000:])
            one_line_error(done.stderr, f"hseg {argv[0]}: error: ", *needles)
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


def _child(script, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(_as_reader([sys.executable, str(script), *argv]), capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})


@pytest.mark.parametrize("read_only", ["folder", "file"])
def test_a_read_only_lexical_folder_is_named_and_a_query_still_answers(fake, capsys, read_only):
    """Issue 47 item 7: with ``db/hseg-lexical`` read-only (its lock file cannot be opened), ``hseg query``
    failed with ``[Errno 13] Permission denied: '.../hseg.sqlite.lock'`` and ``hseg index`` of a new file
    with SQLite's "attempt to write a readonly database", read as Chroma's: "The disk of db is read-only:
    free space first". The Chroma database beside it is writable and the dense side answers: the query
    answers densely with one warning naming the lexical folder, and ``hseg index`` refuses in one line
    naming that folder and the fix."""
    write_file(fake / "docs" / "tides.md", TIDES * 3)
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    script = write_file(fake / "child.py", HASHING_CLI_CHILD.format(repo=str(REPO)))
    folder = fake / "db" / "hseg-lexical"
    write_file(fake / "docs" / "cats.md", CATS * 3)  # a new document: the next index writes
    subprocess.run(["chmod", "-R", "a-w", str(folder)] if read_only == "folder" else
                   ["chmod", "a-w", str(folder / "hseg.sqlite")], check=True)
    try:
        asked = _child(script, ["query", "tides", "--db", "db", "--json"])
        indexed = _child(script, ["index", "docs", "--db", "db", *FAKE_CLI])
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(folder)], check=True)
    assert asked.returncode == 0, asked.stderr[-3000:]
    assert json.loads(asked.stdout)[0]["metadata"]["hseg_doc_id"] == "docs/tides.md"
    if read_only == "folder":  # a file alone read-only is still read: no warning then
        warning = [line for line in asked.stderr.splitlines() if line.startswith("WARNING")]
        assert len(warning) == 1 and f"the lexical index folder {folder} is read-only" in warning[0], asked.stderr
        assert "by the dense side alone" in warning[0]
    assert indexed.returncode == 1, indexed.stderr[-3000:]
    one_line_error(indexed.stderr, f"hseg index: error: the lexical index folder {folder} is read-only",
                   f"chmod -R u+w {folder}")
    assert "Chroma database" not in indexed.stderr and "disk of db" not in indexed.stderr
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0  # writable again: the run completes
    assert "1 indexed, 1 unchanged" in capsys.readouterr().out
