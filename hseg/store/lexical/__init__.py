"""The lexical index: BM25 over a store's segments in SQLite FTS5, kept beside the store.

One index per collection, one row per segment record (the retrieval unit of every search: a parent's
lexical score is its best segment's), tokenised ``porter unicode61 remove_diacritics 2``
(:mod:`hseg.retrieval.lexical_query`). Chroma cannot hold it (sparse indexes are refused by local
and ``chroma run`` servers), so it lives beside Chroma, in one of two ways
(:mod:`~hseg.store.lexical.location`):

* **maintained** (:class:`~hseg.store.lexical.maintained.MaintainedKind`; an embedded
  ``PersistentClient``: ``<path>/hseg-lexical/<collection>.sqlite``; an ``EphemeralClient``: an
  in-memory database shared by the process). Every hseg write updates it in step, inside its write
  bracket: the writer takes the index's writer lock (``flock`` on ``<file>.lock``, released by the
  kernel however its holder exits), records the documents it is about to write as *pending*
  (committed), writes Chroma's records, then the unit index, then the documents' rows, and clears
  *pending* with the collection's record count in one last commit (deletes run in the reverse
  order: rows first). A process killed anywhere in between leaves its documents *pending*; the next
  process to check the index while no writer holds the lock re-reads those documents from Chroma
  and rewrites their rows. Readers in other processes read the same file: a write costs them
  nothing but the words' terms they kept (BM25's statistics changed).
* **cache** (:class:`~hseg.store.lexical.cached.CachedKind`; any other client, e.g. an
  ``HttpClient`` of a ``chroma run`` server shared by many processes): each client machine derives
  the index from the collection into
  ``$HSEG_CACHE/lexical/<host_port>/<tenant>/<database>/<collection>.sqlite`` (default
  ``~/.cache/hseg``), and follows every client's writes through the write log hseg writers keep in
  the companion collection ``<name>_hseg_writes`` (:mod:`~hseg.store.lexical.journal`): a reader
  re-reads the documents written since its last check (:mod:`~hseg.store.lexical.follow`), and
  reads the whole collection again only when the log cannot say what changed.

Records written without hseg (another tool writing hseg records into the collection) change
Chroma's record count without a log entry or *pending* document: each index object compares the
count with the one recorded at its last sync on its first check and rebuilds if they differ, as the
unit index does (:mod:`hseg.store.unit_index`). ``HierarchicalStore.sync_lexical_index()`` rebuilds
on demand.

The modules: :mod:`~hseg.store.lexical.location` (where it lives), :mod:`~hseg.store.lexical.tables`
(its tables and the statements that write them), :mod:`~hseg.store.lexical.database` (the file's
connection, writer lock and kept word terms), :mod:`~hseg.store.lexical.reads` (what a search reads),
:mod:`~hseg.store.lexical.table` (the rows both kinds hold and write), :mod:`~hseg.store.lexical.index`
(what both kinds do: staying in step before a search, the verbs of a derived index,
:class:`hseg.store.indexes.DerivedIndex`), :mod:`~hseg.store.lexical.maintained` and
:mod:`~hseg.store.lexical.cached` (the two kinds' write brackets and checks),
:mod:`~hseg.store.lexical.repair` (a damaged file set aside and built again),
:mod:`~hseg.store.lexical.journal` and :mod:`~hseg.store.lexical.follow` (the write log and a cache
following it).
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
