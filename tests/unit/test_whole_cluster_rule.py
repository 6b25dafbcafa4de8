"""Rule 3 of :mod:`hseg.retrieval.selection` (a parent taken whole) as search settings: its two
constants are ``SearchSettings.whole_cluster_min`` / ``whole_cluster_share``, validated once, and a
search passes them to the walk."""

from __future__ import annotations

import uuid
from typing import Any

import chromadb
import numpy as np
import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.cli import build_parser
from hseg.cli.options import search_settings_from_args
from hseg.retrieval.selection import ClusterSize, walk
from hseg.retrieval.settings import SearchSettings
from hseg.store import HierarchicalStore
from hseg_testing.fakes import HashingEncoder

TIDES = ("The tide is the rise and fall of the sea. Tides are caused by the gravity of the moon and the sun. "
         "High tide and low tide alternate twice a day on most coasts.\n\n")
CATS = ("Cats are small carnivorous mammals. A cat sleeps for most of the day. Cats hunt mice and birds, "
        "and people keep cats as companions in their homes.\n\n")

# parent "a" has 5 segments of 100 tokens, two of them candidates; "b" and "c" one segment each
SCORE, CLUSTER, TOKENS = np.array([0.9, 0.85, 0.8, 0.75]), ["a", "a", "b", "c"], [100, 100, 100, 100]
SIZES = {"a": ClusterSize(5, 500)}


def _walk(settings: SearchSettings):
    return walk(SCORE, CLUSTER, TOKENS, SIZES, 1000, whole_cluster_min=settings.whole_cluster_min,
                whole_cluster_share=settings.whole_cluster_share)


def test_the_default_rule_takes_a_parent_whole_on_its_second_segment():
    # after a0 and a1, 800 tokens are left; the rest of "a" costs 300: under a half
    sel = _walk(SearchSettings())
    assert sel is not None and sel.expanded == [(2, "a")] and sel.taken == [0, 1, 2, 3]
    assert sel == walk(SCORE, CLUSTER, TOKENS, SIZES, 1000)  # the settings' defaults are the walk's


def test_a_stricter_rule_leaves_the_parent_in_pieces():
    sel = _walk(SearchSettings(whole_cluster_min=3, whole_cluster_share=0.25))
    assert sel is not None and sel.taken == [0, 1, 2, 3] and sel.expanded == []
    assert _walk(SearchSettings(whole_cluster_share=0.25)).expanded == []  # a quarter of 800 < 300
    assert _walk(SearchSettings(whole_cluster_min=3)).expanded == []  # a third segment never comes
    # the parent's 300 tokens are charged to the budget: with 800, "b" still fits (200 left) and "c" too,
    # with 650 the parent is too dear (450 left after a1: a half is 225 < 300) and the walk goes on in pieces
    assert _walk_budget(800).expanded == [(2, "a")] and _walk_budget(650).expanded == []


def _walk_budget(budget: int):
    sel = walk(SCORE, CLUSTER, TOKENS, SIZES, budget, whole_cluster_min=2, whole_cluster_share=0.5)
    assert sel is not None
    return sel


@pytest.mark.parametrize(("fields", "named"), [
    ({"whole_cluster_min": 0}, "whole_cluster_min"), ({"whole_cluster_min": 1.5}, "whole_cluster_min"),
    ({"whole_cluster_min": True}, "whole_cluster_min"), ({"whole_cluster_min": "2"}, "whole_cluster_min"),
    ({"whole_cluster_share": -0.1}, "whole_cluster_share"), ({"whole_cluster_share": 1.5}, "whole_cluster_share"),
    ({"whole_cluster_share": float("nan")}, "whole_cluster_share"),
    ({"whole_cluster_share": "0.5"}, "whole_cluster_share"),
])
def test_bad_rule_settings_fail_at_construction_naming_the_field(fields, named):
    with pytest.raises(ValueError, match=named) as exc:
        SearchSettings(**fields)
    assert "\n" not in str(exc.value)


def test_the_cli_has_an_option_per_rule_setting():
    args = build_parser().parse_args(["query", "tides", "--db", "x", "--budget-tokens", "512",
                                      "--whole-cluster-min", "2", "--whole-cluster-share", "0.5"])
    settings = search_settings_from_args(args)
    assert (settings.whole_cluster_min, settings.whole_cluster_share) == (2, 0.5)


@pytest.mark.parametrize("lexical_weight", [0.0, 0.2])
def test_a_search_takes_more_parents_whole_with_a_looser_rule(lexical_weight):
    enc = HashingEncoder()
    store = HierarchicalStore(f"t-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(), encoder=enc)
    chunker = HierarchicalChunker(encoder=enc, segmenter="texttiling", target_tokens=64, min_segment_tokens=8)
    results = chunker.chunk_many([TIDES * 3, CATS * 3], ["tides", "cats"])
    store.add(results, [{"source": "t.md"}, {"source": "c.md"}])
    segments = {c.id: len(c.segment_ids) for r in results for c in r.clusters}

    def whole(**rule: Any) -> set[str]:
        hits = store.search("moon gravity", budget_tokens=200, unit="auto", lexical_weight=lexical_weight, **rule)
        return {h.cluster_id for h in hits if len(h.segment_ids) == segments[h.cluster_id]}

    strict = whole(whole_cluster_min=3, whole_cluster_share=0.25)
    assert strict <= whole() and strict < whole(whole_cluster_min=1, whole_cluster_share=1.0)
