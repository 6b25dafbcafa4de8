"""Which shape a collection's client has: the one place that looks at a Chroma client."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from hseg.errors import ServerUnreachableError
from hseg.store.backends.base import Backend, ClientFacts
from hseg.store.backends.embedded import EmbeddedBackend
from hseg.store.backends.foreign import ForeignBackend
from hseg.store.backends.memory import MemoryBackend
from hseg.store.backends.server import ServerBackend
from hseg.store.connection import is_connection_error

#: the shapes a store can run on, most particular first: the first whose :meth:`~Backend.claim`
#: takes a client serves it (the foreign shape takes any); a new shape is its module and its place here
SHAPES: tuple[type[Backend], ...] = (EmbeddedBackend, MemoryBackend, ServerBackend, ForeignBackend)


def choose_backend(collection: Any) -> Backend:
    """The backend of ``collection``'s client: the first of :data:`SHAPES` to claim it, from what
    the client is (chromadb's ``ServerAPI`` behind the collection, ``collection._client``, read here
    once into :class:`~hseg.store.backends.base.ClientFacts`). A store chooses once, when it opens;
    an embedded client of chromadb's own engine outside
    :data:`~hseg.store.backends.embedded.CHROMADB_RANGE` is refused
    (:class:`~hseg.errors.ChromaVersionError`).

    Example:
        >>> choose_backend(object()).kind
        'foreign'
        >>> import chromadb, uuid
        >>> collection = chromadb.EphemeralClient().create_collection(f"c-{uuid.uuid4().hex}", embedding_function=None)
        >>> choose_backend(collection).kind
        'memory'
    """
    facts = client_facts(collection)
    for shape in SHAPES:
        backend = shape.claim(facts)
        if backend is not None:
            return backend
    raise AssertionError("unreachable")  # the foreign shape claims every client


def client_facts(collection: Any) -> ClientFacts:
    """What the shapes are told of ``collection``'s client (:class:`~hseg.store.backends.base.ClientFacts`)."""
    api = getattr(collection, "_client", None)
    settings = api.get_settings() if api is not None and hasattr(api, "get_settings") else None
    units = api is not None and hasattr(api, "get_or_create_collection")
    return ClientFacts(api, settings, server_address(collection), units)


@contextmanager
def opening_errors(client: Any) -> Iterator[None]:
    """Around opening a collection through ``client``, before any backend is chosen: a client of a
    server that cannot be reached is a :class:`~hseg.errors.ServerUnreachableError` naming host:port."""
    try:
        yield
    except Exception as exc:
        settings = getattr(client, "get_settings", lambda: None)()
        host = getattr(settings, "chroma_server_host", None)
        if not host or not is_connection_error(exc):
            raise
        where = f"{host}:{getattr(settings, 'chroma_server_http_port', '')}"
        raise ServerUnreachableError(f"Chroma server at {where}: opening the collection failed ({exc})") from exc


def server_address(collection: Any) -> str | None:
    """``"host:port"`` of the Chroma server behind a collection, ``None`` for an embedded client."""
    api = getattr(collection, "_client", None)
    get_url = getattr(api, "get_api_url", None)
    if get_url is None:
        return None
    try:
        from urllib.parse import urlsplit

        url = urlsplit(str(get_url()))
        return f"{url.hostname}:{url.port}" if url.port else str(url.hostname or url.netloc)
    except Exception:  # an unusual client: no address to name
        return None


def remote_errors(collection: Any, action: str) -> AbstractContextManager[None]:
    """:meth:`Backend.errors <hseg.store.backends.Backend.errors>` for a caller holding a collection
    and no store (the agent tools): a lost connection to a Chroma server is a
    :class:`~hseg.errors.ServerUnreachableError` naming host:port (one an inner block raised already
    is passed on as it is)."""
    return Backend(address=server_address(collection)).errors(action)
