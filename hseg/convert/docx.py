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

__all__ = ["convert_docx"]

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _outline_level(paragraph: Any) -> int | None:
    """The paragraph's outline level (0 = top), from the paragraph, else its style chain; ``None``: body text."""
    candidates = [paragraph._p.pPr]
    style = paragraph.style
    while style is not None:
        candidates.append(style.element.pPr)
        if style.name == "Title":
            return -1
        style = style.base_style
    for ppr in candidates:
        if ppr is None:
            continue
        found = ppr.find(f"{_W}outlineLvl")
        if found is not None:
            level = int(found.get(f"{_W}val"))
            return None if level >= 9 else level  # 9: explicitly body text
    return None


def _is_list(paragraph: Any) -> bool:
    ppr = paragraph._p.pPr
    if ppr is not None and ppr.find(f"{_W}numPr") is not None:
        return True
    name = paragraph.style.name if paragraph.style is not None else ""
    return name.startswith(("List Bullet", "List Number", "List Paragraph"))


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
    paragraphs = [p for p in document.iter_inner_content() if not isinstance(p, Table)]
    has_title = any(_outline_level(p) == -1 for p in paragraphs if p.text.strip())
    blocks: list[str] = []
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            blocks.append(_table(item))
            continue
        text = " ".join(item.text.split())
        if not text:
            continue
        level = _outline_level(item)
        if level is not None:  # Title above Heading 1 when there is one
            blocks.append("#" * min(6, level + 1 + has_title) + " " + text)
        elif _is_list(item):
            if blocks and blocks[-1].startswith("- ") and "\n\n" not in blocks[-1]:
                blocks[-1] += "\n- " + text
                continue
            blocks.append("- " + text)
        else:
            blocks.append(text)
    return Converted("\n\n".join(b for b in blocks if b), None, "docx")
