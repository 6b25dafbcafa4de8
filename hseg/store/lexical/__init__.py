"""The lexical index: BM25 over a store's segments in SQLite FTS5, kept beside the store.

How and why: docs/design.md, ``hseg.store.lexical``.
"""

from collections.abc import Callable
from typing import Any

from hseg.store.lexical.cached import CachedKind
from hseg.store.lexical.index import LexicalIndex
from hseg.store.lexical.journal import JOURNAL_SUFFIX, Journal, journal_name
from hseg.store.lexical.location import FOLDER, Location, cache_root
from hseg.store.lexical.maintained import MaintainedKind
from hseg.store.lexical.repair import LexicalIndexUnavailable
from hseg.store.lexical.tables import TOKENIZER

__all__ = ["LexicalIndex", "open_lexical_index", "MaintainedKind", "CachedKind", "LexicalIndexUnavailable", "Journal",
           "JOURNAL_SUFFIX", "journal_name", "FOLDER", "Location", "cache_root", "TOKENIZER", "lexical_state"]


def open_lexical_index(collection: Any, location: Location | None, journal: Callable[[], Journal]
                       ) -> LexicalIndex | None:
    """The lexical index of ``collection`` at ``location`` (``None``: it has none): maintained by its
    writers, or a cache following the write log ``journal()`` opens (asked only for a cache).

    Example:
        >>> index = open_lexical_index(collection, Location("memory", None, "demo"), journal)  # doctest: +SKIP
        >>> index.maintained  # doctest: +SKIP
        True
    """
    if location is None:
        return None
    return LexicalIndex(collection, location, None if location.maintained else journal())


def lexical_state(index: LexicalIndex) -> dict[str, Any]:
    """What ``stats`` reports of the index (:meth:`LexicalIndex.state`)."""
    return index.state()
