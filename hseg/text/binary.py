"""Text that is not text: the raw bytes of a PDF, an Office file or an image handed over as a string.

A loader that does not know a format often decodes its bytes anyway (LlamaIndex's ``SimpleDirectoryReader``
without its PDF reader gives a PDF's raw bytes as one Document), and chunking them would store pages
of ``%PDF-1.4 ... endobj`` that no question finds. :func:`binary_reason` says why a text looks like
such bytes: it starts with a binary format's signature, holds a NUL character, or control characters
(other than tab, line and page breaks) or U+FFFD replacement characters make up more than
:data:`MAX_ODD_SHARE` of its first :data:`SAMPLE` characters. :func:`check_not_binary` refuses it with
:class:`~hseg.errors.UnreadableDocumentError` naming the fix (convert the file first).

Example:
    >>> binary_reason("%PDF-1.7\\n1 0 obj << /Type /Catalog >>")
    'the raw bytes of a PDF file'
    >>> binary_reason("Tides rise twice a day.") is None
    True
"""

from __future__ import annotations

from hseg.errors import UnreadableDocumentError

#: how a binary format's bytes begin, as a loader that decoded them gives them (Latin-1 or UTF-8 with errors ignored)
SIGNATURES = {
    "%PDF-": "a PDF file",
    "PK\x03\x04": "a ZIP archive (a DOCX, PPTX or XLSX file is one)",
    "\x89PNG": "a PNG image",
    "GIF8": "a GIF image",
    "\xff\xd8\xff": "a JPEG image",
    "\xd0\xcf\x11\xe0": "an old Office file (DOC, XLS, PPT)",
}
#: the characters looked at for odd ones
SAMPLE = 65536
#: the share of control or replacement characters above which a text is taken for bytes
MAX_ODD_SHARE = 0.01
_ALLOWED = frozenset("\t\n\r\f\v")


def binary_reason(text: str) -> str | None:
    """What ``text`` looks like instead of text (``"the raw bytes of a PDF file"``), ``None`` for text."""
    head = text.lstrip("\ufeff \t\r\n")[:8]
    for signature, kind in SIGNATURES.items():
        if head.startswith(signature):
            return f"the raw bytes of {kind}"
    sample = text[:SAMPLE]
    if "\x00" in sample:
        return "binary data (it holds NUL characters)"
    odd = sum(1 for ch in sample if (ch < " " and ch not in _ALLOWED) or ch == "\ufffd" or "\x7f" <= ch < "\xa0")
    if sample and odd > 8 and odd / len(sample) > MAX_ODD_SHARE:
        return f"binary data ({odd} control or undecodable characters in its first {len(sample)})"
    return None


def check_not_binary(what: str, text: str) -> None:
    """Raise :class:`~hseg.errors.UnreadableDocumentError` naming ``what`` when ``text`` looks like bytes.

    Example:
        >>> check_not_binary("texts[0]", "PK\\x03\\x04\\x14\\x00")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        hseg.errors.UnreadableDocumentError: texts[0] looks like the raw bytes of a ZIP archive ...
    """
    reason = binary_reason(text)
    if reason is not None:
        raise UnreadableDocumentError(
            f"{what} looks like {reason}, not text: convert the file first (hseg.convert.convert(path) or "
            "`hseg index FILE` read PDF, DOCX, PPTX and HTML; in LlamaIndex or LangChain, a loader for its "
            "format such as PDFReader or PyPDFLoader)")
