"""What every shape of Chroma client gives a store (:class:`Backend`); the shapes are its subclasses,
one module each, and :func:`hseg.store.backends.choose_backend` picks one when a store opens."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, ClassVar, TypeVar

from hseg.errors import IndexOutOfStepError, ServerUnreachableError
from hseg.retrieval.plans import is_missing_vector
from hseg.store.connection import is_connection_error
from hseg.store.freshness import FreshReads
from hseg.store.lexical.location import Location

__all__ = ["Backend"]

logger = logging.getLogger(__name__)

#: reads of one search through newer views when a view turns out torn (see :meth:`Backend.read`),
#: and the pause before each (times its number): a writer's save of its vector index takes milliseconds
_TORN_VIEW_TRIES = 4
_TORN_VIEW_WAIT_S = 0.05
#: records per write call where a client does not tell its limit (a foreign collection's)
_FALLBACK_BATCH = 1000

T = TypeVar("T")


class Backend:
    """One shape of Chroma client, chosen once when a store opens: the rest of the store asks it
    instead of looking at the client. This base is a shape with nothing of its own: no fresh views,
    no writer lock, no lexical index; a subclass says what its shape has.

    Args:
        address: ``"host:port"`` of the Chroma server behind the client (``None``: none), named in
            the errors of a lost connection (:meth:`errors`).
        units: whether a unit index (a companion collection, opened through the collection's own
            connection) can go with the collection.
        api: chromadb's ``ServerAPI`` the collection was opened through (``collection._client``;
            ``None`` where it has none).

    Example:
        >>> from hseg.store.backends import ServerBackend
        >>> with ServerBackend(address="10.1.2.3:8000").errors("search"):
        ...     raise ConnectionError("reset")
        Traceback (most recent call last):
        hseg.errors.ServerUnreachableError: Chroma server at 10.1.2.3:8000: search failed (ConnectionError: reset)
    """

    #: the shape's name, as docs/deployment.md's table names it
    kind: ClassVar[str]

    def __init__(self, *, address: str | None = None, units: bool = True, api: Any = None) -> None:
        self.address = address
        self.units = units
        self.api = api
        self._shared: Callable[[], tuple[Any, Any]] | None = None

    def max_batch_size(self, client: Any) -> int:
        """Records per write call through ``client`` (the store's): its ``get_max_batch_size()``,
        asked at each write, else a fixed number."""
        getter = getattr(client, "get_max_batch_size", None)
        size = getter() if getter is not None else _FALLBACK_BATCH
        return max(1, int(size))

    @property
    def path(self) -> str | None:
        """The folder of an embedded database (``None``: the shape has no folder of its own)."""
        return None

    def lexical_location(self, collection: Any) -> Location | None:
        """Where the lexical index of ``collection`` lives (``None``: it has none)."""
        return None

    @contextmanager
    def errors(self, action: str) -> Iterator[None]:
        """Around a call to Chroma: a lost connection to the server (:attr:`address`) is a
        :class:`~hseg.errors.ServerUnreachableError` naming host:port and ``action`` (one an inner
        block raised already is passed on as it is)."""
        try:
            yield
        except Exception as exc:
            if self.address is None or not is_connection_error(exc) or isinstance(exc, ServerUnreachableError):
                raise
            raise ServerUnreachableError(f"Chroma server at {self.address}: {action} failed "
                                         f"({type(exc).__name__}: {exc})") from exc

    def open_reads(self, shared: Callable[[], tuple[Any, Any]],
                   build: Callable[[Any, Any], tuple[Any, Any]]) -> FreshReads | None:
        """Where searches read: ``shared()`` gives the store's own ``(collection, unit index or None)``,
        ``build(collection, companion)`` the same pair of a private client's collections. Returns the
        views a search reads when they are not the store's own collections (the embedded shape's,
        :mod:`hseg.store.freshness`); ``None``: a search reads ``shared()`` as it is."""
        self._shared = shared
        return None

    def reading(self, wait_s: float | None = None) -> AbstractContextManager[tuple[Any, Any]]:
        """The ``(collection, unit index)`` a search reads (:meth:`open_reads` first); ``wait_s``: how
        long to wait for a view of other processes' writes under way (``None``: the default)."""
        if self._shared is None:
            raise RuntimeError("open_reads() first: the backend does not know the store's collections yet")
        return nullcontext(self._shared())

    def discard(self, view: tuple[Any, Any]) -> bool:
        """Retire ``view``, which a search found torn, so that the next :meth:`reading` is newer;
        ``False`` when it is the store's own collections (they are read again as they are)."""
        return False

    def read(self, run: Callable[[Any, Any], T], units: Any, retry_wait_s: float) -> T:
        """``run(collection, unit index)`` on the view a search reads. A view that another writer's
        save left torn (a kNN failing on a missing vector, :mod:`hseg.store.freshness`) is discarded
        and ``run`` goes again on one opened later, a bounded number of times, waiting up to
        ``retry_wait_s`` for it; so is a search whose reads disagreed (:class:`IndexOutOfStepError`:
        another process deleted or replaced documents between them, or after the view was opened),
        on any shape, and one that found the store's unit index ``units`` deleted by another client."""
        for attempt in range(1, _TORN_VIEW_TRIES + 1):
            with self.reading(wait_s=None if attempt == 1 else retry_wait_s) as view:
                try:
                    return run(*view)
                except Exception as exc:
                    if attempt == _TORN_VIEW_TRIES or not self._read_again(view, exc, units):
                        raise
                    logger.info("%s: a search met another writer's write half seen (%s); reading again",
                                view[0].name, exc)
            time.sleep(_TORN_VIEW_WAIT_S * attempt)  # the writer's save is under way: give it a moment
        raise AssertionError("unreachable")  # the last try returns or raises

    def _read_again(self, view: tuple[Any, Any], exc: Exception, units: Any) -> bool:
        """Whether a search that failed with ``exc`` reading ``view`` goes again (see :meth:`read`)."""
        if units is not None and units.gone(exc):
            units.forget()  # deleted by another client: absent until a write makes it again
        elif not isinstance(exc, IndexOutOfStepError):
            return is_missing_vector(exc) and self.discard(view)
        self.discard(view)  # the store's own collections are read again as they are
        return True

    @contextmanager
    def writing(self, collection: Any, timeout_s: float) -> Iterator[None]:
        """The writer's turn around a block of writes through ``collection``: nothing to take here."""
        yield

    def own_write(self) -> AbstractContextManager[None]:
        """Around one of the store's own writes (inside :meth:`writing`): nothing to note here."""
        return nullcontext()

    def close(self) -> None:
        """Let go of what the backend opened for reads (the store is unusable afterwards)."""

    def writer_turn(self) -> object | None:
        """This process's present hold of the writer's turn (``None``: not held, or the shape has none)."""
        return None
