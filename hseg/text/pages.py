"""Page Documents of one source joined into one text, with its :class:`~hseg.text.provenance.SourceMap`.

How and why: docs/design.md, ``hseg.text.pages``.

Example:
    >>> pages = ["Report 2024\\nThe tide rises twice a\\nday, driven by the moon-\\n",
    ...          "Report 2024\\nlight and grav-\\nity.", "Report 2024\\nEnd."]
    >>> text, source_map = join_pages(pages, [1, 2, 3])
    >>> text
    'The tide rises twice a\\nday, driven by the moonlight\\nand gravity.\\n\\nEnd.'
    >>> source_map.spans, source_map.pages_of(text, 40, 60)
    (((0, 51, 1), (52, 64, 2), (66, 70, 3)), (1, 2))
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hseg.text.provenance import SourceMap
from hseg.text.structure import source_name

logger = logging.getLogger(__name__)

#: the page keys of the loaders' page Documents: LangChain's ``page`` (0-based, ``PyPDFLoader`` and
#: ``PyMuPDFLoader``) and ``page_label`` (the PDF's printed label, ``PyPDFLoader``), LlamaIndex's
#: ``page_label`` (1-based unless the PDF labels its pages). A joined text has pages of its own, so
#: these keys are not its metadata: its chunks carry ``hseg_page_start``/``hseg_page_end``.
PAGE_KEYS = ("page", "page_label")
#: what the adapters do with page Documents (their ``pages`` setting): ``"clean"`` joins the pages of
#: one source and cleans them (:func:`join_pages`), ``"exact"`` joins them as they are, ``"separate"``
#: chunks each page alone (as before pages were joined), each still telling its page
PAGE_MODES = ("clean", "exact", "separate")
DEFAULT_PAGE_MODE = "clean"
#: lines at the top or bottom of a page looked at for a running header or footer
EDGE_LINES = 2
#: the least number of pages on which a line must repeat to be dropped as a header or footer
MIN_REPEATS = 3

_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")
# a word broken at a line end: two letters, a hyphen, the line break, a lower-case letter
_HYPHENATED = re.compile(r"([^\W\d_]*[^\W\d_]{2})-[ \t]*\n[ \t]*([^\W\d_A-Z]{2}[^\W\d_]*)")
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
_SENTENCE_END = tuple(".!?:;\"')]»”’")


def page_number(metadata: Mapping[str, Any] | None) -> int | None:
    """The page number (from 1) a loader's page Document names, ``None`` when it names none.

    LangChain's 0-based ``page`` comes first; else LlamaIndex's ``page_label`` when it is a number
    (a label such as ``"iv"`` says no number: such pages are chunked one by one, as before).

    Example:
        >>> page_number({"source": "a.pdf", "page": 0}), page_number({"page_label": "12"})
        (1, 12)
        >>> page_number({"page_label": "iv"})
    """
    metadata = metadata or {}
    page = metadata.get("page")
    if isinstance(page, int) and not isinstance(page, bool):
        return page + 1 if page >= 0 else None
    label = metadata.get("page_label")
    if isinstance(label, str) and label.strip().isdigit() and int(label) >= 1:
        return int(label)
    return None


def loader_page_key(key: str, pages: tuple[int, int] | None) -> dict[str, Any]:
    """A loader's own page key (``key``: ``"page"`` or ``"page_label"``, :data:`PAGE_KEYS`) naming the
    first of ``pages`` as that loader would: what the adapters put on chunks and results beside
    ``hseg_page_start``/``hseg_page_end``, so code written for the loader's pages reads them.

    Example:
        >>> loader_page_key("page", (12, 13)), loader_page_key("page_label", (12, 13)), loader_page_key("page", None)
        ({'page': 11}, {'page_label': '12'}, {})
    """
    if key not in PAGE_KEYS:
        raise ValueError(f"key must be one of {PAGE_KEYS}, got {key!r}")
    if pages is None:
        return {}
    return {"page": pages[0] - 1} if key == "page" else {"page_label": str(pages[0])}


@dataclass(frozen=True)
class PageGroup:
    """Consecutive page Documents of one source: their positions among the Documents given to
    :func:`group_pages`, their page numbers (``None`` for a Document that is not a page), and their
    metadata without the page keys.

    Example:
        >>> group_pages([("a", {"source": "x.pdf", "page": 0}), ("b", {"source": "x.pdf", "page": 1})])[0].numbers
        (1, 2)
    """

    indices: tuple[int, ...]
    numbers: tuple[int, ...] | None
    metadata: dict[str, Any]

    @property
    def paged(self) -> bool:
        return self.numbers is not None


def _rest(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (metadata or {}).items() if k not in PAGE_KEYS}


def group_pages(documents: Sequence[tuple[str, Mapping[str, Any] | None]]) -> list[PageGroup]:
    """The Documents (``(text, metadata)`` pairs, in the order given) as groups, in order: each run of
    consecutive pages of one source is one group, every other Document a group of its own.

    Pages group while they have the same source name, their page numbers rise, and their metadata is
    the same but for :data:`PAGE_KEYS` (so that the group's metadata drops nothing but the page keys).

    Example:
        >>> docs = [("p1", {"source": "a.pdf", "page": 0}), ("p2", {"source": "a.pdf", "page": 1}),
        ...         ("notes", {"source": "b.md"}), ("p1", {"source": "c.pdf", "page": 0})]
        >>> [(g.indices, g.numbers) for g in group_pages(docs)]
        [((0, 1), (1, 2)), ((2,), None), ((3,), (1,))]
    """
    groups: list[PageGroup] = []
    run: list[int] = []
    numbers: list[int] = []

    def close() -> None:
        if run:
            groups.append(PageGroup(tuple(run), tuple(numbers), _rest(documents[run[0]][1])))
            run.clear()
            numbers.clear()

    for i, (_, metadata) in enumerate(documents):
        number = page_number(metadata)
        name = source_name(metadata)
        if number is None or name is None:
            close()
            groups.append(PageGroup((i,), None, dict(metadata or {})))
            continue
        first = documents[run[0]][1] if run else None
        if run and (number <= numbers[-1] or source_name(first) != name or _rest(first) != _rest(metadata)):
            close()
        run.append(i)
        numbers.append(number)
    close()
    return groups


def _normalised(line: str) -> str:
    """A line as headers and footers repeat it: page numbers and dates vary, so digits do not count."""
    return _SPACE.sub(" ", _DIGITS.sub("#", line)).strip().lower()


def _edge_lines(page: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the first and last :data:`EDGE_LINES` non-blank lines of a page (line
    break included), each once."""
    lines: list[tuple[int, int]] = []
    at = 0
    for line in page.splitlines(keepends=True):
        if line.strip():
            lines.append((at, at + len(line)))
        at += len(line)
    picked = lines[:EDGE_LINES] + lines[-EDGE_LINES:]
    return sorted(set(picked))


def repeated_edge_lines(pages: Sequence[str]) -> frozenset[str]:
    """The running headers and footers of ``pages``: lines (:func:`_normalised`: digits aside) among
    the first or last :data:`EDGE_LINES` non-blank lines of more than half of the pages, and of at
    least :data:`MIN_REPEATS`. A document of fewer pages has none.

    Example:
        >>> sorted(repeated_edge_lines(["ACME report\\nText one.\\n1", "ACME report\\nText two.\\n2",
        ...                             "ACME report\\nText three.\\n3"]))
        ['#', 'acme report']
    """
    counts: Counter[str] = Counter()
    for page in pages:
        counts.update({_normalised(page[a:b]) for a, b in _edge_lines(page)})
    least = max(MIN_REPEATS, len(pages) // 2 + 1)
    return frozenset(line for line, n in counts.items() if n >= least and line)


def _without_edges(page: str, repeated: frozenset[str]) -> str:
    if not repeated:
        return page
    drop = [(a, b) for a, b in _edge_lines(page) if _normalised(page[a:b]) in repeated]
    out, at = [], 0
    for a, b in drop:
        out.append(page[at:a])
        at = b
    out.append(page[at:])
    return "".join(out)


def vocabulary(pages: Sequence[str]) -> frozenset[str]:
    """The words (lower case; hyphenated compounds as one word) written whole on a line of ``pages``:
    what tells a word broken at a line end from a compound that only wrapped there.

    Example:
        >>> sorted(vocabulary(["A well-known tide.", "Tides-\\nturn"]))
        ['a', 'tide', 'tides', 'turn', 'well-known']
    """
    return frozenset(w.lower() for page in pages for w in _WORD.findall(page))


def _rejoined(left: str, right: str, words: frozenset[str] | None) -> str:
    """The word ``left-`` at a line end and ``right`` on the next line make: the hyphen kept where the
    document writes the compound whole elsewhere and never the word without it (``well-known``),
    dropped otherwise (a typesetter's break: ``conti-nued``)."""
    if words is not None and f"{left}-{right}".lower() in words and f"{left}{right}".lower() not in words:
        return f"{left}-{right}"
    return left + right


def rejoin_hyphenated(text: str, words: frozenset[str] | None = None) -> str:
    """``text`` with words broken by a hyphen at a line end joined again (the line break goes: the
    rest of the line follows the word). A hyphen before a capital or a digit stays; with the
    document's ``words`` (:func:`vocabulary`), so does the hyphen of a compound it writes whole elsewhere.

    Example:
        >>> rejoin_hyphenated("the gravi-\\ntational pull of Franco-\\nPrussian")
        'the gravitational pull of Franco-\\nPrussian'
        >>> rejoin_hyphenated("a well-\\nknown tide", frozenset({"well-known"}))
        'a well-known tide'
    """
    return _HYPHENATED.sub(lambda m: _rejoined(m.group(1), m.group(2), words), text)


def _carry_over(before: str, after: str, words: frozenset[str] | None = None) -> tuple[str, str]:
    """A word hyphenated across a page break: its second half moves to the page it starts on."""
    head = before.rstrip()
    tail = after.lstrip()
    if not (head.endswith("-") and len(head) >= 3 and head[-3:-1].isalpha() and tail[:2].isalpha()
            and tail[:2].islower()):
        return before, after
    word = re.match(r"\S+", tail)
    left = re.search(r"[^\W\d_]+-$", head)
    assert word is not None and left is not None  # tail starts with two letters, head ends with two and "-"
    joined = _rejoined(left.group(0)[:-1], word.group(0), words)
    return head[:left.start()] + joined, tail[word.end():].lstrip(" \t")


def join_pages(pages: Sequence[str], numbers: Sequence[int] | None = None, *, clean: bool = True,
               unit: str = "page", markdown: bool = True) -> tuple[str, SourceMap]:
    """The stored text of consecutive pages and its source map (the rules: docs/design.md, ``hseg.text.pages``).

    ``clean=True`` drops running headers and footers and rejoins hyphenated words; ``clean=False``
    keeps every page's text as it is. Pages are joined by ``"\\n"`` where a page ends inside a
    sentence (the sentence splitter then reads on into the next page) and by ``"\\n\\n"``
    elsewhere; each page's span covers exactly what is left of it, and a page left empty has no span.

    Example:
        >>> text, m = join_pages(["One sentence runs", "on here."], clean=False)
        >>> text, m.spans
        ('One sentence runs\\non here.', ((0, 17, 1), (18, 26, 2)))
    """
    if isinstance(pages, str) or not isinstance(pages, Sequence):
        raise ValueError(f"pages must be a sequence of page texts, got {type(pages).__name__}")
    for i, page in enumerate(pages):
        if not isinstance(page, str):
            raise ValueError(f"pages[{i}] must be a str, got {type(page).__name__}")
    nums = list(range(1, len(pages) + 1)) if numbers is None else list(numbers)
    if len(nums) != len(pages):
        raise ValueError(f"numbers has {len(nums)} items for {len(pages)} pages; give one number per page")
    texts = list(pages)
    if clean:
        repeated = repeated_edge_lines(texts)
        if repeated:
            logger.debug("dropping %d running header/footer lines from %d pages", len(repeated), len(texts))
        texts = [_without_edges(p, repeated) for p in texts]
        words = vocabulary(texts)
        texts = [rejoin_hyphenated(p, words).strip() for p in texts]
        for i in range(len(texts) - 1):
            texts[i], texts[i + 1] = _carry_over(texts[i], texts[i + 1], words)
    parts: list[str] = []
    spans: list[tuple[int, int, int]] = []
    at = 0
    for page, number in zip(texts, nums):
        if not page:
            continue
        if parts:
            separator = "\n\n" if parts[-1].rstrip().endswith(_SENTENCE_END) or parts[-1].endswith("\n\n") else "\n"
            separator = "" if parts[-1].endswith(separator) else separator
            parts.append(separator)
            at += len(separator)
        parts.append(page)
        spans.append((at, at + len(page), number))
        at += len(page)
    text = "".join(parts)
    return text, SourceMap.from_spans(text, spans, unit=unit, markdown=markdown)


@dataclass(frozen=True)
class JoinedDocument:
    """What an adapter chunks for the Documents at ``indices``: one Document as it is, or the pages of
    one source joined (``text``, their metadata without the page keys, and the ``source_map``;
    ``None`` for a Document that is not a page).
    """

    indices: tuple[int, ...]
    text: str
    metadata: dict[str, Any]
    source_map: SourceMap | None


def join_documents(documents: Sequence[tuple[str, Mapping[str, Any] | None]],
                   pages: str = DEFAULT_PAGE_MODE) -> list[JoinedDocument]:
    """The Documents (``(text, metadata)`` pairs) as the adapters chunk them, in order: the pages of
    one source (:func:`group_pages`) joined as ``pages`` (:data:`PAGE_MODES`) says, every other
    Document as it is.

    Example:
        >>> docs = [("One.", {"source": "a.pdf", "page": 0}), ("Two.", {"source": "a.pdf", "page": 1})]
        >>> [(d.indices, d.text, d.metadata, d.source_map.spans) for d in join_documents(docs)]
        [((0, 1), 'One.\\n\\nTwo.', {'source': 'a.pdf'}, ((0, 4, 1), (6, 10, 2)))]
        >>> [d.text for d in join_documents(docs, pages="separate")]
        ['One.', 'Two.']
    """
    if pages not in PAGE_MODES:
        raise ValueError(f"pages must be one of {PAGE_MODES}, got {pages!r}")
    out: list[JoinedDocument] = []
    for group in group_pages(documents):
        texts = [documents[i][0] for i in group.indices]
        if group.numbers is None:
            out.append(JoinedDocument(group.indices, texts[0], group.metadata, None))
        elif pages == "separate":
            for i, text, number in zip(group.indices, texts, group.numbers):
                joined, source_map = SourceMap.from_pages([text], [number])
                out.append(JoinedDocument((i,), joined, group.metadata, source_map))
        else:
            joined, source_map = join_pages(texts, group.numbers, clean=pages == "clean")
            out.append(JoinedDocument(group.indices, joined, group.metadata, source_map))
    return out
