"""The retrieval tools as a Model Context Protocol server (``hseg mcp``), on the ``mcp`` SDK.

Each tool of :data:`hseg.tools.TOOLS` is registered with its description, its input schema (the
method's typed signature) and its output schema (its result dataclass), all derived by the SDK from
the one declaration, and marked read-only. A :class:`~hseg.tools.ToolInputError`, any of hseg's
errors (:mod:`hseg.errors`) or a ``ValueError`` naming an argument (e.g. a ``where`` Chroma refuses)
reaches the client as the tool's error result with its one-line message; anything else is a crash
the SDK reports without its text.

The SDK is an optional dependency: ``pip install 'hseg[mcp]'`` (:func:`require_mcp` says so).

Example:
    >>> server = build_server(StoreTools(store))  # doctest: +SKIP
    >>> server.run("stdio")  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from hseg.errors import HsegError
from hseg.tools.store_tools import TOOLS, StoreTools

INSTALL_HINT = "hseg mcp needs the Model Context Protocol SDK: pip install 'hseg[mcp]'"

#: what a client shows its model about the server as a whole
INSTRUCTIONS = (
    "Retrieval over a document store indexed by hseg. Every passage and hit has a source and an exact character "
    "span [start, end): cite it as source:start-end, quote it with read, and see its whole section with expand. "
    "Start with search; use lexical_search for exact names or rare words; list_documents lists the sources."
)


def require_mcp() -> None:
    """Raise ``ModuleNotFoundError`` with the install hint when the ``mcp`` SDK is not installed."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(f"{INSTALL_HINT} ({exc})", name=exc.name) from None


def build_server(tools: StoreTools, *, name: str = "hseg", log_level: str = "WARNING") -> Any:
    """An ``mcp.server.mcpserver.MCPServer`` serving ``tools``; ``run("stdio")`` or
    ``run("streamable-http", host=..., port=...)`` serves it.

    The tools run one at a time (the SDK runs each call in a worker thread; one store, one encoder).
    ``log_level``: the SDK's own logging (each refused call is logged at INFO).
    """
    require_mcp()
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    from hseg import __version__

    server = MCPServer(name, version=__version__, instructions=INSTRUCTIONS, log_level=log_level)  # type: ignore[arg-type]
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)
    lock = threading.Lock()
    functions = tools.functions()
    for declaration in TOOLS:
        server.add_tool(_reported(functions[declaration.name], lock), name=declaration.name,
                        description=declaration.description, annotations=read_only, structured_output=True)
    return server


def _reported(fn: Callable[..., Any], lock: threading.Lock) -> Callable[..., Any]:
    """``fn`` with hseg's errors raised as the SDK's ``ToolError``, whose message the client receives
    (the SDK withholds the text of any other exception); the signature stays ``fn``'s."""
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with lock:
            try:
                return fn(*args, **kwargs)
            except (HsegError, ValueError) as exc:  # hseg's refusals: their one line names the fix
                raise ToolError(str(exc)) from exc

    return call
