"""The converters of PDF, DOCX, PPTX and HTML (issue 53): documents written in the test from one outline
(:mod:`benchmarks.harness.documents`) come back as markdown with the outline's headings at its levels,
each page's (slide's) text mapped to its number, with every socket closed while they convert; a missing
library names the install command; what a converter cannot read is refused in one line.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.harness.documents import OUTLINE, PAGE_SENTENCES, book, headings, write
from hseg.convert import CONVERTED_SUFFIXES, Converted, Pieces, convert, converter_for
from hseg.errors import FormatSupportMissing, HsegError, UnreadableDocumentError
from hseg.text.structure import find_headings

pytest.importorskip("pypdf")
pytest.importorskip("docx")
pytest.importorskip("pptx")
pytest.importorskip("markdownify")
pytest.importorskip("fpdf")


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """A converter that opened a connection (a model or font download) fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a converter opened a socket")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _relative(pairs: list[tuple[int, str]]) -> list[tuple[int, str]]:
    top = min(level for level, _ in pairs)
    return [(level - top + 1, title) for level, title in pairs]


def _headings(done: Converted) -> list[tuple[int, str]]:
    return _relative([(h.level, h.title) for h in find_headings(done.text)])


@pytest.mark.parametrize("suffix", [".pdf", ".docx", ".html"])
def test_headings_come_back_at_their_levels(tmp_path: Path, suffix: str) -> None:
    done = convert(write(tmp_path / f"manual{suffix}", OUTLINE))
    assert _headings(done) == headings(OUTLINE)
    for sentence in PAGE_SENTENCES.values():
        assert sentence in done.text


def test_pdf_without_bookmarks_takes_headings_from_font_sizes(tmp_path: Path) -> None:
    outline = book(4)
    done = convert(write(tmp_path / "plain.pdf", outline, bookmarks=False, running="Handbook, 2026 edition"))
    assert _headings(done) == headings(outline)
    # the running head and the page numbers are dropped
    assert "2026 edition" not in done.text and "Page 2" not in done.text


def test_pdf_and_pptx_map_every_page_to_its_number(tmp_path: Path) -> None:
    for suffix, unit in ((".pdf", "page"), (".pptx", "slide")):
        done = convert(write(tmp_path / f"manual{suffix}", OUTLINE))
        assert done.pages is not None and done.pages.unit == unit
        assert [n for _, _, n in done.pages.spans] == [1, 2, 3]
        for page, sentence in PAGE_SENTENCES.items():
            at = done.text.index(sentence)
            assert done.pages.pages(at, at + len(sentence)) == (page,)
        for start, end, _ in done.pages.spans:  # a page's span holds its text, not the blank line after it
            assert done.text[start:end] == done.text[start:end].strip()


def test_pptx_slide_titles_are_headings(tmp_path: Path) -> None:
    done = convert(write(tmp_path / "deck.pptx", OUTLINE))
    titles = [b.text for i, b in enumerate(OUTLINE) if b.new_page or i == 0]
    assert [(h.level, h.title) for h in find_headings(done.text)] == [(1, t) for t in titles]
    assert done.pages is not None and done.pages.heading_path(done.text.index(PAGE_SENTENCES[2])) == (titles[1],)


def test_html_drops_navigation_scripts_and_styles(tmp_path: Path) -> None:
    done = convert(write(tmp_path / "page.html", OUTLINE))
    assert done.pages is None
    for noise in ("NAVIGATION_TEXT", "SCRIPT_TEXT", "navy", "Home"):
        assert noise not in done.text
    from hseg.convert.html import html_to_markdown

    # the page's own characters are kept, not escaped; links keep their text only
    assert html_to_markdown("<p>Set <a href='/x'>max_depth</a> to 2*3.</p>") == "Set max_depth to 2*3."


def test_docx_title_style_and_lists(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Annual Report", level=0)  # the Title style
    document.add_heading("Revenue", level=1)
    document.add_paragraph("Revenue rose.")
    document.add_paragraph("first point", style="List Bullet")
    document.add_paragraph("second point", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text, table.cell(1, 0).text, table.cell(1, 1).text = "Q", "EUR", "Q1", "4"
    document.save(str(tmp_path / "r.docx"))
    text = convert(tmp_path / "r.docx").text
    assert text == ("# Annual Report\n\n## Revenue\n\nRevenue rose.\n\n- first point\n- second point\n\n"
                    "| Q | EUR |\n| --- | --- |\n| Q1 | 4 |")


def test_pdf_joins_hyphenated_words_and_a_paragraph_across_pages(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.cell(0, 6, "The gantry crane lifts forty tonnes when the wind is calm and the oper-", new_x="LMARGIN",
             new_y="NEXT")
    pdf.cell(0, 6, "ator has checked the cable and the", new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    pdf.cell(0, 6, "hook before every lift.")
    pdf.output(str(tmp_path / "j.pdf"))
    done = convert(tmp_path / "j.pdf")
    assert done.text == ("The gantry crane lifts forty tonnes when the wind is calm and the operator has checked the "
                         "cable and the hook before every lift.")
    assert done.pages is not None and done.pages.pages_of(done.text, 0, len(done.text)) == (1, 2)
    assert done.pages.page_at(done.text.index("hook")) == 2


def test_unreadable_files_are_refused_in_one_line(tmp_path: Path) -> None:
    from fpdf import FPDF

    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4 this is not a PDF at all")
    with pytest.raises(UnreadableDocumentError, match="not a readable PDF"):
        convert(bad)
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(10, 10, 50, 50)  # a page with no text: what a scan without OCR looks like to a reader
    pdf.output(str(tmp_path / "scan.pdf"))
    with pytest.raises(UnreadableDocumentError, match="no text layer") as exc:
        convert(tmp_path / "scan.pdf")
    assert "\n" not in str(exc.value) and isinstance(exc.value, (HsegError, ValueError))
    with pytest.raises(ValueError, match="is not a file hseg converts"):
        convert(tmp_path / "notes.md")
    for suffix in (".docx", ".pptx"):
        (tmp_path / f"bad{suffix}").write_bytes(b"PK\x03\x04 a damaged archive")
        with pytest.raises(UnreadableDocumentError, match=f"not a readable {suffix[1:].upper()} file"):
            convert(tmp_path / f"bad{suffix}")
    with pytest.raises(FileNotFoundError, match="no such file"):
        convert(tmp_path / "gone.pdf")


@pytest.mark.parametrize("suffix,module", [(".pdf", "pypdf"), (".docx", "docx"), (".pptx", "pptx"),
                                           (".html", "markdownify")])
def test_a_missing_library_names_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      suffix: str, module: str) -> None:
    path = write(tmp_path / f"m{suffix}", OUTLINE)
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if it were not installed
    with pytest.raises(FormatSupportMissing, match=r'pip install "hseg\[formats\]"') as exc:
        convert(path)
    assert isinstance(exc.value, ImportError) and exc.value.module == module


def test_converter_for_reads_the_suffix() -> None:
    assert {converter_for(f"a{s.upper()}") is not None for s in CONVERTED_SUFFIXES} == {True}
    assert converter_for("a.md") is None and converter_for("a.txt") is None


@given(st.lists(st.tuples(st.text(max_size=6), st.one_of(st.none(), st.integers(1, 4)), st.sampled_from(["", "\n\n"])),
                max_size=12))
def test_pieces_map_each_piece_to_its_page(parts: list[tuple[str, int | None, str]]) -> None:
    parts = sorted(parts, key=lambda p: p[1] or 0)  # pages never go back
    pieces = Pieces()
    where = []
    for text, page, before in parts:
        pieces.add(text, page, before)
        where.append((len("".join(p for p in pieces._parts)) - len(text), text, page))
    done = pieces.done("test")
    assert done.pages is not None
    for start, text, page in where:
        if text:
            assert done.pages.pages(start, start + len(text)) == ((page,) if page is not None else ())


def test_pdf_bookmarks_without_the_section_number_still_find_their_heading(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    for level, number, title in ((0, "2", "Cargo Handling"), (1, "2.1", "Cranes"), (1, "2.2", "Forklifts")):
        pdf.start_section(title, level=level)  # the bookmark says "Cranes", the page "2.1 Cranes"
        pdf.set_font("Helvetica", "B", 16 - 2 * level)
        pdf.cell(0, 10, f"{number} {title}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, f"Text about {title.lower()} at the port, one ordinary sentence.")
    pdf.output(str(tmp_path / "n.pdf"))
    done = convert(tmp_path / "n.pdf")
    assert [(h.level, h.title) for h in find_headings(done.text)] == [
        (1, "2 Cargo Handling"), (2, "2.1 Cranes"), (2, "2.2 Forklifts")]


def test_pptx_reads_groups_and_tables(tmp_path: Path) -> None:
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Grouped"
    group = slide.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(2), Inches(3), Inches(1)).text_frame.text = "Inside a group."
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(4), Inches(4), Inches(1)).table
    table.cell(0, 0).text, table.cell(1, 1).text = "a", "d"
    deck.save(str(tmp_path / "g.pptx"))
    done = convert(tmp_path / "g.pptx")
    assert done.text == "# Grouped\n\nInside a group.\n\n| a |  |\n| --- | --- |\n|  | d |"
    assert done.pages is not None and done.pages.spans == ((0, len(done.text), 1),)
