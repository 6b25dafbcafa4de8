"""One writing process at a time per embedded store: a lock on the Chroma database folder itself.

How and why: docs/design.md, ``hseg.store.lock``.

Example:
    >>> with writer_lock("./hseg-db", timeout_s=600):  # doctest: +SKIP
    ...     store = HierarchicalStore(path="./hseg-db")
    ...     store.add(chunkings)
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import portalocker

from hseg.errors import DatabaseReadOnlyError, DatabaseStorageError, WriterBusyError

LOCK_NAME = "hseg-writer.lock"
_POLL_S = 0.2
#: whether a folder can be opened and locked (POSIX); on Windows the lock file alone is locked
_FOLDER_LOCKS = os.name != "nt"


def lock_descriptor(fd: int, *, shared: bool = False, blocking: bool = True) -> bool:
    """Lock the open file (or, on POSIX, folder) ``fd``, exclusively or ``shared``; ``False`` when
    ``blocking`` is off and another process holds a conflicting lock. Closing ``fd`` lets go.

    Example:
        >>> fd = os.open("some.lock", os.O_RDWR | os.O_CREAT)  # doctest: +SKIP
        >>> lock_descriptor(fd, blocking=False)  # doctest: +SKIP
        True
    """
    flags = portalocker.LockFlags.SHARED if shared else portalocker.LockFlags.EXCLUSIVE
    if not blocking:
        flags |= portalocker.LockFlags.NON_BLOCKING
    try:
        portalocker.lock(fd, flags)
    except portalocker.AlreadyLocked:
        return False
    except portalocker.LockException as exc:  # not a conflict: the system's own error says what
        if isinstance(exc.__cause__, OSError):
            raise exc.__cause__ from None
        raise
    return True


class _Held:
    """The lock of one database folder as this process holds it: its two descriptors and how many
    blocks (of any thread) are inside it."""

    def __init__(self, folder_fd: int | None, file_fd: int) -> None:
        self.fds = (folder_fd, file_fd)
        self.count = 0

    def release(self) -> None:
        folder_fd, file_fd = self.fds
        with contextlib.suppress(OSError):
            os.ftruncate(file_fd, 0)
        for fd in (file_fd, folder_fd):  # the file first: the reverse of taking them
            if fd is not None:
                with contextlib.suppress(portalocker.LockException):
                    portalocker.unlock(fd)
                os.close(fd)


_registry = threading.Lock()
_held: dict[str, _Held] = {}  # by the folder's real path
_gates: dict[str, threading.Lock] = {}  # one thread at a time takes (or lets go of) a folder's lock


def _key(db: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(db))


def holds_writer_lock(db: str | os.PathLike[str]) -> bool:
    """Whether this process holds the writer lock of the embedded store in folder ``db``."""
    with _registry:
        return _key(db) in _held


def writer_turn(db: str | os.PathLike[str]) -> object | None:
    """This process's present hold of the writer lock of the embedded store in folder ``db`` (``None``:
    not held): the same object for as long as the lock stays held, another once it was let go and
    taken again, so what was read under one hold can be told apart from what another writer may
    have changed since."""
    with _registry:
        return _held.get(_key(db))


def _holder(path: Path) -> str:
    try:
        pid = path.read_text().strip()
    except OSError:
        return "another process"
    return f"process {pid}" if pid.isdigit() else "another process"


def current_writer(db: str | os.PathLike[str]) -> str | None:
    """Who holds the writer lock of the embedded store in folder ``db`` now (``"process N"``), or ``None``
    when no other process does: a reader's question (what an empty store means), which neither waits
    nor creates anything.

    Example:
        >>> current_writer("./hseg-db")  # doctest: +SKIP
        'process 4242'
    """
    path = Path(db) / LOCK_NAME
    if holds_writer_lock(db):
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # no lock file: no hseg writer has ever written here
        return None
    try:
        return None if lock_descriptor(fd, shared=True, blocking=False) else _holder(path)
    finally:
        os.close(fd)


def _open_folder(folder: str | os.PathLike[str]) -> int | None:
    """A descriptor of ``folder`` to lock (``None`` on Windows, where a folder cannot be opened)."""
    return os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)) if _FOLDER_LOCKS else None


def _open(db: str | os.PathLike[str], folder: Path, path: Path) -> tuple[int | None, int]:
    """Descriptors of the folder (created if absent) and of the lock file in it (created if absent)."""
    fds: list[int] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        folder_fd = _open_folder(folder)
        if folder_fd is not None:
            fds.append(folder_fd)
        # not through a link: the file is truncated and written, and a link would have that done to
        # whatever it points at
        fds.append(os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644))
    except OSError as exc:  # a read-only or full disk: say so before Chroma fails less clearly
        for fd in fds:
            os.close(fd)
        if path.is_symlink():
            raise DatabaseStorageError(f"{db}: the writer lock file {path} is a symbolic link (to "
                                       f"{os.readlink(path)}), which hseg does not write through: remove it "
                                       f"(rm {path}) and run again") from exc
        if exc.errno == errno.ENOSPC:
            raise DatabaseStorageError(f"{db}: cannot create the writer lock file {path} ({exc.strerror}): the disk "
                                       "is full; free space and run again") from exc
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise DatabaseReadOnlyError(f"{db}: cannot create the writer lock file {path} ({exc.strerror}): the "
                                        "store is read-only, and a writer needs to write it") from exc
        raise
    return folder_fd, fds[-1]


def _take(fd: int, db: str | os.PathLike[str], path: Path, deadline: float, timeout_s: float,
          on_wait: Callable[[str], None] | None, told: list[bool]) -> None:
    """Lock ``fd`` exclusively, polling until ``deadline``; then :class:`WriterBusyError`."""
    while True:
        if lock_descriptor(fd, blocking=False):
            return
        if time.monotonic() >= deadline:
            raise WriterBusyError(f"{db}: {_holder(path)} is writing to this store (lock {path}); waited "
                                  f"{timeout_s:g} s. Run one writer at a time, or serve the store with "
                                  "'chroma run' for several")
        if not told[0] and on_wait is not None:
            on_wait(_holder(path))
            told[0] = True
        time.sleep(_POLL_S)


def _acquire(db: str | os.PathLike[str], timeout_s: float, on_wait: Callable[[str], None] | None) -> _Held:
    folder = Path(db)
    path = folder / LOCK_NAME
    deadline = time.monotonic() + timeout_s
    folder_fd, file_fd = _open(db, folder, path)
    try:
        told = [False]
        if folder_fd is not None:
            _take(folder_fd, db, path, deadline, timeout_s, on_wait, told)
        _take(file_fd, db, path, deadline, timeout_s, on_wait, told)  # held only by an older hseg's writer
        os.ftruncate(file_fd, 0)
        os.write(file_fd, str(os.getpid()).encode())
    except BaseException:
        os.close(file_fd)
        if folder_fd is not None:
            os.close(folder_fd)  # closing lets go of a lock taken
        raise
    return _Held(folder_fd, file_fd)


@contextlib.contextmanager
def writer_lock(db: str | os.PathLike[str], *, timeout_s: float = 600.0,
                on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the writer lock of the embedded store in folder ``db`` (created if absent) for the block.

    Waits up to ``timeout_s`` seconds for another process to finish (``on_wait(holder)`` is told once,
    e.g. to print a line), then raises :class:`WriterBusyError` naming the holder. Taken again while
    this process holds it (by any thread), it is entered at once.
    """
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s < 0:
        raise ValueError(f"timeout_s must be a number >= 0, got {timeout_s!r}")
    key = _key(db)
    with _registry:
        gate = _gates.setdefault(key, threading.Lock())
    # another thread of this process may be waiting for the same lock: wait behind it, as long
    if not gate.acquire(timeout=timeout_s):
        raise WriterBusyError(f"{db}: another thread of this process waited {timeout_s:g} s for the writer lock "
                              f"(lock {Path(db) / LOCK_NAME}); another process is writing to this store")
    try:
        with _registry:
            held = _held.get(key)
        if held is None:
            held = _acquire(db, timeout_s, on_wait)
            with _registry:
                _held[key] = held
        held.count += 1
    finally:
        gate.release()
    try:
        yield
    finally:
        with gate:
            held.count -= 1
            if held.count == 0:
                with _registry:
                    del _held[key]
                held.release()


@contextlib.contextmanager
def reader_lock(db: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the embedded store's folder ``db`` shared for the block: no hseg writer of another process
    writes while it is held, and it waits until none is writing. Several readers hold it at once.

    Within a process that holds the writer lock it is entered at once: a shared lock on another
    descriptor of the folder would wait for this process's own exclusive one. Where the folder (on
    Windows, its lock file) cannot be opened (it is gone) the block runs without it."""
    if holds_writer_lock(db):
        yield
        return
    try:
        fd = _open_folder(db)
        if fd is None:
            fd = os.open(Path(db) / LOCK_NAME, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        # blocking: a writer writing back to back lets go of the lock between its writes only for an
        # instant, which a poll would miss; writers poll, so a waiting reader gets its turn
        lock_descriptor(fd, shared=True)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
