"""The record schema has one reader (issue 45 item 5): ``hseg.chunking.schema`` names every ``hseg_*``
key, and its views read what the records hold, the same as the chunks they came from."""

from __future__ import annotations

import re

import pytest

from hseg.chunking.records import records_for
from hseg.chunking.schema import (
    CLUSTER,
    LEVEL_KEY,
    START_KEY,
    ClusterMeta,
    SegmentMeta,
)
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import synthetic_book
from tests.support import REPO

#: how many raw ``"hseg_*"`` strings the code outside the schema module may still hold (docstring
#: examples only): a key is named by its constant
RAW_KEYS_OUTSIDE_SCHEMA = 44


def test_keys_are_named_by_the_schema_module():
    raw = re.compile(r"[\"'](hseg_[a-z_]+)[\"']")
    schema = REPO / "hseg" / "chunking" / "schema.py"
    sources = {path: path.read_text(encoding="utf-8") for package in ("hseg", "langchain_hseg", "llama_index_hseg")
               for path in sorted((REPO / package).rglob("*.py")) if path != schema}
    # a function of ours named hseg_* (hseg_tools) is named in __all__ lists: a Python name, not a key
    functions = {name for text in sources.values() for name in re.findall(r"^def (hseg_[a-z_]+)", text, re.M)}
    found = [(path.relative_to(REPO), hit) for path, text in sources.items()
             for hit in raw.findall(text) if hit not in functions]
    assert len(found) <= RAW_KEYS_OUTSIDE_SCHEMA, found


@pytest.fixture(scope="module")
def chunking():
    text = "# Tides\n\n" + synthetic_book(2500, seed=4) + "\n\n## Why\n\n" + synthetic_book(1500, seed=5)
    return small_chunker(structure="markdown").chunk(text, doc_id="book")


def test_views_read_the_records_as_the_chunks_were(chunking):
    by_id = {r.id: r.metadata for r in records_for(chunking)}
    for seg in chunking.segments:
        view = SegmentMeta.of(by_id[seg.id])
        assert (view.doc_id, view.start, view.end, view.tokens) == ("book", seg.start, seg.end, seg.token_count)
        assert view.heading_path == seg.heading_path and tuple(view.cuts()) == seg.cuts
    assert any(seg.heading_path for seg in chunking.segments)
    for cluster in chunking.clusters:
        view = ClusterMeta.of(by_id[cluster.id])
        assert (view.cluster_id, view.start, view.end, view.tokens) == \
            (cluster.id, cluster.start, cluster.end, cluster.token_count)
        assert view.segment_ids == tuple(cluster.segment_ids) and view.heading_path == cluster.heading_path
        # a cluster made of its segments' views is the cluster its record describes (its tokens summed)
        joined = ClusterMeta.joined(cluster.id, [(s.id, SegmentMeta.of(by_id[s.id])) for s in cluster.segments])
        assert joined is not None
        assert (joined.start, joined.end, joined.segment_ids, joined.heading_path) == \
            (view.start, view.end, view.segment_ids, view.heading_path)
        assert joined.tokens == sum(s.token_count for s in cluster.segments)


def test_views_name_what_a_record_lacks(chunking):
    meta = records_for(chunking)[1].metadata
    assert meta[LEVEL_KEY] != CLUSTER
    broken = {k: v for k, v in meta.items() if k != START_KEY}
    with pytest.raises(ValueError, match=START_KEY):
        SegmentMeta.of(broken)
    assert SegmentMeta.read(broken) is None and SegmentMeta.read({"source": "a.md"}) is None
    a, b = SegmentMeta.of(meta), SegmentMeta("book", "other", 0, 1, 1, ())
    assert ClusterMeta.joined(a.cluster_id, [("s", a), ("t", b)]) is None  # not of one cluster
