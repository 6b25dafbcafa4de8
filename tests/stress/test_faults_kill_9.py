"""Reliability (issue 7), faults: ``hseg index`` killed with ``kill -9`` mid-batch and between its
upserts and its deletes, then run again; every stored document is whole (hashing encoder, child
processes on an embedded store).

The in-process faults are ``tests/store/test_faults.py``. See ``docs/reliability.md``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import chromadb

from hseg.retrieval.unit_vectors import UnitKey, companion_name
from hseg_testing.checks import document_problems, expected_records, stored_documents
from hseg_testing.fakes import CLI_CHILD as CHILD
from hseg_testing.fakes import FAKE_CLI, run_child, synthetic_book
from tests.support import REPO


def _unit_index_documents(companion) -> dict[str, set[str]]:
    """``{doc id: segment ids}`` the unit index (companion collection) holds."""
    got = companion.get(include=["metadatas"])
    out: dict[str, set[str]] = {}
    for uid, meta in zip(got["ids"], got["metadatas"]):
        out.setdefault(str(meta["hseg_doc_id"]), set()).add(UnitKey.parse(uid).segment_id)
    return out


def test_kill_9_mid_batch_leaves_complete_documents_and_a_rerun_finishes(tmp_path):
    files = {f"docs/f{i:03d}.md": synthetic_book(1_500 + 37 * i, seed=i) for i in range(60)}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO)))
    args = ["index", "docs", "--db", "db", "--batch-docs", "4", *FAKE_CLI]

    proc = subprocess.Popen([sys.executable, str(script), *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "HSEG_TEST_HOLD_AFTER_ADD": "6"})
    try:
        seen = 0
        deadline = time.monotonic() + 120
        while seen < 6 and time.monotonic() < deadline:  # bounded: at most 15 batches exist
            line = proc.stdout.readline()
            if not line:
                break
            seen += line.startswith("ADD")
        time.sleep(0.003)  # into the 6th write
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
    assert seen == 6, "the indexer did not reach its 6th batch"
    assert proc.returncode == -signal.SIGKILL

    # the store as the crash left it (a copy: opened by this process only)
    shutil.copytree(tmp_path / "db", tmp_path / "crashed")
    crashed_client = chromadb.PersistentClient(path=str(tmp_path / "crashed"))
    crashed = stored_documents(crashed_client.get_collection("hseg"))
    assert 5 * 4 <= len(crashed) <= 6 * 4 < len(files)  # 5 batches done, the 6th all or nothing
    for doc_id, records in crashed.items():
        assert document_problems(records, files[doc_id]) == [], doc_id
    # The kill may land between the 6th batch's records and its unit-index records: those documents
    # are then incomplete (the re-run must redo them), so what is "unchanged" is whatever is complete
    # with its unit-index rows too: the 5 whole batches at least.
    units = _unit_index_documents(crashed_client.get_collection(companion_name("hseg")))
    complete = {d for d, records in crashed.items()
                if units.get(d) == {rid for rid, r in records.items() if r["meta"]["hseg_level"] == "segment"}}
    assert 5 * 4 <= len(complete) <= len(crashed), (len(complete), len(crashed))

    rerun = run_child(script, args, tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"{len(files) - len(complete)} indexed, {len(complete)} unchanged" in rerun.stdout
    col = chromadb.PersistentClient(path=str(tmp_path / "db")).get_collection("hseg")
    final = stored_documents(col)
    assert set(final) == set(files)
    for doc_id, records in final.items():
        assert document_problems(records, files[doc_id]) == [], doc_id
    assert col.count() == expected_records(files)  # exactly a clean run's records: no duplicates


KILL_AT_DELETE = r"""
import os, signal, sys
sys.path.insert(0, {repo!r})
from chromadb.api.models.Collection import Collection
from hseg import ingest
from hseg.encoders import factory
from hseg.cli import main
from hseg_testing.fakes import HashingEncoder

factory.load_encoder = lambda name=None, backend=None, threads=None: HashingEncoder()
# kill -9 after the upserts of a changed document, before its stale records are deleted
Collection.delete = lambda self, *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
sys.exit(main(sys.argv[1:]))
"""


def test_kill_9_between_upserts_and_stale_deletes_and_a_rerun_cleans_up(tmp_path):
    files = {"docs/a.md": synthetic_book(3_000, seed=11), "docs/b.md": synthetic_book(2_000, seed=12)}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    plain, killer = tmp_path / "child.py", tmp_path / "kill_at_delete.py"
    plain.write_text(CHILD.format(repo=str(REPO)))
    killer.write_text(KILL_AT_DELETE.format(repo=str(REPO)))
    args = ["index", "docs", "--db", "db", *FAKE_CLI]
    assert run_child(plain, args, tmp_path).returncode == 0

    files["docs/a.md"] = synthetic_book(2_500, seed=13)  # a new version: other spans, other ids
    (tmp_path / "docs/a.md").write_text(files["docs/a.md"], encoding="utf-8")
    crashed = run_child(killer, args, tmp_path)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    shutil.copytree(tmp_path / "db", tmp_path / "crashed")  # opened by this process only
    left = stored_documents(chromadb.PersistentClient(path=str(tmp_path / "crashed")).get_collection("hseg"))
    assert document_problems(left["docs/a.md"], files["docs/a.md"]) != []  # both versions of a.md
    assert sum(map(len, left.values())) > expected_records(files)

    rerun = run_child(plain, args, tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "1 indexed, 1 unchanged" in rerun.stdout  # a.md is not taken for unchanged
    col = chromadb.PersistentClient(path=str(tmp_path / "db")).get_collection("hseg")
    final = stored_documents(col)
    assert all(document_problems(final[d], files[d]) == [] for d in files)
    assert col.count() == expected_records(files)  # the old version's records are gone
