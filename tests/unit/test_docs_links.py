"""Every relative link of the README and of ``docs/`` leads to a file of the repository, and every
``benchmarks/results/...`` file they or ``benchmarks/RESULTS.md`` name exists (raw files get renamed)."""

from __future__ import annotations

import re

import pytest

from tests.support import REPO

DOCS = ["README.md", "benchmarks/RESULTS.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_lead_to_files(doc):
    path = REPO / doc
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8"))
    missing = [t for t in targets if "://" not in t and not (path.parent / t).exists()]
    assert not missing, f"{doc} links to {missing}"


@pytest.mark.parametrize("doc", DOCS)
def test_named_raw_results_exist(doc):
    path = REPO / doc
    results = REPO / "benchmarks" / "results"
    named = set(re.findall(r"results/([\w.\-]+\.(?:md|csv|png))", path.read_text(encoding="utf-8")))
    missing = sorted(n for n in named if not (results / n).exists())
    assert not missing, f"{doc} names raw results that are not in benchmarks/results: {missing}"
