"""The example notebooks run offline top to bottom (that they are committed without outputs is
``tests/unit/test_notebooks_committed.py``).

Executing them needs the dev packages ``nbclient``, ``nbformat`` and ``ipykernel`` (the kernel is
``python3`` of the interpreter running the tests).
"""

from __future__ import annotations

import pytest

from tests.support import REPO

EXAMPLES = REPO / "examples"


def _stdout(cell: dict) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream"
                   and o.get("name") == "stdout")


def _tagged(nb, tag: str) -> dict:
    cells = [c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"expected one cell tagged {tag!r}"
    return cells[0]


def _execute(name: str, monkeypatch: pytest.MonkeyPatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    # the kernel inherits this environment: nothing may reach a model hub, no Chroma telemetry
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("ANONYMIZED_TELEMETRY", "False")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=300,
        allow_errors=False,
        resources={"metadata": {"path": str(EXAMPLES)}},  # cwd = examples/, as in Jupyter
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not [o for o in cell.outputs if o.output_type == "error"]
    return nb


def _check_retrieval_output(out: str, n_questions: int = 2) -> None:
    assert out.count("Q: ") == n_questions
    assert "score=0." in out
    assert ">>>" in out and "<<<" in out  # the matched record is highlighted
    assert "Galileo" in out


@pytest.mark.model
def test_langchain_notebook_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    nb = _execute("langchain_quickstart.ipynb", monkeypatch)
    _check_retrieval_output(_stdout(_tagged(nb, "retrieval")))
    auto = _stdout(_tagged(nb, "retrieval-auto"))
    _check_retrieval_output(auto)
    assert "unit=auto" in auto
    batch = _stdout(_tagged(nb, "retrieval-batch"))
    assert batch.count("passages, ") == 2  # one line per question: the batch answered both


@pytest.mark.model
def test_llama_index_notebook_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    nb = _execute("llama_index_quickstart.ipynb", monkeypatch)
    _check_retrieval_output(_stdout(_tagged(nb, "retrieval")))
    engine = _stdout(_tagged(nb, "engine"))
    assert "Context information" in engine or "context" in engine.lower()  # MockLLM echoes the QA prompt
    assert "score=0." in engine
