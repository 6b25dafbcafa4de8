"""Small PDF, DOCX, PPTX and HTML documents written in the test from one outline, so that a converter's
headings and pages can be checked against what the writer put there (no binary fixtures in the repository).

An outline is a list of :class:`Block` s: headings (level 1 to 3) and paragraphs, with a page break
wherever ``Block.new_page`` is set. :func:`write` renders it as ``.pdf`` (fpdf2: larger bold headings,
and bookmarks when ``bookmarks=True``), ``.docx`` (python-docx's ``Heading N`` styles, a page break
before each ``new_page`` block), ``.pptx`` (python-pptx: a slide per page, its first heading as the
slide title) or ``.html`` (``<h1>``..``<h3>``, a ``<nav>``, a ``<script>`` and a ``<style>`` that a
converter must drop).

Example:
    >>> path = write(tmp_path / "manual.pdf", OUTLINE)  # doctest: +SKIP
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Block:
    text: str
    level: int = 0  #: 0: a paragraph; 1-3: a heading of that level
    new_page: bool = False  #: a page (slide) starts with this block


def _para(topic: str, n: int) -> str:
    return " ".join(f"The {topic} note number {i} explains one plain fact about {topic} for the reader."
                    for i in range(n))


#: a three-page manual: a title, two chapters with sections, a paragraph per section
OUTLINE: list[Block] = [
    Block("Harbour Operations Manual", 1),
    Block(_para("harbour", 3)),
    Block("Tides and Moorings", 2),
    Block(_para("tide", 4)),
    Block("Spring tides", 3),
    Block("Spring tides raise the water by two metres at the outer quay. " + _para("spring", 3)),
    Block("Cargo Handling", 2, new_page=True),
    Block(_para("cargo", 4)),
    Block("Cranes", 3),
    Block("The gantry crane lifts forty tonnes on a calm day. " + _para("crane", 3)),
    Block("Safety Rules", 2, new_page=True),
    Block("Every visitor wears a yellow helmet beyond the gate. " + _para("safety", 3)),
]

#: the text each page (slide) of :data:`OUTLINE` holds: one sentence to find on each
PAGE_SENTENCES = {1: "Spring tides raise the water by two metres at the outer quay.",
                  2: "The gantry crane lifts forty tonnes on a calm day.",
                  3: "Every visitor wears a yellow helmet beyond the gate."}


def book(chapters: int) -> list[Block]:
    """A longer outline: a title, then ``chapters`` chapters of three sections, each chapter from a new page,
    each section a few paragraphs (about two pages of PDF per chapter)."""
    out = [Block("Port Authority Handbook", 1), Block(_para("handbook", 3))]
    for c in range(1, chapters + 1):
        out.append(Block(f"Chapter {c}: Berth {c} Procedures", 2, new_page=c > 1))
        out.append(Block(_para(f"berth {c}", 4)))
        for s in range(1, 4):
            out.append(Block(f"Section {c}.{s} Duty {s} at berth {c}", 3))
            out += [Block(_para(f"duty {c}.{s}.{p}", 5)) for p in range(2)]
    return out


def headings(outline: list[Block]) -> list[tuple[int, str]]:
    """The ``(level, title)`` of every heading of ``outline``, in order."""
    return [(b.level, b.text) for b in outline if b.level]


def write(path: Path, outline: list[Block] = OUTLINE, *, bookmarks: bool = True, running: str = "") -> Path:
    """Render ``outline`` into ``path`` by its suffix; returns ``path``. A PDF gets bookmarks unless
    ``bookmarks=False``, and with ``running`` that text as a running head and "Page N" as a foot on every page."""
    if path.suffix.lower() == ".pdf":
        _pdf(path, outline, bookmarks, running)
        return path
    writers = {".docx": _docx, ".pptx": _pptx, ".html": _html, ".htm": _html}
    writers[path.suffix.lower()](path, outline, bookmarks)
    return path


def _pdf(path: Path, outline: list[Block], bookmarks: bool, running: str = "") -> None:
    from fpdf import FPDF

    class Paper(FPDF):
        def header(self) -> None:
            if running:
                self.set_font("Helvetica", "I", 8)
                self.cell(0, 8, running, align="C")
                self.ln(10)

        def footer(self) -> None:
            if running:
                self.set_y(-15)
                self.set_font("Helvetica", "I", 8)
                self.cell(0, 8, f"Page {self.page_no()}", align="C")

    pdf = Paper(format="A4")
    pdf.set_auto_page_break(True, margin=20)
    pdf.add_page()
    sizes = {1: 20, 2: 16, 3: 13}
    for i, block in enumerate(outline):
        if block.new_page and i:
            pdf.add_page()
        if block.level:
            if bookmarks:
                pdf.start_section(block.text, level=block.level - 1)
            pdf.set_font("Helvetica", "B", sizes[block.level])
            pdf.multi_cell(0, sizes[block.level] * 0.6, block.text)
            pdf.ln(2)
        else:
            pdf.set_font("Helvetica", "", 11)
            pdf.multi_cell(0, 6, block.text)
            pdf.ln(4)
    pdf.output(str(path))


def _docx(path: Path, outline: list[Block], bookmarks: bool) -> None:
    import docx
    from docx.enum.text import WD_BREAK

    doc = docx.Document()
    for i, block in enumerate(outline):
        if block.new_page and i:
            doc.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
        if block.level:
            doc.add_heading(block.text, level=block.level)
        else:
            doc.add_paragraph(block.text)
    doc.save(str(path))


def _pptx(path: Path, outline: list[Block], bookmarks: bool) -> None:
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    slides: list[list[Block]] = []
    for i, block in enumerate(outline):
        if block.new_page or i == 0:
            slides.append([])
        slides[-1].append(block)
    for blocks in slides:
        slide = prs.slides.add_slide(prs.slide_layouts[5])  # title only
        slide.shapes.title.text = blocks[0].text
        box = slide.shapes.add_textbox(Inches(0.5), Inches(1.5), Inches(9), Inches(5)).text_frame
        box.word_wrap = True
        for j, block in enumerate(blocks[1:]):
            para = box.paragraphs[0] if j == 0 else box.add_paragraph()
            para.text = block.text
    prs.save(str(path))


def _html(path: Path, outline: list[Block], bookmarks: bool) -> None:
    body = "\n".join(f"<h{b.level}>{html.escape(b.text)}</h{b.level}>" if b.level else f"<p>{html.escape(b.text)}</p>"
                     for b in outline)
    path.write_text(
        "<!DOCTYPE html><html><head><title>Harbour</title><style>p { color: navy; }</style>"
        "<script>var tracking = 'SCRIPT_TEXT';</script></head><body>"
        "<nav><a href='/'>Home</a> <a href='/menu'>NAVIGATION_TEXT</a></nav>"
        f"<main>{body}</main><script>console.log('SCRIPT_TEXT');</script></body></html>",
        encoding="utf-8")
