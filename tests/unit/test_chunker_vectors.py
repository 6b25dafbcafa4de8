"""What is embedded for a unit (issue 48): ``segment_context="heading"`` puts a segment's heading path in
its vector, ``cluster_vector="encode"`` encodes a cluster's text; neither changes a span or a text."""

from __future__ import annotations

import numpy as np
import pytest

from hseg.chunking.clustering import mean_vector
from hseg.chunking.config import ChunkerConfig
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder

DOC = ("Opening words before any heading. They talk of rivers and of stone.\n\n"
       "# Tides\n\nThe moon pulls the sea. Water rises twice a day. " + "Harbours fill and empty again. " * 6 +
       "\n\n## Spring tides\n\nSun and moon in line give the largest range. " + "Boats wait for the flood. " * 6 +
       "\n\n# Glaciers\n\nIce moves slowly downhill. " + "Moraines mark where it stopped. " * 8)


def spans(result):
    return [(s.start, s.end, s.text) for s in result.segments], [(c.start, c.end, c.text) for c in result.clusters]


def test_the_settings_are_declared_and_checked():
    assert ChunkerConfig.defaults()["segment_context"] == "none"
    assert ChunkerConfig.defaults()["cluster_vector"] == "mean"
    with pytest.raises(ValueError, match="segment_context"):
        ChunkerConfig(segment_context="title")
    with pytest.raises(ValueError, match="cluster_vector"):
        ChunkerConfig(cluster_vector="max")


def test_heading_context_is_one_more_sentence_of_the_mean_and_the_spans_stay():
    plain = small_chunker(structure="markdown").chunk(DOC, "d")
    chunker = small_chunker(structure="markdown", segment_context="heading")
    result = chunker.chunk(DOC, "d")
    assert spans(result) == spans(plain)
    enc = HashingEncoder()
    texts = [sp.of(DOC) for sp in chunker._sentences(DOC, result.headings)]
    vectors = enc.encode(texts)
    tokens = chunker._with_gaps(DOC, chunker._sentences(DOC, result.headings),
                                [chunker.count_tokens(t) for t in texts])
    under = 0
    for seg, old in zip(result.segments, plain.segments):
        a, b = seg.sentence_start, seg.sentence_end
        if not seg.heading_path:  # no heading above it: the plain vector
            np.testing.assert_array_equal(seg.embedding, old.embedding)
            continue
        under += 1
        path = " > ".join(seg.heading_path)
        expected = mean_vector(np.vstack([vectors[a:b], enc.encode([path])]),
                               [*tokens[a:b], chunker.count_tokens(path)])
        np.testing.assert_allclose(seg.embedding, expected, atol=1e-6)
        assert not np.allclose(seg.embedding, old.embedding)
    assert under >= 3 and result.segments[0].heading_path == ()


def test_heading_context_in_front_of_an_encoded_segment():
    enc = HashingEncoder()
    chunker = small_chunker(structure="markdown", segment_context="heading", segment_vector="encode")
    result = chunker.chunk(DOC, "d")
    for seg in result.segments:
        path = " > ".join(seg.heading_path)
        shown = (path + "\n\n" if path else "") + seg.text.strip()
        np.testing.assert_allclose(seg.embedding, enc.encode([shown])[0], atol=1e-6)


def test_an_encoded_cluster_vector_is_its_text_encoded_and_the_clusters_stay():
    plain = small_chunker().chunk(DOC, "d")
    result = small_chunker(cluster_vector="encode").chunk(DOC, "d")
    assert spans(result) == spans(plain)
    enc = HashingEncoder()
    for cluster, old in zip(result.clusters, plain.clusters):
        np.testing.assert_allclose(cluster.embedding, enc.encode([cluster.text.strip()])[0], atol=1e-6)
        np.testing.assert_array_equal([s.embedding for s in cluster.segments], [s.embedding for s in old.segments])
    assert any(not np.allclose(c.embedding, o.embedding) for c, o in zip(result.clusters, plain.clusters))


def test_the_command_line_takes_them_and_a_store_remembers_them():
    import argparse

    from hseg.cli.options import CHUNK_OPTIONS, add_chunker_options, chunk_options, chunker_config_from_args

    parser = argparse.ArgumentParser()
    add_chunker_options(parser)
    args = parser.parse_args(["--segment-context", "heading", "--cluster-vector", "encode"])
    config = chunker_config_from_args(args)
    assert (config.segment_context, config.cluster_vector) == ("heading", "encode")
    assert {"segment_context", "cluster_vector"} <= set(CHUNK_OPTIONS)
    later = parser.parse_args([])  # a later hseg index without them uses what the store remembers
    assert chunk_options(later, {"segment_context": "heading"}) == {"segment_context": "heading"}
    assert chunker_config_from_args(later).segment_context == "heading"
    with pytest.raises(SystemExit):
        parser.parse_args(["--segment-context", "title"])
