"""hseg's retrieval tools as LangChain tools: search, read, expand, lexical_search and list_documents
over a store, for an agent built with LangChain (no MCP needed).

How and why: docs/design.md, ``langchain_hseg.tools``.

Example:
    >>> from langchain_hseg import hseg_tools
    >>> tools = hseg_tools(store)  # doctest: +SKIP
    >>> agent_model = chat_model.bind_tools(tools)  # doctest: +SKIP
    >>> msg = tools[0].invoke({"type": "tool_call", "id": "1", "name": "search",
    ...                        "args": {"question": "What causes tides?"}})  # doctest: +SKIP
    >>> msg.artifact["passages"][0]["start"]  # doctest: +SKIP
    1841
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from typing import Any

from langchain_core.tools import StructuredTool, ToolException

from hseg import HsegError
from hseg.tools import TOOLS, StoreTools, arguments_model, as_json


def hseg_tools(store: Any) -> list[StructuredTool]:
    """The retrieval tools over a store, in :data:`hseg.tools.TOOLS`' order.

    Args:
        store: an :class:`~hseg.store.HierarchicalStore`, or the :class:`~hseg.tools.StoreTools` over one.

    Returns:
        One ``StructuredTool`` per tool; a tool's error comes back to the agent as its answer.

    Raises:
        ValueError: ``store`` is neither.

    Example:
        >>> [t.name for t in hseg_tools(store)]  # doctest: +SKIP
        ['search', 'read', 'expand', 'lexical_search', 'list_documents']
    """
    tools = store if isinstance(store, StoreTools) else StoreTools(store)
    functions = tools.functions()
    out = []
    for declaration in TOOLS:
        fn = functions[declaration.name]
        call = _content_and_artifact(fn)
        out.append(StructuredTool.from_function(
            func=call, coroutine=_in_thread(call), name=declaration.name, description=declaration.description,
            args_schema=arguments_model(fn), response_format="content_and_artifact", handle_tool_error=True))
    return out


def _content_and_artifact(fn: Callable[..., Any]) -> Callable[..., tuple[str, dict[str, Any]]]:
    """``fn`` returning ``(the result as JSON text, the result as a dict)``, hseg's refusals raised as
    ``ToolException`` (their message is what the model reads)."""

    def call(**kwargs: Any) -> tuple[str, dict[str, Any]]:
        try:
            result = as_json(fn(**kwargs))
        except (HsegError, ValueError) as exc:
            raise ToolException(str(exc)) from exc
        return json.dumps(result, ensure_ascii=False), result

    call.__name__ = getattr(fn, "__name__", "tool")
    return call


def _in_thread(call: Callable[..., tuple[str, dict[str, Any]]]) -> Callable[..., Any]:
    """The coroutine of a tool: ``call`` in a worker thread (the encoder and Chroma block)."""

    async def acall(**kwargs: Any) -> tuple[str, dict[str, Any]]:
        return await asyncio.to_thread(functools.partial(call, **kwargs))

    return acall
