"""What every shape of Chroma client gives a store (:class:`Backend`); the shapes are its subclasses,
one module each, and :func:`hseg.store.backends.choose_backend` picks one when a store opens."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from hseg.errors import ServerUnreachableError
from hseg.store.connection import is_connection_error
from hseg.store.freshness import FreshReads
from hseg.store.lexical.location import Location

__all__ = ["Backend"]


class Backend:
    """One shape of Chroma client, chosen once when a store opens: the rest of the store asks it
    instead of looking at the client. This base is a shape with nothing of its own: no fresh views,
    no writer lock, no lexical index; a subclass says what its shape has.

    Args:
        address: ``"host:port"`` of the Chroma server behind the client (``None``: none), named in
            the errors of a lost connection (:meth:`errors`).
        units: whether a unit index (a companion collection, opened through the collection's own
            connection) can go with the collection.

    Example:
        >>> from hseg.store.backends import ServerBackend
        >>> with ServerBackend(address="10.1.2.3:8000").errors("search"):
        ...     raise ConnectionError("reset")
        Traceback (most recent call last):
        hseg.errors.ServerUnreachableError: Chroma server at 10.1.2.3:8000: search failed (ConnectionError: reset)
    """

    #: the shape's name, as docs/deployment.md's table names it
    kind: ClassVar[str]

    def __init__(self, *, address: str | None = None, units: bool = True) -> None:
        self.address = address
        self.units = units

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
        """The views a search reads when they are not the store's own collections (the embedded
        shape's, :mod:`hseg.store.freshness`); ``None``: a search reads ``shared()`` as it is."""
        return None

    @contextmanager
    def writing(self, collection: Any, timeout_s: float) -> Iterator[None]:
        """The writer's turn around a block of writes through ``collection``: nothing to take here."""
        yield

    def writer_turn(self) -> object | None:
        """This process's present hold of the writer's turn (``None``: not held, or the shape has none)."""
        return None
