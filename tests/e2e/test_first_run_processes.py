"""What a new user sees of ``hseg index`` and ``hseg query`` in processes of their own (issue 57): the
progress lines end on the counts the summary gives, and a query during an index says indexing is under
way. The hashing encoder in the child; the progress interval set by the test (0: every line)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hseg_testing.fakes import synthetic_book

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import os, sys
sys.path.insert(0, {repo!r})
import hseg.progress
hseg.progress.INTERVAL_S = float(os.environ.get("TEST_PROGRESS_INTERVAL_S", hseg.progress.INTERVAL_S))
from hseg.chunking import chunker
from hseg.cli import main
from hseg.encoders import factory
from hseg_testing.fakes import HashingEncoder

real = chunker.as_encoder
chunker.as_encoder = lambda enc, **kw: HashingEncoder() if enc is None else real(enc, **kw)
factory.load_encoder = lambda name=None, backend=None, threads=None: HashingEncoder()
sys.exit(main(sys.argv[1:]))
"""

FAKE = ("--encoder", "test-hashing-encoder", "--segmenter", "texttiling")


@pytest.fixture
def work(tmp_path):
    (tmp_path / "child.py").write_text(CHILD.format(repo=str(REPO)), encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(4):
        (docs / f"ch{i}.md").write_text(synthetic_book(3_000, seed=i), encoding="utf-8")
    return tmp_path


def hseg(work: Path, *args: str, interval: float | None = 0.0, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TEST_PROGRESS_INTERVAL_S"}
    if interval is not None:
        env["TEST_PROGRESS_INTERVAL_S"] = str(interval)
    return subprocess.run([sys.executable, "child.py", *args], cwd=work, env={**env, "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, timeout=300, **kwargs)


def last_documents_line(stderr: str) -> str:
    return [line for line in stderr.splitlines() if line.startswith("hseg index: documents: ")][-1]


def test_the_progress_lines_end_on_the_counts_of_the_summary(work):
    # issue 57 item 5: the last line said "0 written of 4" and the summary "4 indexed"; a re-run's said
    # "4 written of 4" and its summary "1 indexed, 3 unchanged"
    first = hseg(work, "index", "docs", "--db", "db", *FAKE)
    assert first.returncode == 0, first.stderr
    assert last_documents_line(first.stderr) == \
        "hseg index: documents: 4 read, 4 chunked, 4 written, 0 skipped (unchanged, empty or failed) of 4"
    assert "documents  4 indexed, 0 unchanged" in first.stdout
    (work / "docs" / "ch0.md").write_text(synthetic_book(3_000, seed=9), encoding="utf-8")
    again = hseg(work, "index", "docs", "--db", "db", *FAKE)
    assert again.returncode == 0, again.stderr
    assert last_documents_line(again.stderr) == \
        "hseg index: documents: 4 read, 1 chunked, 1 written, 3 skipped (unchanged, empty or failed) of 4"
    assert "documents  1 indexed, 3 unchanged" in again.stdout


#: a writer that holds the store's writer lock, as ``hseg index`` does for its run: the lock first, the
#: collection (empty) after a line on stdin, then it waits for stdin to close
WRITER = r"""
import sys
sys.path.insert(0, {repo!r})
from hseg.store import HierarchicalStore
from hseg.store.lock import writer_lock
from hseg_testing.fakes import HashingEncoder

with writer_lock(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.readline()
    HierarchicalStore("hseg", path=sys.argv[1], encoder=HashingEncoder())
    print("created", flush=True)
    sys.stdin.read()
"""


def test_a_query_while_the_store_is_being_written_says_so(work):
    # issue 57 item 7: "is empty; run 'hseg index' first" while the writer lock named the indexing process
    (work / "writer.py").write_text(WRITER.format(repo=str(REPO)), encoding="utf-8")
    writer = subprocess.Popen([sys.executable, "writer.py", "db"], cwd=work, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "locked\n"
        before = hseg(work, "query", "tides", "--db", "db")
        assert before.returncode == 1 and before.stderr.count("\n") == 1, before.stderr
        assert f"no index at db; process {writer.pid} is writing to it now" in before.stderr
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.stdout.readline() == "created\n"
        empty = hseg(work, "query", "tides", "--db", "db")
        assert empty.returncode == 1 and empty.stderr.count("\n") == 1, empty.stderr
        assert f"collection 'hseg' at db is empty; process {writer.pid} is writing to it now" in empty.stderr
    finally:
        writer.stdin.close()
        writer.wait(timeout=60)
    after = hseg(work, "query", "tides", "--db", "db")  # the writer gone: what to do next
    assert after.returncode == 1 and "is empty; run 'hseg index' first" in after.stderr, after.stderr


@pytest.mark.model
def test_a_first_run_says_it_exports_the_model_and_draws_no_bar_into_a_pipe(tmp_path):
    # issue 57 item 4: ~20 s of one-time ONNX export went unannounced, and transformers' "Loading weights"
    # bar was drawn into a stderr that is not a terminal
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HSEG_ONNX_CACHE": str(tmp_path / "onnx")}

    def index(db: str) -> subprocess.CompletedProcess:
        example = REPO / "examples" / "data" / "example.md"
        return subprocess.run([sys.executable, "-m", "hseg.cli", "index", str(example), "--db", str(tmp_path / db)],
                              capture_output=True, text=True, env=env, timeout=900)

    first = index("db")
    assert first.returncode == 0, first.stderr[-2000:]
    said = [line for line in first.stderr.splitlines() if " to ONNX in " in line]
    assert len(said) == 2 and said[0].startswith("hseg index: exporting ") and "once per model" in said[0], said
    assert said[1].startswith("hseg index: exported ") and said[1].endswith(" s"), said
    assert "Loading weights" not in first.stderr and "\r" not in first.stderr, first.stderr[-2000:]
    # the summary's seconds hold the model's load and the export, which they left out
    seconds = next(line for line in first.stdout.splitlines() if line.startswith("seconds "))
    assert re.fullmatch(r"seconds +[\d.]+ \(model [\d.]+, of which a one-time ONNX export [\d.]+; reading [\d.]+, "
                        r"chunking [\d.]+, writing [\d.]+\)", seconds), seconds
    again = index("db2")  # the export is cached: nothing to announce
    assert again.returncode == 0 and " to ONNX " not in again.stderr, again.stderr[-2000:]
    seconds = next(line for line in again.stdout.splitlines() if line.startswith("seconds "))
    assert re.fullmatch(r"seconds +[\d.]+ \(model [\d.]+, reading [\d.]+, chunking [\d.]+, writing [\d.]+\)",
                        seconds), seconds


def test_a_budget_smaller_than_the_best_result_is_said(work):
    # issue 57 item 6: --budget-tokens 5 returned a 41-token passage without a word
    assert hseg(work, "index", "docs", "--db", "db", *FAKE).returncode == 0
    small = hseg(work, "query", "orbit", "--db", "db", "--budget-tokens", "5")
    assert small.returncode == 0 and small.stdout.startswith("#1  score"), small.stderr
    tokens = int(small.stdout.split(" tokens;")[0].rsplit(" ", 1)[1])
    assert tokens > 5 and small.stderr == (
        f"hseg query: note: the best result alone ({tokens} tokens) is larger than --budget-tokens 5; a search "
        "returns at least one result, whole (its smallest unit is a segment)\n")
    roomy = hseg(work, "query", "orbit", "--db", "db", "--budget-tokens", "4000")
    assert roomy.returncode == 0 and roomy.stderr == "", roomy.stderr


def test_the_summary_says_what_sources_are_relative_to(work):
    # issue 57 item 11: a store in a subfolder gave sources like '../docs/ch0.md' with no word of why
    done = hseg(work, "index", "docs", "--db", "stores/db", *FAKE)
    assert done.returncode == 0, done.stderr
    assert f"sources    paths relative to {work / 'stores'}, the folder that holds --db" in done.stdout
    hit = hseg(work, "query", "orbit", "--db", "stores/db", "-k", "1")
    assert hit.returncode == 0 and "  ../docs/ch" in hit.stdout, hit.stdout
    unchanged = hseg(work, "index", "docs", "--db", "stores/db", *FAKE)  # nothing new to name
    assert unchanged.returncode == 0 and "sources " not in unchanged.stdout
