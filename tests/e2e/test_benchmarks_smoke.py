"""Smoke runs of the benchmark commands: one corpus, one budget; the table's shape, not its numbers.

The runs of the real commands load the real model (marked ``model``). The peers and ``--questions``,
in-process on tiny generated data with a hashing encoder in the model's place, are
``tests/store/test_benchmarks_without_model.py``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.store.test_benchmarks_without_model import tiny_eval
from tests.support import REPO


def run(args: list[str], tmp_path: Path) -> str:
    out = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=900,
                         env={**__import__("os").environ, "HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg"})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def table_rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| method")]


@pytest.mark.model
def test_retrieval_benchmark_smoke(shared_dir, tmp_path):
    data = shared_dir / "data" / "chroma_eval"
    stdout = run(["-m", "benchmarks.retrieval", "--data", str(data), "--corpora", "chatlogs", "--budgets", "1024",
                  "--methods", "lc_recursive_200_0", "hseg_sc_512", "hseg_auto_512", "hseg_auto_512_hybrid",
                  "--out", str(tmp_path)], tmp_path)
    pooled = stdout.split("## chatlogs")[0]
    rows = table_rows(pooled)
    assert [r[0] for r in rows] == ["lc_recursive_200_0", "hseg_sc_512", "hseg_auto_512", "hseg_auto_512_hybrid"]
    assert all(len(r) == 4 + 3 * 2 for r in rows)  # method, chunks, tokens, PΩ, then R/IoU/P at k=5 and B=1024
    for r in rows:
        assert 0 <= float(r[4]) <= 100 and 0 <= float(r[7]) <= 100
    csv = (tmp_path / "retrieval.csv").read_text().splitlines()
    assert len(csv) == 1 + 4 * 2 * 2  # header + methods x (chatlogs, pooled) x (k=5, B=1024)
    assert sorted(p.name for p in (tmp_path / "methods").iterdir()) == [
        "hseg_auto_512.md", "hseg_auto_512_hybrid.md", "hseg_sc_512.md", "lc_recursive_200_0.md"]
    assert (tmp_path / "retrieval.png").stat().st_size > 1000


@pytest.mark.model
def test_ingest_speed_benchmark_smoke(shared_dir, tmp_path):
    data = shared_dir / "data" / "chroma_eval"
    stdout = run(["-m", "benchmarks.ingest_speed", "--data", str(data), "--corpora", "chatlogs",
                  "--methods", "lc_recursive_200_0", "hseg", "--backends", "onnx", "torch"], tmp_path)
    rows = table_rows(stdout)
    assert [(r[0], r[1]) for r in rows] == [("lc_recursive_200_0", "onnx"), ("lc_recursive_200_0", "torch"),
                                          ("hseg", "onnx"), ("hseg", "torch")]
    assert float(rows[1][4]) == 1.0  # the floor (torch) is its own unit
    assert all(float(r[2]) > 0 and float(r[5].replace(",", "")) > 100 and int(r[6]) > 0 for r in rows)
    assert rows[0][6] == rows[1][6] and rows[2][6] == rows[3][6]  # the backends make the same records
    assert rows[0][7] == "—" and float(rows[2][7]) >= 0  # hseg's segmenter loads before the clock, reported apart
    assert "hseg: onnx" in stdout and "the speed of torch" in stdout


@pytest.mark.model
def test_paired_comparison_smoke(shared_dir, tmp_path):
    data = shared_dir / "data" / "chroma_eval"
    stdout = run(["-m", "benchmarks.paired", "hseg_sc_256", "hseg_c_256", "--data", str(data), "--corpora", "chatlogs",
                  "--budgets", "1024", "--ks", "5"], tmp_path)
    rows = [r for r in table_rows(stdout) if not r[0].startswith("setting")]
    assert [r[0] for r in rows] == ["k=5", "B=1024"]
    for r in rows:
        a, b, diff = float(r[1]), float(r[2]), float(r[3])
        assert abs((a - b) - diff) <= 0.1 + 1e-9  # A − B of the means, each rounded to 0.1
        wins, losses = map(int, r[4].split("/"))
        assert wins + losses <= 45 and 0 <= float(r[5]) <= 1  # chatlogs has 45 queries


@pytest.mark.model
def test_paired_compares_one_method_under_two_segmenters(shared_dir, tmp_path):
    data = shared_dir / "data" / "chroma_eval"
    stdout = run(["-m", "benchmarks.paired", "hseg_seg_256", "hseg_seg_256@bilstm", "--pairs", "hseg_seg_256",
                  "hseg_seg_256@texttiling", "--data", str(data), "--corpora", "chatlogs", "--budgets", "1024",
                  "--ks", "5"], tmp_path)
    same, other = stdout.split("### ")[1:]
    assert "hseg_seg_256@bilstm (B)" in same and "hseg_seg_256@texttiling (B)" in other
    for r in (r for r in table_rows(same) if not r[0].startswith("setting")):
        assert float(r[3]) == 0 and r[4] == "0/0"  # "@bilstm" is the default segmenter: the same answers
    texttiling = [r for r in table_rows(other) if not r[0].startswith("setting")]
    assert [r[0] for r in texttiling] == ["k=5", "B=1024"]
    bad = subprocess.run([sys.executable, "-m", "benchmarks.paired", "hseg_seg_256", "lc_recursive_200_0@bilstm"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "unknown methods" in bad.stderr  # only hseg methods take a segmenter


@pytest.mark.model
def test_query_cold_start_smoke(tmp_path):
    report = tmp_path / "cold.md"
    stdout = run(["-m", "benchmarks.query_cold_start", "--db", str(tmp_path / "db"), "--runs", "1",
                  "--import-runs", "1", "--out", str(report)], tmp_path)
    assert "median" in stdout and report.read_text(encoding="utf-8") in stdout
    rows = table_rows(stdout)
    assert [r[0] for r in rows][1:] == ["`torch`", "`sentence_transformers`", "`onnxruntime`", "`tokenizers`",
                                        "`chromadb`", "`hseg.cli`"]
    assert "--backend onnx` cold start" in stdout and "--backend torch` cold start" in stdout
    assert all(re.fullmatch(r"-?\d+\.\d\d", r[1]) for r in rows[1:]), rows  # seconds, two decimals


def indexed_tiny_eval(tmp_path: Path) -> Path:
    """:func:`tiny_eval`'s corpora indexed by ``hseg index`` into ``tmp_path / "db"``; returns its questions."""
    questions = tiny_eval(tmp_path / "eval")
    (tmp_path / "docs").mkdir()
    for md in (tmp_path / "eval" / "corpora").glob("*.md"):
        (tmp_path / "docs" / md.name).write_text(md.read_text(encoding="utf-8"), encoding="utf-8")
    run(["-m", "hseg.cli", "index", str(tmp_path / "docs"), "--db", str(tmp_path / "db"), "--quiet"], tmp_path)
    return questions


@pytest.mark.model
def test_lexical_cache_smoke(tmp_path):
    """The search with its word cache and with the cache emptied give the same hits; the table has its three rows."""
    questions = indexed_tiny_eval(tmp_path)
    stdout = run(["-m", "benchmarks.lexical_cache", "--db", str(tmp_path / "db"), "--questions", str(questions),
                  "--queries", "4", "--warmup", "2", "--rounds", "2", "--budget", "1024"], tmp_path)
    assert "hits differ between the two searches on 0 calls" in stdout
    rows = [r for r in table_rows(stdout) if r[0] != "call"]
    assert [r[0] for r in rows] == ["plain", "word cache", "no reuse"]
    assert all(re.fullmatch(r"\d+\.\d\d", x) for r in rows for x in r[1:]), rows
