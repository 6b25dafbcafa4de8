"""The server shape: a client of ``chroma run`` (``HttpClient``), one of any number of readers and writers."""

from __future__ import annotations

from typing import Any, ClassVar

from hseg.store.backends.base import Backend, ClientFacts
from hseg.store.lexical.location import Location, cache_root


class ServerBackend(Backend):
    """A client of a Chroma server: its lexical index is a cache per client machine under
    :func:`~hseg.store.lexical.location.cache_root`, following the write log its writers keep; its
    errors name the server. A server serves any number of writers: no writer lock.

    Example:
        >>> ServerBackend(address="10.1.2.3:8000").address
        '10.1.2.3:8000'
    """

    kind: ClassVar[str] = "server"

    @classmethod
    def claim(cls, facts: ClientFacts) -> Backend | None:
        """Any client that tells its settings and is neither embedded nor in memory (those shapes are
        asked first); one without an address is a client of some server, cached as one."""
        if facts.settings is None:
            return None
        return cls(address=facts.address, units=facts.units, api=facts.api)

    def lexical_location(self, collection: Any) -> Location | None:
        name, tenant, database = str(collection.name), str(collection.tenant), str(collection.database)
        where = (self.address or "client").replace(":", "_").replace("/", "_")
        return Location("cache", cache_root() / "lexical" / where / tenant / database / f"{name}.sqlite", name)
