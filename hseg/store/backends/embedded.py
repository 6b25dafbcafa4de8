"""The embedded shape: a ``PersistentClient`` on a folder that processes of one machine share, one
writer at a time."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, ClassVar

from hseg.errors import ChromaVersionError
from hseg.store.backends.base import Backend, ClientFacts
from hseg.store.freshness import FreshReads, current_writes
from hseg.store.lexical.location import FOLDER, Location
from hseg.store.lock import writer_lock, writer_turn
from hseg.store.unit_index import UnitIndex

#: the chromadb releases, ``[low, high)`` by (major, minor), whose embedded internals this backend
#: relies on (:mod:`hseg.store.freshness`: the engine's ``start()``, ``System`` outside the client
#: cache, the ``embeddings_queue`` table of ``chroma.sqlite3``); pyproject.toml allows the same
CHROMADB_RANGE = ((1, 3), (2, 0))
#: the class of chromadb's embedded engine, the one that never reloads its vector index by itself
_EMBEDDED_ENGINE = "RustBindingsAPI"


def check_chromadb_version(version: str) -> None:
    """Refuse (:class:`ChromaVersionError`) a chromadb ``version`` outside :data:`CHROMADB_RANGE`.

    Example:
        >>> check_chromadb_version("1.5.9")
        >>> check_chromadb_version("2.0.1")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        hseg.errors.ChromaVersionError: chromadb 2.0.1: ...
    """
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]]
    low, high = CHROMADB_RANGE
    if len(parts) == 2 and low <= (parts[0], parts[1]) < high:
        return
    want = f">={low[0]}.{low[1]},<{high[0]}.{high[1]}"
    raise ChromaVersionError(
        f"chromadb {version}: an embedded store (path=, a PersistentClient) needs chromadb{want}, whose "
        f"internals hseg relies on to see other processes' writes; install it (pip install 'chromadb{want}') "
        "or serve the folder with 'chroma run --path FOLDER' and connect with host=")


class EmbeddedBackend(Backend):
    """A ``PersistentClient`` on the folder ``path``: its lexical index lives beside Chroma's files
    (``<path>/hseg-lexical/``), kept by every writer; writers take turns through the writer lock on
    the folder (:mod:`hseg.store.lock`), and searches read through views that see other processes'
    writes (:class:`~hseg.store.freshness.FreshReads`). ``engine``: the client runs Chroma's embedded
    engine, which never reloads its vector index by itself (views and lock); another engine keeps
    only the lexical index beside the files.

    Example:
        >>> EmbeddedBackend("./chroma-db").lexical_location(collection).path  # doctest: +SKIP
        PosixPath('chroma-db/hseg-lexical/docs.sqlite')
    """

    kind: ClassVar[str] = "embedded"

    @classmethod
    def claim(cls, facts: ClientFacts) -> Backend | None:
        """A persistent client on a folder, with no server address. Chroma's own engine (the one
        that never reloads its vector index by itself) is refused outside :data:`CHROMADB_RANGE`."""
        folder = getattr(facts.settings, "persist_directory", None)  # None: a client without settings
        if not folder or facts.address is not None or not getattr(facts.settings, "is_persistent", False):
            return None
        engine = type(facts.api).__name__ == _EMBEDDED_ENGINE
        if engine:
            import chromadb

            check_chromadb_version(str(chromadb.__version__))
        return cls(str(folder), engine=engine, units=facts.units, api=facts.api)

    def __init__(self, path: str, *, engine: bool = True, units: bool = True, api: Any = None) -> None:
        super().__init__(units=units, api=api)
        self._path = path
        self.engine = engine
        self.fresh: FreshReads | None = None

    @property
    def path(self) -> str | None:
        return self._path

    def lexical_location(self, collection: Any) -> Location | None:
        name = str(collection.name)
        return Location("embedded", Path(self._path) / FOLDER / f"{name}.sqlite", name)

    def open_reads(self, shared: Callable[[], tuple[Any, UnitIndex | None]], batch_size: Callable[[], int]) -> None:
        super().open_reads(shared, batch_size)
        if self.engine and self.fresh is None:
            self.fresh = FreshReads(self._path, self.api, shared,
                                    lambda collection, companion: private_view(collection, companion,
                                                                               shared()[1] is not None, batch_size))

    def reading(self, wait_s: float | None = None) -> AbstractContextManager[tuple[Any, Any]]:
        if self.fresh is None:
            return super().reading(wait_s)
        return self.fresh.reading() if wait_s is None else self.fresh.reading(wait_s=wait_s)

    def discard(self, view: tuple[Any, Any]) -> bool:
        return self.fresh is not None and self.fresh.discard(view)

    @contextmanager
    def writing(self, timeout_s: float) -> Iterator[None]:
        """The writer lock on the folder, and the client's engine started anew when another process
        wrote since this one's client last wrote (:func:`~hseg.store.freshness.current_writes`)."""
        fresh = self.fresh
        if fresh is None:
            yield
            return
        with writer_lock(fresh.path, timeout_s=timeout_s), current_writes(self.api, fresh.log) as new:
            if new is not None:
                fresh.current(new)
            yield

    def own_write(self) -> AbstractContextManager[None]:
        """The fresh views note the write as the store's own, not another process's
        (:meth:`~hseg.store.freshness.FreshReads.writing`)."""
        return super().own_write() if self.fresh is None else self.fresh.writing()

    def close(self) -> None:
        if self.fresh is not None:
            self.fresh.close()

    def writer_turn(self) -> object | None:
        return None if self.fresh is None else writer_turn(self.fresh.path)


def private_view(collection: Any, companion: Any, units: bool, batch_size: Callable[[], int]
                 ) -> tuple[Any, UnitIndex | None]:
    """A search's view of a private client's ``collection`` and unit-index ``companion`` (never
    written through; ``units``: the store has a unit index). The view's unit index decides its
    coverage here, while the view is opened with no writer writing: counted during a write, the two
    collections would seem out of step."""
    if not units:
        return collection, None
    view = UnitIndex(lambda create: companion, collection, batch_size)
    view.complete()
    return collection, view
