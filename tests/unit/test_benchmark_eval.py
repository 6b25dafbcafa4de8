"""The Chroma-protocol metric, selection rules and span recovery of benchmarks/harness/evaluation.py.

Hand-computed cases, no model, no data files.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from benchmarks.harness.evaluation import (
    Chunk,
    Query,
    budget,
    evaluate,
    overlap_length,
    precision_omega,
    recover_spans,
    score,
    top_k,
    union,
)

A = "a" * 100  # corpus "A": offsets only matter
B = "b" * 100


def chunk(cid: str, start: int, end: int) -> Chunk:
    return Chunk(cid, start, end, (A if cid == "A" else B)[start:end])


def test_union_and_overlap():
    assert union([(5, 10), (0, 3), (8, 12), (12, 15), (20, 20)]) == [(0, 3), (5, 15)]
    assert overlap_length([(0, 10), (20, 30)], [(5, 25)]) == 10
    assert overlap_length([(0, 10)], [(10, 20)]) == 0


def test_partial_overlap():
    q = Query("q", "A", [(10, 20)])
    recall, precision, iou = score(q, [chunk("A", 15, 35)])
    # |E∩R| = 5, |E| = 10, Σ|chunk| = 20
    assert recall == pytest.approx(5 / 10)
    assert precision == pytest.approx(5 / 20)
    assert iou == pytest.approx(5 / (10 + 20 - 5))


def test_chunk_from_other_corpus_counts_only_in_denominators():
    q = Query("q", "A", [(10, 20)])
    # same offsets in corpus B: no intersection, but its 10 chars are retrieved
    recall, precision, iou = score(q, [chunk("A", 0, 15), chunk("B", 10, 20)])
    assert recall == pytest.approx(5 / 10)
    assert precision == pytest.approx(5 / 25)
    assert iou == pytest.approx(5 / (10 + 25 - 5))


def test_overlapping_and_duplicate_chunks_are_summed_not_unioned():
    q = Query("q", "A", [(10, 20), (40, 50)])
    got = [chunk("A", 0, 30), chunk("A", 20, 45), chunk("A", 0, 30)]
    recall, precision, iou = score(q, got)
    # R = [0,45): hit = 10 + 5 = 15 of |E| = 20; Σ|chunk| = 30 + 25 + 30 = 85 (report's convention)
    assert recall == pytest.approx(15 / 20)
    assert precision == pytest.approx(15 / 85)
    assert iou == pytest.approx(15 / (20 + 85 - 15))


def test_perfect_and_empty():
    q = Query("q", "A", [(10, 20)])
    assert score(q, [chunk("A", 10, 20)]) == (1.0, 1.0, 1.0)
    assert score(q, []) == (0.0, 0.0, 0.0)


def test_top_k():
    ranked = [chunk("A", i, i + 1) for i in range(10)]
    assert top_k(ranked, 5) == ranked[:5]
    assert top_k(ranked[:3], 5) == ranked[:3]


def test_budget_stops_at_first_misfit_and_keeps_one():
    ranked = [chunk("A", i, i + 1) for i in range(5)]
    # 400 + 500 = 900 fits, + 200 = 1100 does not: stop, even though the 4th (50) would fit
    assert budget(ranked, 1000, [400, 500, 200, 50, 10]) == ranked[:2]
    assert budget(ranked, 1000, [400, 600, 10, 10, 10]) == ranked[:2]  # exactly 1000 fits, then full
    assert budget(ranked, 1000, [100, 100, 100, 100, 100]) == ranked[:5]
    assert budget(ranked, 1000, [3000, 10, 10, 10, 10]) == ranked[:1]  # always at least one
    assert budget([], 1000, []) == []


def test_evaluate_rows():
    queries = [Query("q1", "A", [(10, 20)]), Query("q2", "B", [(0, 10)])]
    ranked = [[chunk("A", 0, 20), chunk("B", 0, 10)], [chunk("A", 0, 10), chunk("B", 0, 40)]]
    rows = evaluate("m", queries, ranked, count=len, k=1, budgets=[25], units=ranked[0])
    by = {(r["corpus"], r["setting"]): r for r in rows}
    assert set(by) == {(c, s) for c in ("A", "B", "pooled") for s in ("k=1", "B=25")}
    assert by[("A", "k=1")]["recall"] == pytest.approx(100.0)
    assert by[("B", "k=1")]["recall"] == pytest.approx(0.0)  # its top chunk is from A
    assert by[("pooled", "k=1")]["recall"] == pytest.approx(50.0)
    # B=25: q1 takes 20 + 10 = 30 > 25 -> one chunk; q2 takes only its first chunk (10 + 40 > 25)
    assert by[("pooled", "B=25")]["chunks"] == pytest.approx(1.0)
    assert by[("pooled", "B=25")]["tokens"] == pytest.approx(15.0)
    assert by[("A", "k=1")]["index_chunks"] == 1 and by[("pooled", "k=1")]["index_chunks"] == 2
    assert by[("pooled", "k=1")]["starved"] == 0 and by[("pooled", "B=25")]["starved"] == 0
    assert evaluate("m", queries, ranked, count=len, k=3, budgets=[])[-1]["starved"] == 2
    with pytest.raises(ValueError):
        evaluate("m", queries, ranked[:1], count=len)


def test_precision_omega_counts_touching_chunks_like_the_report():
    q = Query("q", "A", [(10, 20)])
    units = [chunk("A", 0, 10), chunk("A", 10, 15), chunk("A", 15, 20), chunk("A", 20, 30),
             chunk("A", 30, 40), chunk("B", 10, 20)]
    # every chunk touching [10, 20) (ends included) is taken: [0, 30) -> 10 / 30
    assert precision_omega(q, units) == pytest.approx(10 / 30)
    assert precision_omega(q, [chunk("A", 5, 25)]) == pytest.approx(10 / 20)


def test_recover_spans_with_overlap_and_repeats():
    corpus = "Alpha beta. Alpha beta.\n\nGamma delta. Alpha beta."
    # overlapping chunks (each starts inside the previous one)
    texts = ["Alpha beta. Alpha", "Alpha beta.\n\nGamma", "Gamma delta.", "Alpha beta."]
    got = recover_spans("c", corpus, texts)
    assert [(c.start, c.end) for c in got] == [(0, 17), (12, 30), (25, 37), (38, 49)]
    assert all(corpus[c.start:c.end] == c.text for c in got)
    # a repeated text maps to successive copies, not to the first one again
    got = recover_spans("c", corpus, ["Alpha beta.", "Alpha beta.", "Gamma delta. Alpha beta."])
    assert [(c.start, c.end) for c in got] == [(0, 11), (12, 23), (25, 49)]


def test_recover_spans_rejects_only_text_missing_after_the_previous_start():
    with pytest.raises(ValueError, match=r"c: chunk not found at or after offset 4: 'four'"):
        recover_spans("c", "one two three", ["one", "two", "four"])
    with pytest.raises(ValueError, match="offset 4: 'one'"):  # only before the previous chunk
        recover_spans("c", "one two three", ["two", "one"])
    # not an error: a repeated chunk may share its predecessor's start, and a dropped "x" is a gap
    got = recover_spans("c", "ab x ab", ["ab", "ab", "ab"])
    assert all("ab x ab"[c.start:c.end] == c.text for c in got)
    assert [c.start for c in got] == sorted(c.start for c in got)


COPYRIGHT = "copyright © 2011 dow jones & company. all rights reserved."


def line_spans(lines: list[str]) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for line in lines:
        spans.append((pos, pos + len(line)))
        pos += len(line) + 1
    return spans


def test_recover_spans_repeated_boilerplate_line():
    """A 10-K failure: repeated footer lines, and a chunk that is one of them on its own.

    The first copy of "page 12" after the previous chunk's start lies inside that chunk; mapping
    the chunk there left the second copy uncovered, and the old search raised "non-whitespace gap
    ... before 'copyright ...'" on the next chunk.
    """
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    lines = [COPYRIGHT, "page 12", "page 12", COPYRIGHT, "item 7. management's discussion and analysis"]
    corpus = "\n".join(lines)
    splitter = RecursiveCharacterTextSplitter(chunk_size=66, chunk_overlap=0, separators=["\n\n", "\n", " ", ""])
    texts = splitter.split_text(corpus)
    assert texts == [f"{COPYRIGHT}\npage 12", "page 12", COPYRIGHT, lines[4]]
    got = recover_spans("finance", corpus, texts)
    spans = line_spans(lines)
    assert [(c.start, c.end) for c in got] == [(0, spans[1][1]), spans[2], spans[3], spans[4]]
    assert all(corpus[c.start:c.end] == c.text for c in got)


def uncovered_non_space(corpus: str, chunks: list[Chunk]) -> int:
    """Non-whitespace characters of ``corpus`` that no chunk covers."""
    covered, total = 0, 0
    for start, end in union((c.start, c.end) for c in chunks) + [(len(corpus), len(corpus))]:
        total += len("".join(corpus[covered:start].split()))
        covered = end
    return total


def check_alignment(corpus: str, texts: list[str], got: list[Chunk]) -> None:
    assert [c.text for c in got] == [t for t in texts if t]
    assert all(corpus[c.start:c.end] == c.text for c in got)
    assert all(a.start <= b.start for a, b in zip(got, got[1:]))


# few distinct lines, so that lines, pieces of lines and whole chunks repeat
REPEATED_LINES = [COPYRIGHT, "page 12", "page 12", "item 7. md&a", "net sales rose 4%.", "a b", "a", ""]


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.sampled_from(REPEATED_LINES), min_size=1, max_size=30),
       size=st.integers(4, 150), overlap=st.sampled_from([0.0, 0.25, 0.5]),
       keep=st.sampled_from([True, False, "end"]), strip=st.booleans())
def test_recover_spans_langchain_splits_of_repeated_lines(lines, size, overlap, keep, strip):
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    corpus = "\n".join(lines)
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=size, chunk_overlap=int(size * overlap), keep_separator=keep, strip_whitespace=strip,
        separators=["\n\n", "\n", " ", ""])
    texts = splitter.split_text(corpus)
    # without keep_separator, LangChain re-joins pieces with the separator, so a run of empty lines
    # comes out shorter than it was: such chunks are not spans of the corpus at all
    assume(all(t in corpus for t in texts))
    got = recover_spans("c", corpus, texts)
    check_alignment(corpus, texts, got)
    # these separators are whitespace, so the chunks hold every other character of the corpus
    assert uncovered_non_space(corpus, got) == 0


@st.composite
def line_split(draw):
    """A corpus of repeated lines joined by separators (some not whitespace), and a split of it into
    runs of whole lines, each starting at or after the previous one (overlapping or not) and ending
    after it; separators between chunks that do not overlap are dropped."""
    lines = draw(st.lists(st.sampled_from([COPYRIGHT, "page 12", "a b", "a", "b"]), min_size=1, max_size=30))
    seps = draw(st.lists(st.sampled_from(["\n", "\n\n", " ", " | ", "."]), min_size=len(lines), max_size=len(lines)))
    corpus, starts, ends = "", [], []
    for line, sep in zip(lines, seps):
        starts.append(len(corpus))
        corpus += line
        ends.append(len(corpus))
        corpus += sep
    corpus = corpus[:ends[-1]]
    cuts = sorted(draw(st.sets(st.integers(1, len(lines) - 1), max_size=len(lines) - 1)) | {len(lines)}) \
        if len(lines) > 1 else [1]
    spans, first = [], 0
    for j, cut in enumerate(cuts):
        if j:
            first = max(first, cuts[j - 1] - draw(st.integers(0, 3)))
        spans.append((starts[first], ends[cut - 1]))
    return corpus, spans


@settings(max_examples=300, deadline=None)
@given(line_split())
def test_recover_spans_generated_splits_cover_as_much_as_the_truth(split):
    corpus, spans = split
    texts = [corpus[s:e] for s, e in spans]
    got = recover_spans("c", corpus, texts)
    check_alignment(corpus, texts, got)
    truth = [Chunk("c", s, e, corpus[s:e]) for s, e in spans]
    assert uncovered_non_space(corpus, got) <= uncovered_non_space(corpus, truth)


def test_recover_spans_many_identical_chunks_go_to_successive_copies():
    corpus = "\n".join(["| -- | -- |"] * 3000)
    got = recover_spans("c", corpus, ["| -- | -- |"] * 3000)
    assert [c.start for c in got] == [12 * i for i in range(3000)]


def test_token_windows_exact_spans_with_multibyte_text():
    pytest.importorskip("tiktoken")
    from benchmarks.harness.baselines import token_windows

    text = "Senjō no Valkyria 3 : 戦場のヴァルキュリア3 — “quoted” text … " * 20
    got = token_windows("c", text, 7, 3)
    assert all(text[c.start:c.end] == c.text for c in got)
    assert got[0].start == 0 and got[-1].end == len(text)
    assert all(b.start > a.start and b.start <= a.end for a, b in zip(got, got[1:]))  # overlapping windows


def test_sentence_groups_map_back_to_spans():
    from benchmarks.harness.baselines import spans_from_sentence_groups

    text = "One.  Two!\nThree? Four."
    sentences = [(0, 4), (6, 10), (11, 17), (18, 23)]
    got = spans_from_sentence_groups("c", text, sentences, ["One. Two!", "Three? Four."], " ")
    assert [(c.start, c.end) for c in got] == [(0, 10), (11, 23)]
    assert got[0].text == "One.  Two!"
    with pytest.raises(ValueError):
        spans_from_sentence_groups("c", text, sentences, ["One. Three?"], " ")


def _partitions(n: int, max_size: int):
    """Every split of ``range(n)`` into consecutive runs of at most ``max_size``."""
    if n == 0:
        yield []
        return
    for size in range(1, min(max_size, n) + 1):
        for rest in _partitions(n - size, max_size):
            yield [(0, size)] + [(a + size, b + size) for a, b in rest]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_cluster_pieces_finds_the_best_partition(n, max_pieces, seed):
    """ClusterSemanticChunker's dynamic programme against brute force over every partition."""
    import numpy as np

    from benchmarks.harness.baselines import cluster_pieces

    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, 5))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    sims = v @ v.T
    mean = float(sims[np.triu_indices(n, 1)].mean()) if n > 1 else 0.0
    band = np.zeros((n, max(max_pieces - 1, 1)))
    for d in range(1, min(max_pieces, n)):
        band[: n - d, d - 1] = np.diag(sims, d)

    def value(runs):
        return sum(sims[i, j] - mean for a, b in runs for i in range(a, b) for j in range(i + 1, b))

    got = cluster_pieces(band, mean, max_pieces)
    assert [a for a, _ in got] == [0, *(b for _, b in got[:-1])] and got[-1][1] == n
    assert all(b - a <= max_pieces for a, b in got)
    assert value(got) == pytest.approx(max(value(p) for p in _partitions(n, max_pieces)), abs=1e-9)


def test_cluster_semantic_chunker_on_documents_shorter_than_a_chunk():
    """Fewer pieces than a chunk may hold (here 1 to 3): one exact span, no error."""
    pytest.importorskip("tiktoken")
    from benchmarks.harness.baselines import cluster_semantic
    from hseg_testing.fakes import HashingEncoder

    chunker = cluster_semantic(200)
    for text in ["Short.", "A sentence about rivers. " * 4, "Engines and pistons turn the crank. " * 9]:
        got = chunker("c", text, HashingEncoder())
        assert got and all(text[c.start:c.end] == c.text for c in got)
