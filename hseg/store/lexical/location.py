"""Where a collection's lexical index lives: beside an embedded store's files, in memory beside an
ephemeral one, or in a per-machine cache for a client of a server."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hseg.store.connection import server_address

__all__ = ["FOLDER", "Location", "cache_root", "lexical_location"]

#: the folder beside an embedded store's Chroma files that holds its lexical indexes
FOLDER = "hseg-lexical"


@dataclass(frozen=True)
class Location:
    """Where a collection's lexical index lives: ``kind`` is ``"embedded"`` or ``"memory"`` (maintained
    by every writer) or ``"cache"`` (derived per client machine); ``path`` is the SQLite file
    (``None`` in memory) and ``key`` names the in-memory database."""

    kind: str
    path: Path | None
    key: str

    @property
    def maintained(self) -> bool:
        return self.kind != "cache"


def cache_root() -> Path:
    """``$HSEG_CACHE``, else ``$XDG_CACHE_HOME/hseg``, else ``~/.cache/hseg``."""
    if os.environ.get("HSEG_CACHE"):
        return Path(os.environ["HSEG_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hseg"


def lexical_location(collection: Any) -> Location | None:
    """Where the lexical index of ``collection`` lives (``None`` for an object that is not a chromadb
    collection: no lexical index).

    Example:
        >>> lexical_location(object()) is None
        True
    """
    api = getattr(collection, "_client", None)
    if api is None or not hasattr(api, "get_settings"):
        return None
    name, tenant, database = str(collection.name), str(collection.tenant), str(collection.database)
    address = server_address(collection)
    settings = api.get_settings()
    if address is None and getattr(settings, "is_persistent", False) and getattr(settings, "persist_directory", None):
        return Location("embedded", Path(settings.persist_directory) / FOLDER / f"{name}.sqlite", name)
    if address is None and not getattr(settings, "is_persistent", True):
        return Location("memory", None, f"{collection.id}")
    where = (address or "client").replace(":", "_").replace("/", "_")
    return Location("cache", cache_root() / "lexical" / where / tenant / database / f"{name}.sqlite", name)
