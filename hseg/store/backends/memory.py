"""The in-memory shape: an ``EphemeralClient``, read and written by its own process only."""

from __future__ import annotations

from typing import Any, ClassVar

from hseg.store.backends.base import Backend, ClientFacts
from hseg.store.lexical.location import Location


class MemoryBackend(Backend):
    """An in-memory client: its lexical index is a SQLite database in memory, kept by its writes; no
    other process reads or writes it, so there is no writer lock and no view to refresh.

    Example:
        >>> MemoryBackend().path is None
        True
    """

    kind: ClassVar[str] = "memory"

    @classmethod
    def claim(cls, facts: ClientFacts) -> Backend | None:
        """A client that tells its settings, is not persistent and has no server address."""
        if facts.settings is None or facts.address is not None or getattr(facts.settings, "is_persistent", True):
            return None
        return cls(units=facts.units, api=facts.api)

    def lexical_location(self, collection: Any) -> Location | None:
        return Location("memory", None, f"{collection.id}")
