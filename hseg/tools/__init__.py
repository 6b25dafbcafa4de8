"""Retrieval as tools for agents: search, read, expand, lexical search and the list of documents,
over an open store, with exact spans an agent can cite and expand.

The framework-free core of ``hseg mcp`` (:mod:`hseg.tools.mcp`), of the LangChain tool set
(:mod:`langchain_hseg.tools`) and of the LlamaIndex tools (:mod:`llama_index_hseg.tools`): each is
declared once here (:data:`TOOLS`, :class:`StoreTools`) and returns a dataclass of
:mod:`hseg.tools.results`.

Example:
    >>> from hseg.store import HierarchicalStore
    >>> from hseg.tools import StoreTools
    >>> tools = StoreTools(HierarchicalStore("hseg", path="./hseg-db", create=False))  # doctest: +SKIP
    >>> hit = tools.search("What did Galileo see?", budget_tokens=256).passages[0]  # doctest: +SKIP
    >>> tools.expand(hit.source, hit.start, hit.end).heading_path  # doctest: +SKIP
    ['Astronomy', 'Galileo']
"""

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
    as_json,
    json_schema,
)
from hseg.tools.store_tools import (
    LIMITS,
    TOOLS,
    StoreTools,
    ToolDeclaration,
    ToolInputError,
    ToolLimits,
    arguments_model,
)

__all__ = ["StoreTools", "TOOLS", "ToolDeclaration", "ToolInputError", "ToolLimits", "LIMITS", "Passage",
           "SearchAnswer", "SpanText", "Span", "ClusterText", "LexicalHit", "LexicalAnswer", "DocumentInfo",
           "DocumentList", "as_json", "json_schema", "arguments_model"]
