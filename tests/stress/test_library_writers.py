"""Nothing lost (issue 47, items 1 and 2): every hseg writer of an embedded store takes turns on one
lock, the library's as well as ``hseg index``'s, and a lock whose file is deleted still holds.

Before, ``HierarchicalStore.add`` took no lock: two library writers (or one beside ``hseg index``) on
one embedded store both exited 0 and left hundreds of records without a vector, and ``hseg stats``
called every document complete; deleting ``<db>/hseg-writer.lock`` let a second writer in.

The checks in one process are ``tests/store/test_library_writers.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.retrieval.unit_vectors import companion_name
from hseg.store import HierarchicalStore
from hseg.store.lock import LOCK_NAME, WriterBusyError, writer_lock
from hseg_testing.fakes import FAKE_CLI, HASHING_CLI_CHILD, HashingEncoder, synthetic_book
from tests.support import REPO

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}

#: a library writer: the files of a folder, 4 documents per ``add``, ids as ``hseg index`` names them;
#: it starts writing when told (a line on stdin), so that two writers overlap
LIBRARY = r"""
import sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from hseg.chunking.chunker import HierarchicalChunker
from hseg.store import HierarchicalStore
from hseg_testing.fakes import HashingEncoder

db, folder = sys.argv[1], sys.argv[2]
enc = HashingEncoder()
store = HierarchicalStore("hseg", path=db, encoder=enc)
chunker = HierarchicalChunker(encoder=enc, segmenter="texttiling")
files = sorted(Path(folder).glob("*.md"))
print("ready", flush=True)
sys.stdin.readline()
for i in range(0, len(files), 4):
    ids = [p.as_posix() for p in files[i : i + 4]]
    store.add(chunker.chunk_many([Path(d).read_text(encoding="utf-8") for d in ids], ids),
              [{{"source": d}} for d in ids])
print("written", len(files), flush=True)
"""


def _corpus(work: Path, trial: int) -> set[str]:
    """20 files of ~20 KB in each of a/ and b/ (over 1,000 records a writer: Chroma saves its vector
    index from memory past its sync threshold, which is when unserialised writers overwrite each
    other's), and seed.md; returns their document ids."""
    files = {f"{part}/f{i}.md": synthetic_book(20_000 + 97 * i, seed=1000 * trial + 100 * ord(part[0]) + i)
             for part in ("a", "b") for i in range(20)}
    files["seed.md"] = synthetic_book(3_000, seed=trial)
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text, encoding="utf-8")
    return set(files)


def _script(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text.format(repo=str(REPO)))
    return path


def _cli(script: Path, args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(script), *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)


def _library(script: Path, folder: str, cwd: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(script), "db", folder], cwd=cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdout is not None
    ready = proc.stdout.readline().strip()
    assert ready == "ready", proc.communicate(timeout=60)[1][-2000:]
    return proc


def _go(*procs: subprocess.Popen) -> None:
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
    return proc.returncode, out, err


def _seed(cli: Path, work: Path) -> None:
    done = subprocess.run([sys.executable, str(cli), "index", "seed.md", "--db", "db", *FAKE_CLI], cwd=work,
                          capture_output=True, text=True, timeout=300, env=ENV)
    assert done.returncode == 0, done.stderr[-2000:]


def _vectorless(db: Path) -> dict[str, int]:
    """Records without a vector, per collection (the store's and its unit index), read through a
    client opened after the writers finished (in a process of its own: this one's clients are cached)."""
    code = ("import json, sys, chromadb\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "from hseg.store.paging import ids_without_vectors\n"
            f"client = chromadb.PersistentClient(path={str(db)!r})\n"
            "out = {}\n"
            f"for name in ('hseg', {companion_name('hseg')!r}):\n"
            "    col = client.get_collection(name)\n"
            "    out[name] = len(ids_without_vectors(col, col.get(include=[])['ids']))\n"
            "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _stats(cli: Path, work: Path) -> dict:
    done = subprocess.run([sys.executable, str(cli), "stats", "--db", "db", "--json"], cwd=work,
                          capture_output=True, text=True, timeout=300, env=ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _check_whole(cli: Path, work: Path, docs: set[str], results: list[tuple[int, str, str]]) -> None:
    for rc, _, err in results:
        assert rc == 0, err[-2000:]
    assert _vectorless(work / "db") == {"hseg": 0, companion_name("hseg"): 0}
    stats = _stats(cli, work)
    assert (stats["documents"], stats["documents_complete"], stats["documents_incomplete"]) == (len(docs), len(docs), 0)
    assert stats["records_without_vectors"] == 0


def test_two_library_writers_on_one_embedded_store_lose_no_vector(tmp_path):
    """Two processes each adding 20 documents of ~20 KB (4 per ``add``) to one ``path=`` store. Was:
    both exited 0, 671-698 records and 223-240 unit-index records without a vector, and ``hseg stats``
    said "complete all 41 documents" (3 of 3 runs)."""
    cli, lib = _script(tmp_path, "cli.py", HASHING_CLI_CHILD), _script(tmp_path, "library.py", LIBRARY)
    work = tmp_path / "w"
    docs = _corpus(work, 0)
    _seed(cli, work)
    writers = [_library(lib, part, work) for part in ("a", "b")]
    _go(*writers)
    results = [_finish(p) for p in writers]
    for _, out, _ in results:
        assert "written 20" in out, out
    _check_whole(cli, work, docs, results)


def test_hseg_index_beside_a_library_writer_loses_no_vector(tmp_path):
    """``hseg index`` took the lock and the library did not: the library's writes went in between."""
    cli, lib = _script(tmp_path, "cli.py", HASHING_CLI_CHILD), _script(tmp_path, "library.py", LIBRARY)
    work = tmp_path / "w"
    docs = _corpus(work, 1)
    _seed(cli, work)
    library = _library(lib, "b", work)
    index = _cli(cli, ["index", "a", "--db", "db", "--batch-docs", "4", *FAKE_CLI], work)
    _go(library)
    results = [_finish(index), _finish(library)]
    assert "20 indexed" in results[0][1], results[0][1]
    assert "written 20" in results[1][1], results[1][1]
    _check_whole(cli, work, docs, results)


#: holds the writer lock of a store until its stdin closes
HOLDER = r"""
import sys
sys.path.insert(0, {repo!r})
from hseg.store.lock import writer_lock

with writer_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_lock_whose_file_is_deleted_still_keeps_a_second_writer_out(tmp_path):
    """Removing ``hseg-writer.lock`` while its holder writes must not let another writer in: neither
    one asking for the lock nor a library ``add``, which waits and then raises a catchable error."""
    db = tmp_path / "db"
    enc = HashingEncoder()
    store = HierarchicalStore("hseg", path=str(db), encoder=enc, lock_timeout=0.5)
    chunking = HierarchicalChunker(encoder=enc, segmenter="texttiling").chunk(synthetic_book(2_000, seed=1), "x.md")
    holder = subprocess.Popen([sys.executable, str(_script(tmp_path, "holder.py", HOLDER)), str(db)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        (db / LOCK_NAME).unlink()
        with pytest.raises(WriterBusyError, match="is writing to this store"):
            with writer_lock(db, timeout_s=0.5):
                pass
        with pytest.raises(WriterBusyError, match="is writing to this store"):
            store.add(chunking)
        assert store.count() == 0
    finally:
        holder.communicate(timeout=60)  # closes its stdin: it lets go
    assert store.add(chunking) > 0  # and the lock is free again


def test_deleting_the_lock_file_under_hseg_index_lets_no_second_writer_in(tmp_path):
    """The finding itself: ``hseg index`` writing, its lock file deleted, a second ``hseg index``
    started. Was: the second went straight in, vectors were lost, both exited 0."""
    cli = _script(tmp_path, "cli.py", HASHING_CLI_CHILD)
    work = tmp_path / "w"
    docs = _corpus(work, 2)
    _seed(cli, work)
    first = _cli(cli, ["index", "a", "--db", "db", "--batch-docs", "4", *FAKE_CLI], work)
    lock, deadline = work / "db" / LOCK_NAME, time.monotonic() + 120
    while not (lock.exists() and lock.read_text().strip() == str(first.pid)):  # the first holds the lock
        assert first.poll() is None and time.monotonic() < deadline, "the first writer never took the lock"
        time.sleep(0.05)
    lock.unlink()
    second = _cli(cli, ["index", "b", "--db", "db", "--batch-docs", "4", *FAKE_CLI], work)
    results = [_finish(first), _finish(second)]
    assert "20 indexed" in results[0][1] and "20 indexed" in results[1][1], results
    assert "waiting for another process" in results[1][2], results[1][2]  # it waited its turn
    _check_whole(cli, work, docs, results)
