"""Documents that are not plain text, read into markdown with their headings: PDF, DOCX, PPTX and HTML.

:func:`convert` picks the converter by the file's suffix (:data:`CONVERTERS`) and returns a
:class:`Converted`: the markdown text (``#`` headings at the levels the source gives them) and, for
paged formats, the :class:`~hseg.text.provenance.SourceMap` from its character offsets to the page
(PDF) or slide (PPTX) each came from. Each format is read by a small maintained library (pypdf,
python-docx, python-pptx, markdownify), installed by the ``formats`` extra and imported only when a
file of its format is read; when it is missing, :class:`~hseg.errors.FormatSupportMissing` names
the install command. Nothing here loads a model or opens a network connection.

Example:
    >>> from hseg.convert import convert
    >>> done = convert("reports/annual.pdf")  # doctest: +SKIP
    >>> done.text[:40], done.pages.pages(0, 2000)  # doctest: +SKIP
    ('# Annual Report\\n\\nThe harbour handled 4', (1, 2))
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from hseg.convert.result import Converted, Pieces
from hseg.convert.support import INSTALL_HINT
from hseg.errors import HsegError, UnreadableDocumentError

__all__ = ["CONVERTERS", "CONVERTED_SUFFIXES", "INSTALL_HINT", "Converted", "Pieces", "convert", "converter_for"]


def _pdf(path: Path) -> Converted:
    from hseg.convert.pdf import convert_pdf

    return convert_pdf(path)


def _docx(path: Path) -> Converted:
    from hseg.convert.docx import convert_docx

    return convert_docx(path)


def _pptx(path: Path) -> Converted:
    from hseg.convert.pptx import convert_pptx

    return convert_pptx(path)


def _html(path: Path) -> Converted:
    from hseg.convert.html import convert_html

    return convert_html(path)


#: the converter of each suffix (lower case); the modules behind them are imported on first use
CONVERTERS: dict[str, Callable[[Path], Converted]] = {
    ".pdf": _pdf, ".docx": _docx, ".pptx": _pptx, ".html": _html, ".htm": _html, ".xhtml": _html,
}
#: the suffixes :func:`convert` reads
CONVERTED_SUFFIXES = tuple(CONVERTERS)


def converter_for(path: str | os.PathLike[str]) -> Callable[[Path], Converted] | None:
    """The converter of ``path``'s suffix, ``None`` for a file read as text as it is.

    Example:
        >>> converter_for("a.PDF") is CONVERTERS[".pdf"], converter_for("a.md")
        (True, None)
    """
    return CONVERTERS.get(Path(path).suffix.lower())


def convert(path: str | os.PathLike[str]) -> Converted:
    """The markdown (and page map) of the PDF, DOCX, PPTX or HTML file at ``path``.

    Raises ``ValueError`` for another suffix, :class:`~hseg.errors.FormatSupportMissing` when the
    format's library is not installed, :class:`~hseg.errors.UnreadableDocumentError` for a file its
    converter cannot read (damaged, encrypted, a PDF without a text layer), and ``OSError`` when the
    file cannot be opened.

    Example:
        >>> convert("slides/kickoff.pptx").pages.unit  # doctest: +SKIP
        'slide'
    """
    reader = converter_for(path)
    if reader is None:
        raise ValueError(f"path {os.fspath(path)!r} is not a file hseg converts; give one ending in "
                         f"{', '.join(CONVERTED_SUFFIXES)} (text and markdown files are read as they are)")
    if not Path(path).is_file():  # the libraries say "package not found" for a missing file
        raise FileNotFoundError(f"{os.fspath(path)}: no such file")
    try:
        return reader(Path(path))
    except (HsegError, OSError):
        raise
    except Exception as exc:  # a damaged file: each library fails in its own words and types
        kind = Path(path).suffix.lstrip(".").upper()
        raise UnreadableDocumentError(f"{os.fspath(path)}: not a readable {kind} file ({type(exc).__name__}: "
                                      f"{exc})") from exc
