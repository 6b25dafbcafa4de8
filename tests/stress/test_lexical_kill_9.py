"""Reliability of the lexical index (issues 7 and 26): ``hseg index`` killed with ``kill -9`` between
Chroma's write and the lexical rows (both orders), and two writers on one embedded store; the next open
repairs the index (hashing encoder, child processes).

See ``docs/reliability.md``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from hseg.store import HierarchicalStore
from hseg_testing.checks import lexical_disagreement
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import CLI_CHILD as CHILD
from hseg_testing.fakes import FAKE_CLI, HashingEncoder, run_child, synthetic_book
from tests.support import REPO

KILL_AT_LEXICAL = r"""
import os, signal, sys
sys.path.insert(0, {repo!r})
from chromadb.api.models.Collection import Collection
from hseg.encoders import factory
from hseg.cli import main
from hseg.store.lexical import LexicalIndex
from hseg_testing.fakes import HashingEncoder

factory.load_encoder = lambda name=None, backend=None, threads=None: HashingEncoder()
if {at!r} == "rows":
    # kill -9 on the 2nd batch after Chroma's records and the unit index, before the lexical rows
    calls = []
    real_write = LexicalIndex.write

    def write(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_write(self, *args, **kwargs)

    LexicalIndex.write = write
else:
    # kill -9 at the first Chroma delete: a pruned document's rows are gone, its records not
    Collection.delete = lambda self, *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
sys.exit(main(sys.argv[1:]))
"""


def _write_files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def test_kill_9_between_chroma_and_the_lexical_rows_is_repaired_on_the_next_open(tmp_path):
    files = {f"docs/f{i:02d}.md": synthetic_book(1_500 + 41 * i, seed=400 + i) for i in range(8)}
    _write_files(tmp_path, files)
    killer = tmp_path / "kill_at_lexical.py"
    killer.write_text(KILL_AT_LEXICAL.format(repo=str(REPO), at="rows"))
    args = ["index", "docs", "--db", "db", "--batch-docs", "2", *FAKE_CLI]
    crashed = run_child(killer, args, tmp_path)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    left = lexical_disagreement(tmp_path / "db")
    assert left and left[0].startswith("pending") and any(p.startswith("missing row") for p in left)

    # the next open that checks the index (here a hybrid search) re-reads the pending documents
    store = HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=HashingEncoder())
    hits = store.search("river delta flood", budget_tokens=600, unit="auto", lexical_weight=0.3)
    assert hits and all(h.text == files[h.doc_id][h.start:h.end] for h in hits)
    assert lexical_disagreement(tmp_path / "db") == []
    del store
    # and hseg index finishes the run, taking the repaired documents for complete
    plain = tmp_path / "child.py"
    plain.write_text(CHILD.format(repo=str(REPO)))
    rerun = run_child(plain, args, tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "4 indexed, 4 unchanged" in rerun.stdout, rerun.stdout
    assert lexical_disagreement(tmp_path / "db") == []


def test_kill_9_between_the_lexical_delete_and_chromas_is_repaired_and_the_prune_finishes(tmp_path):
    files = {f"docs/f{i}.md": synthetic_book(1_800, seed=500 + i) for i in range(4)}
    _write_files(tmp_path, files)
    plain, killer = tmp_path / "child.py", tmp_path / "kill_at_delete.py"
    plain.write_text(CHILD.format(repo=str(REPO)))
    killer.write_text(KILL_AT_LEXICAL.format(repo=str(REPO), at="delete"))
    args = ["index", "docs", "--db", "db", "--prune", *FAKE_CLI]
    assert run_child(plain, args, tmp_path).returncode == 0
    (tmp_path / "docs/f1.md").unlink()
    crashed = run_child(killer, args, tmp_path)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    left = lexical_disagreement(tmp_path / "db")
    assert left and any(p.startswith("missing row") for p in left)  # the rows went first

    rerun = run_child(plain, args, tmp_path)  # opens, repairs f1's rows, then prunes it for good
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert lexical_disagreement(tmp_path / "db") == []
    store = HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=HashingEncoder())
    assert store.doc_ids() == ["docs/f0.md", "docs/f2.md", "docs/f3.md"]


def test_two_writers_on_one_embedded_store_leave_the_lexical_index_whole(tmp_path):
    """Two ``hseg index`` processes at once (they take turns on the writer lock) and, in one process,
    two threads adding through two store objects (they take turns on the lexical index's lock)."""
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO)))
    files = {f"{part}/f{i}.md": synthetic_book(3_000 + 53 * i, seed=700 + 10 * ord(part) + i)
             for part in ("a", "b") for i in range(6)}
    _write_files(tmp_path, files)
    procs = [subprocess.Popen([sys.executable, str(script), "index", part, "--db", "db", "--batch-docs", "2",
                               *FAKE_CLI], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"}) for part in ("a", "b")]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and "6 indexed" in out, err[-2000:]
    assert lexical_disagreement(tmp_path / "db") == []

    chunker = small_chunker()
    path = str(tmp_path / "db2")
    stores = [HierarchicalStore("hseg", path=path, encoder=HashingEncoder()) for _ in range(2)]
    errors: list[Exception] = []
    texts = {f"t{w}-{i}": synthetic_book(1_500, seed=800 + 10 * w + i) for w in range(2) for i in range(5)}

    def write(w: int) -> None:
        try:
            for i in range(5):
                stores[w].add(chunker.chunk(texts[f"t{w}-{i}"], f"t{w}-{i}"))
                stores[w].search("glacier ice", k=2, unit="auto", lexical_weight=0.5)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and not any(t.is_alive() for t in threads)
    assert lexical_disagreement(tmp_path / "db2") == []
