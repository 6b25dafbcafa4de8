"""``hseg chunk`` / ``show`` / ``index`` with stderr a pipe (issue 47 item 11): a large file showed no
progress for minutes when stderr was not a terminal (the only bars counted documents), and the
chunker's tqdm bars filled a ``2>&1`` pipe with carriage returns. Now: lines of ``hseg.progress`` on
stderr every few seconds of long work, none with ``--quiet``, bars only on a terminal. The hashing
encoder in a process of its own; the progress interval set by the test script (0: every line)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hseg_testing.fakes import synthetic_book

REPO = Path(__file__).resolve().parents[2]

#: ``hseg`` on the hashing encoder, the progress interval from TEST_PROGRESS_INTERVAL_S
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


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("progress")
    (folder / "child.py").write_text(CHILD.format(repo=str(REPO)), encoding="utf-8")
    (folder / "big.md").write_text(synthetic_book(120_000), encoding="utf-8")
    return folder


def hseg(work: Path, *args: str, interval: float | None = 0.0, merged: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TEST_PROGRESS_INTERVAL_S"}
    if interval is not None:
        env["TEST_PROGRESS_INTERVAL_S"] = str(interval)
    return subprocess.run([sys.executable, "child.py", *args], cwd=work, env={**env, "HF_HUB_OFFLINE": "1"},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merged else subprocess.PIPE,
                          text=True, timeout=300)


def test_hseg_chunk_with_stderr_a_pipe_shows_progress_lines_and_no_bars(work):
    run = hseg(work, "chunk", "big.md", "--segmenter", "texttiling")
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert "\r" not in run.stderr and all(line.startswith("hseg chunk: ") for line in lines), run.stderr
    said = [line.removeprefix("hseg chunk: ") for line in lines]
    total = int(next(s for s in said if s.startswith("sentences encoded: ")).split(" of ")[1])
    assert total > 1024  # more than one batch: a line for each
    assert "sentences split: 1 of 1 documents" in said
    assert [s for s in said if s.startswith("sentences encoded: ")] == [
        f"sentences encoded: {min(n, total)} of {total}" for n in range(1024, total + 1024, 1024)]
    assert any(s.startswith(f"big.md: {total} sentences segmented into ") for s in said)
    assert any(s.startswith("big.md: ") and " segments clustered into " in s for s in said)
    assert run.stdout.startswith("## big.md\n") and "hseg chunk:" not in run.stdout


def test_2_and_1_into_one_pipe_holds_no_carriage_returns(work):
    run = hseg(work, "chunk", "big.md", "--segmenter", "texttiling", merged=True)
    assert run.returncode == 0 and "\r" not in run.stdout and "it/s" not in run.stdout
    assert "hseg chunk: sentences encoded: " in run.stdout and "## big.md\n" in run.stdout


def test_quiet_and_short_work_show_no_progress(work):
    quiet = hseg(work, "chunk", "big.md", "--segmenter", "texttiling", "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == ""
    # the real interval (5 s): a run shorter than that says nothing
    (work / "small.md").write_text("# Notes\n\nA short text. It has two sentences.\n", encoding="utf-8")
    short = hseg(work, "chunk", "small.md", "--segmenter", "texttiling", interval=None)
    assert short.returncode == 0 and short.stderr == ""


def test_hseg_show_and_index_with_stderr_a_pipe(work):
    show = hseg(work, "show", "big.md", "--segmenter", "texttiling", "--html", "big.html")
    assert show.returncode == 0 and "\r" not in show.stderr
    assert "hseg show: sentences split: 1 of 1 documents" in show.stderr.splitlines()
    index = hseg(work, "index", "big.md", "--db", "db", "--encoder", "test-hashing-encoder",
                 "--segmenter", "texttiling")
    assert index.returncode == 0 and "\r" not in index.stderr, index.stderr
    lines = index.stderr.splitlines()
    assert "hseg index: documents: 1 read, 1 chunked, 1 written, 0 skipped (unchanged, empty or failed) of 1" in lines
    assert any(line.startswith("hseg index: big.md: ") and " segments clustered into " in line for line in lines)
    assert index.stdout.startswith("documents  1 indexed")
    quiet = hseg(work, "index", "big.md", "--db", "db2", "--encoder", "test-hashing-encoder",
                 "--segmenter", "texttiling", "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == ""
