"""The source map (issue 53): stored-text offsets to pages or slides, and heading paths.

Property tests: pages joined by ``from_pages`` are covered exactly by their spans, and the pages of
any range are those whose spans share a character with it, checked against a character-by-character
reading of the map; the encoded form reads back equal.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hseg.text.provenance import SourceMap
from hseg.text.structure import find_headings, path_at

PAGE_TEXT = st.text(alphabet=st.sampled_from("ab \n#-.é"), max_size=30)


@st.composite
def joined_pages(draw: st.DrawFn) -> tuple[list[str], list[int], str, str, SourceMap]:
    pages = draw(st.lists(PAGE_TEXT, max_size=8))
    gaps = draw(st.lists(st.integers(0, 3), min_size=len(pages), max_size=len(pages)))
    numbers: list[int] = []
    n = 0
    for g in gaps:
        n += g + (1 if not numbers else 0)
        numbers.append(max(n, 1))
    separator = draw(st.sampled_from(["\n\n", "", "\f", " | "]))
    text, source_map = SourceMap.from_pages(pages, numbers, separator=separator)
    return pages, numbers, separator, text, source_map


def page_of_each_char(source_map: SourceMap) -> list[int | None]:
    owner: list[int | None] = [None] * source_map.length
    for start, end, number in source_map.spans:
        for i in range(start, end):
            owner[i] = number
    return owner


@settings(max_examples=200, deadline=None)
@given(joined_pages())
def test_page_spans_cover_each_page_exactly(case: tuple[list[str], list[int], str, str, SourceMap]) -> None:
    pages, numbers, separator, text, source_map = case
    assert text == separator.join(pages)
    assert source_map.length == len(text)
    non_empty = [(p, n) for p, n in zip(pages, numbers) if p]
    assert [(text[a:b], n) for a, b, n in source_map.spans] == non_empty
    # what no page covers is exactly the separators
    assert sum(b - a for a, b, _ in source_map.spans) == len(text) - len(separator) * max(len(pages) - 1, 0)


@settings(max_examples=200, deadline=None)
@given(joined_pages(), st.data())
def test_pages_of_a_range_are_those_whose_spans_intersect_it(
        case: tuple[list[str], list[int], str, str, SourceMap], data: st.DataObject) -> None:
    _, _, _, text, source_map = case
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    owner = page_of_each_char(source_map)
    expected = sorted({n for n in owner[start:end] if n is not None})
    assert list(source_map.pages(start, end)) == expected
    assert source_map.within(start, end) == tuple(
        (max(a, start), min(b, end), n) for a, b, n in source_map.spans if a < end and b > start and start < end)
    for i in range(start, end):
        assert source_map.page_at(i) == owner[i]
    trimmed = text[start:end].strip()
    lead = len(text[start:end]) - len(text[start:end].lstrip())
    want = sorted({n for n in owner[start + lead:start + lead + len(trimmed)] if n is not None})
    assert list(source_map.pages_of(text, start, end)) == want
    assert SourceMap.decode(text, source_map.encode()) == source_map


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["# A\n\n", "## B\n\n", "text.\n\n", "Title\n=====\n\n", "```\n# no\n```\n"]),
                max_size=10))
def test_heading_path_is_the_structure_modules(parts: list[str]) -> None:
    text, source_map = SourceMap.from_pages(parts, separator="")
    headings = find_headings(text)
    for offset in range(len(text) + 1):
        assert source_map.heading_path(offset) == path_at(headings, offset)
    _, plain = SourceMap.from_pages(parts, separator="", markdown=False)
    assert plain.heading_path(len(text)) == ()
    assert plain == source_map  # headings are derived, not part of the value


def test_from_spans_keeps_slides() -> None:
    text = "# Plan\n\nGoals.\n\n# Budget\n\nMoney."
    slides = SourceMap.from_spans(text, [(0, 14, 1), (16, len(text), 2)], unit="slide")
    assert slides.pages(0, len(text)) == (1, 2)
    assert slides.heading_path(20) == ("Budget",)
    assert slides.encode().startswith('{"unit":"slide"')


@pytest.mark.parametrize("spans, message", [
    (((0, 5, 1), (4, 8, 2)), "overlaps or precedes"),
    (((4, 8, 1), (0, 2, 2)), "overlaps or precedes"),
    (((0, 5, 2), (6, 8, 1)), "must not decrease"),
    (((0, 0, 1),), "0 <= start < end <= 10"),
    (((0, 11, 1),), "0 <= start < end <= 10"),
    (((0, 5, 0),), "numbers start at 1"),
    (((0, 5),), "(start, end, number) tuple of ints"),
    (((0, 5, True),), "(start, end, number) tuple of ints"),
    ([(0, 5, 1)], "must be a tuple"),
])
def test_bad_spans_are_refused_naming_the_fix(spans: object, message: str) -> None:
    with pytest.raises(ValueError, match="SourceMap spans") as info:
        SourceMap(10, spans)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="unit must be one of"):
        SourceMap(10, (), "chapter")
    with pytest.raises(ValueError, match="length must be an int"):
        SourceMap(-1, ())
    with pytest.raises(ValueError, match="numbers has 1 items for 2 pages"):
        SourceMap.from_pages(["a", "b"], [1])
    with pytest.raises(ValueError, match=r"pages\[1\] must be a str"):
        SourceMap.from_pages(["a", b"b"])  # type: ignore[list-item]
    source_map = SourceMap(10, ((0, 5, 1),))
    with pytest.raises(ValueError, match=r"range \[3, 11\)"):
        source_map.pages(3, 11)
    with pytest.raises(ValueError, match="give the text the map was built for"):
        source_map.pages_of("short", 0, 3)
    with pytest.raises(ValueError, match="give the text it was made for"):
        SourceMap.decode("abc", source_map.encode())
    with pytest.raises(ValueError, match="encoded form"):
        SourceMap.decode("abc", "not json")
