"""The lexical score on a ``chroma run`` server: every test of ``tests/store/test_hybrid.py`` that takes
``chroma_client``, here over HTTP, and a store whose lexical index is a client-side cache of the
server's collection."""

from __future__ import annotations

import numpy as np
import pytest

from tests.store import test_hybrid
from tests.store.test_hybrid import QUESTIONS, expected_passages, lexical_scores, make_store
from tests.support.clients import server_variants

globals().update(server_variants(test_hybrid))


@pytest.mark.integration
def test_hybrid_on_a_server_store(chroma_server, chroma_collection_name):
    store, chunkings, rng = make_store(chroma_server.client(), chroma_collection_name)
    assert store._parts.lexical.location.kind == "cache"
    q = rng.standard_normal(16).astype(np.float32)
    q /= np.linalg.norm(q)
    lex = lexical_scores(store, chunkings, QUESTIONS[0])
    kept = {ch.doc_id for ch in chunkings}
    hits = store.search(q, budget_tokens=150, unit="auto", lexical_weight=0.5, query_text=QUESTIONS[0])
    assert ([h.segment_ids for h in hits], [h.end for h in hits]) == \
        expected_passages(chunkings, kept, q, lex, 0.5, "auto", 150, None)
