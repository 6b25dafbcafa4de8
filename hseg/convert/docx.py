"""DOCX to markdown with python-docx: headings from the paragraph's outline level, read the way Word reads it.

A paragraph is a heading when it (or its style, or a style that one is based on) has an outline level:
Word's ``Heading 1`` .. ``Heading 9`` styles have levels 0 .. 8, and a custom style made a heading in
Word's paragraph dialog has one too; ``Title`` is read as the level above ``Heading 1``. Lists become
``-`` items, tables markdown rows, in the body's order. A DOCX has no fixed pages (Word lays them
out when it shows the document), so the result has no page map.

Example:
    >>> convert_docx(Path("manual.docx")).text  # doctest: +SKIP
    '# Harbour Operations Manual\\n\\nThe harbour ...'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hseg.convert.result import Converted
from hseg.convert.support import need

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


class _Styles:
    """The outline level and name of each paragraph style, read once per style (python-docx looks a
    paragraph's style up anew on every access)."""

    def __init__(self) -> None:
        self._levels: dict[str | None, tuple[int | None, str]] = {}

    def of(self, paragraph: Any) -> tuple[int | None, str]:
        """``(outline level, style name)``: the level from the paragraph itself, else its style chain;
        ``-1`` for ``Title``, ``None`` for body text."""
        ppr = paragraph._p.pPr
        style_id = ppr.pStyle.val if ppr is not None and ppr.pStyle is not None else None
        if style_id not in self._levels:
            style = paragraph.style
            self._levels[style_id] = (_chain_level(style), style.name if style is not None else "")
        level, name = self._levels[style_id]
        own = _level(ppr)
        return (own if own is not _UNSET else level), name


_UNSET: Any = object()


def _level(ppr: Any) -> Any:
    """The outline level a ``w:pPr`` sets (``None``: body text), or ``_UNSET``."""
    found = ppr.find(f"{_W}outlineLvl") if ppr is not None else None
    if found is None:
        return _UNSET
    level = int(found.get(f"{_W}val"))
    return None if level >= 9 else level  # 9: explicitly body text


def _chain_level(style: Any) -> int | None:
    while style is not None:
        if style.name == "Title":
            return -1
        level = _level(style.element.pPr)
        if level is not _UNSET:
            return level
        style = style.base_style
    return None


def _is_list(paragraph: Any, style_name: str) -> bool:
    ppr = paragraph._p.pPr
    if ppr is not None and ppr.find(f"{_W}numPr") is not None:
        return True
    return style_name.startswith(("List Bullet", "List Number", "List Paragraph"))


def _table(table: Any) -> str:
    rows = [[" ".join(cell.text.split()) for cell in row.cells] for row in table.rows]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    lines = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in rows]
    lines.insert(1, "|" + " --- |" * width)
    return "\n".join(lines)


def convert_docx(path: Path) -> Converted:
    """The markdown of the DOCX file at ``path``."""
    docx = need("docx", "DOCX")
    from docx.table import Table

    document = docx.Document(str(path))
    styles = _Styles()
    items: list[tuple[Any, str, int | None, str]] = []  # (item, text, level, style name)
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            items.append((item, "", None, ""))
        else:
            text = " ".join(item.text.split())
            if text:
                items.append((item, text, *styles.of(item)))
    has_title = any(level == -1 for _, _, level, _ in items)
    blocks: list[str] = []
    for item, text, level, name in items:
        if isinstance(item, Table):
            blocks.append(_table(item))
        elif level is not None:  # Title above Heading 1 when there is one
            blocks.append("#" * min(6, level + 1 + has_title) + " " + text)
        elif _is_list(item, name):
            if blocks and blocks[-1].startswith("- ") and "\n\n" not in blocks[-1]:
                blocks[-1] += "\n- " + text
                continue
            blocks.append("- " + text)
        else:
            blocks.append(text)
    return Converted("\n\n".join(b for b in blocks if b), None, "docx")
