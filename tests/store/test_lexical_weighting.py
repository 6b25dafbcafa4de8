"""``lexical_weighting="coverage"`` (issue 48): the lexical weight of a query scaled by the share of its
IDF mass that its best lexical match holds, computed here from FTS5 itself; searches with it answer as
searches with that weight given."""

from __future__ import annotations

import math

import chromadb
import numpy as np
import pytest

from hseg.retrieval.lexical_query import fts5_match, lexical_query, query_terms
from hseg.retrieval.plans import run_one
from hseg.store import SearchSettings
from tests.store.test_hybrid import QUESTIONS, make_store


def expected_coverage(store, text):
    """By hand: the best row of FTS5's own OR query, each word's IDF as FTS5's BM25 has it."""
    db = store._parts.lexical.db
    found = db.rows("SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts), rowid LIMIT 1",
                    (fts5_match(query_terms(text)),))
    if not found:
        return 0.0
    best = found[0][0]
    rows = db.rows("SELECT count(*) FROM segments")[0][0]
    held = total = 0.0
    for term in query_terms(text):
        n = db.rows("SELECT count(*) FROM fts WHERE fts MATCH ?", (fts5_match([term]),))[0][0]
        idf = max(math.log((rows - n + 0.5) / (n + 0.5)), 1e-6)
        total += idf
        if db.rows("SELECT 1 FROM fts WHERE fts MATCH ? AND rowid = ?", (fts5_match([term]), best)):
            held += idf
    return held / total


def test_coverage_is_the_best_matchs_share_of_the_query_idf_and_scales_the_weight(chroma_collection_name):
    store, chunkings, rng = make_store(chromadb.EphemeralClient(), chroma_collection_name)
    store._parts.lexical.ensure_fresh()
    seen = []
    for text in [*QUESTIONS, "tide zebra", "zebra okapi"]:
        cov = expected_coverage(store, text)
        seen.append(cov)
        fixed = run_one(lexical_query(store._parts.lexical, text, 0.3))
        scaled = run_one(lexical_query(store._parts.lexical, text, 0.3, "coverage"))
        assert fixed is not None and scaled is not None
        assert fixed.weight == 0.3 and run_one(scaled.coverage()) == pytest.approx(cov, abs=1e-12)
        assert scaled.weight == pytest.approx(0.3 * cov, abs=1e-12)
        q = rng.standard_normal(16).astype(np.float32)
        for unit in ("auto", "segment", "cluster"):
            got = store.search(q, budget_tokens=300, unit=unit, lexical_weight=0.3, lexical_weighting="coverage",
                               query_text=text)
            given = store.search(q, budget_tokens=300, unit=unit, lexical_weight=0.3 * cov, query_text=text)
            assert [(h.segment_ids, h.end) for h in got] == [(h.segment_ids, h.end) for h in given], (text, unit)
    assert seen[-1] == 0.0  # no word of it in the collection: the dense side alone decides
    assert any(0.0 < c < 1.0 for c in seen) and seen[-2] < 1.0  # a word the text lacks counts against it


def test_the_setting_is_checked():
    assert SearchSettings().lexical_weighting == "fixed"
    with pytest.raises(ValueError, match="lexical_weighting"):
        SearchSettings(lexical_weighting="idf")
