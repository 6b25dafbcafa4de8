"""One writing process per embedded store: an advisory lock file beside the Chroma database.

An embedded Chroma (``PersistentClient``) keeps each collection's vector index in the memory of the
process that opened it and writes it back to disk from there. Two processes writing one database
therefore overwrite each other's vectors: the metadata and text of every record survive in SQLite,
but some records lose their vector and no search finds them again (measured: 220 of 3,123 records
after two overlapping ``hseg index`` runs). Writers must take turns, each opening the database
after the previous one has finished.

:func:`writer_lock` takes an exclusive ``flock`` on ``<db>/hseg-writer.lock`` before the database is
opened, and waits its turn (bounded) when another process holds it. The kernel releases the lock
when its holder exits, however it exits (a ``kill -9`` included), so a lock never outlives a writer.
Readers take no lock. A Chroma server (``chroma run``) serves any number of writing clients and
needs none of this.

Example:
    >>> with writer_lock("./hseg-db", timeout_s=600):  # doctest: +SKIP
    ...     store = HierarchicalStore(path="./hseg-db")
    ...     store.add(chunkings)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["LOCK_NAME", "WriterBusyError", "writer_lock"]

LOCK_NAME = "hseg-writer.lock"
_POLL_S = 0.2


class WriterBusyError(RuntimeError):
    """Another process kept the writer lock of an embedded store longer than we could wait."""


def _holder(path: Path) -> str:
    try:
        pid = path.read_text().strip()
    except OSError:
        return "another process"
    return f"process {pid}" if pid.isdigit() else "another process"


@contextlib.contextmanager
def writer_lock(db: str | os.PathLike[str], *, timeout_s: float = 600.0,
                on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the writer lock of the embedded store in folder ``db`` (created if absent) for the block.

    Waits up to ``timeout_s`` seconds for another writer to finish (``on_wait(holder)`` is told once,
    e.g. to print a line), then raises :class:`WriterBusyError` naming the holder.
    """
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s < 0:
        raise ValueError(f"timeout_s must be a number >= 0, got {timeout_s!r}")
    folder = Path(db)
    path = folder / LOCK_NAME
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:  # a read-only or full disk: say so before Chroma fails less clearly
        if exc.errno == errno.ENOSPC:
            raise OSError(f"{db}: cannot create the writer lock file {path} ({exc.strerror}): the disk is full; "
                          "free space and run again") from exc
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise PermissionError(f"{db}: cannot create the writer lock file {path} ({exc.strerror}): the store "
                                  "is read-only, and a writer needs to write it") from exc
        raise
    try:
        deadline = time.monotonic() + timeout_s
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                raise WriterBusyError(f"{db}: {_holder(path)} is writing to this store (lock {path}); waited "
                                      f"{timeout_s:g} s. Run one writer at a time, or serve the store with "
                                      "'chroma run' for several") from None
            if not told and on_wait is not None:
                on_wait(_holder(path))
                told = True
            time.sleep(_POLL_S)
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
