"""PDF to markdown with pypdf: the text layer read line by line, headings from the PDF's bookmarks when it
has them and from font sizes when it has none, and each page's text mapped to its page number.

How and why: docs/design.md, ``hseg.convert.pdf``.

Example:
    >>> done = convert_pdf(Path("manual.pdf"))  # doctest: +SKIP
    >>> done.pages.page_at(done.text.index("gantry crane"))  # doctest: +SKIP
    2
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hseg.convert.result import Converted, Pieces
from hseg.convert.support import need
from hseg.errors import UnreadableDocumentError

#: a line this much larger than the body text (or more) may be a heading, when the PDF has no outline
HEADING_SIZE_RATIO = 1.15
#: ... and only if it is this short: a long line in a large font is a pull quote or a banner
HEADING_MAX_CHARS = 150
#: a running head or foot is no longer than this
RUNNING_MAX_CHARS = 80
#: a gap between baselines this many times the page's usual line spacing ends a paragraph
PARAGRAPH_GAP_RATIO = 1.3


@dataclass
class _Line:
    text: str
    size: float
    y: float
    sizes: Counter[float] = field(default_factory=Counter)
    heading: int = 0  #: its heading level; 0: body text


def _page_lines(page: Any) -> list[_Line]:
    lines: list[_Line] = []
    current: list[tuple[str, float, float]] = []

    def close() -> None:
        text = " ".join("".join(t for t, _, _ in current).split())
        if text:
            sizes: Counter[float] = Counter()
            for t, s, _ in current:
                sizes[s] += len(t.strip())
            ys = [y for t, _, y in current if t.strip()]
            lines.append(_Line(text, sizes.most_common(1)[0][0], ys[0] if ys else 0.0, sizes))
        current.clear()

    def visit(text: str, cm: Any, tm: Any, font: Any, size: float) -> None:
        scale = abs(float(tm[3]) * float(cm[3])) or 1.0
        effective = round(float(size) * scale * 2) / 2
        y = float(tm[5]) * float(cm[3]) + float(cm[5])
        parts = text.split("\n")
        for i, part in enumerate(parts):
            if i:
                close()
            if part:
                current.append((part, effective, y))

    page.extract_text(visitor_text=visit)
    close()
    return lines


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _body_size(pages: list[list[_Line]]) -> float:
    """The font size most characters of the document have."""
    weight: Counter[float] = Counter()
    for lines in pages:
        for line in lines:
            weight.update(line.sizes)
    return weight.most_common(1)[0][0] if weight else 0.0


def _drop_running_lines(pages: list[list[_Line]], body: float) -> None:
    """Remove page numbers and running heads: short lines, no larger than the body text, near a page's top or
    bottom, that recur (digits aside) on most pages."""
    if len(pages) < 3:
        return

    def key(line: _Line) -> str:
        return re.sub(r"\d+", "#", _norm(line.text))

    def edges(lines: list[_Line]) -> list[_Line]:
        near = lines[:2] + lines[-2:] if len(lines) > 4 else lines
        return [line for line in near if len(line.text) <= RUNNING_MAX_CHARS and line.size < body * HEADING_SIZE_RATIO]

    seen = Counter(k for lines in pages for k in {key(line) for line in edges(lines)})
    running = {k for k, n in seen.items() if n >= max(3, 0.6 * len(pages))}
    for lines in pages:
        drop = {id(line) for line in edges(lines) if key(line) in running}
        lines[:] = [line for line in lines if id(line) not in drop]


def _outline(reader: Any) -> list[tuple[int, str, int]]:
    """``(depth from 1, title, page index)`` of every bookmark that points to a page."""
    out: list[tuple[int, str, int]] = []

    def walk(items: Any, depth: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
                continue
            try:
                page = reader.get_destination_page_number(item)
            except Exception:  # a bookmark to a named destination that is missing: not a heading we can place
                continue
            title = " ".join(str(item.title or "").split())
            if title and page is not None and page >= 0:
                out.append((min(depth, 6), title, page))

    try:
        walk(reader.outline, 1)
    except Exception:  # a damaged outline: read the document without it
        return []
    return out


#: a section number in front of a heading ("2.1 ", "A.3. ", "IV "), which a bookmark's title often leaves out
_NUMBER = re.compile(r"^(?:[0-9]+|[A-Z]|[IVXLC]+)(?:\.[0-9]+)*\.?\s+")


def _headings_from_outline(pages: list[list[_Line]], outline: list[tuple[int, str, int]]) -> int:
    """Mark the lines each bookmark's title names on its page (or the lines that, joined, name it; a
    section number before the title allowed); returns how many bookmarks were found."""
    found = 0
    for depth, title, index in outline:
        if index >= len(pages):
            continue
        want = _norm(title)
        lines = pages[index]
        for i, line in enumerate(lines):
            first = _norm(line.text)
            number = _NUMBER.match(first)
            if number and not want.startswith(first) and want.startswith(first[number.end():]):
                first = first[number.end():]
            if line.heading or not first or not want.startswith(first):
                continue
            joined, j = first, i
            while joined != want and j + 1 < len(lines) and want.startswith(joined + " " + _norm(lines[j + 1].text)):
                j += 1
                joined += " " + _norm(lines[j].text)
            if joined == want:
                line.text = " ".join(" ".join(x.text for x in lines[i : j + 1]).split())
                line.heading = depth
                del lines[i + 1 : j + 1]
                found += 1
                break
    return found


def _headings_from_sizes(pages: list[list[_Line]], body: float) -> None:
    large = sorted({line.size for lines in pages for line in lines if line.size >= body * HEADING_SIZE_RATIO},
                   reverse=True)
    levels = {size: min(i + 1, 6) for i, size in enumerate(large)}
    for lines in pages:
        for line in lines:
            if line.size in levels and len(line.text) <= HEADING_MAX_CHARS:
                line.heading = levels[line.size]
        # a heading set on two lines is one heading
        i = 0
        while i + 1 < len(lines):
            a, b = lines[i], lines[i + 1]
            if a.heading and a.heading == b.heading and len(a.text) + len(b.text) <= HEADING_MAX_CHARS:
                a.text += " " + b.text
                del lines[i + 1]
            else:
                i += 1


def _join(a: str, b: str) -> str:
    if re.search(r"\w-$", a) and b[:1].islower():
        return a[:-1] + b
    return a + " " + b


def _blocks(lines: list[_Line]) -> list[tuple[str, bool]]:
    """``(markdown block, is a heading)`` of one page's lines."""
    gaps = [abs(a.y - b.y) for a, b in zip(lines, lines[1:]) if not a.heading and not b.heading and a.size == b.size]
    usual = statistics.median(gaps) if gaps else 0.0
    blocks: list[tuple[str, bool]] = []
    previous: _Line | None = None
    for line in lines:
        if line.heading:
            blocks.append(("#" * line.heading + " " + line.text, True))
        elif (previous is None or previous.heading or previous.size != line.size
              or (usual and abs(previous.y - line.y) > usual * PARAGRAPH_GAP_RATIO)):
            blocks.append((line.text, False))
        else:
            blocks[-1] = (_join(blocks[-1][0], line.text), False)
        previous = line
    return blocks


def convert_pdf(path: Path) -> Converted:
    """The markdown of the PDF file at ``path``, with a map of each page's text to its page number."""
    pypdf = need("pypdf", "PDF")
    try:
        reader = pypdf.PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableDocumentError(f"{path}: the PDF is encrypted with a password; decrypt it first")
        pages = [_page_lines(page) for page in reader.pages]
        outline = _outline(reader)
    except UnreadableDocumentError:
        raise
    except Exception as exc:  # pypdf's errors for a damaged file are of many types
        raise UnreadableDocumentError(f"{path}: not a readable PDF ({type(exc).__name__}: {exc})") from exc
    if pages and not any(pages):
        raise UnreadableDocumentError(f"{path}: the PDF has no text layer (a scanned document?); run OCR on it "
                                      "first (e.g. ocrmypdf)")
    body = _body_size(pages)
    _drop_running_lines(pages, body)
    # bookmarks name the headings when they point at them; an outline whose titles are mostly not on
    # their pages (a table of contents of other words) leaves the font sizes to tell
    if not outline or _headings_from_outline(pages, outline) < len(outline) / 2:
        for lines in pages:
            for line in lines:
                line.heading = 0
        _headings_from_sizes(pages, body)
    pieces = Pieces(unit="page")
    open_paragraph = False  # the previous page ended in a paragraph that its last sentence leaves open
    for number, lines in enumerate(pages, start=1):
        for i, (block, heading) in enumerate(_blocks(lines)):
            runs_on = i == 0 and open_paragraph and not heading and not block[:1].isupper()
            pieces.add(block, number, " " if runs_on else "\n\n")
        if lines:
            last = lines[-1]
            open_paragraph = not last.heading and not re.search(r"[.!?:;)\"'”’]$", last.text)
    return pieces.done("pdf")
