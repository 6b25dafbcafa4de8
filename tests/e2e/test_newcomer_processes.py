"""What a new user hit (issue 24), in ``hseg`` processes of their own: output into a closed pipe, and
Ctrl-C in the middle of ``hseg index``. The rest, in-process, is ``tests/store/test_newcomer.py``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hseg_testing.fakes import CLI_CHILD as CHILD
from hseg_testing.fakes import FAKE_CLI, stuck_child_report
from tests.store.test_newcomer import write_docs
from tests.support import REPO


def _child(tmp_path: Path) -> Path:
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO)))
    return script


def test_output_into_a_closed_pipe_is_quiet(tmp_path):
    script = _child(tmp_path)
    write_docs(tmp_path)
    subprocess.run([sys.executable, str(script), "index", "docs", "--db", "db", *FAKE_CLI], cwd=tmp_path, check=True,
                   capture_output=True, timeout=300)
    for args in (["stats", "--db", "db"], ["index", "docs", "--db", "db", *FAKE_CLI]):
        proc = subprocess.Popen([sys.executable, str(script), *args], cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        proc.stdout.close()  # as `| head -1` does once it has its line
        err = proc.stderr.read()
        proc.stderr.close()
        assert proc.wait(timeout=300) == 0, err
        assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_ctrl_c_says_what_was_stored_and_that_a_rerun_finishes(tmp_path):
    script = _child(tmp_path)
    files = write_docs(tmp_path, 12)
    proc = subprocess.Popen([sys.executable, str(script), "index", "docs", "--db", "db", "--batch-docs", "2",
                             *FAKE_CLI], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HSEG_TEST_HOLD_AFTER_ADD": "3"})
    try:
        seen = 0
        deadline = time.monotonic() + 120
        while seen < 3 and time.monotonic() < deadline:  # bounded: 6 batches exist
            line = proc.stdout.readline()
            if not line:
                break
            seen += line.startswith("ADD")
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(stuck_child_report(proc))
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted after" in err and "re-run the same command" in err and "Traceback" not in err
    done = int(err.split("interrupted after ")[1].split(" ")[0])
    assert 2 <= done < len(files)
    rerun = subprocess.run([sys.executable, str(script), "index", "docs", "--db", "db", *FAKE_CLI], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0 and "unchanged" in rerun.stdout
