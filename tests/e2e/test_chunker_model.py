"""The chunking path with the real model: size control on the example document (the rest of the
chunker's tests, on the hashing encoder, are ``tests/unit/test_chunker.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg_testing.checks import check_chunk_invariants


@pytest.mark.model
def test_real_model_target_size_and_cap(encoder, example_text):
    chunker = HierarchicalChunker(encoder=encoder, target_tokens=512)
    result = chunker.chunk(example_text, "example")
    check_chunk_invariants(result, example_text, chunker)
    sizes = [c.token_count for c in result.clusters]
    assert 0.8 * 512 <= np.mean(sizes) <= 1.2 * 512, sizes
    assert max(sizes) <= chunker.max_cluster_tokens
    seg_sizes = [s.token_count for s in result.segments]
    assert np.median(seg_sizes) <= chunker.max_segment_tokens


def test_default_segments_fit_twice_in_a_small_target(encoder, example_text):
    chunker = HierarchicalChunker(encoder=encoder, target_tokens=256)
    result = chunker.chunk(example_text)
    assert chunker.max_segment_tokens == 128
    # the limit is applied to summed sentence sizes; the joined text can differ by a token per seam
    assert max(s.token_count for s in result.segments) <= 128 + 2
    assert np.mean([len(c.segments) for c in result.clusters]) >= 2


@pytest.mark.model
def test_no_graph_and_the_reported_tau_on_a_real_document(encoder, example_text):
    # the default search's tau is one adjacent pairs pass, and the graph joins some; clique_method="none" makes
    # the parents of a threshold nothing passes, from neighbour-joining and the cap, with no k or tau
    default = HierarchicalChunker(encoder=encoder).chunk(example_text, "example")
    vectors = np.stack([s.embedding for s in default.segments])
    adjacent = np.einsum("ij,ij->i", vectors[:-1], vectors[1:])
    assert default.info["tau"] < adjacent.max() and default.info["graph_joined"] > 0  # relatedness made parents
    chunker = HierarchicalChunker(encoder=encoder, clique_method="none")
    none = chunker.chunk(example_text, "example")
    check_chunk_invariants(none, example_text, chunker)
    assert none.k is None and none.info["tau"] is None and none.info["graph_joined"] == 0
    strict = HierarchicalChunker(encoder=encoder, k=1e6, max_segment_tokens=128).chunk(example_text, "example")
    assert [(c.start, c.end) for c in none.clusters] == [(c.start, c.end) for c in strict.clusters]
