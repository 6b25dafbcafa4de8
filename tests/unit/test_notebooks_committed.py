"""The example notebooks are committed without outputs (running them offline, top to bottom, is
``tests/e2e/test_notebooks.py``)."""

from __future__ import annotations

import json

import pytest

from tests.support import REPO

EXAMPLES = REPO / "examples"
NOTEBOOKS = ["langchain_quickstart.ipynb", "llama_index_quickstart.ipynb"]


def _load_json(name: str) -> dict:
    return json.loads((EXAMPLES / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_committed_without_outputs(name: str) -> None:
    nb = _load_json(name)
    assert nb["nbformat"] == 4
    assert nb["metadata"].get("kernelspec", {}).get("name") == "python3"
    assert set(nb["metadata"]) <= {"kernelspec", "language_info"}, "notebook metadata left over from a run"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, "no code cells"
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        assert cell.get("outputs") == [], f"{name} cell {i} has outputs: clear them before committing"
        assert cell.get("execution_count") is None, f"{name} cell {i} has an execution count"
        assert "execution" not in cell.get("metadata", {}), f"{name} cell {i} has execution timing metadata"
