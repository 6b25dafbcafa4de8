"""The retrieval tools an agent calls, over an open :class:`~hseg.store.HierarchicalStore`: the one
declaration every front end (``hseg mcp``, the LangChain and LlamaIndex tool sets) derives from.

How and why: docs/design.md, ``hseg.tools.store_tools``.

Example:
    >>> from hseg.store import HierarchicalStore
    >>> tools = StoreTools(HierarchicalStore("hseg", path="./hseg-db", create=False))  # doctest: +SKIP
    >>> answer = tools.search("What causes tides?", budget_tokens=512)  # doctest: +SKIP
    >>> p = answer.passages[0]  # doctest: +SKIP
    >>> tools.read(p.source, p.start, p.end).text == p.text  # doctest: +SKIP
    True
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, get_type_hints

from pydantic import BaseModel, Field, create_model

from hseg.chunking.schema import SegmentMeta, joined_pages, user_metadata
from hseg.errors import HsegError
from hseg.text.structure import common_prefix
from hseg.tools.documents import covering, document_clusters, text_of
from hseg.tools.results import (
    ClusterText,
    DocumentInfo,
    DocumentList,
    LexicalAnswer,
    LexicalHit,
    Passage,
    SearchAnswer,
    Span,
    SpanText,
    page_list,
)


class ToolInputError(HsegError, ValueError):
    """A tool's argument out of its range, of the wrong type, or naming nothing stored (a span
    outside its document, a budget out of range, an unknown source)."""


@dataclass(frozen=True)
class ToolLimits:
    """The bounds of every tool's input and result."""

    #: the largest ``budget_tokens`` of a search
    max_budget_tokens: int = 8192
    #: the longest question (characters)
    max_question_chars: int = 4000
    #: the longest span ``read`` returns, and the most characters ``expand`` returns (characters)
    max_read_chars: int = 20_000
    #: the most hits of a lexical search
    max_lexical_hits: int = 50
    #: the most documents one ``list_documents`` call lists
    max_documents: int = 1000


LIMITS = ToolLimits()

_QUESTION = Field(description="the question, in plain words", min_length=1, max_length=LIMITS.max_question_chars)
_BUDGET = Field(description="tokens of passage text to return at most (the passages fill it to within a sentence)",
                ge=1, le=LIMITS.max_budget_tokens)
_WHERE = Field(description='an optional metadata filter, e.g. {"source": "notes/a.md"} or '
                           '{"$and": [{"source": "a.md"}, {"year": {"$gte": 2020}}]}')
_SOURCE = Field(description="the document's source, as a passage or list_documents gives it", min_length=1)
_START = Field(description="the span's first character offset in the document", ge=0)
_END = Field(description="the span's end offset, exclusive", ge=0)
_TERMS = Field(description="words to find (BM25 over the exact words, stemmed; no operators)", min_length=1,
               max_length=LIMITS.max_question_chars)
_LIMIT = Field(description="the most hits to return", ge=1, le=LIMITS.max_lexical_hits)
_DOCS = Field(description="the most documents to list", ge=1, le=LIMITS.max_documents)
_OFFSET = Field(description="documents to skip (for the next page)", ge=0)
_AFTER = Field(description="list only the sources after this one (the previous page's next_after)", min_length=1)


@dataclass(frozen=True)
class ToolDeclaration:
    """One tool: its name (a method of :class:`StoreTools`), what the model is told, what it returns."""

    name: str
    description: str
    result: type


#: the tools, in the order a client lists them
TOOLS: tuple[ToolDeclaration, ...] = (
    ToolDeclaration(
        "search",
        "Search the documents for passages that answer a question. Returns the best passages, best first, filling "
        "budget_tokens: each with its source, exact character span (start, end), heading path, pages where known, "
        "score and text. Cite a passage by source and span; read or expand a span to see more.",
        SearchAnswer),
    ToolDeclaration(
        "read",
        "Read the stored characters of a span of a document: text is exactly document[start:end]. Use it to quote "
        "or to read on around a passage (widen start and end).",
        SpanText),
    ToolDeclaration(
        "expand",
        "Expand a span to the whole section (cluster) holding it: its exact span, heading path and text, and the "
        "spans of the sections before and after it.",
        ClusterText),
    ToolDeclaration(
        "lexical_search",
        "Find segments containing given words (BM25 keyword search: names, codes, rare terms that a question-style "
        "search may miss). Returns each hit's source, exact span, heading path, score and text.",
        LexicalAnswer),
    ToolDeclaration(
        "list_documents",
        "List the stored documents, sorted by source, a page at a time (limit; for the next page pass after = the "
        "result's next_after, or offset = its next_offset): each one's source, size in characters and tokens, "
        "sections, when it was indexed (ISO 8601 UTC) and metadata.",
        DocumentList),
)


class StoreTools:
    """The retrieval tools over one open store (see :mod:`hseg.tools`); read-only.

    Example:
        >>> tools = StoreTools(store)  # doctest: +SKIP
        >>> [d.source for d in tools.list_documents().documents]  # doctest: +SKIP
        ['example.md']
    """

    def __init__(self, store: Any, limits: ToolLimits = LIMITS) -> None:
        if not hasattr(store, "search") or not hasattr(store, "collection"):
            raise ValueError(f"store must be an hseg.store.HierarchicalStore, got {type(store).__name__}")
        self.store = store
        self.limits = limits

    def functions(self) -> dict[str, Callable[..., Any]]:
        """``{tool name: the bound method}`` in :data:`TOOLS`' order: what a front end registers."""
        return {t.name: getattr(self, t.name) for t in TOOLS}

    def input_schema(self, name: str) -> dict[str, Any]:
        """The JSON schema of tool ``name``'s arguments (:func:`arguments_model`'s).

        Example:
            >>> StoreTools(store).input_schema("read")["required"]  # doctest: +SKIP
            ['source', 'start', 'end']
        """
        if name not in {t.name for t in TOOLS}:
            raise ValueError(f"name must be one of {[t.name for t in TOOLS]}, got {name!r}")
        return arguments_model(getattr(self, name)).model_json_schema()

    # ----------------------------------------------------------------- the tools

    def search(self, question: Annotated[str, _QUESTION], budget_tokens: Annotated[int, _BUDGET] = 1024,
               where: Annotated[dict[str, Any] | None, _WHERE] = None) -> SearchAnswer:
        """Passages answering ``question``, best first, filling ``budget_tokens`` (the store's search
        with ``unit="auto"``), each with its exact span."""
        question = _text("question", question, self.limits.max_question_chars)
        budget = _bounded("budget_tokens", budget_tokens, 1, self.limits.max_budget_tokens)
        where = _where(where)
        from hseg.retrieval.results import result_for

        hits = self.store.search(question, budget_tokens=budget, unit="auto", where=where)
        passages = []
        for hit in hits:
            rid, _ = result_for(hit)
            passages.append(Passage(
                source=str(hit.doc_id), start=int(hit.start), end=int(hit.end), text=hit.text,
                score=round(float(hit.score), 6), tokens=int(hit.token_count), heading_path=list(hit.heading_path),
                cluster_id=str(hit.cluster_id), id=rid, metadata=_user(hit.metadata), pages=page_list(hit.pages)))
        return SearchAnswer(question, budget, sum(p.tokens for p in passages), passages)

    def read(self, source: Annotated[str, _SOURCE], start: Annotated[int, _START],
             end: Annotated[int, _END]) -> SpanText:
        """The stored characters ``[start, end)`` of document ``source``."""
        source = _text("source", source, 4096)
        start, end = _int("start", start), _int("end", end)
        clusters = self._clusters(source)
        length = clusters[-1].end
        _check_span(source, start, end, length)
        if end - start > self.limits.max_read_chars:
            raise ToolInputError(f"end: the span [{start}, {end}) has {end - start:,} characters, more than one read "
                                 f"returns ({self.limits.max_read_chars:,}); read it in parts, e.g. "
                                 f"[{start}, {start + self.limits.max_read_chars})")
        return SpanText(source, start, end, text_of(clusters, start, end), length)

    def expand(self, source: Annotated[str, _SOURCE], start: Annotated[int, _START],
               end: Annotated[int, _END]) -> ClusterText:
        """The cluster (parent) of document ``source`` holding ``[start, end)``: all the clusters the
        span crosses, as one span."""
        source = _text("source", source, 4096)
        start, end = _int("start", start), _int("end", end)
        clusters = self._clusters(source)
        _check_span(source, start, end, clusters[-1].end)
        held = covering(clusters, start, end)
        first, last = held[0], held[-1]
        if last.end - first.start > self.limits.max_read_chars:
            raise ToolInputError(f"end: the span [{start}, {end}) lies in {len(held)} sections of "
                                 f"{last.end - first.start:,} characters, more than one expand returns "
                                 f"({self.limits.max_read_chars:,}); expand a shorter span, or read it in parts")
        at = clusters.index(first)
        before = clusters[at - 1] if at > 0 else None
        after = clusters[at + len(held)] if at + len(held) < len(clusters) else None
        return ClusterText(source, first.start, last.end, text_of(clusters, first.start, last.end),
                           sum(c.tokens for c in held), list(common_prefix(c.heading_path for c in held)),
                           [c.id for c in held], None if before is None else Span(before.start, before.end),
                           None if after is None else Span(after.start, after.end),
                           page_list(joined_pages(c.pages for c in held)))

    def lexical_search(self, terms: Annotated[str, _TERMS], limit: Annotated[int, _LIMIT] = 10) -> LexicalAnswer:
        """The ``limit`` best segments for the words of ``terms`` by BM25, from the lexical index."""
        from hseg.retrieval.lexical_query import query_terms

        text = _text("terms", terms, self.limits.max_question_chars)
        limit = _bounded("limit", limit, 1, self.limits.max_lexical_hits)
        words = query_terms(text)
        if not words:
            raise ToolInputError(f"terms: {text!r:.80} has no words to search for; give words, e.g. 'tidal "
                                 "locking'")
        top = self.store.lexical_top(words, limit)
        if top is None:
            raise ToolInputError("lexical_search: this store has no lexical index (it wraps an object that is not a "
                                 "chromadb collection); use search")
        hits = []
        for row, score, meta, text_ in top:
            view = SegmentMeta.read(meta)
            if view is None:
                continue  # a segment record damaged since it was written: nothing to cite
            hits.append(LexicalHit(str(row.doc_id), view.start, view.end, text_, round(float(score), 6),
                                   list(view.heading_path), view.cluster_id, row.segment_id, page_list(view.pages)))
        return LexicalAnswer(words, hits)

    def list_documents(self, limit: Annotated[int, _DOCS] = 100, offset: Annotated[int, _OFFSET] = 0,
                       after: Annotated[str | None, _AFTER] = None) -> DocumentList:
        """The stored documents sorted by source, ``limit`` of them from ``offset`` (after source
        ``after``, where given; the result's ``next_offset`` and ``next_after`` read on), each with its
        size, content hash, time indexed and metadata. A call reads the page's documents, not the
        whole store."""
        limit = _bounded("limit", limit, 1, self.limits.max_documents)
        offset = _bounded("offset", offset, 0, 10**12)
        after = None if after is None else _text("after", after, 4096)
        got = self.store.document_page(offset, limit, after)
        page = [DocumentInfo(d.doc_id, d.chars, d.tokens, d.clusters, d.content_sha256, d.indexed_at, d.metadata)
                for d in got.documents]
        if not got.more:
            return DocumentList(got.total, offset, page)
        return DocumentList(got.total, offset, page, offset + len(page), page[-1].source)

    # ----------------------------------------------------------------- helpers

    def _clusters(self, source: str) -> list[Any]:
        clusters = document_clusters(self.store, source)
        if not clusters:
            alike = difflib.get_close_matches(source, self.store.document_ids_near(source), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(map(repr, alike))}?" if alike else \
                "; list_documents gives the sources stored"
            raise ToolInputError(f"source: no document {source!r} is stored{hint}")
        return clusters


def arguments_model(fn: Callable[..., Any]) -> type[BaseModel]:
    """A pydantic model of a tool's arguments, from its typed signature (each ``Annotated`` field's
    description and bounds): the input schema for a framework that takes one (a LangChain
    ``args_schema``, a LlamaIndex ``fn_schema``).

    Example:
        >>> arguments_model(StoreTools(store).search).model_json_schema()["required"]  # doctest: +SKIP
        ['question']
    """
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.name != "self":
            fields[param.name] = (hints[param.name], ... if param.default is param.empty else param.default)
    return create_model(f"{fn.__name__}_arguments", **fields)


def _user(metadata: Any) -> dict[str, Any]:
    from hseg.chunking.schema import BOOKKEEPING_KEYS

    return {k: v for k, v in user_metadata(metadata or {}).items() if k not in BOOKKEEPING_KEYS}


def _text(name: str, value: Any, longest: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolInputError(f"{name} must be a non-empty string, got {value!r:.80}")
    if len(value) > longest:
        raise ToolInputError(f"{name} has {len(value):,} characters, more than {longest:,}; shorten it")
    return value


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, float) and value.is_integer()):
        raise ToolInputError(f"{name} must be an integer character offset, got {value!r:.80}")
    return int(value)


def _bounded(name: str, value: Any, lowest: int, highest: int) -> int:
    number = _int(name, value)
    if not lowest <= number <= highest:
        raise ToolInputError(f"{name} must be from {lowest:,} to {highest:,}, got {number:,}")
    return number


def _check_span(source: str, start: int, end: int, length: int) -> None:
    if not 0 <= start <= end <= length:
        raise ToolInputError(f"start, end: the span [{start}, {end}) is outside document {source!r} "
                             f"(characters [0, {length:,})); give 0 <= start <= end <= {length:,}")


def _where(where: Any) -> dict[str, Any] | None:
    if where is None or where == {}:
        return None
    if not isinstance(where, dict):
        raise ToolInputError(f"where must be a JSON object (a metadata filter) or null, got {where!r:.80}")
    from chromadb.api.types import validate_where

    try:
        validate_where(where)
    except (ValueError, TypeError) as exc:
        raise ToolInputError(f"where: {exc} (got {where!r:.120}); e.g. {{\"source\": \"notes/a.md\"}}") from None
    return where

