"""What a converter returns: the document as markdown text and, for paged formats, its :class:`SourceMap`.

:class:`Converted` holds the markdown and the map from its character offsets to the page (PDF) or
slide (PPTX) each character came from; :class:`Pieces` builds both at once, so a converter appends
text piece by piece, each with its page, and never computes an offset by hand.

Example:
    >>> pieces = Pieces(unit="slide")
    >>> pieces.add("# Tides", 1); pieces.add("The moon pulls.", 1, "\\n\\n"); pieces.add("# Moorings", 2, "\\n\\n")
    >>> done = pieces.done("pptx")
    >>> done.pages.spans, done.text[done.pages.spans[1][0]:done.pages.spans[1][1]]
    (((0, 24, 1), (26, 36, 2)), '# Moorings')
"""

from __future__ import annotations

from dataclasses import dataclass

from hseg.text.provenance import SourceMap


@dataclass(frozen=True)
class Converted:
    """A converted document: ``text`` (markdown), ``pages`` (its page or slide map; ``None`` for a
    format without pages: DOCX, HTML) and ``format`` (the converter's name: ``"pdf"``, ``"docx"``, ...).

    Example:
        >>> Converted("# Title", None, "html").text
        '# Title'
    """

    text: str
    pages: SourceMap | None
    format: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise ValueError(f"Converted text must be a str, got {type(self.text).__name__}")
        if self.pages is not None and self.pages.length != len(self.text):
            raise ValueError(f"Converted pages map {self.pages.length} characters but the text has {len(self.text)}; "
                             "build both with Pieces")


class Pieces:
    """The text of a document being converted and the page of each piece of it.

    ``add(text, page, before)`` appends ``before`` (a separator) and then ``text``, which is on ``page``
    (``None``: on none). A separator between two pieces of one page is on that page, one between pages
    on none: each page's text is one span.
    """

    def __init__(self, unit: str = "page") -> None:
        self.unit = unit
        self._parts: list[str] = []
        self._length = 0
        self._spans: list[tuple[int, int, int]] = []

    def add(self, text: str, page: int | None, before: str = "") -> None:
        if not self._parts:
            before = ""  # nothing to separate from
        same = bool(self._spans) and page is not None and self._spans[-1] == (self._spans[-1][0], self._length, page)
        for piece, on in ((before, page if same else None), (text, page)):
            if not piece:
                continue
            start, self._length = self._length, self._length + len(piece)
            self._parts.append(piece)
            if on is None:
                continue
            if self._spans and self._spans[-1][2] == on and self._spans[-1][1] == start:
                self._spans[-1] = (self._spans[-1][0], self._length, on)
            else:
                self._spans.append((start, self._length, on))

    @property
    def empty(self) -> bool:
        return not self._parts

    def done(self, fmt: str, *, paged: bool = True) -> Converted:
        """The :class:`Converted` of what was added (``paged=False``: no page map)."""
        text = "".join(self._parts)
        pages = SourceMap.from_spans(text, self._spans, unit=self.unit) if paged else None
        return Converted(text, pages, fmt)
