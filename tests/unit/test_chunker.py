"""The chunking path: exact spans, tiling, size control, arguments."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hseg.chunking.chunker import HierarchicalChunker
from hseg.errors import UnreadableDocumentError
from hseg.text.binary import binary_reason
from hseg_testing.checks import check_chunk_invariants
from hseg_testing.chunkers import SMALL, hashing_chunker
from hseg_testing.fakes import HashingEncoder

WORDS = st.sampled_from(
    ("the cat sat on a mat . Dr. Smith paid $3.50 at 9 a.m. ! ? "
     "東京 は 。 مرحبا 😀 # - | ``` \n \n\n  http://x.io/a.b").split(" ")
)
TEXTS = st.one_of(st.text(max_size=400), st.lists(WORDS, max_size=300).map(" ".join))


@pytest.fixture(scope="module")
def fast_chunker():
    return hashing_chunker(**SMALL)


@pytest.mark.filterwarnings("ignore:document .* is blank")
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(TEXTS)
def test_spans_exact_and_tiling_on_arbitrary_text(fast_chunker, text):
    if binary_reason(text) is not None:
        # arbitrary text includes what reads as bytes (a NUL): that is refused, never chunked
        with pytest.raises(UnreadableDocumentError):
            fast_chunker.chunk(text, doc_id="d")
        return
    result = fast_chunker.chunk(text, doc_id="d")
    check_chunk_invariants(result, text, fast_chunker)
    if not text.strip():
        assert result.segments == () and result.clusters == ()


def test_ids_are_stable_and_depend_on_doc_id(fast_chunker):
    text = "Alpha beta gamma. " * 40 + "\n\nDelta epsilon. " * 40
    a, b = fast_chunker.chunk(text, "x"), fast_chunker.chunk(text, "x")
    assert [c.id for c in a.clusters] == [c.id for c in b.clusters]
    assert [s.id for s in a.segments] == [s.id for s in b.segments]
    c = fast_chunker.chunk(text, "y")
    assert not {s.id for s in a.segments} & {s.id for s in c.segments}


def test_blank_document_warns_and_gives_nothing(fast_chunker):
    with pytest.warns(UserWarning, match="blank"):
        result = fast_chunker.chunk("   \n\t ", "blank")
    assert result.clusters == () and result.info["empty"]


def test_chunk_many_shares_encoder_batches():
    enc = HashingEncoder()
    chunker = HierarchicalChunker(encoder=enc, target_tokens=64, min_segment_tokens=8, max_segment_tokens=48,
                                  cache=False)
    docs = ["One two three. Four five six. " * 20, "Seven eight. Nine ten. " * 20]
    results = chunker.chunk_many(docs, ["a", "b"])
    assert [r.doc_id for r in results] == ["a", "b"]
    assert enc.calls == 1  # every sentence of both documents in one encoder call


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"k": 1.0, "target_tokens": 512}, "k or target_tokens"),
        ({"target_tokens": 0}, "target_tokens"),
        ({"target_tokens": 10}, "target_tokens"),
        ({"max_cluster_tokens": 10}, "max_cluster_tokens"),
        ({"min_segment_tokens": 500}, "min_segment_tokens"),
        ({"segment_vector": "max"}, "segment_vector"),
        ({"clique_method": "louvain"}, "clique_method"),
        ({"k": float("nan")}, "k"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        hashing_chunker(**kwargs)


def test_duplicate_doc_ids_with_different_texts_are_refused(fast_chunker):
    with pytest.raises(ValueError, match="doc_ids"):
        fast_chunker.chunk_many(["a b c.", "d e f."], ["same", "same"])


def test_unit_vectors_are_token_weighted_means(fast_chunker):
    # a short sentence must not pull a segment's vector as hard as a long one (the encoder mean-pools tokens)
    text = ("Tides rise. " + "The ocean tide follows the moon and its gravity across the whole planet every day. " * 2
            + "\n\n" + "Cats sleep a lot. Cats purr when they are content and warm in the afternoon sun. " * 3)
    result = fast_chunker.chunk(text, doc_id="w")
    from hseg.text.sentences import split_sentences

    spans = split_sentences(text)
    vectors = fast_chunker.encoder.encode([s.of(text) for s in spans])
    tokens = np.array([fast_chunker.count_tokens(s.of(text)) for s in spans], dtype=float)
    for seg in result.segments:
        w = tokens[seg.sentence_start : seg.sentence_end]
        m = (w[:, None] * vectors[seg.sentence_start : seg.sentence_end]).sum(0)
        np.testing.assert_allclose(seg.embedding, m / np.linalg.norm(m), atol=1e-5)
    weighted = [s for s in result.segments if len(set(tokens[s.sentence_start : s.sentence_end])) > 1]
    assert weighted  # the check above would pass for an unweighted mean otherwise
    for c in result.clusters:
        w = np.array([s.token_count for s in c.segments], dtype=float)
        m = (w[:, None] * np.stack([s.embedding for s in c.segments])).sum(0)
        np.testing.assert_allclose(c.embedding, m / np.linalg.norm(m), atol=1e-5)


@pytest.mark.parametrize("kwargs, expected", [
    ({}, 128),                                   # default target 1024
    ({"target_tokens": 1024}, 128),
    ({"target_tokens": 200}, 100),
    ({"target_tokens": 256}, 128),               # a parent holds two segments or more
    ({"target_tokens": 64}, 48),                 # never below min_segment_tokens
    ({"target_tokens": 64, "min_segment_tokens": 8}, 32),
    ({"k": 0.7}, 128),
    ({"target_tokens": 256, "max_segment_tokens": 200}, 200),  # explicit wins
])
def test_default_max_segment_tokens_is_at_most_half_the_target(kwargs, expected):
    chunker = hashing_chunker(segmenter="texttiling", **kwargs)
    assert chunker.max_segment_tokens == expected


@pytest.mark.parametrize("cuts", [((5, 1), (3, 2)), ((0, 1),), ((12, 1),), ((4, -1),), [(4, 1)], ((4.0, 1),),
                                  ((4, 1, 2),), ((True, 1),)])
def test_bad_cuts_are_refused_at_construction(cuts):
    from hseg.chunking.chunks import Segment

    with pytest.raises(ValueError, match="segment 0: cuts must be"):
        Segment("s0", "d", 0, 0, 12, "One. Two. 3.", 4, 0, 3, cuts=cuts)
    assert Segment("s0", "d", 0, 0, 12, "One. Two. 3.", 4, 0, 3, cuts=((4, 2), (9, 4))).cuts == ((4, 2), (9, 4))
