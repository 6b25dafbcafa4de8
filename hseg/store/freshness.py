"""Searches of an embedded store that see other processes' writes.

How and why: docs/design.md, ``hseg.store.freshness``.
"""

from __future__ import annotations

import logging
import math
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hseg.errors import StoreReplacedError

logger = logging.getLogger(__name__)

#: seconds a search that finds another process's write waits for a view holding it before it answers
#: through the view it has: a small store's view is loaded by then, a large one's loads meanwhile
VIEW_WAIT_S = 0.5
#: views opened in a row when each one's load meets a torn vector index
_OPEN_TRIES = 5
#: after a view's load, the next waits this many times its duration: a reader under a writer writing
#: back to back holds the writer lock shared at most half the time (loading back to back, it held it
#: so often that the writer's writes took twice as long)
_REST_PER_LOAD = 1.0


def _file_identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path`` (``None`` where there is none)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class LogPosition:
    """The last ``seq_id`` of an embedded Chroma database's write log (0 while it is empty), read
    through a read-only SQLite connection of our own (``None`` when it cannot be read: no log table, a
    locked file)."""

    def __init__(self, path: str) -> None:
        self.file = Path(path) / "chroma.sqlite3"
        self._con: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._broken = False

    def read(self) -> int | None:
        with self._lock:
            if self._broken:
                return None
            try:
                if self._con is None:
                    # read-only, and a short wait: a writer holds the file only for its commit
                    self._con = sqlite3.connect(f"file:{quote(str(self.file))}?mode=ro", uri=True, timeout=1.0,
                                                check_same_thread=False)
                row = self._con.execute("SELECT max(seq_id) FROM embeddings_queue").fetchone()
            except sqlite3.OperationalError as exc:
                if "no such" in str(exc):  # another chromadb's schema: say so once, then stop looking
                    self._broken = True
                    logger.warning("%s has no write log hseg can read (%s): searches of this embedded store "
                                   "will not see other processes' writes until it is opened again", self.file, exc)
                return None
            except sqlite3.Error:
                return None
        return 0 if row is None or row[0] is None else int(row[0])  # 0: an empty log

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


class _View:
    """A private client on the database, with the collections a search reads, and the searches using it."""

    def __init__(self, system: Any, collections: tuple[Any, Any]) -> None:
        self.system = system
        self.collections = collections
        self.users = 0
        self.retired = False

    def stop_if_unused(self) -> None:
        if self.retired and self.users == 0 and self.system is not None:
            system, self.system = self.system, None
            try:
                system.stop()
            except Exception:  # stopping frees memory only; a failure must not fail a search
                logger.debug("stopping a private Chroma client failed", exc_info=True)


class _Load:
    """A view being opened in the background: set ``done`` once it is in place (or failed: ``error``)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None


class FreshReads:
    """What a search of an embedded store reads: the store's own collections while no other process
    has written since they were opened, else those of a private client opened after that write.

    ``api`` is chromadb's ``ServerAPI`` of the store's client (a private client is opened with its
    settings); ``shared()`` gives the store's own ``(collection, unit index or None)``;
    ``build(collection, companion)`` makes the same pair from a private client's collections
    (``companion`` is ``None`` when the store has no unit index).

    A private view is opened in a thread of its own, under a shared hold of the writer lock
    (:func:`hseg.store.lock.reader_lock`), and its vector indexes are loaded there: a view opened
    while another process saves its vector index is torn (a kNN on it fails), and loading takes
    long enough on a large store (seconds) that a search should not wait for it. The search that
    finds the log moved waits up to :data:`VIEW_WAIT_S` for the new view, then answers through the
    view it has; the new one serves the searches after it is loaded. After a load, the next one
    starts no sooner than the load took (:data:`_REST_PER_LOAD`).
    """

    def __init__(self, path: str, api: Any, shared: Callable[[], tuple[Any, Any]],
                 build: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        self.path = path
        self._settings = api.get_settings()  # a private client is opened with the store's client's settings
        self.log = LogPosition(path)
        self._shared = shared
        self._build = build
        self._lock = threading.Lock()
        self._view: _View | None = None  # None: the store's own collections are current
        self._loading: _Load | None = None
        self._closed = False
        # the database this store opened: a folder renamed or replaced since is refused, not mixed in
        self._database = _file_identity(self.log.file)
        self._seen = self.log.read()  # the log position the current view holds
        self._placed = -math.inf  # when the current private view was put in place
        self._rest_until = -math.inf  # no view is opened before then (_REST_PER_LOAD), but for a retry
        self.reopened = 0  #: private clients opened (for tests and logs)

    @contextmanager
    def reading(self, wait_s: float = VIEW_WAIT_S) -> Iterator[tuple[Any, Any]]:
        """The collections to read: current as of this call's look at the write log when a view
        opened after it is ready within ``wait_s`` seconds, else the latest view loaded."""
        self.check_same_database()
        position = self.log.read()
        with self._lock:
            load = self._loading
            started = (load is None and position is not None and position != self._seen and not self._closed
                       and (time.monotonic() >= self._rest_until or wait_s > VIEW_WAIT_S))
            if started:
                load = self._loading = _Load()
                threading.Thread(target=self._load, args=(load,), name="hseg-fresh-view", daemon=True).start()
        # a view of a moment ago answers while its successor loads (writes back to back would make
        # every search wait for a load); an older one waits for a while: a write done a moment ago is
        # then found at once where loading is quick. A retry waits for any view under way.
        if load is not None and ((started and time.monotonic() - self._placed > VIEW_WAIT_S)
                                 or wait_s > VIEW_WAIT_S):
            if load.done.wait(wait_s) and load.error is not None:
                raise load.error
        with self._lock:
            view = self._view
            if view is not None:
                view.users += 1
        try:
            yield view.collections if view is not None else self._shared()
        finally:
            if view is not None:
                with self._lock:
                    view.users -= 1
                    view.stop_if_unused()

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Around a write through the store's own collections: when nothing else wrote before it and
        the store reads through its own collections, they hold the write, so the log position it
        leaves is seen (a write of another process landing during this one is then seen only after
        the next write of another process)."""
        self.check_same_database()
        before = self.log.read()
        try:
            yield
        finally:
            with self._lock:
                if self._view is None and self._loading is None and before is not None and before == self._seen:
                    self._seen = self.log.read()

    def check_same_database(self) -> None:
        """:class:`StoreReplacedError` when the database file at the store's path is no longer the one
        it opened (the folder was renamed, or another put in its place): the Chroma client reads the
        files it opened, the lexical index, the write log and new views read the path."""
        now = _file_identity(self.log.file)
        if self._database is not None and now != self._database:
            raise StoreReplacedError(
                f"{self.path}: the store's folder was renamed or replaced after this store opened it ("
                f"{'no database is there now' if now is None else 'another database is there now'}); "
                "open it again in a new process to read what is there (re-run the command; chromadb keeps this "
                "process's client of the old folder)")

    def discard(self, collections: tuple[Any, Any]) -> bool:
        """Retire the view whose collections a search found torn (a kNN failed on a missing vector),
        so that the search reads again through a newer one; ``False`` when ``collections`` are the
        store's own (they are not reopened).

        With many searches in flight, another one may already have replaced that view (the log moved
        on, or it met the same tear): the next :meth:`reading` is then newer already, so this is
        ``True`` as well."""
        if collections[0] is self._shared()[0]:
            return False
        with self._lock:
            view = self._view
            if view is not None and view.collections is collections:
                self._replace(None, None)
        return True

    def _load(self, load: _Load) -> None:
        """Thread: open a view (:meth:`_open`) and put it in place, unless the store closed meanwhile."""
        view, began = None, time.monotonic()
        try:
            view, position = self._open()
        except BaseException as exc:  # the search that started it re-raises it; later ones try again
            load.error = exc
            logger.warning("%s: opening a view of another process's writes failed: %s", self.path, exc)
        with self._lock:
            if self._loading is load:
                self._loading = None
            if view is not None and not self._closed:
                self._replace(view, position)
                self._rest_until = time.monotonic() + _REST_PER_LOAD * (time.monotonic() - began)
            elif view is not None:
                view.retired = True
                view.stop_if_unused()
        load.done.set()

    def _open(self) -> tuple[_View, int | None]:
        """A private client's view and the log position it holds, its vector indexes loaded, opened
        while no hseg writer of another process writes. A view whose load meets a tear anyway (a
        writer without hseg's lock) is opened again, a bounded number of times."""
        from hseg.retrieval.plans import is_missing_vector
        from hseg.store.lock import reader_lock

        for attempt in range(1, _OPEN_TRIES + 1):
            with reader_lock(self.path):
                position = self.log.read()  # no hseg writer can move it while the lock is held
                system, collections = self._client_view()
                try:
                    for collection in collections:
                        _load_vectors(collection)
                    view = _View(system, self._build(collections[0], collections[1] if len(collections) > 1
                                                     else None))
                except Exception as exc:
                    _stop(system)
                    if attempt == _OPEN_TRIES or not is_missing_vector(exc):
                        raise
                    logger.info("%s: a view opened torn (%s); opening another", self.path, exc)
                    continue
            logger.info("%s: another process wrote to this embedded store since its collections were opened; "
                        "searches read through a client opened after that write", self.path)
            return view, position
        raise AssertionError("unreachable")  # the last try returns or raises

    def _client_view(self) -> tuple[Any, tuple[Any, ...]]:
        """A private client (outside chromadb's per-process client cache) and its collections: the
        store's, and its unit index where the store has one."""
        from chromadb.api import ServerAPI
        from chromadb.api.models.Collection import Collection
        from chromadb.config import System

        collection, units = self._shared()
        system = System(self._settings)  # the same settings, outside chromadb's client cache
        fresh = system.instance(ServerAPI)  # type: ignore[type-abstract]  # chromadb resolves the implementation
        system.start()
        self.reopened += 1
        where = {"tenant": collection.tenant, "database": collection.database}

        def reopen(name: str) -> Any:
            return Collection(client=fresh, model=fresh.get_collection(name, **where), embedding_function=None)

        try:
            opened = [reopen(collection.name)]
            if units is not None and units.existing is not None:  # an absent unit index stays absent in the view
                try:
                    opened.append(reopen(units.name))
                except Exception as exc:
                    if not units.gone(exc):
                        raise
                    units.look_again()  # another process deleted it: absent in this view, and in the store's own
        except BaseException:
            _stop(system)
            raise
        return system, tuple(opened)

    def _replace(self, view: _View | None, position: int | None) -> None:
        """Read through ``view`` (``None``: no private view; ``position`` ``None``: open one at the
        next search) and retire the previous view once no search uses it."""
        old, self._view, self._seen = self._view, view, position
        self._placed = -math.inf if view is None else time.monotonic()
        if old is not None:
            old.retired = True
            old.stop_if_unused()

    def current(self, position: int | None) -> None:
        """The store's own collections were just started anew at log ``position`` (under the writer
        lock, :func:`current_writes`): searches read through them again."""
        with self._lock:
            self._replace(None, position)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._replace(None, self._seen)
        self.log.close()


def _load_vectors(collection: Any) -> None:
    """Make ``collection``'s client load its vector index now: one record's vector, then a kNN with it."""
    got = collection.get(limit=1, include=["embeddings"])
    embeddings = got.get("embeddings")
    if embeddings is not None and len(embeddings):
        collection.query(query_embeddings=[embeddings[0]], n_results=1, include=[])


def _stop(system: Any) -> None:
    try:
        system.stop()
    except Exception:  # stopping frees memory only
        logger.debug("stopping a private Chroma client failed", exc_info=True)


class _Client:
    """What this process knows of one embedded client's engine: the write-log position it is current
    with (``None``: unknown), and the writes of this process going through it now."""

    def __init__(self) -> None:
        self.seen: int | None = None
        self.writes = 0
        self.lock = threading.Lock()


_clients_lock = threading.Lock()
_clients: weakref.WeakKeyDictionary[Any, _Client] = weakref.WeakKeyDictionary()


@contextmanager
def current_writes(api: Any, log: LogPosition) -> Iterator[int | None]:
    """Around a write through a collection of ``api`` (an embedded client's ``ServerAPI``), with the store's writer lock
    held: when no other write of this process is under way through its client, and the write log
    (``log``) moved since the client was last known current, the client's engine is started anew, so
    the write goes through a vector index holding every earlier write. Yields the log position it was
    started anew at, else ``None`` (``None`` too when the log cannot be read). A client whose
    position is unknown (its first write here, or an unreadable log) is started anew: a few milliseconds."""
    with _clients_lock:
        client = _clients.setdefault(api, _Client())
    restarted = None
    with client.lock:
        if client.writes == 0:
            position = log.read()
            if position is None or position != client.seen:
                # RustBindingsAPI.start() makes a new engine (``bindings``) and swaps it in at once; calls
                # under way finish on the old one, every later call of every collection of this client
                # reads the database afresh (chromadb 1.5.9)
                api.start()
                restarted = position
                logger.debug("%s: another process wrote since this client last wrote: its engine was started "
                             "anew before this write", log.file.parent)
            client.seen = position
        client.writes += 1
    try:
        yield restarted
    finally:
        with client.lock:
            client.writes -= 1
            # the lock is held: every write since the client was current went through it
            client.seen = log.read()
