"""``hseg index`` in a process of its own on what an outside attack put in folders and stores (issue 54,
findings 7-10 and 16): a file name that is not UTF-8, a FIFO and a link to ``/dev/zero`` named ``*.md``,
a symlinked writer lock, a store copied below a folder that shares a file name with the one it was
indexed from, and small ones of ``hseg query``. Each is reported in one line, and the good files are indexed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hseg_testing.fakes import FAKE_CLI, HASHING_CLI_CHILD, HashingEncoder, synthetic_book
from tests.support import REPO

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
    from hseg_testing.chunkers import hashing_chunker

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


# --------------------------------------------------------------------------- finding 16, the small ones


def _indexed(tmp_path: Path) -> Path:
    work = tmp_path / "w"
    _good_files(work / "docs")
    done = _hseg(tmp_path, ["index", "docs", "--db", "db", *FAKE_CLI], work)
    assert done.returncode == 0, done.stderr[-3000:]
    return work


def test_a_file_named_hseg_lexical_makes_query_answer_densely_with_one_warning(tmp_path):
    """Was: ``hseg query: error: [Errno 17] File exists: '.../hseg-lexical'`` and no answer."""
    work = _indexed(tmp_path)
    shutil.rmtree(work / "db" / "hseg-lexical")
    (work / "db" / "hseg-lexical").write_text("not a folder")
    done = _hseg(tmp_path, ["query", "tide river sediment", "--db", "db", "-k", "2", "--json"], work)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(json.loads(done.stdout)) == 2
    assert done.stderr.count("WARNING") == 1, done.stderr
    assert "hseg-lexical is a file, not a folder" in done.stderr and "by the dense side alone" in done.stderr


def test_collection_choices_leave_out_the_unit_index(tmp_path):
    """Was: ``(collections there: hseg, hseg_hseg_units)``, the unit index offered as a store to query."""
    work = _indexed(tmp_path)
    done = _hseg(tmp_path, ["query", "tide", "--db", "db", "--collection", "nope"], work)
    assert done.returncode == 1
    assert "(collections there: hseg);" in done.stderr, done.stderr


def test_an_infinite_oversample_is_a_value_error_naming_it(tmp_path):
    """Was: ``OverflowError: cannot convert float infinity to integer`` at the first search."""
    from hseg.store import HierarchicalStore

    for bad in (float("inf"), float("nan"), 0.5):
        with pytest.raises(ValueError, match=r"oversample must be a finite number >= 1, got (inf|nan|0\.5)"):
            HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=HashingEncoder(), oversample=bad)


@posix_only
def test_a_full_disk_says_the_space_root_may_still_write(tmp_path):
    """An ext4 file system (a loop device) filled until no block is left to other users: as root, hseg
    may write into the blocks kept back for root. Was: "full, 0 bytes free" while 1.8 MiB were."""
    from hseg.store.connection import disk_trouble

    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None:
        pytest.skip("needs root and mkfs.ext4 to mount a small ext4 file system")
    image, mnt = tmp_path / "fs.img", tmp_path / "mnt"
    with open(image, "wb") as fh:
        fh.truncate(20 * 2**20)
    mnt.mkdir()
    made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True, text=True)
    mounted = made.returncode == 0 and subprocess.run(["mount", "-o", "loop", str(image), str(mnt)],
                                                      capture_output=True, text=True).returncode == 0
    if not mounted:
        pytest.skip("cannot mount a loop device here")
    try:
        (mnt / "db").mkdir()
        with open(mnt / "filler", "wb") as fh:  # as root: until the blocks left to others are taken
            while os.statvfs(mnt).f_bavail > 0:
                fh.write(b"\0" * 65536)
                fh.flush()
        st = os.statvfs(mnt)
        assert st.f_bavail == 0 < st.f_bfree
        trouble = disk_trouble(str(mnt / "db"), OSError(28, "No space left on device"))
        assert trouble is not None and trouble.startswith("full, ") and trouble.endswith(" free"), trouble
        number, unit = trouble.split()[1:3]
        scale = {"bytes": 1, "KiB": 1024, "MiB": 2**20}[unit]
        root_may_write = st.f_bfree * st.f_frsize
        assert abs(float(number) * scale - root_may_write) <= 0.05 * scale, (trouble, root_may_write)
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
