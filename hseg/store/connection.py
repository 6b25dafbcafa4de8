"""What connects: Chroma clients and collections, their schema and space checks, the unit index's
companion collection, and connection failures turned into errors that name the server."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from hseg.chunking.records import SCHEMA_VERSION
from hseg.encoders.identity import canonical_model_name
from hseg.retrieval.settings import DEFAULT_CLUSTER_WEIGHT, DEFAULT_NEIGHBOUR_WEIGHT
from hseg.retrieval.unit_vectors import companion_name

__all__ = ["DEFAULT_HNSW", "open_client", "get_or_create_collection", "open_unit_index", "open_lexical_index",
           "check_schema",
           "collection_space", "server_address", "is_connection_error", "connect_errors", "remote_errors"]

logger = logging.getLogger(__name__)

#: HNSW settings for collections this module creates. A high ef_search keeps the approximate
#: neighbours close to exact on the collection sizes RAG usually has; cosine is required.
DEFAULT_HNSW: dict[str, Any] = {"space": "cosine", "ef_search": 200}


def open_client(path: str | None, client: Any, host: str | None, port: int) -> Any:
    """The chromadb client of a store's arguments (at most one of them; none: in memory)."""
    import chromadb

    if sum(x is not None for x in (path, client, host)) > 1:
        raise ValueError("give only one of path, client and host")
    if client is not None:
        return client
    if path is not None:
        return chromadb.PersistentClient(path=str(path))
    if host is not None:
        try:
            return chromadb.HttpClient(host=host, port=port)
        except Exception as exc:  # chromadb says "Could not connect ..." without the address
            raise ConnectionError(f"cannot reach the Chroma server at {host}:{port} ({exc})") from exc
    logger.info("no path, client or host given: using an in-memory EphemeralClient")
    return chromadb.EphemeralClient()


def get_or_create_collection(client: Any, name: str, hnsw: dict[str, Any], encoder: Any) -> Any:
    from chromadb.errors import InternalError, InvalidArgumentError, NotFoundError, UniqueConstraintError

    if not isinstance(name, str):
        raise ValueError(f"collection_name must be a string, got {type(name).__name__}")

    try:
        return client.get_collection(name, embedding_function=None)
    except (NotFoundError, ValueError):
        pass
    meta: dict[str, Any] = {"hseg_schema": SCHEMA_VERSION}
    if encoder is not None:
        meta["hseg_encoder"] = str(encoder.name)
    try:
        logger.info("creating collection %r with %s", name, hnsw)
        return client.create_collection(name, configuration={"hnsw": hnsw}, metadata=meta, embedding_function=None)
    except InvalidArgumentError as exc:  # e.g. a name Chroma does not accept
        raise ValueError(f"collection_name {name!r}: Chroma refuses it ({exc})") from None
    except (UniqueConstraintError, InternalError):  # created concurrently by another process
        return client.get_collection(name, embedding_function=None)


def open_unit_index(collection: Any, hnsw: Mapping[str, Any]) -> Any:
    """The companion collection of the unit index, created empty when absent, through the
    collection's own connection (``None`` for an object that is not a chromadb collection:
    ``unit="auto"`` then gathers its candidates)."""
    from chromadb.api.models.Collection import Collection

    api = getattr(collection, "_client", None)
    if api is None or not hasattr(api, "get_or_create_collection"):
        return None
    meta = {"hseg_schema": SCHEMA_VERSION, "hseg_cluster_weight": DEFAULT_CLUSTER_WEIGHT,
            "hseg_neighbour_weight": DEFAULT_NEIGHBOUR_WEIGHT}
    model = api.get_or_create_collection(
        name=companion_name(collection.name), configuration={"hnsw": dict(hnsw)}, metadata=meta,
        tenant=collection.tenant, database=collection.database,
    )
    return Collection(client=api, model=model, embedding_function=None)


def open_lexical_index(collection: Any, batch_size: Any) -> Any:
    """The :class:`~hseg.store.lexical_index.LexicalIndex` of a collection (``None`` for an object that
    is not a chromadb collection). A client of a server gets a per-client cache and the journal
    collection its writers keep (created empty when absent), through the collection's own connection."""
    from chromadb.api.models.Collection import Collection

    from hseg.store.lexical_index import LexicalIndex, journal_name, lexical_location

    location = lexical_location(collection)
    if location is None:
        return None
    journal = None
    if not location.maintained:
        api = collection._client
        model = api.get_or_create_collection(name=journal_name(collection.name),
                                             metadata={"hseg_schema": SCHEMA_VERSION},
                                             tenant=collection.tenant, database=collection.database)
        journal = Collection(client=api, model=model, embedding_function=None)
    return LexicalIndex(collection, location, batch_size, journal)


def check_encoder(collection_name: str, recorded: str | None, name: str, *, allow_mismatch: bool = False) -> None:
    """Refuse an encoder other than the one a collection was built with (``ValueError``): the one
    encoder check of hseg, by canonical model name, for the store and the command line alike.

    Example:
        >>> check_encoder("docs", "sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2")  # same model
    """
    if recorded is None or allow_mismatch or canonical_model_name(recorded) == canonical_model_name(name):
        return
    raise ValueError(
        f"collection {collection_name!r} was built with encoder {recorded!r}, got {name!r}; pass the same "
        "encoder, or allow_encoder_mismatch=True if it is the same model under another name"
    )


def check_schema(collection_name: str, schema: Any) -> None:
    """Refuse a collection written with a newer (or unreadable) record schema than this hseg's.

    ``None`` (a collection hseg has not written to yet, or one made by another tool) is accepted."""
    if schema is None:
        return
    try:
        version = int(schema) if not isinstance(schema, bool) and float(schema) == int(schema) else None
    except (TypeError, ValueError, OverflowError):
        version = None
    if version is None:
        raise ValueError(f"collection {collection_name!r}: unreadable hseg_schema {schema!r} in its metadata "
                         f"(this hseg reads schema {SCHEMA_VERSION})")
    if version > SCHEMA_VERSION:
        raise ValueError(
            f"collection {collection_name!r} was written with hseg schema {version}, newer than the schema "
            f"{SCHEMA_VERSION} this version of hseg reads; upgrade hseg (pip install -U hseg) to use it"
        )


def collection_space(collection: Any) -> str:
    with warnings.catch_warnings():
        # chromadb warns "legacy embedding function config" for collections made with
        # embedding_function=None, which is exactly what we want here
        warnings.simplefilter("ignore", DeprecationWarning)
        config = getattr(collection, "configuration", None) or {}
    for index in ("hnsw", "spann"):
        sub = config.get(index) if isinstance(config, Mapping) else None
        if sub and sub.get("space"):
            return str(sub["space"])
    meta = collection.metadata or {}
    return str(meta.get("hnsw:space", "l2"))  # Chroma's default space is l2


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


def is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    try:
        import httpx
    except ImportError:  # pragma: no cover - chromadb depends on httpx
        return False
    return isinstance(exc, httpx.TransportError)


@contextmanager
def connect_errors(client: Any) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        settings = getattr(client, "get_settings", lambda: None)()
        host = getattr(settings, "chroma_server_host", None)
        if not host or not is_connection_error(exc):
            raise
        where = f"{host}:{getattr(settings, 'chroma_server_http_port', '')}"
        raise ConnectionError(f"Chroma server at {where}: opening the collection failed ({exc})") from exc


def _named(exc: BaseException) -> bool:
    """An error an inner :func:`remote_errors` already turned into one naming the server."""
    return isinstance(exc, ConnectionError) and str(exc).startswith("Chroma server at ")


@contextmanager
def remote_errors(collection: Any, action: str) -> Iterator[None]:
    """Turn a lost connection to a Chroma server into a ``ConnectionError`` naming host:port."""
    try:
        yield
    except Exception as exc:
        where = server_address(collection)
        if where is None or not is_connection_error(exc) or _named(exc):
            raise
        raise ConnectionError(f"Chroma server at {where}: {action} failed ({type(exc).__name__}: {exc})") from exc

