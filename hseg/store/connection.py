"""What connects: Chroma clients and collections, their schema and space checks, the unit index's
companion collection, and connection failures turned into errors that name the server."""

from __future__ import annotations

import errno
import logging
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from hseg.chunking.schema import (
    CLUSTER_WEIGHT_KEY,
    ENCODER_KEY,
    NEIGHBOUR_WEIGHT_KEY,
    SCHEMA_KEY,
    SCHEMA_VERSION,
    UNIT_LAYOUT_KEY,
)
from hseg.encoders.identity import canonical_model_name
from hseg.errors import (
    CollectionNotFoundError,
    DatabaseReadOnlyError,
    DatabaseStorageError,
    EncoderMismatchError,
    LexicalIndexStorageError,
    SchemaTooNewError,
    ServerUnreachableError,
)
from hseg.retrieval.settings import DEFAULT_CLUSTER_WEIGHT, DEFAULT_NEIGHBOUR_WEIGHT
from hseg.retrieval.unit_vectors import UNIT_LAYOUT

logger = logging.getLogger(__name__)

#: Records up to which a search of a collection hseg creates is exact. Chroma builds its HNSW graph
#: differently on every build of the same records (one write's records go in in parallel, in the
#: order of a hash map with a per-process random seed), so an approximate kNN misses different true
#: neighbours in different builds, and two processes building one corpus ranked differently (issue
#: 27: 3-78 of 864 queries at ef_search 200 on ~2,000 records). A beam of ef_search candidates
#: that is never full visits every reachable record, so on collections of at most this many records
#: the kNN is exhaustive: exact and the same whatever the build. Larger collections stay
#: approximate; the beam costs about N distances below this size and ~ef_search·M above it.
EXACT_SEARCH_RECORDS = 4096

#: HNSW settings for collections this module creates (and their unit indexes); cosine is required.
#: ``configuration={"ef_search": 200}`` trades exactness (and reproducibility across builds) for
#: speed on a large store.
DEFAULT_HNSW: dict[str, Any] = {"space": "cosine", "ef_search": EXACT_SEARCH_RECORDS}


def open_client(path: str | None, client: Any, host: str | None, port: int) -> Any:
    """The chromadb client of a store's arguments (at most one of them; none: in memory)."""
    import chromadb

    if sum(x is not None for x in (path, client, host)) > 1:
        raise ValueError("give only one of path, client and host")
    if client is not None:
        return client
    if path is not None:
        return open_persistent(str(path))
    if host is not None:
        try:
            return chromadb.HttpClient(host=host, port=port)
        except Exception as exc:  # chromadb says "Could not connect ..." without the address
            raise ServerUnreachableError(f"cannot reach the Chroma server at {host}:{port} ({exc})") from exc
    logger.info("no path, client or host given: using an in-memory EphemeralClient")
    return chromadb.EphemeralClient()


#: the file of an embedded Chroma database in its folder (``chromadb.PersistentClient`` creates it)
DATABASE_FILE = "chroma.sqlite3"


def holds_database(path: str | Path) -> bool:
    """Whether the folder ``path`` holds an embedded Chroma database: opening one where none is creates
    it (and the folder), so a store opened only to read asks this first."""
    return (Path(path) / DATABASE_FILE).is_file()


#: free space under which a failure inside an embedded Chroma database is blamed on a full disk: Chroma's
#: own message for it names no disk ("Failed to apply logs to the metadata segment")
LOW_SPACE_BYTES = 64 * 1024**2


def open_persistent(path: str) -> Any:
    """``chromadb.PersistentClient(path)``, with a :class:`~hseg.errors.DatabaseReadOnlyError` for a
    read-only database and a :class:`~hseg.errors.DatabaseStorageError` for a full disk
    (:func:`storage_error`) instead of Chroma's ``InternalError``."""
    import chromadb

    try:
        return chromadb.PersistentClient(path=path)
    except Exception as exc:
        problem = storage_error(path, exc)
        if problem is None:
            raise
        raise problem from exc


def storage_error(path: str, exc: BaseException) -> DatabaseStorageError | None:
    """The error, naming ``path`` and what to do, of a failure of the embedded database at ``path``
    that its disk explains (:func:`disk_trouble`): :class:`~hseg.errors.DatabaseReadOnlyError` or
    :class:`~hseg.errors.DatabaseStorageError`; ``None`` for any other failure.

    Example:
        >>> print(storage_error("db", OSError(30, "Read-only file system")))  # doctest: +ELLIPSIS
        the Chroma database at db is read-only (OSError: ...): Chroma cannot open a database it cannot write, ...
    """
    trouble = disk_trouble(path, exc)
    if trouble is None:
        return None
    text = f"{type(exc).__name__}: {exc}"
    if trouble == "read-only":
        return DatabaseReadOnlyError(
            f"the Chroma database at {path} is read-only ({text}): Chroma cannot open a database it cannot write, "
            f"not even to read it; copy it to a writable folder (cp -r {path} COPY) and use the copy, or serve such "
            "a copy with 'chroma run --path COPY' and connect with --host")
    return DatabaseStorageError(f"the disk of the Chroma database at {path} is {trouble} ({text}): free space and "
                                "run again")


def disk_trouble(path: str, exc: BaseException) -> str | None:
    """``"read-only"`` or ``"full, N free"`` when the disk of the embedded database at ``path``
    explains ``exc``, else ``None``. Full: by Chroma's or the OS's word, or a failure inside Chroma
    while the disk has less than :data:`LOW_SPACE_BYTES` free. ``exc`` is Chroma's or SQLite's (not
    hseg's), so its text is read where no errno tells: they say "readonly database" and "disk is full"."""
    from chromadb.errors import ChromaError

    text, code = f"{type(exc).__name__}: {exc}", getattr(exc, "errno", None)
    if code == errno.EROFS or "readonly database" in text or "read-only file system" in text.lower():
        return "read-only"
    free = _free_bytes(path)
    full = code == errno.ENOSPC or "disk is full" in text or "no space left" in text.lower()
    if full or (isinstance(exc, ChromaError) and free is not None and free < LOW_SPACE_BYTES):
        return "full" if free is None else f"full, {_size(free)} free"
    return None


def lexical_storage_error(path: Path | None, exc: BaseException) -> LexicalIndexStorageError | None:
    """A :class:`LexicalIndexStorageError` naming the folder of the lexical index file at ``path`` when
    ``exc`` is that file failing for its folder's permissions or its disk, else ``None``. ``exc`` must be
    SQLite's (hseg's own connection: Chroma's embedded errors are its own types) or an ``OSError`` about a
    file of that folder, so a failure of the Chroma database is never blamed on the lexical index.

    Example:
        >>> lexical_storage_error(None, OSError(30, "Read-only file system")) is None  # an in-memory index
        True
    """
    import sqlite3

    if path is None:
        return None
    if isinstance(exc, LexicalIndexStorageError):  # said already
        return exc
    folder = Path(path).parent
    filename = getattr(exc, "filename", None)
    if not isinstance(exc, sqlite3.Error) and not (filename and folder in (Path(str(filename)),
                                                                           Path(str(filename)).parent)):
        return None
    text = f"{type(exc).__name__}: {exc}"
    code = getattr(exc, "errno", None)
    if code in (errno.EEXIST, errno.ENOTDIR) and folder.exists() and not folder.is_dir():
        return LexicalIndexStorageError(
            f"the lexical index folder {folder} is a file, not a folder ({text}): move it away (mv {folder} "
            f"{folder}.moved); the folder holds derived data only, which hseg builds again from the collection")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS) or "readonly database" in text \
            or "unable to open database file" in text:
        return LexicalIndexStorageError(
            f"the lexical index folder {folder} is read-only ({text}): make it writable (chmod -R u+w {folder}); "
            "it holds derived data only, so removing it is safe too (hseg builds it again from the collection)")
    if code == errno.ENOSPC or "disk is full" in text:
        return LexicalIndexStorageError(f"the disk of the lexical index folder {folder} is full ({text}): free "
                                        "space and run again")
    return None


@contextmanager
def lexical_errors(path: Path | None) -> Iterator[None]:
    """Raise :func:`lexical_storage_error`'s error in place of what the lexical index file at ``path``
    failed with, when that is its folder's or disk's fault."""
    try:
        yield
    except Exception as exc:
        problem = lexical_storage_error(path, exc)
        if problem is None or problem is exc:
            raise
        raise problem from exc


def _free_bytes(path: str) -> int | None:
    """The bytes this process may still write on the disk of ``path`` (``None``: unknown)."""
    import shutil

    try:
        if hasattr(os, "statvfs") and hasattr(os, "geteuid") and os.geteuid() == 0:
            # root may write into the blocks the file system keeps back for it (5% on ext4), which
            # disk_usage leaves out: it said "0 bytes free" while root had 1.8 MiB to write into
            st = os.statvfs(path)
            return st.f_bfree * st.f_frsize
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n / 1024:.1f} KiB" if n < 1024**2 else f"{n / 1024**2:.1f} MiB"


def set_collection_metadata(collection: Any, wanted: Mapping[str, Any]) -> None:
    """Set these keys of the collection's metadata, keeping the others; nothing when all hold these values."""
    meta = dict(collection.metadata or {})
    if all(meta.get(k) == v for k, v in wanted.items()):
        return
    # modify() replaces the metadata and refuses hnsw:* keys (the space lives in the configuration)
    merged = {k: v for k, v in meta.items() if not k.startswith("hnsw:")}
    merged.update(wanted)
    collection.modify(metadata=merged)


def open_collection(client: Any, name: str) -> Any:
    """The existing collection ``name``; a :class:`~hseg.errors.CollectionNotFoundError` naming the
    collections there when it is absent (nothing is created)."""
    from chromadb.errors import NotFoundError

    if not isinstance(name, str):
        raise ValueError(f"collection_name must be a string, got {type(name).__name__}")
    try:
        return client.get_collection(name, embedding_function=None)
    except (NotFoundError, ValueError):  # Chroma's "does not exist": a NotFoundError, or a ValueError on older clients
        names = sorted(c if isinstance(c, str) else c.name for c in client.list_collections())
        have = f"collections there: {', '.join(names)}" if names else "it holds no collections"
        raise CollectionNotFoundError(f"no collection {name!r} ({have})", existing=names) from None


def get_or_create_collection(client: Any, name: str, hnsw: dict[str, Any], encoder: Any) -> Any:
    from chromadb.errors import ChromaError, InvalidArgumentError, NotFoundError

    if not isinstance(name, str):
        raise ValueError(f"collection_name must be a string, got {type(name).__name__}")

    try:
        return client.get_collection(name, embedding_function=None)
    except (NotFoundError, ValueError):
        pass
    meta: dict[str, Any] = {SCHEMA_KEY: SCHEMA_VERSION}
    if encoder is not None:
        meta[ENCODER_KEY] = str(encoder.name)
    try:
        logger.info("creating collection %r with %s", name, hnsw)
        return client.create_collection(name, configuration={"hnsw": hnsw}, metadata=meta, embedding_function=None)
    except InvalidArgumentError as exc:  # e.g. a name Chroma does not accept
        raise ValueError(f"collection_name {name!r}: Chroma refuses it ({exc})") from None
    except ChromaError as exc:
        if not created_concurrently(exc):
            raise
        logger.info("collection %r was created by another writer at the same time: opening it", name)
        return client.get_collection(name, embedding_function=None)


def created_concurrently(exc: BaseException) -> bool:
    """Whether a create failed because the collection exists: another writer created it between our
    look-up and our create. Each client says so its own way: ``UniqueConstraintError`` (older
    embedded clients), ``InternalError`` (the embedded client of chromadb 1.x) or a bare
    ``ChromaError`` (``HttpClient``), all with "already exists" in the message."""
    from chromadb.errors import UniqueConstraintError

    # Chroma's errors, of types that say nothing more specific: only their text tells
    return isinstance(exc, UniqueConstraintError) or "already exists" in str(exc)


def unit_index_metadata() -> dict[str, Any]:
    """The metadata a new unit index's companion collection is created with
    (:meth:`hseg.store.backends.Backend.unit_index`): the schema, the weights its vectors fuse, its layout.

    Example:
        >>> unit_index_metadata()[UNIT_LAYOUT_KEY] >= 1
        True
    """
    return {SCHEMA_KEY: SCHEMA_VERSION, CLUSTER_WEIGHT_KEY: DEFAULT_CLUSTER_WEIGHT,
            NEIGHBOUR_WEIGHT_KEY: DEFAULT_NEIGHBOUR_WEIGHT, UNIT_LAYOUT_KEY: UNIT_LAYOUT}


def check_encoder(collection_name: str, recorded: str | None, name: str, *, allow_mismatch: bool = False) -> None:
    """Refuse an encoder other than the one a collection was built with
    (:class:`~hseg.errors.EncoderMismatchError`): the one encoder check of hseg, by canonical model
    name, for the store and the command line alike.

    Example:
        >>> check_encoder("docs", "sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2")  # same model
    """
    if recorded is None or allow_mismatch or canonical_model_name(recorded) == canonical_model_name(name):
        return
    raise EncoderMismatchError(
        f"collection {collection_name!r} was built with encoder {recorded!r}, got {name!r}; pass the same "
        "encoder, or allow_encoder_mismatch=True if it is the same model under another name"
    )


def check_schema(collection_name: str, schema: Any) -> None:
    """Refuse a collection written with a newer (or unreadable) record schema than this hseg's
    (:class:`~hseg.errors.SchemaTooNewError`).

    ``None`` (a collection hseg has not written to yet, or one made by another tool) is accepted."""
    if schema is None:
        return
    try:
        version = int(schema) if not isinstance(schema, bool) and float(schema) == int(schema) else None
    except (TypeError, ValueError, OverflowError):
        version = None
    if version is None:
        raise SchemaTooNewError(f"collection {collection_name!r}: unreadable {SCHEMA_KEY} {schema!r} in its metadata "
                         f"(this hseg reads schema {SCHEMA_VERSION})")
    if version > SCHEMA_VERSION:
        raise SchemaTooNewError(
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


def is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    try:
        import httpx
    except ImportError:  # pragma: no cover - chromadb depends on httpx
        return False
    return isinstance(exc, httpx.TransportError)


#: what names a lost server in the errors of one ``action`` (``errors(action)`` around the calls): a
#: store's is its backend's (:meth:`hseg.store.backends.Backend.errors`), the address read once
ServerErrors = Callable[[str], AbstractContextManager[None]]
