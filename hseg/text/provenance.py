"""Where stored text came from: a map from character offsets of the stored text to source locations.

How and why: docs/design.md, ``hseg.text.provenance``.

Example:
    >>> text, pages = SourceMap.from_pages(["# Tides\\n\\nThe moon pulls.", "Twice a day."], [4, 5])
    >>> text
    '# Tides\\n\\nThe moon pulls.\\n\\nTwice a day.'
    >>> pages.spans
    ((0, 24, 4), (26, 38, 5))
    >>> pages.pages(10, 38), pages.page_at(30), pages.heading_path(30)
    ((4, 5), 5, ('Tides',))
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hseg.text.structure import Heading, find_headings, path_at

#: what a span's number counts: the pages of a PDF or the slides of a presentation
UNITS = ("page", "slide")
#: what joins two pages in :meth:`SourceMap.from_pages` unless told otherwise: a paragraph break, so
#: the sentence splitter never runs the last sentence of a page into the first of the next
PAGE_SEPARATOR = "\n\n"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class SourceMap:
    """A map from offsets of a stored text of ``length`` characters to its pages (or slides).

    Attributes:
        length: the length of the text the map is of.
        spans: ``(start, end, number)`` triples, sorted, non-overlapping, non-empty, inside
            ``[0, length)``, with numbers (1 and up) that never decrease.
        unit: ``"page"`` or ``"slide"`` (:data:`UNITS`).
        headings: the markdown headings of the text (``()`` for text not read as markdown); not part
            of the map's value (two maps of the same spans are equal), derived from the text.

    Raises ``ValueError`` naming the field, the value and the fix when any of this does not hold.

    Example:
        >>> SourceMap(20, ((0, 8, 1), (10, 20, 2))).pages(5, 12)
        (1, 2)
        >>> SourceMap(20, ((0, 8, 1), (6, 20, 2)))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: SourceMap spans: span (6, 20, 2) overlaps or precedes (0, 8, 1); ...
    """

    length: int
    spans: tuple[tuple[int, int, int], ...]
    unit: str = "page"
    headings: tuple[Heading, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not _is_int(self.length) or self.length < 0:
            raise ValueError(f"SourceMap length must be an int >= 0 (the stored text's length), got {self.length!r}")
        if self.unit not in UNITS:
            raise ValueError(f"SourceMap unit must be one of {UNITS}, got {self.unit!r}")
        if not isinstance(self.spans, tuple):
            raise ValueError(f"SourceMap spans must be a tuple of (start, end, number) int triples, got "
                             f"{type(self.spans).__name__}; pass tuple(spans)")
        before: tuple[int, int, int] | None = None
        for span in self.spans:
            if not (isinstance(span, tuple) and len(span) == 3 and all(_is_int(x) for x in span)):
                raise ValueError(f"SourceMap spans: each span must be a (start, end, number) tuple of ints, "
                                 f"got {span!r:.80}")
            start, end, number = span
            if not 0 <= start < end <= self.length:
                raise ValueError(f"SourceMap spans: span {span} must satisfy 0 <= start < end <= {self.length} "
                                 "(the text's length); leave empty pages out")
            if number < 1:
                raise ValueError(f"SourceMap spans: span {span} has {self.unit} number {number}; numbers start "
                                 "at 1 (add 1 to a 0-based page index)")
            if before is not None and start < before[1]:
                raise ValueError(f"SourceMap spans: span {span} overlaps or precedes {before}; give spans sorted "
                                 "by offset and non-overlapping")
            if before is not None and number < before[2]:
                raise ValueError(f"SourceMap spans: span {span} has a lower {self.unit} number than {before} "
                                 "before it; numbers must not decrease along the text")
            before = span
        if not isinstance(self.headings, tuple) or not all(isinstance(h, Heading) for h in self.headings):
            raise ValueError("SourceMap headings must be a tuple of hseg.text.structure.Heading "
                             "(build the map with from_spans or from_pages to read them from the text)")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_spans(cls, text: str, spans: Sequence[Sequence[int]], *, unit: str = "page",
                   markdown: bool = True) -> SourceMap:
        """The map of ``text`` from explicit ``(start, end, number)`` spans; ``markdown=True`` reads
        the text's headings for :meth:`heading_path`.

        Example:
            >>> SourceMap.from_spans("Slide one.\\nSlide two.", [(0, 10, 1), (11, 21, 2)], unit="slide").unit
            'slide'
        """
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        if isinstance(spans, (str, bytes)) or not isinstance(spans, Sequence):
            raise ValueError(f"spans must be a sequence of (start, end, number) triples, got {type(spans).__name__}")
        triples = tuple(tuple(s) if isinstance(s, (list, tuple)) else s for s in spans)
        return cls(len(text), triples, unit, tuple(find_headings(text)) if markdown else ())  # type: ignore[arg-type]

    @classmethod
    def from_pages(cls, pages: Sequence[str], numbers: Sequence[int] | None = None, *,
                   separator: str = PAGE_SEPARATOR, unit: str = "page",
                   markdown: bool = True) -> tuple[str, SourceMap]:
        """Join the texts of consecutive pages with ``separator``; returns the joined text and its map.

        ``numbers`` are the pages' numbers (default 1, 2, ...); page ``i``'s span covers exactly its
        text (``joined[start:end] == pages[i]``), the separators lie on no page, and a page with no text
        has no span (there is nothing on it to cite).

        Example:
            >>> text, m = SourceMap.from_pages(["One.", "", "Three."])
            >>> text, m.spans
            ('One.\\n\\n\\n\\nThree.', ((0, 4, 1), (8, 14, 3)))
        """
        if isinstance(pages, str) or not isinstance(pages, Sequence):
            raise ValueError(f"pages must be a sequence of page texts, got {type(pages).__name__}")
        for i, page in enumerate(pages):
            if not isinstance(page, str):
                raise ValueError(f"pages[{i}] must be a str, got {type(page).__name__}")
        if not isinstance(separator, str):
            raise ValueError(f"separator must be a str, got {type(separator).__name__}")
        nums = list(range(1, len(pages) + 1)) if numbers is None else list(numbers)
        if len(nums) != len(pages):
            raise ValueError(f"numbers has {len(nums)} items for {len(pages)} pages; give one number per page")
        spans: list[tuple[int, int, int]] = []
        at = 0
        for i, (page, number) in enumerate(zip(pages, nums)):
            at += len(separator) if i else 0
            if page:
                spans.append((at, at + len(page), number))
            at += len(page)
        text = separator.join(pages)
        return text, cls(len(text), tuple(spans), unit, tuple(find_headings(text)) if markdown else ())

    # ------------------------------------------------------------------ questions
    def _check_range(self, start: int, end: int) -> None:
        if not (_is_int(start) and _is_int(end)) or not 0 <= start <= end <= self.length:
            raise ValueError(f"range [{start!r}, {end!r}) must satisfy 0 <= start <= end <= {self.length} "
                             "(the mapped text's length)")

    def pages(self, start: int, end: int) -> tuple[int, ...]:
        """The numbers of the pages (slides) whose spans share a character with ``[start, end)``, in
        order, each once (``()`` for an empty range or one on no page).

        Example:
            >>> SourceMap(30, ((0, 10, 1), (12, 20, 2), (20, 30, 2))).pages(9, 25)
            (1, 2)
        """
        self._check_range(start, end)
        if start == end:
            return ()
        # spans are sorted and disjoint, so both their starts and their ends are sorted
        first = bisect.bisect_right(self.spans, start, key=lambda s: s[1])
        last = bisect.bisect_left(self.spans, end, key=lambda s: s[0])
        out: list[int] = []
        for _, _, number in self.spans[first:last]:
            if not out or out[-1] != number:
                out.append(number)
        return tuple(out)

    def pages_of(self, text: str, start: int, end: int) -> tuple[int, ...]:
        """The pages of ``text[start:end]`` (``text`` is the mapped text) without its leading and
        trailing whitespace: the pages a chunk's words are on.

        Example:
            >>> text, m = SourceMap.from_pages(["Page one ends.", "\\nPage two."])
            >>> m.pages(0, 17), m.pages_of(text, 0, 17)
            ((1, 2), (1,))
        """
        self._check_range(start, end)
        if len(text) != self.length:
            raise ValueError(f"text has {len(text)} characters but the SourceMap maps {self.length}; "
                             "give the text the map was built for")
        piece = text[start:end]
        lead = len(piece) - len(piece.lstrip())
        trimmed = piece.strip()
        return self.pages(start + lead, start + lead + len(trimmed)) if trimmed else ()

    def page_at(self, offset: int) -> int | None:
        """The page (slide) of the character at ``offset``, ``None`` when it is on none.

        Example:
            >>> SourceMap(10, ((0, 4, 7),)).page_at(3), SourceMap(10, ((0, 4, 7),)).page_at(4)
            (7, None)
        """
        if not _is_int(offset) or not 0 <= offset < self.length:
            raise ValueError(f"offset must be an int in [0, {self.length}) (the mapped text's length), got {offset!r}")
        pages = self.pages(offset, offset + 1)
        return pages[0] if pages else None

    def heading_path(self, offset: int) -> tuple[str, ...]:
        """The titles of the markdown headings the character at ``offset`` lies under, outermost first.

        Example:
            >>> SourceMap.from_spans("# A\\n\\nx\\n\\n## B\\n\\ny", [(0, 15, 1)]).heading_path(14)
            ('A', 'B')
        """
        if not _is_int(offset) or not 0 <= offset <= self.length:
            raise ValueError(f"offset must be an int in [0, {self.length}] (the mapped text's length), got {offset!r}")
        return path_at(self.headings, offset)

    def within(self, start: int, end: int) -> tuple[tuple[int, int, int], ...]:
        """The spans cut to ``[start, end)`` (offsets stay absolute): the part of the map a chunk of
        that range carries.

        Example:
            >>> SourceMap(30, ((0, 10, 1), (12, 30, 2))).within(5, 20)
            ((5, 10, 1), (12, 20, 2))
        """
        self._check_range(start, end)
        first = bisect.bisect_right(self.spans, start, key=lambda s: s[1])
        last = bisect.bisect_left(self.spans, end, key=lambda s: s[0])
        return tuple((max(a, start), min(b, end), n) for a, b, n in self.spans[first:last] if start < end)

    # ------------------------------------------------------------------ stored form
    def encode(self) -> str:
        """The map as a JSON string (its unit and spans; the headings are read again from the text).

        Example:
            >>> SourceMap(10, ((0, 4, 1),), "slide").encode()
            '{"unit":"slide","length":10,"spans":[[0,4,1]]}'
        """
        return json.dumps({"unit": self.unit, "length": self.length, "spans": [list(s) for s in self.spans]},
                          separators=(",", ":"))

    @classmethod
    def decode(cls, text: str, value: str, *, markdown: bool = True) -> SourceMap:
        """The map :meth:`encode` wrote, for ``text`` (whose length it must match).

        Example:
            >>> m = SourceMap.from_spans("abc def", [(0, 3, 1), (4, 7, 2)])
            >>> SourceMap.decode("abc def", m.encode()) == m
            True
        """
        try:
            raw = json.loads(value)
            unit, length, spans = raw["unit"], raw["length"], raw["spans"]
        except (TypeError, ValueError, KeyError):
            raise ValueError(f"value is not a SourceMap's encoded form (SourceMap.encode): {value!r:.80}") from None
        if not isinstance(text, str) or length != len(text):
            given = len(text) if isinstance(text, str) else type(text).__name__
            raise ValueError(f"the encoded SourceMap maps {length!r} characters, the text has {given}; "
                             "give the text it was made for")
        if not isinstance(spans, list) or not all(isinstance(s, list) for s in spans):
            raise ValueError(f"value's spans must be a list of [start, end, number] lists, got {spans!r:.80}")
        return cls.from_spans(text, [tuple(s) for s in spans], unit=unit, markdown=markdown)


def cite_pages(pages: tuple[int, int] | None, unit: str = "page") -> str:
    """Pages as a reader cites them: ``"p. 12"``, ``"p. 12–13"`` (slides: ``"slide 4"``); ``""`` for none.

    Example:
        >>> cite_pages((12, 13)), cite_pages((7, 7)), cite_pages((4, 5), "slide"), cite_pages(None)
        ('p. 12–13', 'p. 7', 'slides 4–5', '')
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    if pages is None:
        return ""
    first, last = pages
    span = str(first) if first == last else f"{first}\u2013{last}"
    if unit == "slide":
        return ("slide " if first == last else "slides ") + span
    return "p. " + span
