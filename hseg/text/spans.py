"""Character spans: the one offset type of the package.

Every unit hseg produces (sentence, segment, cluster) is a half-open character range
``[start, end)`` into the *original* document string, so ``text[span.start:span.end]``
is always the unit's text. Nothing is stripped or re-joined.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Span:
    """A half-open character range ``[start, end)`` into a source string.

    Validated at construction so an inverted or negative span can never travel further.

    Example:
        >>> text = "Hello world. Bye."
        >>> s = Span(0, 12)
        >>> s.of(text)
        'Hello world.'
        >>> len(s)
        12
    """

    start: int
    end: int

    def __post_init__(self) -> None:
        if not isinstance(self.start, int) or not isinstance(self.end, int):
            raise TypeError(f"Span offsets must be int, got start={self.start!r}, end={self.end!r}")
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"invalid span: start={self.start}, end={self.end} (need 0 <= start <= end)")

    def __len__(self) -> int:
        return self.end - self.start

    def of(self, text: str) -> str:
        """The slice of ``text`` this span covers."""
        if self.end > len(text):
            raise ValueError(f"span end={self.end} is past the end of a text of length {len(text)}")
        return text[self.start : self.end]
