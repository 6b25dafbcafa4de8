"""What the retrieval tools return: plain dataclasses of JSON values, one per tool.

Every span is exact: ``start``/``end`` are character offsets in the stored document, and ``text`` is
``document[start:end]``, so an agent can cite a span and hand it back to ``read`` or ``expand``.
:func:`as_json` turns any of them into the JSON object a framework or an MCP client receives, and
:func:`json_schema` gives that object's JSON schema, derived from the dataclass.

Example:
    >>> span = SpanText(source="notes/a.md", start=0, end=5, text="Tides", document_chars=120)
    >>> as_json(span)["text"]
    'Tides'
    >>> json_schema(SpanText)["required"][:3]
    ['source', 'start', 'end']
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from hseg.text.spans import Span


@dataclass(frozen=True)
class Passage:
    """One passage of a search: exact span, heading path, page(s) where known, score and text."""

    #: the document's id (``hseg index``: the file's path relative to the folder that holds the store)
    source: str
    start: int
    end: int
    text: str
    #: relevance on the cosine scale, higher is better (the store's ``hseg_score``)
    score: float
    tokens: int
    #: titles of the markdown headings the passage lies under, outermost first
    heading_path: list[str]
    #: the id of the cluster (parent) the passage starts in
    cluster_id: str
    #: the stable id of this passage (the store's result id)
    id: str
    #: the document's own metadata as stored (hseg's keys left out)
    metadata: dict[str, Any]
    #: the page (or slide) numbers the passage lies on, from 1, where the document has pages (a PDF,
    #: a presentation); ``None`` otherwise
    pages: list[int] | None = None


@dataclass(frozen=True)
class SearchAnswer:
    """The passages of one question, best first, filling at most ``budget_tokens``."""

    question: str
    budget_tokens: int
    #: tokens of all passages together (at most ``budget_tokens``)
    tokens: int
    passages: list[Passage]


@dataclass(frozen=True)
class SpanText:
    """The stored characters of a span: ``text`` is ``document[start:end]``."""

    source: str
    start: int
    end: int
    text: str
    #: the document's length in characters (the largest ``end`` a span may have)
    document_chars: int


@dataclass(frozen=True)
class ClusterText:
    """The cluster (parent) holding a span: its exact span and text, and where its neighbours lie."""

    source: str
    start: int
    end: int
    text: str
    tokens: int
    heading_path: list[str]
    #: the cluster's id (several when the span asked about crosses clusters: all of them, in order)
    cluster_ids: list[str]
    #: the cluster before and after in the document (``None`` at its edges): ``expand`` them to read on
    previous: Span | None
    next: Span | None
    #: the page (or slide) numbers the text lies on, where the document has pages
    pages: list[int] | None = None


@dataclass(frozen=True)
class LexicalHit:
    """A segment of the lexical (BM25) index matching a query's words."""

    source: str
    start: int
    end: int
    text: str
    #: the BM25 score (higher is better; comparable within one query only)
    score: float
    heading_path: list[str]
    cluster_id: str
    segment_id: str
    #: the page (or slide) numbers the segment lies on, where the document has pages
    pages: list[int] | None = None


@dataclass(frozen=True)
class LexicalAnswer:
    """The best segments for a query's words, best first."""

    #: the words searched for (lower-cased, stop words left out)
    terms: list[str]
    hits: list[LexicalHit]


@dataclass(frozen=True)
class DocumentInfo:
    """One stored document."""

    source: str
    #: the document's length in characters
    chars: int
    #: its tokens (the sum of its segments')
    tokens: int
    #: its sections (clusters)
    clusters: int
    #: the SHA-256 of its text, as the store recorded it (``None`` when written around hseg)
    content_sha256: str | None
    #: when it was indexed, ISO 8601 UTC to the second (e.g. ``"2026-12-06T08:31:24Z"``): the write that
    #: last changed its text, chunks or metadata, on the Chroma server's clock for a server's store;
    #: adding it again unchanged keeps the time. ``None`` for a document written before hseg kept it
    indexed_at: str | None
    #: the document's own metadata as stored (hseg's keys left out)
    metadata: dict[str, Any]


@dataclass(frozen=True)
class DocumentList:
    """A page of the stored documents, sorted by source."""

    #: documents in the store
    total: int
    offset: int
    documents: list[DocumentInfo]
    #: the ``offset`` of the next page, ``None`` on the last
    next_offset: int | None = None
    #: the ``after`` of the next page (this page's last source), ``None`` on the last: a page after a
    #: source costs the same however deep it lies
    next_after: str | None = None


def page_list(pages: tuple[int, int] | None) -> list[int] | None:
    """Every page of a ``(first, last)`` range (the schema's :func:`~hseg.chunking.schema.page_range`),
    or ``None`` for text on no known page.

    Example:
        >>> page_list((4, 6)), page_list(None)
        ([4, 5, 6], None)
    """
    return None if pages is None else list(range(pages[0], pages[1] + 1))


def as_json(result: Any) -> dict[str, Any]:
    """A tool's result as a JSON object (dataclasses become dicts, nested ones too).

    Example:
        >>> as_json(Span(3, 9))
        {'start': 3, 'end': 9}
    """
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        raise ValueError(f"result must be a dataclass instance of hseg.tools.results, got {type(result).__name__}")
    return dataclasses.asdict(result)


def json_schema(result_type: type) -> dict[str, Any]:
    """The JSON schema of a result type's :func:`as_json` object (derived by pydantic, which chromadb
    already brings).

    Example:
        >>> json_schema(Span)["properties"]["start"]
        {'title': 'Start', 'type': 'integer'}
    """
    from pydantic import TypeAdapter

    return TypeAdapter(result_type).json_schema()
