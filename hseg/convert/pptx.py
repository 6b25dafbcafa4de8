"""PPTX to markdown with python-pptx: a ``#`` heading per slide title, its text frames and tables in reading
order (top to bottom, then left to right), each slide's text mapped to its slide number.

Example:
    >>> done = convert_pptx(Path("deck.pptx"))  # doctest: +SKIP
    >>> done.pages.unit, done.pages.page_at(0)  # doctest: +SKIP
    ('slide', 1)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hseg.convert.result import Converted, Pieces
from hseg.convert.support import need

#: shapes whose tops differ by less than this (in EMU: 36,000 to the millimetre) are read as one row
_ROW_EMU = 36000


def _shapes(shapes: Iterable[Any]) -> Iterator[Any]:
    """The shapes in reading order (rows top to bottom, each left to right), groups opened."""
    from pptx.shapes.group import GroupShape

    ordered = sorted(shapes, key=lambda s: ((s.top or 0) // _ROW_EMU, s.left or 0))
    for shape in ordered:
        if isinstance(shape, GroupShape):
            yield from _shapes(shape.shapes)
        else:
            yield shape


def _blocks(shape: Any) -> list[str]:
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = [[" ".join(c.text.split()) for c in row.cells] for row in shape.table.rows]
        if not rows:
            return []
        lines = ["| " + " | ".join(r) + " |" for r in rows]
        lines.insert(1, "|" + " --- |" * len(rows[0]))
        return ["\n".join(lines)]
    if not getattr(shape, "has_text_frame", False) or not shape.has_text_frame:
        return []
    out = []
    for para in shape.text_frame.paragraphs:
        text = " ".join("".join(run.text for run in para.runs).split())
        if text:
            out.append("  " * para.level + ("- " if para.level else "") + text)
    return out


def convert_pptx(path: Path) -> Converted:
    """The markdown of the PPTX file at ``path``, with a map of each slide's text to its number."""
    pptx = need("pptx", "PPTX")
    presentation = pptx.Presentation(str(path))
    pieces = Pieces(unit="slide")
    for number, slide in enumerate(presentation.slides, start=1):
        title = slide.shapes.title
        blocks = []
        if title is not None and title.has_text_frame and title.text_frame.text.strip():
            blocks.append("# " + " ".join(title.text_frame.text.split()))
        for shape in _shapes(slide.shapes):
            if title is not None and shape.shape_id == title.shape_id:
                continue
            blocks.extend(_blocks(shape))
        for block in blocks:
            pieces.add(block, number, "\n\n")
    return pieces.done("pptx")
