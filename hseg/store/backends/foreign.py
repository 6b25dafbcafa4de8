"""The foreign shape: a collection-like object that is not a chromadb collection with a client hseg knows."""

from __future__ import annotations

from typing import ClassVar

from hseg.store.backends.base import Backend


class ForeignBackend(Backend):
    """An object read and written as a collection whose client hseg does not know: no lexical index,
    no fresh views, no writer lock; a unit index only where its client can make collections
    (``units``).

    Example:
        >>> ForeignBackend(units=False).lexical_location(object()) is None
        True
    """

    kind: ClassVar[str] = "foreign"
