"""A lexical index file SQLite cannot read, set aside and built again from the collection: the index
is derived data, so a damaged file costs a rebuild, never a failed search."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable
from typing import Any

from hseg.errors import LexicalIndexUnavailable
from hseg.store.connection import lexical_storage_error
from hseg.store.lexical.database import drop_memory_database, file_inode, file_lock
from hseg.store.lexical.table import LexicalTable

logger = logging.getLogger(__name__)


def repair(table: LexicalTable, problem: BaseException, rebuild: Callable[[], None]) -> None:
    """The index is derived data: a file SQLite cannot read (truncated, overwritten, damaged FTS5
    blocks) is set aside as ``<file>.damaged`` and built again from the collection by ``rebuild()``
    (the index's own, which takes the writer lock; a process that finds another already replaced the
    file only opens the new one). :class:`LexicalIndexUnavailable` when that fails too. A file that
    failed for its disk (full, or read-only) is not damaged: it stays as it is, and
    :class:`~hseg.errors.LexicalIndexStorageError` says what to free or make writable."""
    path = table.location.path
    storage = lexical_storage_error(path, problem)
    if storage is not None:  # setting the file aside would lose a good file (and overwrite the last one set aside)
        raise storage from problem
    logger.warning("collection %r: the lexical index %s cannot be read (%s); building it again from the "
                   "collection", table.name, path or "(in memory)", problem)
    was_open, seen = table.opened()
    table.close()
    try:
        if path is None:
            drop_memory_database(table.location.key)
        else:
            with file_lock(path):
                if not was_open or seen == file_inode(path):  # nobody replaced it yet
                    _set_aside(path)
        rebuild()
        table.count_checked = True
    except (OSError, sqlite3.Error) as exc:
        table.close()
        raise LexicalIndexUnavailable(f"collection {table.name!r}: the lexical index {path} cannot be read "
                                      f"({problem}) nor built again ({exc}); remove it, or make its folder "
                                      "writable") from exc


def _set_aside(path: Any) -> None:
    """The damaged file kept as ``<file>.damaged`` (for a post-mortem); its WAL and shared memory go."""
    if os.path.exists(path):
        os.replace(path, f"{path}.damaged")
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(f"{path}{suffix}")


def check_file(table: LexicalTable, rebuild: Callable[[], None]) -> None:
    """Before a check: the file ``table`` reads is still the one at its path (a file deleted or
    replaced under a long-lived reader is opened again), and, on the object's first check, it holds
    as many rows as its last write noted (rows lost without the bookkeeping: built again by
    ``rebuild()``, the index's own)."""
    if table.replaced():
        # the file was deleted or replaced under this object: read the one at the path now
        logger.warning("collection %r: the lexical index %s was replaced or removed; opening it again",
                       table.name, table.location.path)
        table.close()
        table.count_checked = False
    if not table.count_checked and table.lost_rows():
        logger.warning("collection %r: the lexical index %s holds other rows than its bookkeeping says; "
                       "building it again", table.name, table.location.path or "(in memory)")
        rebuild()
