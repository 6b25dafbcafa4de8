"""A lexical index file SQLite cannot read, set aside and built again from the collection: the index
is derived data, so a damaged file costs a rebuild, never a failed search."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from typing import TYPE_CHECKING, Any

from hseg.errors import LexicalIndexUnavailable
from hseg.store.connection import lexical_storage_error
from hseg.store.lexical.database import drop_memory_database, file_inode, file_lock

if TYPE_CHECKING:
    from hseg.store.lexical.index import LexicalIndex

__all__ = ["LexicalIndexUnavailable", "repair", "check_file", "state"]

logger = logging.getLogger(__name__)


def repair(index: LexicalIndex, problem: BaseException) -> None:
    """The index is derived data: a file SQLite cannot read (truncated, overwritten, damaged FTS5
    blocks) is set aside as ``<file>.damaged`` and built again from the collection, under the
    writer lock (a process that finds another already replaced it only opens the new file).
    :class:`LexicalIndexUnavailable` when that fails too. A file that failed for its disk (full, or
    read-only) is not damaged: it stays as it is, and :class:`~hseg.errors.LexicalIndexStorageError`
    says what to free or make writable."""
    storage = lexical_storage_error(index.location.path, problem)
    if storage is not None:  # setting the file aside would lose a good file (and overwrite the last one set aside)
        raise storage from problem
    logger.warning("collection %r: the lexical index %s cannot be read (%s); building it again from the "
                   "collection", index.collection.name, index.location.path or "(in memory)", problem)
    seen = index._db
    index._db = None
    if seen is not None:
        with contextlib.suppress(Exception):
            seen.close()
    try:
        if index.location.path is None:
            drop_memory_database(index.location.key)
        else:
            with file_lock(index.location.path):
                if seen is None or seen.inode == file_inode(index.location.path):  # nobody replaced it yet
                    _set_aside(index.location.path)
        index.rebuild_locked()
        index._count_checked = True
    except (OSError, sqlite3.Error) as exc:
        index._db = None
        raise LexicalIndexUnavailable(f"collection {index.collection.name!r}: the lexical index "
                                      f"{index.location.path} cannot be read ({problem}) nor built again "
                                      f"({exc}); remove it, or make its folder writable") from exc


def _set_aside(path: Any) -> None:
    """The damaged file kept as ``<file>.damaged`` (for a post-mortem); its WAL and shared memory go."""
    if os.path.exists(path):
        os.replace(path, f"{path}.damaged")
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(f"{path}{suffix}")


def check_file(index: LexicalIndex) -> None:
    """Before a check: the file this object reads is still the one at its path (a file deleted or
    replaced under a long-lived reader is opened again), and, on this object's first check, it holds
    as many rows as its last write noted (rows lost without the bookkeeping: built again)."""
    path = index.location.path
    if index._db is not None and path is not None and index._db.inode != file_inode(path):
        # the file was deleted or replaced under this object: read the one at the path now
        logger.warning("collection %r: the lexical index %s was replaced or removed; opening it again",
                       index.collection.name, index.location.path)
        index._db.close()
        index._db = None
        index._count_checked = False
    if not index._count_checked and index.lost_rows():
        logger.warning("collection %r: the lexical index %s holds other rows than its bookkeeping says; "
                       "building it again", index.collection.name, index.location.path or "(in memory)")
        index.rebuild_locked()


def state(index: LexicalIndex) -> dict[str, Any]:
    """What ``stats`` reports of the index: where it lives and the segments it holds after a check
    (which repairs a damaged file), or the ``problem`` when it can be neither read nor built again."""
    out: dict[str, Any] = {"kind": index.location.kind,
                           "path": None if index.location.path is None else str(index.location.path)}
    try:
        index.ensure_fresh()
        out["segments"] = index.count()
    except Exception as exc:  # stats still counts a store whose lexical index fails, and says why
        out["segments"], out["problem"] = None, str(exc)
    return out
