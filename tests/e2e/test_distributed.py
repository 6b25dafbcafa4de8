"""hseg.ingest.ray.index_dataset and ``hseg index --ray``: a Ray Data job writing into a Chroma server.

The Ray runs happen in a process of their own (``tests/support/ray_scenarios.py``, one local Ray with 2
CPUs, started once for this module), against the session's ``chroma run`` server; the tests here
check what each run returned and what it wrote. So Ray never enters the pytest process. Most runs
chunk with the bag-of-words ``HashingEncoder``, pickled to the workers; the ``model`` ones load
all-MiniLM-L6-v2 in the worker. What needs no Ray (arguments, starting or joining Ray, the
workers' settings) is ``tests/unit/test_distributed_options.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hseg import ingest
from hseg.chunking.chunker import HierarchicalChunker
from hseg.chunking.schema import INDEXED_AT_KEY
from hseg.cli import main
from hseg.store import HierarchicalStore
from hseg_testing.chunkers import hashing_chunker
from hseg_testing.fakes import HashingEncoder
from tests.support import REPO
from tests.support.ray_scenarios import CATS, PARTIAL_DOC, TIDES, books, fake_settings, model_texts

#: the scenario of tests/support/ray_scenarios.py each test checks (the module's Ray process runs those selected)
SCENARIO_OF = {
    "test_two_workers_write_what_one_process_writes": "two_workers",
    "test_a_killed_worker_is_redone_and_a_rerun_repairs_a_partial_document": "killed",
    "test_a_dataset_without_a_text_column_is_refused": "missing_text",
    "test_a_server_gone_mid_job_fails_the_job_with_a_rerun_hint": "server_gone",
    "test_real_model_records_equal_a_single_process_run": "real_model",
    "test_cli_index_ray_end_to_end": "cli",
}


@pytest.fixture(scope="module")
def ray_runs(request, chroma_server, tmp_path_factory) -> dict[str, Any]:
    """``{scenario: result}`` of the scenarios the selected tests of this module check."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip('Ray is not installed (pip install -e ".[ray]")')
    names = sorted({SCENARIO_OF[item.originalname] for item in request.session.items
                    if item.module is request.module and item.originalname in SCENARIO_OF})
    workdir = tmp_path_factory.mktemp("ray-runs")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    # a bound against a hang only: the scenarios took 4-6 min on a 2-core machine at load 7-11, and ran past 9 min
    # (the old bound) while other jobs kept its load at 16
    proc = subprocess.run([sys.executable, "-m", "tests.support.ray_scenarios", chroma_server.host,
                           str(chroma_server.port), str(workdir), *names], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads((workdir / "results.json").read_text(encoding="utf-8"))


def _result(runs: dict[str, Any], name: str) -> dict[str, Any]:
    result = runs[name]
    assert "exception" not in result, result.get("exception")
    return result


def _summary(fields: dict[str, Any]) -> tuple:
    return fields["documents"], fields["unchanged"], fields["failed"]


def _where(server) -> dict:
    return {"host": server.host, "port": server.port}


def _records(store: HierarchicalStore) -> dict[tuple[str, str], tuple]:
    """``{(kind, id): (metadata, document, embedding)}`` of a collection's records and of its unit index's."""
    out = {}
    for kind, col in (("record", store.collection), ("unit", store._parts.units.collection)):
        got = col.get(include=["metadatas", "documents", "embeddings"])
        for rid, meta, doc, emb in zip(got["ids"], got["metadatas"], got["documents"], got["embeddings"]):
            out[(kind, rid)] = (meta, doc, np.asarray(emb, dtype=np.float64))
    return out


def _assert_same_records(a: HierarchicalStore, b: HierarchicalStore) -> None:
    ra, rb = _records(a), _records(b)
    assert ra and sorted(ra) == sorted(rb)
    for rid in ra:
        # when each run wrote is its own: both stamp it, the rest of the metadata is equal
        ma, mb = dict(ra[rid][0]), dict(rb[rid][0])
        assert (ma.pop(INDEXED_AT_KEY, None) is None) == (mb.pop(INDEXED_AT_KEY, None) is None), rid
        assert ma == mb, rid
        assert ra[rid][1] == rb[rid][1], rid
        np.testing.assert_allclose(ra[rid][2], rb[rid][2], rtol=0, atol=1e-6, err_msg=str(rid))


def _assert_every_doc_complete(store: HierarchicalStore, texts: dict[str, str], settings: str) -> None:
    stored = store.maintenance.records(list(texts))
    units = store._parts.units.segment_ids(list(texts))
    for d, text in texts.items():
        sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
        assert ingest.is_complete(stored.get(d, {}), sha, settings, len(text), units.get(d)), d


def _assert_lexical_agrees(store: HierarchicalStore, *, all_closed: bool) -> None:
    """A client's lexical cache, derived from the server, holds every segment the workers wrote;
    with ``all_closed`` every worker also closed its write in the journal."""
    index = store._parts.lexical
    index.ensure_fresh()
    rows = dict(index.db.rows("SELECT s.id, f.text FROM segments s JOIN fts f ON f.rowid = s.rowid"))
    got = store.collection.get(where={"hseg_level": "segment"}, include=["documents"])
    assert rows == dict(zip(got["ids"], got["documents"]))
    if all_closed:
        assert index.journal.read(since=0.0).opens == []


def _single_process(server, texts: dict[str, str], tmp_path: Path, chunker: HierarchicalChunker,
                    encoder) -> HierarchicalStore:
    """The same documents written by ``hseg.ingest.ingest`` in this process, into a new collection."""
    files = []
    for d, text in texts.items():
        (tmp_path / d).write_text(text, encoding="utf-8")
        files.append(ingest.SourceFile(tmp_path / d, d))
    store = HierarchicalStore(f"single-{uuid.uuid4().hex[:12]}", **_where(server), encoder=encoder)
    summary = ingest.ingest(files, chunker, store)
    assert summary.documents == len(texts) and not summary.failed
    return store


def _fake_chunker() -> HierarchicalChunker:
    return hashing_chunker(segmenter="texttiling")


# --------------------------------------------------------------------------- fake encoder


@pytest.mark.integration
def test_two_workers_write_what_one_process_writes(ray_runs, chroma_server, tmp_path):
    run = _result(ray_runs, "two_workers")
    assert _summary(run["summary"]) == (10, 0, [])
    texts, chunker = books(10), _fake_chunker()
    store = HierarchicalStore(run["collection"], **_where(chroma_server), encoder=chunker.encoder)
    single = _single_process(chroma_server, texts, tmp_path, chunker, chunker.encoder)
    assert store.count() == single.count() == run["summary"]["vectors"]  # no duplicates, nothing missing
    assert sorted(store.collection.get(include=[])["ids"]) == sorted(single.collection.get(include=[])["ids"])
    _assert_every_doc_complete(store, texts, ingest.chunk_settings(chunker))
    _assert_lexical_agrees(store, all_closed=True)
    metas = store.collection.get(include=["metadatas"])["metadatas"]
    assert {(m["source"], m["lang"]) for m in metas} == {(d, "en") for d in texts}  # metadata columns kept


@pytest.mark.integration
def test_a_killed_worker_is_redone_and_a_rerun_repairs_a_partial_document(ray_runs, chroma_server, tmp_path):
    run = _result(ray_runs, "killed")
    assert run["crashed"]  # a worker did exit mid-batch; Ray restarted it and redid its batch
    first = run["first"]
    assert first["documents"] + first["unchanged"] == 8 and first["failed"] == []
    texts, chunker = books(8), _fake_chunker()
    clean = _single_process(chroma_server, texts, tmp_path, chunker, chunker.encoder).count()
    assert run["count_after_crash"] == clean
    # the re-run after a record of PARTIAL_DOC was lost redoes that document only
    assert len(run["lost"]) == 1 and _summary(run["again"]) == (1, 7, [])
    store = HierarchicalStore(run["collection"], **_where(chroma_server), encoder=chunker.encoder)
    assert store.count() == clean and run["lost"][0] in store.collection.get(where={"hseg_doc_id": PARTIAL_DOC})["ids"]
    _assert_every_doc_complete(store, texts, ingest.chunk_settings(chunker))
    _assert_lexical_agrees(store, all_closed=False)  # the killed worker's write stays open: its documents re-read


@pytest.mark.integration
def test_a_worker_writes_metadata_columns_and_fails_rows_without_text_or_with_a_repeated_id(chroma_server):
    from hseg.chunking.config import ChunkerConfig
    from hseg.ingest.ray import IndexWorker, _summary_from_row

    # one worker in this process, as a Ray actor holds it; a numpy batch, as Ray Data hands it
    collection = f"worker-{uuid.uuid4().hex[:12]}"
    worker = IndexWorker(ChunkerConfig(**fake_settings()), **_where(chroma_server), collection=collection)
    batch = {"id": np.array(["a", "b", "a"], dtype=object), "text": np.array([TIDES * 3, None, CATS * 3], dtype=object),
             "lang": np.array(["en", None, "fr"], dtype=object), "year": np.array([np.nan, 2025.0, 2026.0])}
    row = worker(batch)
    assert row["error"] == [""] and row["started"][0] <= row["finished"][0]
    summary = _summary_from_row(row["summary"][0])
    assert summary.documents == 1 and summary.vectors > 0
    assert summary.failed == [("b", "text must be a string, got NoneType"),
                              ("a", "the id is given twice in the dataset; indexed once")]
    store = HierarchicalStore(collection, **_where(chroma_server), encoder=HashingEncoder())
    metas = store.collection.get(include=["metadatas"])["metadatas"]
    assert len(metas) == summary.vectors
    assert {(m["source"], m["lang"], m.get("year")) for m in metas} == {("a", "en", None)}  # NaN: missing
    assert "".join(r.document for r in store.get_records("a") if r.metadata["hseg_level"] == "segment") == TIDES * 3


@pytest.mark.integration
def test_a_dataset_without_a_text_column_is_refused(ray_runs):
    assert "needs the columns 'id' and 'text'" in (_result(ray_runs, "missing_text")["error"] or "")


@pytest.mark.integration
def test_a_server_gone_mid_job_fails_the_job_with_a_rerun_hint(ray_runs):
    error = _result(ray_runs, "server_gone")["error"] or ""
    assert "writing a batch of 2 documents failed (ServerUnreachableError: Chroma server at " in error
    assert error.endswith("0 documents were written by batches that finished; re-run the same job to complete the rest")


# --------------------------------------------------------------------------- real model


@pytest.mark.model
@pytest.mark.integration
def test_real_model_records_equal_a_single_process_run(ray_runs, chroma_server, tmp_path, encoder):
    run = _result(ray_runs, "real_model")
    assert _summary(run["summary"]) == (3, 0, [])
    store = HierarchicalStore(run["collection"], **_where(chroma_server), encoder=encoder)
    single = _single_process(chroma_server, model_texts(), tmp_path, HierarchicalChunker(encoder=encoder), encoder)
    _assert_same_records(store, single)
    assert run["summary"]["vectors"] == store.count()


@pytest.mark.model
@pytest.mark.integration
def test_cli_index_ray_end_to_end(ray_runs, chroma_server):
    # in a process already connected to a Ray the command uses it and leaves it running; how it
    # starts or joins one otherwise is test_the_cli_starts_a_local_ray_or_joins_a_cluster
    run = _result(ray_runs, "cli")
    first, again = run["first"], run["again"]
    assert first["code"] == 1  # the binary file failed, as without --ray
    assert "documents  2 indexed, 0 unchanged (skipped), 1 failed" in first["out"]
    assert "docs/binary.md" in first["err"] and "binary" in first["err"]
    lines = {line.split()[0]: line for line in first["out"].splitlines()}
    vectors = int(lines["vectors"].split()[1])
    assert vectors > 0 and lines["vectors"].endswith(f"'cli-ray' at {chroma_server.host}:{chroma_server.port} "
                                                     f"holds {vectors}")
    assert again["code"] == 0  # a re-run skips everything
    assert "documents  0 indexed, 2 unchanged (skipped), 0 failed" in again["out"]
    assert f"holds {vectors}" in again["out"]
    assert run["ray_still_up"]


#: what Ray's loggers print: its C++ core ("[... E 123 123] core_worker.cc:2465: ..."), its Python
#: loggers ("2026-01-01 10:00:00,000\tINFO worker.py:2038 -- ..."), the output of its workers and
#: daemons forwarded to the driver ("(raylet) ...", "(MapWorker(...) pid=123) ...") and Ray Data's
#: progress, logged line by line when stderr is not a terminal ("Running Dataset", "Total Progress")
RAY_LINE = re.compile(r"\.(cc|h):\d+:|\b(DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\S+\.py:\d+ --|^\(\S[^)]*\) "
                      r"|Started a local Ray instance|Running Dataset|Total Progress|ray-data|token auth",
                      re.IGNORECASE)


@pytest.mark.model
@pytest.mark.integration
def test_ray_quiet_prints_no_ray_log_lines_and_still_reports_failed_files(chroma_server, tmp_path):
    # issue 24, item 9: with --quiet, Ray printed its own log lines (one at error level, from the C++
    # core, that read like a failure). Run as a user does: the command in a process of its own that
    # starts and stops its local Ray (this is what writes to the terminal), stdout and stderr kept apart.
    if importlib.util.find_spec("ray") is None:
        pytest.skip('Ray is not installed (pip install -e ".[ray]")')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "tides.txt").write_text(TIDES * 3, encoding="utf-8")
    (tmp_path / "docs" / "cats.md").write_text(CATS * 3, encoding="utf-8")
    (tmp_path / "docs" / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    collection = f"quiet-{uuid.uuid4().hex[:12]}"
    where = ["--host", chroma_server.host, "--port", str(chroma_server.port), "--collection", collection]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    for name in ("RAY_BACKEND_LOG_LEVEL", "RAY_DATA_LOG_LEVEL", "RAY_LOG_TO_DRIVER"):  # Ray's defaults, as a user has
        env.pop(name, None)
    # generous: a local Ray's start, a worker loading the model and the shutdown, on a busy machine
    done = subprocess.run([sys.executable, "-m", "hseg.cli", "index", "docs", *where, "--ray", "--workers", "1",
                           "--quiet"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=480)
    ray_lines = [line for line in (done.stdout + done.stderr).splitlines() if RAY_LINE.search(line)]
    assert ray_lines == [], done.stderr
    # hseg's own lines still reach the terminal: the file that failed, and the summary
    assert done.returncode == 1, done.stderr  # the binary file failed, as without --ray
    err_lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(err_lines) == 1 and "docs/binary.md" in err_lines[0], done.stderr
    assert "documents  2 indexed, 0 unchanged (skipped), 1 failed" in done.stdout
    # and what the workers wrote is complete
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["stats", *where]) == 0
    assert "complete   all 2 documents" in out.getvalue()


# --------------------------------------------------------------------------- no Ray needed


def test_importing_hseg_and_its_cli_never_imports_ray():
    code = ("import sys, hseg, hseg.cli, hseg.ingest, hseg.ingest.ray, hseg.cli.index_ray; "
            "hseg.cli.build_parser(); "
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    # a bound against a hang only, so generous: a busy machine stretches a fresh interpreter's imports
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
