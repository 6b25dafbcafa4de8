"""Where an index lives, for ``hseg index``, ``query`` and ``stats``: the location options, the
Chroma client, and one-line errors that name the database or server.

The embedded ``chromadb.PersistentClient`` at ``--db DIR`` is the default; ``--host/--port``
talk to a Chroma server (``chroma run``) instead.
"""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hseg.cli.options import positive_int
from hseg.errors import CliError, DatabaseStorageError, HsegError

CONNECT_TIMEOUT_S = 5.0


def _port(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port in 1..65535, got {text!r}")
    return value


def _db_folder(text: str) -> str:
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a file; give a folder (created if missing)")
    return text


def add_location(p: argparse.ArgumentParser, *, db_help: str) -> None:
    """``--db`` or ``--host`` (one required), ``--port`` and ``--collection``."""
    location = p.add_mutually_exclusive_group(required=True)
    location.add_argument("--db", metavar="DIR", type=_db_folder, help=db_help)
    location.add_argument("--host", metavar="HOST", help="a Chroma server (chroma run) instead of --db")
    p.add_argument("--port", type=_port, default=None, metavar="PORT", help="the server's port (default 8000)")
    p.add_argument("--collection", default="hseg", metavar="NAME", help="Chroma collection (default 'hseg')")
    p.set_defaults(_parser=p)


def check_location(args: argparse.Namespace) -> None:
    """Exit 2 for a ``--port`` without ``--host`` (argparse cannot express it)."""
    if args.port is not None and args.host is None:
        args._parser.error("--port needs --host")


def location_label(args: argparse.Namespace) -> str:
    """``host:port`` of the server, or the ``--db`` directory."""
    return f"{args.host}:{args.port or 8000}" if args.host else str(args.db)


def location_options(args: argparse.Namespace) -> str:
    """The options that name this store again in another command: ``--db DIR`` or ``--host H --port P``,
    and ``--collection`` when not the default.

    Example:
        >>> location_options(argparse.Namespace(db="db", host=None, port=None, collection="hseg"))
        '--db db'
    """
    where = f"--host {args.host} --port {args.port or 8000}" if args.host else f"--db {args.db}"
    return where + ("" if args.collection == "hseg" else f" --collection {args.collection}")


@contextmanager
def server_errors(args: argparse.Namespace) -> Iterator[None]:
    """Name the server in every failure to talk to it (connection refused, gone mid-run, ...), and
    the database in a failure its disk explains (read-only, full) instead of Chroma's traceback.
    hseg's own errors (:class:`~hseg.errors.HsegError`) say what failed already and pass as they are."""
    if args.host is None:
        try:
            yield
        except Exception as exc:
            if isinstance(exc, (HsegError, ValueError, FileNotFoundError)):  # the user's input, said already
                raise
            from hseg.store.connection import storage_error

            problem = storage_error(str(args.db), exc)
            if problem is None:
                raise
            raise problem from exc
        return
    try:
        yield
    except (OSError, ValueError, RuntimeError) as exc:
        if isinstance(exc, (HsegError, FileNotFoundError)):
            raise
        raise CliError(f"Chroma server at {location_label(args)}: {exc}") from exc


def client(args: argparse.Namespace, *, must_exist: bool) -> Any:
    """The chromadb client of ``--host/--port`` or ``--db`` (``must_exist``: refuse a missing ``--db``)."""
    if args.host is not None:
        port = args.port or 8000
        try:  # fail in bounded time, and clearly, before chromadb's own attempts
            socket.create_connection((args.host, port), timeout=CONNECT_TIMEOUT_S).close()
        except OSError as exc:
            reason = "connection refused" if isinstance(exc, ConnectionRefusedError) else str(exc) or type(exc).__name__
            raise CliError(f"cannot reach the Chroma server at {args.host}:{port} ({reason}); is 'chroma run' "
                             "running there?") from None
        import chromadb

        with server_errors(args):
            return chromadb.HttpClient(host=args.host, port=port)
    db = Path(args.db)
    if db.exists() and not db.is_dir():
        raise CliError(f"--db {args.db}: not a directory")
    from hseg.store.connection import holds_database, open_persistent, storage_error

    if must_exist and not holds_database(db):  # opening a folder that holds no database would create one there
        raise CliError(f"no index at {args.db}; " + not_there_yet(args, f"run 'hseg index PATH --db {args.db}' first"))

    # an absolute path: chromadb shares one system per path string within a process
    try:
        return open_persistent(str(db.resolve()))
    except DatabaseStorageError as exc:  # read-only or full: one line naming the folder as given
        raise (storage_error(str(args.db), exc.__cause__ or exc) or exc) from exc


def not_there_yet(args: argparse.Namespace, fix: str) -> str:
    """The end of a message that the index is missing or empty: another process writing the ``--db`` store
    now (an ``hseg index`` under way), or else ``fix``."""
    from hseg.store.lock import current_writer

    writer = None if args.host is not None or not Path(args.db).is_dir() else current_writer(args.db)
    if writer is None:
        return fix
    return f"{writer} is writing to it now (an 'hseg index' under way?): query again when it has finished"


def id_anchor(args: argparse.Namespace) -> Path | None:
    """Where document ids and sources are relative to: the folder that holds ``--db`` (so a file
    gets the same id whatever the working directory), or ``None`` (absolute paths) with ``--host``."""
    return None if args.host is not None else Path(args.db).resolve().parent


def existing_store(args: argparse.Namespace) -> Any:
    """The store of the ``--collection`` of an index written before, opened to read (nothing is created,
    a newer schema is refused) with no encoder yet; a ``CliError`` naming what is there if absent."""
    from hseg.errors import CollectionNotFoundError
    from hseg.store import HierarchicalStore

    chroma = client(args, must_exist=True)
    with server_errors(args):
        try:
            return HierarchicalStore(args.collection, client=chroma, create=False)
        except CollectionNotFoundError as exc:
            raise missing_collection(args, exc) from None


def store_names(names: list[str]) -> list[str]:
    """The collections of ``names`` a ``--collection`` can name: without the unit index and write log
    that hseg keeps beside each store (``docs_hseg_units`` and ``docs_hseg_writes`` of ``docs``).

    Example:
        >>> store_names(["docs", "docs_hseg_units", "docs_hseg_writes", "notes"])
        ['docs', 'notes']
    """
    from hseg.retrieval.unit_vectors import COMPANION_SUFFIX
    from hseg.store.lexical.journal import JOURNAL_SUFFIX

    held = set(names)
    return [n for n in names if not any(n.endswith(suffix) and n[:-len(suffix)] in held
                                        for suffix in (COMPANION_SUFFIX, JOURNAL_SUFFIX))]


def missing_collection(args: argparse.Namespace, exc: Any) -> CliError:
    """The one-line error of a ``--collection`` that is not there (``exc``: the store's
    :class:`~hseg.errors.CollectionNotFoundError`), naming the collections that are."""
    names = store_names(exc.existing)
    have = f"collections there: {', '.join(names)}" if names else "it holds no collections"
    return CliError(f"no collection {args.collection!r} at {location_label(args)} ({have}); "
                    + not_there_yet(args, "run 'hseg index' first"))
