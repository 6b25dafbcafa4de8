"""What every shape of Chroma client gives a store (:class:`Backend`); the shapes are its subclasses,
one module each, and :func:`hseg.store.backends.choose_backend` picks one when a store opens."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from hseg.chunking.records import SCHEMA_VERSION
from hseg.chunking.schema import SCHEMA_KEY
from hseg.errors import IndexOutOfStepError, ServerUnreachableError
from hseg.retrieval.plans import is_missing_vector
from hseg.retrieval.unit_vectors import companion_name
from hseg.store.connection import created_concurrently, is_connection_error, unit_index_metadata
from hseg.store.lexical import LexicalIndex, open_lexical_index
from hseg.store.lexical.journal import Journal, journal_name
from hseg.store.lexical.location import Location
from hseg.store.unit_index import UnitIndex

logger = logging.getLogger(__name__)

#: reads of one search through newer views when a view turns out torn (see :meth:`Backend.read`),
#: and the pause before each (times its number): a writer's save of its vector index takes milliseconds
_TORN_VIEW_TRIES = 4
_TORN_VIEW_WAIT_S = 0.05
#: records per write call where a client does not tell its limit (a foreign collection's)
_FALLBACK_BATCH = 1000

T = TypeVar("T")


@dataclass(frozen=True)
class ClientFacts:
    """What :func:`~hseg.store.backends.choose_backend` reads of a collection's client, once, for
    each shape to claim it by (:meth:`Backend.claim`): ``api``, chromadb's ``ServerAPI`` behind the
    collection (``None``: none); ``settings``, its ``Settings`` (``None``: it tells none); ``address``,
    ``"host:port"`` of its server (``None``: none); ``units``, whether it can make collections.

    Example:
        >>> ClientFacts(api=None, settings=None, address=None, units=False).settings is None
        True
    """

    api: Any
    settings: Any
    address: str | None
    units: bool


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
        self._shared: Callable[[], tuple[Any, UnitIndex | None]] | None = None

    @classmethod
    def claim(cls, facts: ClientFacts) -> Backend | None:
        """This shape's backend for a client with these ``facts``, ``None`` where the client is not of
        this shape; :func:`~hseg.store.backends.choose_backend` asks the shapes in turn. The base
        claims every client: a collection-like object served as it is."""
        return cls(address=facts.address, units=facts.units, api=facts.api)

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

    def unit_index(self, collection: Any, hnsw: Mapping[str, Any], batch_size: Callable[[], int]
                   ) -> UnitIndex | None:
        """The unit index of ``collection`` in its companion collection (:meth:`companion`, with the
        HNSW settings ``hnsw``), opened, not created: a store opened only to read writes nothing, the
        first write creates it. ``None`` where the client cannot make collections (:attr:`units`)."""
        if not self.units:
            return None
        name, config = companion_name(collection.name), {"hnsw": dict(hnsw)}

        def companion(create: bool) -> Any:
            return self.companion(collection, name, create=create, metadata=unit_index_metadata(),
                                  configuration=config)

        return UnitIndex(companion, collection, batch_size, lambda: self.drop_collection(collection, name))

    def lexical_index(self, collection: Any) -> LexicalIndex | None:
        """The lexical index of ``collection`` at :meth:`lexical_location` (``None``: none); one kept
        as a cache (``Location.maintained`` false: a server's clients) follows the write log its
        writers keep (:meth:`journal`). Nothing is opened or read until its first use."""
        return open_lexical_index(collection, self.lexical_location(collection), lambda: self.journal(collection))

    def journal(self, collection: Any) -> Journal:
        """The write log of ``collection`` (:mod:`hseg.store.lexical.journal`), created empty where absent."""
        log = self.companion(collection, journal_name(collection.name), metadata={SCHEMA_KEY: SCHEMA_VERSION})
        return Journal(log, self.api)

    def companion(self, collection: Any, name: str, *, create: bool = True, metadata: dict[str, Any] | None = None,
                  configuration: dict[str, Any] | None = None) -> Any:
        """The collection ``name`` beside ``collection`` (its tenant and database), opened through the
        same connection (:attr:`api`): ``None`` when it is absent and not ``create``, else created
        with ``metadata`` and ``configuration`` (one another writer creates at the same moment is
        opened). A unit index and a write log are such companions."""
        from chromadb.api.models.Collection import Collection
        from chromadb.errors import NotFoundError

        api, where = self.api, {"tenant": collection.tenant, "database": collection.database}
        try:
            model = api.get_collection(name, **where)
        except (NotFoundError, ValueError):
            if not create:
                return None
            try:
                model = api.get_or_create_collection(name=name, configuration=configuration, metadata=metadata,
                                                     **where)
            except Exception as exc:  # a server can refuse even get_or_create when two create at once
                if not created_concurrently(exc):
                    raise
                model = api.get_collection(name, **where)
        return Collection(client=api, model=model, embedding_function=None)

    def drop_collection(self, collection: Any, name: str) -> None:
        """Delete the collection ``name`` beside ``collection`` (``collection`` itself, or a companion)."""
        self.api.delete_collection(name, tenant=collection.tenant, database=collection.database)

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

    def open_reads(self, shared: Callable[[], tuple[Any, UnitIndex | None]], batch_size: Callable[[], int]) -> None:
        """Where searches read: ``shared()`` gives the store's own ``(collection, unit index or None)``,
        ``batch_size()`` its records per write call. Here a search reads ``shared()`` as it is; the
        embedded shape reads through views that see other processes' writes
        (:mod:`hseg.store.freshness`)."""
        self._shared = shared

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
            units.look_again()  # deleted by another client: absent until a write makes it again
        elif not isinstance(exc, IndexOutOfStepError):
            return is_missing_vector(exc) and self.discard(view)
        self.discard(view)  # the store's own collections are read again as they are
        return True

    @contextmanager
    def writing(self, timeout_s: float) -> Iterator[None]:
        """The writer's turn around a block of writes, waited for up to ``timeout_s``: nothing to take here."""
        yield

    def own_write(self) -> AbstractContextManager[None]:
        """Around one of the store's own writes (inside :meth:`writing`): nothing to note here."""
        return nullcontext()

    def close(self) -> None:
        """Let go of what the backend opened for reads (the store is unusable afterwards)."""

    def writer_turn(self) -> object | None:
        """This process's present hold of the writer's turn (``None``: not held, or the shape has none)."""
        return None
