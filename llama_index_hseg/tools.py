"""hseg's retrieval tools as LlamaIndex ``FunctionTool``s: search, read, expand, lexical_search and
list_documents over a store, for a LlamaIndex agent (no MCP needed).

How and why: docs/design.md, ``llama_index_hseg.tools``.

Example:
    >>> from llama_index.core.agent.workflow import FunctionAgent
    >>> from llama_index_hseg import hseg_tools
    >>> agent = FunctionAgent(tools=hseg_tools(store), llm=llm)  # doctest: +SKIP
    >>> out = hseg_tools(store)[0].call(question="What causes tides?")  # doctest: +SKIP
    >>> out.raw_output.passages[0].start  # doctest: +SKIP
    1841
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from typing import Any

from llama_index.core.tools import FunctionTool

from hseg.tools import TOOLS, StoreTools, arguments_model, as_json


def hseg_tools(store: Any) -> list[FunctionTool]:
    """The retrieval tools over a store, in :data:`hseg.tools.TOOLS`' order.

    Args:
        store: an :class:`~hseg.store.HierarchicalStore`, or the :class:`~hseg.tools.StoreTools` over one.

    Returns:
        One ``FunctionTool`` per tool.

    Raises:
        ValueError: ``store`` is neither.

    Example:
        >>> [t.metadata.name for t in hseg_tools(store)]  # doctest: +SKIP
        ['search', 'read', 'expand', 'lexical_search', 'list_documents']
    """
    tools = store if isinstance(store, StoreTools) else StoreTools(store)
    functions = tools.functions()
    return [FunctionTool.from_defaults(fn=functions[d.name], async_fn=_in_thread(functions[d.name]), name=d.name,
                                       description=d.description, fn_schema=arguments_model(functions[d.name]),
                                       callback=_as_content, async_callback=_as_content_async)
            for d in TOOLS]


def _as_content(result: Any) -> str:
    """What the model reads of a result: it as JSON."""
    return json.dumps(as_json(result), ensure_ascii=False)


async def _as_content_async(result: Any) -> str:
    return _as_content(result)


def _in_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The async twin of a tool: ``fn`` in a worker thread (the encoder and Chroma block)."""

    async def acall(**kwargs: Any) -> Any:
        return await asyncio.to_thread(functools.partial(fn, **kwargs))

    return acall
