"""Smoke run of ``benchmarks.converted_retrieval``: one short textbook prefix, one budget; the tables' shape."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import REPO


@pytest.mark.model
def test_converted_retrieval_benchmark_smoke(shared_dir, tmp_path):
    data = shared_dir / "data" / "textbook_qa"
    if not (data / "corpora").is_dir():
        pytest.skip("textbook_qa is not in ../shared")
    out = subprocess.run([sys.executable, "-m", "benchmarks.converted_retrieval", "--data", str(data),
                          "--corpora", "introduction-anthropology", "--chars", "20000", "--budgets", "1024",
                          "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {r[0]: r[1:] for r in ([c.strip() for c in line.strip("|").split("|")]
                                  for line in out.stdout.splitlines() if line.startswith("| "))}
    sides = ["md", "pdf", "docx", "html", "pypdfloader", "llamaindex", "recursive"]
    assert rows["budget"] == sides
    assert all(0 <= float(v) <= 100 for v in rows["1024"])
    # the markdown is its own source: every reference found, every segment placed with its own heading path
    mapped, total = rows["md"][1].split("/")
    assert mapped == total and rows["md"][3].endswith("(100.0%)")
    for side in ("pdf", "docx", "html"):  # the files were written and converted back, headings and all
        assert (tmp_path / f"introduction-anthropology.{side}").stat().st_size > 1000
        assert float(rows[side][3].split("(")[1].rstrip("%)")) > 50
    assert "docx - md at 1024:" in out.stdout and "pdf - recursive at 1024:" in out.stdout
