"""The README's shell commands run as written (the installs aside, which CI has just done), and so do
the Python examples of the README and of ``docs/api.md`` that use the example document; that the
README's test command is CI's is ``tests/unit/test_readme_test_command.py``."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO
from tests.unit.test_readme_test_command import BLOCKS, runnable

#: (document, first line, code) of each Python example that runs on examples/data/example.md
EXAMPLES = [(doc, code.splitlines()[0], code)
            for doc in ("README.md", "docs/api.md")
            for code in re.findall(r"```python\n(.*?)```", (REPO / doc).read_text(encoding="utf-8"), re.S)
            if "examples/data/example.md" in code]


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


def test_the_documents_have_their_examples():
    assert [doc for doc, _, _ in EXAMPLES].count("README.md") >= 3  # LangChain, LlamaIndex, the core
    assert any(doc == "docs/api.md" for doc, _, _ in EXAMPLES)


@pytest.mark.model
@pytest.mark.parametrize("doc,first,code", EXAMPLES, ids=[f"{d}:{i}" for i, (d, _, _) in enumerate(EXAMPLES)])
def test_python_example_runs_as_written(doc, first, code, tmp_path):
    """Each in a fresh process and folder, as a reader would paste it (``./chroma-db`` is created there)."""
    (tmp_path / "examples" / "data").mkdir(parents=True)
    shutil.copy(REPO / "examples" / "data" / "example.md", tmp_path / "examples" / "data" / "example.md")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{doc}, the example starting {first!r}:\n{done.stderr[-2000:]}"
