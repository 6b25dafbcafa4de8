"""Where a collection's lexical index lives: beside an embedded store's files, in memory beside an
ephemeral one, or in a per-machine cache for a client of a server. Which of them a collection's is,
the store's backend says (:meth:`hseg.store.backends.Backend.lexical_location`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

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

