"""benchmarks.retrieval keeps finished methods on disk and goes on past a failing one.

No model: the encoder is the hashing fake and the methods are registered here.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from benchmarks import retrieval
from benchmarks.harness.evaluation import Chunk
from hseg_testing.fakes import HashingEncoder, fake_encoder_factory

CORPORA = {
    "alpha": "Rivers carry silt to the delta. Floods spread it on the plain.\n\nTides mix the estuary.",
    "beta": "Pistons drive the crank. Valves let the exhaust out.\n\nGears turn the shaft.",
}


def write_data(root: Path) -> Path:
    (root / "corpora").mkdir(parents=True)
    for cid, text in CORPORA.items():
        (root / "corpora" / f"{cid}.md").write_text(text, encoding="utf-8")
    with open(root / "questions.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["question", "references", "corpus_id"])
        for cid, phrase in [("alpha", "Tides mix the estuary."), ("beta", "Gears turn the shaft.")]:
            start = CORPORA[cid].index(phrase)
            ref = {"content": phrase, "start_index": start, "end_index": start + len(phrase)}
            writer.writerow([f"What about {phrase.split()[0].lower()}?", json.dumps([ref]), cid])
    return root


def paragraphs(corpora: dict[str, str], queries: list, encoder) -> list[list[Chunk]]:
    units = []
    for cid, text in corpora.items():
        start = 0
        for para in text.split("\n\n"):
            start = text.index(para, start)
            units.append(Chunk(cid, start, start + len(para), para))
            start += len(para)
    return [list(units) for _ in queries]


def test_a_failing_method_keeps_finished_rows_and_fails_the_run(tmp_path, monkeypatch, capsys):
    data = write_data(tmp_path / "data")
    out = tmp_path / "out"
    on_disk_when_it_failed: dict[str, object] = {}

    def broken(corpora, queries, encoder):
        with open(out / "retrieval.csv", encoding="utf-8", newline="") as fh:
            on_disk_when_it_failed["csv"] = list(csv.DictReader(fh))
        on_disk_when_it_failed["md"] = sorted(p.name for p in (out / "methods").iterdir())
        raise RuntimeError("boom in the middle of the run")

    fake_encoder_factory(monkeypatch, HashingEncoder)
    monkeypatch.setitem(retrieval.METHODS, "first", paragraphs)
    monkeypatch.setitem(retrieval.METHODS, "broken", broken)
    monkeypatch.setitem(retrieval.METHODS, "last", paragraphs)
    out.mkdir()
    (out / "retrieval.csv").write_text("stale,rows\n1,2\n")  # a previous run's table is replaced

    with pytest.raises(SystemExit) as exc:
        retrieval.main(["--data", str(data), "--methods", "first", "broken", "last", "--budgets", "1024",
                        "--out", str(out)])
    captured = capsys.readouterr()

    # (a) the finished method's rows and tables were on disk before the later method ran
    rows_then = on_disk_when_it_failed["csv"]
    assert {r["method"] for r in rows_then} == {"first"}
    assert len(rows_then) == 3 * 2  # (alpha, beta, pooled) x (k=5, B=1024)
    assert on_disk_when_it_failed["md"] == ["first.md"]

    # (b) the failure is reported with its traceback, the run went on, and it ends non-zero
    assert "[broken] FAILED" in captured.err and "Traceback" in captured.err
    assert "RuntimeError: boom in the middle of the run" in captured.err
    assert exc.value.code not in (0, None) and "1 of 3 methods failed" in str(exc.value.code)
    assert "broken" in str(exc.value.code)

    with open(out / "retrieval.csv", encoding="utf-8", newline="") as fh:
        final = list(csv.DictReader(fh))
    assert [r["method"] for r in final] == ["first"] * 6 + ["last"] * 6  # header once, no stale rows
    assert sorted(p.name for p in (out / "methods").iterdir()) == ["first.md", "last.md"]
    md = (out / "methods" / "last.md").read_text(encoding="utf-8")
    assert md.startswith("# last\n\n## pooled (2 queries, 2 corpora in one index)")
    assert "## alpha (1 queries)" in md and "| last |" in md
    pooled = captured.out.split("## alpha")[0]
    assert "| first |" in pooled and "| last |" in pooled and "broken" not in pooled
    assert (out / "retrieval.png").stat().st_size > 1000


def test_a_clean_run_exits_normally_and_returns_its_rows(tmp_path, monkeypatch):
    data = write_data(tmp_path / "data")
    fake_encoder_factory(monkeypatch, HashingEncoder)
    monkeypatch.setitem(retrieval.METHODS, "only", paragraphs)
    rows = retrieval.main(["--data", str(data), "--methods", "only", "--budgets", "1024", "--out", str(tmp_path / "o")])
    assert len(rows) == 6 and (tmp_path / "o" / "methods" / "only.md").exists()
