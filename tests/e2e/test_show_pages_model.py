"""``hseg show`` on a PDF, as a command with the real all-MiniLM-L6-v2 (issue 53): the PDF is written in
the test (chapters from new pages, a running head), and every cluster and segment of the page names its pages
(``data-page-start``/``data-page-end``, the cluster's label citing them as ``hseg query`` does); the truth is
pypdf's text of those pages: each segment's first and last lines are on its first and last page."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmarks.harness.documents import book, write
from tests.support import REPO
from tests.support.pages import parse

pytest.importorskip("fpdf")
pytest.importorskip("pypdf")


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.model
def test_hseg_show_names_the_pages_of_every_cluster_and_segment(tmp_path):
    from pypdf import PdfReader

    # a running head and a foot on every page (as a report has), and chapters of more than a page
    pdf = write(tmp_path / "handbook.pdf", book(5), bookmarks=False, running="Port Authority Handbook")
    pages = [_flat(p.extract_text()) for p in PdfReader(pdf).pages]
    done = subprocess.run([sys.executable, "-m", "hseg.cli", "show", str(pdf), "--html", "out.html",
                           "--target-tokens", "256", "--quiet"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    html = (tmp_path / "out.html").read_text(encoding="utf-8")
    page = parse(html)
    assert page.clusters and all("data-page-start" in c for c in page.clusters + page.segments)
    for c in page.clusters:
        first, last = int(c["data-page-start"]), int(c["data-page-end"])
        assert ("p. " + (str(first) if first == last else f"{first}\u2013{last}")) in c["data-label"]
    crossing = 0
    for attrs, text in zip(page.segments, page.texts):
        lines = [_flat(line) for line in text.splitlines() if line.strip() and not line.startswith("#")]
        if not lines:
            continue
        first, last = int(attrs["data-page-start"]), int(attrs["data-page-end"])
        assert lines[0][:24] in pages[first - 1], (first, lines[0][:24])
        assert lines[-1][-24:] in pages[last - 1], (last, lines[-1][-24:])
        assert f"; p. {first}" in attrs["title"]
    for c in page.clusters:
        crossing += c["data-page-start"] != c["data-page-end"]
    assert crossing, "no cluster spans a page break"
    assert f"<dt>pages</dt><dd>p. 1\u2013{len(pages)}</dd>" in html
