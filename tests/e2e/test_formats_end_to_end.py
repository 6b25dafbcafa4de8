"""A folder of the documents users keep (issue 53): markdown, HTML, DOCX, PPTX and PDF, written in the test,
indexed by ``hseg index`` in a process of its own with the real all-MiniLM-L6-v2 into an embedded Chroma;
``hseg query`` then finds a fact from each file, its hit naming the file (and, for the PDF and the
presentation, the page or slide the fact is on). The converters import no torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.harness.documents import Block, write
from hseg.chunking.schema import PAGE_END_KEY, PAGE_START_KEY
from hseg.cli import main
from hseg.encoders import factory
from tests.support import REPO

pytest.importorskip("pypdf")
pytest.importorskip("docx")
pytest.importorskip("pptx")
pytest.importorskip("markdownify")
pytest.importorskip("fpdf")

#: per file: (the question, the fact that answers it, the page or slide it is on; None: a format without pages)
FACTS = {
    "notes.md": ("When is the harbour office open?",
                 "The harbour office is open from eight in the morning until four in the afternoon.", None),
    "visitors.html": ("Where do visitors park their cars?",
                      "Visitors park their cars in the gravel lot behind the fish market.", None),
    "ferries.docx": ("When does the ferry to the northern island leave?",
                     "The ferry to the northern island leaves every day at half past seven.", None),
    "lighthouse.pptx": ("How often is the lighthouse lens polished?",
                        "The lighthouse keeper polishes the great lens every Tuesday morning.", 2),
    "cranes.pdf": ("How much can the gantry crane lift?",
                   "The gantry crane lifts forty tonnes when the wind is calm.", 2),
}


def _filler(topic: str) -> str:
    return " ".join(f"Paragraph {i} about the {topic} says something ordinary about daily work at the port."
                    for i in range(6))


def _outline(name: str, fact: str) -> list[Block]:
    topic = name.split(".")[0]
    return [Block(f"The {topic} guide", 1), Block(_filler(topic)), Block("Opening remarks", 2),
            Block(_filler(topic + " history")),
            Block("The details", 2, new_page=True), Block(fact + " " + _filler(topic + " rules")),
            Block("Closing notes", 2, new_page=True), Block(_filler(topic + " future"))]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("formats")
    docs = root / "docs"
    docs.mkdir()
    for name, (_, fact, _) in FACTS.items():
        if name.endswith(".md"):
            (docs / name).write_text(f"# Office hours\n\n{_filler('office')}\n\n{fact}\n", encoding="utf-8")
        else:
            write(docs / name, _outline(name, fact))
    (docs / "budget.xlsx").write_bytes(b"PK\x03\x04 a spreadsheet")
    done = subprocess.run([sys.executable, "-m", "hseg.cli", "index", "docs", "--db", "db", "--quiet"], cwd=root,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "documents  5 indexed, 0 unchanged (skipped), 0 failed" in done.stdout, done.stdout
    assert "left out   1 .xlsx file in the folders" in done.stdout
    return root


@pytest.mark.model
@pytest.mark.parametrize("name", list(FACTS))
def test_hseg_query_finds_a_fact_from_each_format(indexed: Path, encoder: object, name: str,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    question, fact, page = FACTS[name]
    monkeypatch.setattr(factory, "load_encoder", lambda name=None, backend=None, threads=None: encoder)
    monkeypatch.chdir(indexed)
    assert main(["query", question, "--db", "db", "-k", "1", "--unit", "segment", "--json"]) == 0
    [hit] = json.loads(capsys.readouterr().out)
    meta = hit["metadata"]
    assert meta["source"] == f"docs/{name}" and fact in hit["text"], (meta["source"], hit["text"][:200])
    if page is None:
        assert PAGE_START_KEY not in meta
    else:
        assert meta[PAGE_START_KEY] <= page <= meta[PAGE_END_KEY]


def test_the_converters_import_no_torch(tmp_path: Path) -> None:
    for name, (_, fact, _) in FACTS.items():
        if not name.endswith(".md"):
            write(tmp_path / name, _outline(name, fact))
    script = ("import sys, pathlib; from hseg.convert import convert; "
              "[convert(p) for p in sorted(pathlib.Path(sys.argv[1]).iterdir())]; "
              "print(sorted(m for m in ('torch', 'sentence_transformers', 'chromadb') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"
