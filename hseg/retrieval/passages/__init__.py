"""``unit="segment"`` and ``unit="auto"`` searches on Chroma: candidates, the walk, passages.

The package holds one module per read path (:mod:`.indexed`, :mod:`.segments`, :mod:`.gathered`),
what they share to read candidates (:mod:`.candidates`) and to make hits of what a walk took
(:mod:`.assemble`); this module chooses the path.

The three read paths, and why each is exact: :func:`units_plan`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hseg.retrieval.continuation import Continuation, continued
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.lexical_query import LexicalQuery, LexicalSource
from hseg.retrieval.passages.gathered import search_gathered
from hseg.retrieval.passages.indexed import hybrid_indexed, search_indexed
from hseg.retrieval.passages.segments import hybrid_segments, search_segments
from hseg.retrieval.plans import Plan
from hseg.retrieval.settings import SearchSettings

__all__ = ["units_plan"]


def units_plan(collection: Any, query_vector: np.ndarray, settings: SearchSettings, *,
               unit_index: Any = None, lexical: LexicalQuery | None = None,
               table: LexicalSource | None = None) -> Plan[list[SearchHit]]:
    """Passages for ``unit="auto"`` (fused scores) or ``unit="segment"`` (segment scores alone), as
    a plan of reads (:mod:`hseg.retrieval.plans`), on every path.

    Three read paths, each exact with respect to the neighbours Chroma returns (the walk of
    :func:`hseg.retrieval.selection.walk` stops only once every segment not fetched scores below what it took):

    * ``unit="auto"`` on a store with a unit index (:mod:`hseg.retrieval.unit_vectors`): one kNN on the index,
      asking for distances only, returns segments in fused-score order with what the walk needs in
      their ids; the texts of what was taken are then read, from the lexical table when the search has
      one, else with one ``get`` on the collection. A second kNN
      (twice as deep) runs only when the first page ends before the budget is spent.
    * ``unit="segment"``: one kNN of ids and distances on the collection itself, then its records read
      in rank order, a slice at a time (usually one ``get``), until the walk is decided. Levels are told
      apart client-side: a Chroma ``where`` on the level costs a metadata scan (``benchmarks/RESULTS.md``).
    * ``unit="auto"`` without a usable index (other weights than the index's, a ``where_document``
      filter, a collection written by another tool): the fused score is assembled from gathered
      segments, clusters and neighbours (several round trips; kept for these cases).

    With ``lexical_weight`` λ > 0 each path adds ``λ · lex(s)`` to a segment's dense score on the cosine
    scale (``lex``: BM25 divided by the query's best, :class:`~hseg.retrieval.lexical_query.LexicalQuery`)
    and takes the lexical index's best segments as candidates beside the kNN's (Fagin's threshold
    algorithm, :mod:`.candidates`): exact with respect to what the kNN and the lexical index
    return, as the dense paths are with respect to the kNN. Approximate only where they are: the kNN
    is HNSW's, and a lexical index that lags a write in flight scores that write's segments by their
    previous text (or 0). With λ = 0 none of it runs: the three paths above, unchanged.

    ``unit_index`` is the companion collection of :mod:`hseg.retrieval.unit_vectors`, built with these weights,
    or ``None``. ``lexical`` is the query's lexical side (``lexical_weight`` > 0),
    or ``None``: the dense paths above, untouched. ``table`` is the lexical index of a search with a
    lexical side (even one whose query has no words to look up): with it, ``unit="auto"`` spends the
    rest of a budget on the segments after its passages and the first sentences of the next (rules 5
    and 6 of :mod:`hseg.retrieval.selection`, read as :mod:`hseg.retrieval.continuation` says).
    """
    rest = None
    if table is not None and settings.resolved_unit == "auto" and settings.budget_tokens is not None:
        rest = Continuation(table, settings.budget_tokens, settings.read_on_tokens, settings.read_on_margin)
    hits = yield from _passages(collection, query_vector, settings, unit_index, lexical, rest)
    if rest is not None:
        hits = yield from continued(collection, hits, rest, settings.where, settings.where_document)
    return hits


def _passages(collection: Any, query_vector: np.ndarray, settings: SearchSettings, unit_index: Any,
              lexical: LexicalQuery | None, rest: Continuation | None = None) -> Plan[list[SearchHit]]:
    indexed = unit_index is not None and not settings.where_document
    if settings.resolved_unit == "segment":
        if lexical is not None:
            return (yield from hybrid_segments(collection, query_vector, settings, lexical))
        return (yield from search_segments(collection, query_vector, settings))
    if indexed and lexical is not None:
        return (yield from hybrid_indexed(collection, unit_index, query_vector, settings, lexical, rest))
    if indexed:
        return (yield from search_indexed(collection, unit_index, query_vector, settings))
    return (yield from search_gathered(collection, query_vector, settings, lexical))
