"""The document converters, hseg's (:mod:`hseg.convert`) against the candidates: headings kept, seconds per page.

    python -m benchmarks.convert_formats [--chapters 10] [--repeat 3] [--converters hseg docling ...]

One handbook outline (:func:`benchmarks.harness.documents.book`: a title, chapters from a new page,
three sections each) is written as PDF (with bookmarks, and again without, both with a running head
and a page-number foot), DOCX, PPTX (a slide per page, its first heading the slide title) and HTML
(with a ``<nav>``, a ``<script>`` and a ``<style>``); each converter that reads a format converts it
``--repeat`` times. Per (converter, file) it prints:

- ``headings``: true headings found as markdown headings with their title and their level (levels
  counted from the shallowest heading of each side, so a converter that starts at ``##`` is not
  penalised), over the true headings; for PPTX the true headings are the slide titles;
- ``extra``: markdown headings that are no true heading (running heads, body lines);
- ``leaks``: whether the running head, the page numbers (PDF) or the navigation and script text
  (HTML) are in the output;
- ``s/page``: the fastest run's seconds over the PDF's page count (the same content in every format).

A converter whose library is not importable is skipped with a line saying so; run the script again
with another environment to measure it (the candidates are not hseg's dependencies).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from hseg.text.structure import find_headings

from .harness.documents import book, headings, write

RUNNING = "Port Authority Handbook - 2026 edition"


def _hseg(path: Path) -> str:
    from hseg.convert import convert

    return convert(path).text


def _docling(path: Path) -> str:
    from docling.backend.html_backend import HTMLDocumentBackend
    from docling.backend.mspowerpoint_backend import MsPowerpointDocumentBackend
    from docling.backend.msword_backend import MsWordDocumentBackend
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.document import InputDocument

    kinds = {".docx": (InputFormat.DOCX, MsWordDocumentBackend),
             ".pptx": (InputFormat.PPTX, MsPowerpointDocumentBackend),
             ".html": (InputFormat.HTML, HTMLDocumentBackend)}
    fmt, backend = kinds[path.suffix]
    doc = InputDocument(path_or_stream=path, format=fmt, backend=backend)
    return str(backend(doc, path).convert().export_to_markdown())


def _liteparse(path: Path) -> str:
    from liteparse import LiteParse

    return str(LiteParse(output_format="markdown", ocr_enabled=False, quiet=True).parse(str(path)).text)


def _markitdown(path: Path) -> str:
    from markitdown import MarkItDown

    return str(MarkItDown(enable_plugins=False).convert(str(path)).text_content)


#: converter name: (what it reads, the function)
CONVERTERS: dict[str, tuple[tuple[str, ...], Callable[[Path], str]]] = {
    "hseg": ((".pdf", ".docx", ".pptx", ".html"), _hseg),
    "docling": ((".docx", ".pptx", ".html"), _docling),
    "liteparse": ((".pdf",), _liteparse),
    "markitdown": ((".pdf", ".docx", ".pptx", ".html"), _markitdown),
}


def _relative(pairs: list[tuple[int, str]]) -> set[tuple[int, str]]:
    top = min((level for level, _ in pairs), default=1)
    return {(level - top, " ".join(title.split())) for level, title in pairs}


def score(markdown: str, truth: list[tuple[int, str]]) -> tuple[int, int]:
    """(true headings found with their relative level, markdown headings that are no true heading)."""
    found = _relative([(h.level, h.title) for h in find_headings(markdown)])
    want = _relative(truth)
    titles = {t for _, t in want}
    return len(found & want), len({t for _, t in found} - titles)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chapters", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--converters", nargs="+", default=list(CONVERTERS), choices=list(CONVERTERS))
    args = ap.parse_args(argv)
    outline = book(args.chapters)
    truth = headings(outline)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = {
            "pdf (bookmarks)": write(folder / "book.pdf", outline, running=RUNNING),
            "pdf (no bookmarks)": write(folder / "plain.pdf", outline, bookmarks=False, running=RUNNING),
            "docx": write(folder / "book.docx", outline),
            "pptx": write(folder / "book.pptx", outline),
            "html": write(folder / "book.html", outline),
        }
        import pypdf

        pages = len(pypdf.PdfReader(str(files["pdf (bookmarks)"])).pages)
        slides = [b for i, b in enumerate(outline) if b.new_page or i == 0]
        print(f"{args.chapters} chapters: {len(truth)} headings, {pages} PDF pages, {len(slides)} slides")
        print("| converter | file | headings | extra | leaks | s/page |")
        print("|---|---|---|---|---|---|")
        for name in args.converters:
            reads, convert = CONVERTERS[name]
            for label, path in files.items():
                if path.suffix not in reads:
                    continue
                want = [(1, b.text) for b in slides] if path.suffix == ".pptx" else truth
                try:
                    best, text = float("inf"), ""
                    for _ in range(args.repeat):
                        t0 = time.perf_counter()
                        text = convert(path)
                        best = min(best, time.perf_counter() - t0)
                except ImportError as exc:
                    print(f"| {name} | {label} | skipped: {exc} | | | |")
                    break
                except Exception as exc:  # a candidate that fails on a file: say so, measure the rest
                    print(f"| {name} | {label} | failed: {type(exc).__name__}: {str(exc).splitlines()[-1]:.80} | | | |")
                    continue
                hit, extra = score(text, want)
                leaks = [w for w in ("edition", "Page 2", "NAVIGATION_TEXT", "SCRIPT_TEXT", "color: navy") if w in text]
                print(f"| {name} | {label} | {hit}/{len(want)} | {extra} | {', '.join(leaks) or 'none'} | "
                      f"{best / pages:.4f} |")


if __name__ == "__main__":
    main()
