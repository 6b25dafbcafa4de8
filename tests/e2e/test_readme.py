"""The README's shell commands run as written (the installs aside, which CI has just done); that its
test command is CI's is ``tests/unit/test_readme_test_command.py``."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO
from tests.unit.test_readme_test_command import BLOCKS, runnable


def _bin_path() -> str:
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


@pytest.mark.model
def test_setup_command_indexes_and_answers(tmp_path):
    setup = next(b for b in BLOCKS if "hseg index examples/data/example.md" in b)
    command = runnable(setup).replace(".hseg-db", shlex.quote(str(tmp_path / "db")))
    done = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PATH": _bin_path()})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "documents  1 indexed" in done.stdout and "#1  score" in done.stdout
    assert "Jupiter" in done.stdout  # Galileo's moons: the answer is in the top 3


def test_notebook_command_names_the_notebooks_and_its_tool_is_installed():
    command = next(b for b in BLOCKS if "nbconvert" in b)
    assert "examples/*.ipynb" in command
    found = subprocess.run([sys.executable, "-m", "nbconvert", "--version"], capture_output=True, text=True)
    assert found.returncode == 0, "the dev extra must install nbconvert"
