"""A store's searches: :class:`Searcher` holds the bodies of ``search`` and ``search_many``, and
:class:`SearchPlanner` what one search reads: its settings, the query's words, and the plan over the
collection, the unit index and the lexical index that :mod:`hseg.retrieval.plans` runs (one search
or many together)."""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from hseg.errors import LexicalIndexStorageError
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.lexical_query import lexical_query
from hseg.retrieval.parents import parents_plan
from hseg.retrieval.passages import units_plan
from hseg.retrieval.plans import Plan, run_many, run_one
from hseg.retrieval.settings import SearchSettings
from hseg.store.connection import lexical_storage_error
from hseg.store.lexical import LexicalIndex, LexicalIndexUnavailable
from hseg.store.parts import StoreParts
from hseg.store.unit_index import UnitIndex

logger = logging.getLogger(__name__)

T = TypeVar("T")


def search_settings(settings: SearchSettings | None, k: int | None, fields: Mapping[str, Any]) -> SearchSettings:
    """The settings of one call: ``settings`` (default: the defaults) with ``k`` and ``fields`` over it."""
    if k is not None:
        fields = {**fields, "k": k}
    return SearchSettings.resolve(settings, **fields)


def text_of_query(query: Any, text: str | None, name: str) -> str | None:
    """The words of a query for the lexical side: a string query's own, else ``text`` (may be ``None``)."""
    if text is not None and not isinstance(text, str):
        raise ValueError(f"{name} must be a string or None, got {type(text).__name__}")
    if isinstance(query, str):
        if text is not None and text != query:
            raise ValueError(f"{name}: give it only beside a vector query (a string query is its own text)")
        return query
    return text


class Searcher:
    """The searches of one store (:meth:`hseg.store.HierarchicalStore.search` and ``search_many``, which
    delegate here): the call's settings and the queries' words checked, the queries embedded on the
    view the backend gives a search, their plans run (:func:`~hseg.retrieval.plans.run_one` for one,
    :func:`~hseg.retrieval.plans.run_many` for many: each step's Chroma and lexical reads shared), and
    the hits checked against the query encoder. ``refuse`` raises for a store that opening created
    and nothing has written since (:meth:`hseg.store.reads.Reads.refuse_made_by_opening`).

    Example:
        >>> Searcher(parts, reads.refuse_made_by_opening).search("tides", k=2)  # doctest: +SKIP
        [SearchHit(cluster_id='clu-...', ...), ...]
    """

    def __init__(self, parts: StoreParts, refuse: Callable[[], None]) -> None:
        self.parts = parts
        self.planner = SearchPlanner(parts.collection.name, parts.lexical, parts.oversample)
        self._refuse = refuse

    def search(self, query: Any, k: int | None = None, *, settings: SearchSettings | None = None,
               query_text: str | None = None, **fields: Any) -> list[SearchHit]:
        """The hits of one query (:meth:`hseg.store.HierarchicalStore.search`)."""
        chosen = search_settings(settings, k, fields)
        text = text_of_query(query, query_text, "query_text")
        return self._answered([query], [text], ["query"], chosen, lambda plans: [run_one(plans[0])])[0]

    def search_many(self, queries: Sequence[Any], k: int | None = None, *, settings: SearchSettings | None = None,
                    query_texts: Sequence[str | None] | None = None, **fields: Any) -> list[list[SearchHit]]:
        """The hits of each query, as :meth:`search` gives them, the searches run together
        (:meth:`hseg.store.HierarchicalStore.search_many`)."""
        if isinstance(queries, (str, np.ndarray)) or not isinstance(queries, Sequence):
            raise ValueError(f"queries must be a list of strings or vectors, got {type(queries).__name__}")
        if query_texts is not None and (isinstance(query_texts, str) or len(query_texts) != len(queries)):
            raise ValueError(f"query_texts must be a list with one entry per query ({len(queries)}), "
                             f"got {query_texts!r:.80}")
        chosen = search_settings(settings, k, fields)
        texts = [text_of_query(q, None if query_texts is None else query_texts[i], f"query_texts[{i}]")
                 for i, q in enumerate(queries)]
        return self._answered(list(queries), texts, [f"queries[{i}]" for i in range(len(queries))], chosen, run_many)

    def _answered(self, queries: list[Any], texts: list[str | None], names: list[str], chosen: SearchSettings,
                  runner: Callable[[list[Plan[list[SearchHit]]]], list[list[SearchHit]]]) -> list[list[SearchHit]]:
        """Each query's hits: embedded (``names`` say which in an error) on the view a search reads,
        its plan run by ``runner`` (again on a newer view where that one was torn: the backend's ``read``)."""
        parts, planner = self.parts, self.planner
        self._refuse()

        def run(collection: Any, units: UnitIndex | None) -> list[list[SearchHit]]:
            vectors = [parts.binding.query_vector(q, what, collection=collection) for q, what in zip(queries, names)]
            with parts.backend.errors("search"):
                return planner.answer(chosen, lambda used: runner(
                    [planner.plan(v, used, collection, units, t) for v, t in zip(vectors, texts)]))

        answers = parts.backend.read(run, parts.units, parts.lock_timeout)
        parts.binding.check_hits(h.metadata for hits in answers for h in hits)
        return answers


class SearchPlanner:
    """Plans the searches of the collection named ``collection_name``: whole parents
    (:func:`hseg.retrieval.parents.parents_plan`, asking Chroma for ``ceil(oversample * k)`` records
    first) or passages (:func:`hseg.retrieval.passages.units_plan`), with ``lexical_index`` when a
    search gives the lexical side a weight."""

    def __init__(self, collection_name: str, lexical_index: LexicalIndex | None, oversample: float) -> None:
        # finite: Chroma is asked for ceil(oversample * k) records, which infinity cannot be
        if isinstance(oversample, bool) or not isinstance(oversample, (int, float)) or not 1 <= oversample < np.inf:
            raise ValueError(f"oversample must be a finite number >= 1, got {oversample!r}")
        self.collection_name = collection_name
        self.lexical_index = lexical_index
        self.oversample = oversample
        self._warned_no_text = False
        self._warned_dense = False

    def lexical(self, action: str) -> LexicalIndex:
        """The lexical index, or a ``ValueError`` saying that ``action`` needs one."""
        if self.lexical_index is None:
            raise ValueError(f"collection {self.collection_name!r}: {action} needs a lexical index, which a store "
                             "wrapping an object that is not a chromadb collection does not have")
        return self.lexical_index

    def ready(self, settings: SearchSettings) -> SearchSettings:
        """Bring the lexical index in step before a search that uses it (once per call; a cache's check
        runs beside the search until its first read of the index, :meth:`LexicalIndex.check_beside`);
        returns the settings to search with: dense alone, with one warning, when the index can be neither read
        nor built again (:class:`~hseg.store.lexical.LexicalIndexUnavailable`)."""
        if settings.lexical_weight:
            index = self.lexical("a search with lexical_weight > 0")
            try:
                index.prepare()  # a cache's check runs beside the search (it reads the write log from the server)
            except LexicalIndexUnavailable as exc:
                return self.dense(settings, exc)
            except OSError as exc:  # a read-only folder: its lock file cannot be opened, the dense side still can
                problem = lexical_storage_error(index.location.path, exc)
                if problem is None:
                    raise
                return self.dense(settings, problem)
        return settings

    def answer(self, settings: SearchSettings, run: Callable[[SearchSettings], T]) -> T:
        """``run(settings)`` once the lexical index is ready; a lexical read that finds the file
        damaged mid-search repairs it (:meth:`~hseg.store.lexical.LexicalIndex.repair`) and runs again
        (dense alone, with one warning, when the repair fails too)."""
        chosen = self.ready(settings)
        try:
            return run(chosen)
        except LexicalIndexUnavailable as exc:  # a check beside the search (ready()) met it at its first read
            return run(self.dense(chosen, exc))
        except sqlite3.DatabaseError as exc:
            if not chosen.lexical_weight or self.lexical_index is None:
                raise
            try:
                self.lexical_index.repair(exc)
            except (LexicalIndexUnavailable, LexicalIndexStorageError) as failed:  # cannot be built, or its disk
                return run(self.dense(chosen, failed))
            return run(chosen)
        except OSError as exc:  # as in ready(), from a check beside the search
            problem = None if self.lexical_index is None or not chosen.lexical_weight else \
                lexical_storage_error(self.lexical_index.location.path, exc)
            if problem is None:
                raise
            return run(self.dense(chosen, problem))
        except Exception as exc:
            refused = refused_filter(exc, chosen)
            if refused is None:
                raise
            raise refused from exc
        finally:
            if chosen.lexical_weight and self.lexical_index is not None:
                self.lexical_index.settle()

    def dense(self, settings: SearchSettings, problem: BaseException) -> SearchSettings:
        if not self._warned_dense:
            self._warned_dense = True
            logger.warning("%s; searching collection %r by the dense side alone", problem, self.collection_name)
        return dataclasses.replace(settings, lexical_weight=0.0)

    def plan(self, vec: np.ndarray, settings: SearchSettings, collection: Any, units: UnitIndex | None,
             text: str | None = None) -> Plan[list[SearchHit]]:
        """The reads of one search of ``collection`` (and its unit index ``units``) for the unit
        query vector ``vec`` and the query's words ``text``: Chroma's and the lexical index's alike,
        from the query's lexical side (its coverage, when weighted by it) to the last passage."""
        lexical = None
        if settings.lexical_weight and text is not None:
            lexical = yield from lexical_query(self.lexical("a search with lexical_weight > 0"), text,
                                               settings.lexical_weight, settings.lexical_weighting)
        elif settings.lexical_weight and not self._warned_no_text:
            self._warned_no_text = True  # a vector has no words: the dense side is all there is to search
            logger.warning("collection %r: a vector query without query_text= is searched densely, without its "
                           "lexical_weight=%g; give its text to search it hybrid", self.collection_name,
                           settings.lexical_weight)
        if settings.resolved_unit == "cluster":
            return (yield from parents_plan(collection, vec, settings, oversample=self.oversample, lexical=lexical))
        index = None
        if settings.resolved_unit == "auto" and units is not None:
            index = units.usable(settings.cluster_weight, settings.neighbour_weight, settings.where)
        # a search with a lexical side spends the rest of a budget on what follows its passages, read
        # from the lexical index's table (made fresh by ready()); a dense one is left as the walk took it
        table = self.lexical_index if settings.lexical_weight and text is not None else None
        return (yield from units_plan(collection, vec, settings, unit_index=index, lexical=lexical, table=table))


def refused_filter(exc: BaseException, settings: SearchSettings) -> ValueError | None:
    """A ``ValueError`` naming the filters of a search whose filter Chroma refused (an unknown
    operator, a bad regular expression), else ``None``.

    Example:
        >>> refused_filter(KeyError("x"), SearchSettings()) is None
        True
    """
    from chromadb.errors import InvalidArgumentError

    if not isinstance(exc, InvalidArgumentError) or not (settings.where or settings.where_document):
        return None
    given = ", ".join(f"{name}={getattr(settings, name)!r}" for name in ("where", "where_document")
                      if getattr(settings, name))
    reason = " ".join(str(exc).split())  # Chroma's message may span lines (a regex error's caret)
    return ValueError(f"{given}: Chroma refused the filter ({reason}); see Chroma's where and where_document syntax")
