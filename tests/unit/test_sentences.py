"""Tests of hseg.text.sentences: span invariants (property-based), splitting rules, the token cap."""

from __future__ import annotations

import doctest
import logging
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hseg.text.sentences
from hseg.text.sentences import _GraphemeEnds, split_sentences, word_count
from hseg.text.spans import Span


def units(text: str, **kwargs: object) -> list[str]:
    return [s.of(text) for s in split_sentences(text, **kwargs)]  # type: ignore[arg-type]


def assert_valid(text: str, spans: list[Span]) -> None:
    """Ordered, non-overlapping, tight, and covering every non-whitespace character once."""
    covered = [False] * len(text)
    prev_end = 0
    for span in spans:
        assert isinstance(span, Span)
        assert prev_end <= span.start < span.end <= len(text), (span, prev_end)
        piece = span.of(text)
        assert piece == piece.strip() and piece, repr(piece)
        for i in range(span.start, span.end):
            covered[i] = True
        prev_end = span.end
    missing = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not missing, [text[i] for i in missing[:10]]


def subword_count(text: str) -> int:
    """A stand-in subword tokenizer: ceil(len/3) tokens per word."""
    return sum(math.ceil(len(w) / 3) for w in text.split())


def assert_fits(text: str, spans: list[Span], max_tokens: int, count) -> None:  # type: ignore[no-untyped-def]
    for span in spans:
        if count(span.of(text)) > max_tokens:
            # The one documented exception: a single grapheme cluster cannot be split further.
            assert _GraphemeEnds(text, span.start, span.end)[0] == span.end, repr(span.of(text))


# --------------------------------------------------------------------------- properties

MARKDOWN_PIECES = [
    "word", "Dr.", "U.S.", "e.g.", "3.14", "$1.5", "Hello", "the", "x", ".", "!", "?", "...", "…", "。", "！",
    '"', "'", "(", ")", " ", " ", "  ", "\t", "\n", "\n", "\n\n", "\r\n", "\u2028", "#", "# ", "## ", "|", "| a |",
    "|---|", "```", "```python\n", "~~~", "- ", "* ", "1. ", "> ", "---", "\\n", "https://example.com/a.b?x=1",
    "你好", "مرحبا", "Straße", "😀", "🇩🇪", "e\u0301", "\u200d", "\x00", "👩\u200d👩\u200d👧",
]
markdownish = st.lists(st.sampled_from(MARKDOWN_PIECES) | st.text(max_size=4), max_size=60).map("".join)
any_text = st.text() | markdownish
counters = st.sampled_from([word_count, len, subword_count])
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(any_text)
def test_spans_are_valid_on_any_text(text: str) -> None:
    assert_valid(text, split_sentences(text))


@FAST
@given(any_text, st.integers(min_value=1, max_value=12), counters)
def test_capped_spans_are_valid_and_fit(text: str, max_tokens: int, count) -> None:  # type: ignore[no-untyped-def]
    spans = split_sentences(text, max_tokens=max_tokens, count_tokens=count)
    assert_valid(text, spans)
    assert_fits(text, spans, max_tokens, count)


@FAST
@given(markdownish, st.integers(min_value=1, max_value=6))
def test_default_counter_is_a_word_count(text: str, max_tokens: int) -> None:
    spans = split_sentences(text, max_tokens=max_tokens)
    assert_valid(text, spans)
    assert all(len(s.of(text).split()) <= max_tokens for s in spans)


# --------------------------------------------------------------------------- punctuation


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Dr. Smith met Mrs. Jones at 5 p.m. They talked.", ["Dr. Smith met Mrs. Jones at 5 p.m.", "They talked."]),
        ("The U.S. Army left. It was over.", ["The U.S. Army left.", "It was over."]),
        ("Use fruit, e.g. apples. Or i.e. pears.", ["Use fruit, e.g. apples.", "Or i.e. pears."]),
        ("J. R. R. Tolkien wrote it. See Fig. 3 and No. 5.", ["J. R. R. Tolkien wrote it.", "See Fig. 3 and No. 5."]),
        ("Pi is 3.14. It cost $1.5 million. Done.", ["Pi is 3.14.", "It cost $1.5 million.", "Done."]),
        ("Version 2.0.1 shipped. Section 4.2. Results follow.",
         ["Version 2.0.1 shipped.", "Section 4.2.", "Results follow."]),
        (
            "See https://example.com/a.b?x=1 for details. Then stop.",
            ["See https://example.com/a.b?x=1 for details.", "Then stop."],
        ),
        ('He said "I left." She stayed.', ['He said "I left."', "She stayed."]),
        ('"Really?" he asked. (It was.) Fine.', ['"Really?" he asked.', "(It was.)", "Fine."]),
        ("Wait... What? No!! Ok?!", ["Wait...", "What?", "No!!", "Ok?!"]),
        ("Yahoo! is a company. Fine.", ["Yahoo! is a company.", "Fine."]),
        ("Miami, Fla., is warm. Yes.", ["Miami, Fla., is warm.", "Yes."]),
        ("I love it 😀. You too 👍🏽! Flags 🇩🇪 too.", ["I love it 😀.", "You too 👍🏽!", "Flags 🇩🇪 too."]),
    ],
)
def test_punctuation_rules(text: str, expected: list[str]) -> None:
    assert units(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("你好。我很好！谢谢？", ["你好。", "我很好！", "谢谢？"]),
        ("これはペンです。あれは本ですか？", ["これはペンです。", "あれは本ですか？"]),
        ("مرحبا. كيف حالك؟ أنا بخير.", ["مرحبا.", "كيف حالك؟", "أنا بخير."]),
        ("नमस्ते। आप कैसे हैं?", ["नमस्ते।", "आप कैसे हैं?"]),
        ("Die Straße ist lang. Sie endet hier.", ["Die Straße ist lang.", "Sie endet hier."]),
        ("Это предложение. Ещё одно!", ["Это предложение.", "Ещё одно!"]),
    ],
)
def test_non_english(text: str, expected: list[str]) -> None:
    assert units(text) == expected


@pytest.mark.parametrize("text", ["", " ", "\n\n\t ", "\u2028\u3000"])
def test_blank_input(text: str) -> None:
    assert split_sentences(text) == []
    assert split_sentences(text, max_tokens=3) == []


def test_lone_surrogates_and_nul_do_not_crash() -> None:
    text = "A\ud800b. C\x00d. E\udfff."
    assert units(text) == ["A\ud800b.", "C\x00d.", "E\udfff."]


# --------------------------------------------------------------------------- markdown and lines


def test_markdown_structure() -> None:
    text = (
        "# Title without period\n"
        "Intro sentence. Second one.\n"
        "\n"
        "- first item. still first\n"
        "- second item\n"
        "1. numbered item\n"
        "\n"
        "| name | value. x |\n"
        "|------|-------|\n"
        "| a | 1.5 |\n"
        "Prose after the table.\n"
        "\n"
        "```python\n"
        "x = 1. \n"
        "y = obj.attr\n"
        "```\n"
        "## Next heading\n"
        "---\n"
        "Done."
    )
    assert units(text) == [
        "# Title without period",
        "Intro sentence.",
        "Second one.",
        "- first item. still first",
        "- second item",
        "1. numbered item",
        "| name | value. x |",
        "|------|-------|",
        "| a | 1.5 |",
        "Prose after the table.",
        "```python\nx = 1. \ny = obj.attr\n```",
        "## Next heading",
        "---",
        "Done.",
    ]


def test_table_without_outer_pipes() -> None:
    text = "Intro line.\na | b\n--|--\nc. d | e. F\n\nEnd."
    assert units(text) == ["Intro line.", "a | b", "--|--", "c. d | e. F", "End."]


def test_unclosed_code_fence_runs_to_the_end() -> None:
    text = "Text.\n```\ncode. More code.\n\nstill code."
    assert units(text) == ["Text.", "```\ncode. More code.\n\nstill code."]


def test_line_per_message_and_continuations() -> None:
    text = "Hello there\nHow are you?\nI am fine thanks\nand you\nGreat"
    assert units(text) == ["Hello there", "How are you?", "I am fine thanks\nand you", "Great"]


def test_hard_wrapped_paragraph_is_reflowed() -> None:
    text = (
        "The committee met on Tuesday to discuss the budget for\n"
        "Anchorage and several other cities. Members agreed that\n"
        "Funding should rise. The vote was unanimous and the\n"
        "meeting ended early."
    )
    assert units(text) == [
        "The committee met on Tuesday to discuss the budget for\nAnchorage and several other cities.",
        "Members agreed that\nFunding should rise.",
        "The vote was unanimous and the\nmeeting ended early.",
    ]


def test_a_wrap_before_a_capitalised_word_in_a_paragraph_not_wrapped_throughout_is_no_sentence_end() -> None:
    # issue 47 item 10: two lines, or a paragraph with a line broken early, is not re-flowed as a whole;
    # a line that was full (its next word would not have fit) continues its sentence whatever the case
    two = ("The old lighthouse was taken down in 1877 and its upper part was rebuilt on Plymouth\n"
           "Hoe, where it still stands as a memorial.")
    assert units(two) == [two]
    uneven = ("Smeaton built the third lighthouse on the rocks. It stood until 1877,\n"
              "when erosion of the rock forced its removal; the upper part was rebuilt on Plymouth\n"
              "Hoe, where it still stands today as a memorial to its designer.")
    assert units(uneven) == ["Smeaton built the third lighthouse on the rocks.", uneven[49:]]
    # a title, a short line or a line ending a sentence still ends it
    titled = "Smeaton's Tower\nThe tower stood on the Eddystone rocks for more than a century before it was moved."
    assert units(titled) == ["Smeaton's Tower", titled[16:]]
    assert units("Hello there\nHow are you today, my old friend from the lighthouse keepers' club?") == [
        "Hello there", "How are you today, my old friend from the lighthouse keepers' club?"]
    ended = "The tower was moved to the Hoe in 1882 after the rock beneath it began to erode.\nIt stands there."
    assert units(ended) == [ended[:80], "It stands there."]


def test_escaped_line_breaks_of_dumps() -> None:
    text = "Steps:\\n\\n1. Log in to your account.\\n2. Click save.\\nthen wait"
    assert units(text) == ["Steps:\\n\\n", "1. Log in to your account.\\n", "2. Click save.\\nthen wait"]


# --------------------------------------------------------------------------- token cap


def test_long_unpunctuated_line_is_capped_quickly() -> None:
    text = " ".join(f"w{i % 97}" for i in range(60_000))  # ~ 200k characters, one line
    assert len(text) > 200_000
    calls = 0

    def counting(s: str) -> int:
        nonlocal calls
        calls += 1
        return word_count(s)

    # CPU time, which other jobs on a busy machine do not stretch as they do the wall clock (~0.15 s here)
    t0 = time.process_time()
    spans = split_sentences(text, max_tokens=128, count_tokens=counting)
    assert time.process_time() - t0 < 2.0
    assert_valid(text, spans)
    assert all(word_count(s.of(text)) <= 128 for s in spans)
    assert len(spans) == math.ceil(60_000 / 128)  # greedy: every piece but the last is full
    assert calls < 20 * len(spans)  # O(log n) counts per piece, not one per word


def test_one_huge_word_is_split_at_characters() -> None:
    text = "x" * 5000 + "e\u0301" * 100
    spans = split_sentences(text, max_tokens=64, count_tokens=len)
    assert_valid(text, spans)
    assert all(len(s) <= 64 for s in spans)
    assert all(text[s.end] != "\u0301" for s in spans if s.end < len(text))  # no mark cut off its letter


def test_code_block_is_cut_at_line_ends() -> None:
    body = "\n".join(f"a{i} = b{i} + c{i}" for i in range(10))  # 5 words per line
    text = f"```\n{body}\n```"
    pieces = units(text, max_tokens=11)
    assert pieces[0] == "```\na0 = b0 + c0\na1 = b1 + c1"
    assert all(word_count(p) <= 11 for p in pieces)
    whole_lines = {"```", *body.split("\n")}
    assert all(set(p.split("\n")) <= whole_lines for p in pieces)  # never a partial line


def test_tokenizer_overhead_is_respected() -> None:
    def with_special_tokens(s: str) -> int:
        return word_count(s) + 2  # e.g. [CLS] and [SEP]

    text = "one two three four five six seven eight nine ten eleven"
    pieces = units(text, max_tokens=5, count_tokens=with_special_tokens)
    assert pieces == ["one two three", "four five six", "seven eight nine", "ten eleven"]


def test_oversized_grapheme_is_kept_whole_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hseg.text.sentences"):
        pieces = units("ab 🇩🇪", max_tokens=1, count_tokens=len)
    assert pieces == ["a", "b", "🇩🇪"]
    assert "exceeds max_tokens=1" in caplog.text


@pytest.mark.parametrize("bad", [0, -3])
def test_non_positive_max_tokens_is_rejected(bad: int) -> None:
    with pytest.raises(ValueError, match=rf"max_tokens.*{bad}"):
        split_sentences("Some text.", max_tokens=bad)


def test_cap_that_leaves_no_room_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"max_tokens=2 leaves no room"):
        split_sentences("Some text.", max_tokens=2, count_tokens=lambda s: word_count(s) + 2)


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [({"max_tokens": 2.5}, "a"), ({"max_tokens": True}, "a"), ({"count_tokens": "len"}, "a"), ({}, None)],
)
def test_wrong_types_are_rejected(kwargs: dict, text: object) -> None:  # type: ignore[type-arg]
    with pytest.raises(TypeError):
        split_sentences(text, **kwargs)  # type: ignore[arg-type]


def test_docstring_examples() -> None:
    failures, _ = doctest.testmod(hseg.text.sentences)
    assert failures == 0
