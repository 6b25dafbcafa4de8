"""``hseg index`` in a process of its own on what an outside attack put in folders and stores (issue 54,
findings 7-10 and 16): a file name that is not UTF-8, a FIFO and a link to ``/dev/zero`` named ``*.md``,
a symlinked writer lock, a store copied below a folder that shares a file name with the one it was
indexed from, and small ones of ``hseg query``. Each is reported in one line, and the good files are indexed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.fakes import FAKE_CLI, HASHING_CLI_CHILD, synthetic_book

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
posix_only = pytest.mark.skipif(os.name != "posix", reason="FIFOs, devices and byte file names are POSIX's")


def _hseg(tmp_path: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "cli.py"
    if not script.exists():
        script.write_text(HASHING_CLI_CHILD.format(repo=str(REPO)))
    # the timeout is a guard against the hang the FIFO caused, not a measure
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=ENV)


def _good_files(folder: Path, n: int = 3) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"good{i}.md").write_text(synthetic_book(1_500, seed=i), encoding="utf-8")


@posix_only
def test_a_file_name_that_is_not_utf8_is_skipped_and_the_others_indexed(tmp_path):
    """Was: a traceback (Chroma's "Invalid where clause" on the id) and nothing indexed."""
    work = tmp_path / "w"
    _good_files(work / "docs")
    with open(os.path.join(os.fsencode(work / "docs"), b"caf\xe9.md"), "w", encoding="utf-8") as fh:
        fh.write(synthetic_book(1_500, seed=9))
    done = _hseg(tmp_path, ["index", "docs", "--db", "db", *FAKE_CLI], work)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "documents  3 indexed, 0 unchanged (skipped), 1 failed" in done.stdout, done.stdout
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "docs/caf\\xe9.md: its name is not valid UTF-8" in done.stderr, done.stderr


@posix_only
def test_a_fifo_and_a_link_to_dev_zero_named_md_are_skipped_and_the_others_indexed(tmp_path):
    """Was: the FIFO hung ``hseg index`` (opening it waits for a writer); the link to ``/dev/zero`` read
    until memory ran out."""
    work = tmp_path / "w"
    _good_files(work / "docs")
    os.mkfifo(work / "docs" / "pipe.md")
    os.symlink("/dev/zero", work / "docs" / "zero.md")
    done = _hseg(tmp_path, ["index", "docs", "--db", "db", *FAKE_CLI], work)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "documents  3 indexed, 0 unchanged (skipped), 2 failed" in done.stdout, done.stdout
    assert "docs/pipe.md: a FIFO, not a regular file: skipped" in done.stderr, done.stderr
    assert "docs/zero.md: a character device, not a regular file: skipped" in done.stderr, done.stderr


@posix_only
def test_a_symlinked_writer_lock_is_refused_and_its_target_left_alone(tmp_path):
    """Was: ``hseg index`` and ``store.add`` followed the link and truncated its target to their pid."""
    from hseg.errors import DatabaseStorageError
    from hseg.store import HierarchicalStore
    from hseg.store.lock import LOCK_NAME
    from tests.support.chunkers import hashing_chunker

    work = tmp_path / "w"
    _good_files(work / "docs")
    victim = tmp_path / "precious.txt"
    victim.write_text("a file outside the store\n")
    (work / "db").mkdir()
    os.symlink(victim, work / "db" / LOCK_NAME)
    done = _hseg(tmp_path, ["index", "docs", "--db", "db", *FAKE_CLI], work)
    assert done.returncode == 1, done.stderr[-3000:]
    assert f"db/{LOCK_NAME} is a symbolic link (to {victim})" in done.stderr, done.stderr
    assert "rm db/" in done.stderr and "Traceback" not in done.stderr, done.stderr
    chunker = hashing_chunker(segmenter="texttiling")
    store = HierarchicalStore("hseg", path=str(work / "db"), encoder=chunker.encoder)
    with pytest.raises(DatabaseStorageError, match="is a symbolic link"):
        store.add(chunker.chunk(synthetic_book(1_500, seed=5), "lib.md"))
    assert victim.read_text() == "a file outside the store\n"


def test_a_store_copied_below_a_folder_with_a_file_of_a_stored_name_is_still_refused(tmp_path):
    """The copied-store guard (``hseg.ingest.relocation``) with a ``README.md`` at both levels. Was: the
    stored id ``README.md`` named ``sub/README.md``, the guard stood down, and every document was stored
    twice."""
    import chromadb

    proj = tmp_path / "proj"
    _good_files(proj / "docs")
    (proj / "README.md").write_text(synthetic_book(800, seed=20), encoding="utf-8")
    done = _hseg(tmp_path, ["index", "README.md", "docs", "--db", "db", *FAKE_CLI], proj)
    assert done.returncode == 0 and "4 indexed" in done.stdout, done.stderr[-3000:]
    shutil.copytree(proj / "db", proj / "sub" / "copydb")
    (proj / "sub" / "README.md").write_text(synthetic_book(800, seed=21), encoding="utf-8")  # another readme
    held = chromadb.PersistentClient(path=str(proj / "sub" / "copydb")).get_collection("hseg").count()
    done = _hseg(tmp_path, ["index", "docs", "--db", "sub/copydb", *FAKE_CLI], proj)
    assert done.returncode == 1, (done.stdout, done.stderr[-3000:])
    assert "the store was copied or moved to another depth" in done.stderr, done.stderr
    assert f"mv sub/copydb {proj}/" in done.stderr, done.stderr
    assert chromadb.PersistentClient(path=str(proj / "sub" / "copydb")).get_collection("hseg").count() == held
