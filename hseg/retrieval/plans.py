"""A search's reads as values, so that many searches can share round trips.

A search is written once, as a *plan*: a generator that yields the reads it needs (:class:`Knn`,
:class:`Get` of Chroma, :class:`Lexical` of the lexical index), receives each one's answer for its
own query, and returns its result. :func:`run_one` answers the reads one at a time (a single
search); :func:`run_many` advances many plans together and answers the reads they wait on with one
call per group of equal reads: kNN reads of the same depth, filter and fields become one ``query``
with many query vectors, ``get`` reads of the same fields and filter one ``get`` of the union of
their ids, and lexical reads of one kind one read of the lexical index (one SQLite pass).

Why batching changes no answer: :func:`run_many`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

#: reads answered by one Chroma call at the most: a ``get`` of the union of a few hundred searches'
#: ids stays far below SQLite's bound on the variables of one statement, and a server request small
READS_PER_CALL = 256
#: records a ``query`` with more than distances may return in one call: Chroma reads the metadata and
#: documents of all of them in one SQLite statement, whose variables are bounded (256 searches of a
#: few hundred results each failed with "too many SQL variables" on the gathered hybrid path)
RESULTS_PER_CALL = 8192


@dataclass(frozen=True, eq=False)
class Knn:
    """The ``n`` nearest records of ``collection`` to ``vector``; answered with one query's lists
    (``{"ids": [...], "distances": [...], ...}``, the fields of ``include``)."""

    collection: Any
    vector: np.ndarray
    n: int
    where: Mapping[str, Any] | None = None
    where_document: Mapping[str, Any] | None = None
    include: tuple[str, ...] = ("distances",)

    def group(self) -> tuple[Any, ...]:
        """What must be equal for two reads to go in one ``query``."""
        return ("knn", id(self.collection), self.n, _key(self.where), _key(self.where_document), self.include)


@dataclass(frozen=True, eq=False)
class Get:
    """The records ``ids`` of ``collection`` (of them, those matching ``where`` and ``where_document``);
    answered like Chroma's ``get`` (records it lacks are absent from the answer), in the order of ``ids``."""

    collection: Any
    ids: tuple[str, ...]
    include: tuple[str, ...] = ("metadatas", "documents")
    where: Mapping[str, Any] | None = None
    where_document: Mapping[str, Any] | None = None

    def group(self) -> tuple[Any, ...]:
        return ("get", id(self.collection), self.include, _key(self.where), _key(self.where_document))


@dataclass(frozen=True, eq=False)
class Lexical:
    """A read of the lexical index ``index`` (:class:`~hseg.retrieval.lexical_query.LexicalSource`), of
    one ``kind``: answered with what the index's method of that name gives for ``keys`` alone.

    * ``"scored"``: ``keys`` are a query's words; answered ``(rowids, BM25 scores)``, best first.
    * ``"ids_at"``, ``"rowids_of"``, ``"rows"``, ``"records"``, ``"cluster_sizes"``,
      ``"cluster_segments"``: ``keys`` are rowids, segment or cluster ids; answered with the
      method's ``{key: value}`` for those keys.
    * ``"following"``: ``keys`` are segment ids, ``limit`` the tokens the lists may hold.
    * ``"count"``: the segments the index holds (no keys).
    """

    index: Any
    kind: str
    keys: tuple[Any, ...] = ()
    limit: int = 0

    def __post_init__(self) -> None:
        if self.kind not in _LEXICAL_KINDS:
            raise ValueError(f"kind must be one of {sorted(_LEXICAL_KINDS)}, got {self.kind!r}")

    def group(self) -> tuple[Any, ...]:
        return ("lexical", id(self.index), self.kind)


#: the kinds of :class:`Lexical` read answered from the union of their keys
_KEYED = frozenset({"ids_at", "rowids_of", "rows", "records", "cluster_sizes", "cluster_segments"})
_LEXICAL_KINDS = _KEYED | {"scored", "following", "count"}

Read = Knn | Get | Lexical
#: a search: yields reads, is sent each read's answer, returns its result
Plan = Generator[Read, Any, T]


def _key(value: Mapping[str, Any] | None) -> str:
    return json.dumps(value, sort_keys=True, default=str) if value else ""


def run_one(plan: Plan[T]) -> T:
    """Drive one plan, one call (of Chroma or of the lexical index) per read."""
    try:
        read = next(plan)
        while True:
            read = plan.send(_answer([read])[0])
    except StopIteration as done:
        return done.value


def run_many(plans: Sequence[Plan[T]]) -> list[T]:
    """Drive many plans together, one call per group of equal reads at each step.

    Batching changes no answer: a kNN read of one vector in a many-vector ``query`` is searched on its
    own (Chroma runs one search per query vector, with the same depth), and a ``get`` by id returns
    each record (that matches its filter) whatever else is asked with it. A lexical read by key (rows,
    records, rowids, cluster sizes and members) answers each key from its own row, whatever else is
    asked; a query's scores are summed from its own words' terms (``scored_many``), read in one
    snapshot with the other queries' words; the segments after a segment, read for the largest budget
    asked, are cut to each read's own (:func:`_within`: a list for a smaller budget is a prefix of it).
    Per query, :func:`run_many` therefore returns exactly what :func:`run_one` returns (tested against
    each other on real stores).

    Example:
        >>> def plan(collection, vector):  # doctest: +SKIP
        ...     page = yield Knn(collection, vector, 5, include=("distances",))
        ...     return page["ids"]
        >>> run_many([plan(c, v) for v in vectors])  # doctest: +SKIP
        [['seg-1', ...], ...]
    """
    results: list[Any] = [None] * len(plans)
    waiting: dict[int, Read] = {}
    for i in range(len(plans)):
        _advance(plans, i, None, waiting, results)
    while waiting:
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, read in waiting.items():
            groups.setdefault(read.group(), []).append(i)
        for members in groups.values():
            per_call = _per_call(waiting[members[0]])
            for start in range(0, len(members), per_call):
                part = members[start:start + per_call]
                answers = _answer([waiting.pop(i) for i in part])
                for i, answer in zip(part, answers):
                    _advance(plans, i, answer, waiting, results)
    return results


def _per_call(read: Read) -> int:
    """Reads of ``read``'s group answered by one call: :data:`READS_PER_CALL`, fewer for searches
    that return records' contents (:data:`RESULTS_PER_CALL` results at the most, at least one search);
    every lexical read of the group at once (the index bounds its own statements)."""
    if isinstance(read, Lexical):
        return sys.maxsize
    if isinstance(read, Knn) and set(read.include) - {"distances"}:
        return max(1, min(READS_PER_CALL, RESULTS_PER_CALL // max(1, read.n)))
    return READS_PER_CALL


def _advance(plans: Sequence[Plan[Any]], i: int, answer: Any, waiting: dict[int, Read], results: list[Any]) -> None:
    try:
        waiting[i] = next(plans[i]) if answer is None else plans[i].send(answer)
    except StopIteration as done:
        results[i] = done.value


def _answer(reads: list[Read]) -> list[Any]:
    """One call for reads of one group; each read's own answer."""
    first = reads[0]
    if isinstance(first, Knn):
        return _query([r for r in reads if isinstance(r, Knn)])
    if isinstance(first, Lexical):
        return _lexical([r for r in reads if isinstance(r, Lexical)])
    return _get([r for r in reads if isinstance(r, Get)])


def _lexical(reads: list[Lexical]) -> list[Any]:
    """One read of the lexical index for reads of one kind (see :func:`run_many` for why each
    answer is the one its read would get alone)."""
    first = reads[0]
    index, kind = first.index, first.kind
    if kind == "scored":
        return list(index.scored_many([r.keys for r in reads]))
    if kind == "count":
        return [index.count()] * len(reads)
    keys = list(dict.fromkeys(key for r in reads for key in r.keys))
    if kind == "following":
        chains = index.following(keys, max(r.limit for r in reads))
        return [{key: _within(chains[key], r.limit) for key in r.keys if key in chains} for r in reads]
    got = getattr(index, kind)(keys)
    return [{key: got[key] for key in r.keys if key in got} for r in reads]


def _within(chain: list[Any], limit: int) -> list[Any]:
    """The part of ``chain`` (rows after a segment, read for a budget >= ``limit``) that a read for
    ``limit`` tokens gets: rows while their tokens add up to at most ``limit``, then the first that
    does not fit. Exact: both lists end at a gap or the document's end, where they are equal, or at
    the first row that does not fit, which for the smaller budget comes no later."""
    if limit <= 0:
        return []
    out, total = [], 0
    for row in chain:
        out.append(row)
        if total + row.tokens > limit:
            break
        total += row.tokens
    return out


def _query(reads: list[Knn]) -> list[dict[str, list[Any]]]:
    first = reads[0]
    res = first.collection.query(
        query_embeddings=[np.asarray(r.vector, dtype=np.float32) for r in reads],
        n_results=first.n,
        where=dict(first.where) if first.where else None,
        where_document=dict(first.where_document) if first.where_document else None,
        include=list(first.include),
    )
    fields = ("ids",) + first.include
    return [{f: list(res[f][q]) if res.get(f) is not None else [] for f in fields} for q in range(len(reads))]


def _get(reads: list[Get]) -> list[dict[str, list[Any]]]:
    first = reads[0]
    wanted = sorted({rid for r in reads for rid in r.ids})
    got: Any = _get_present(first, wanted) if wanted else {"ids": []}
    fields = ("ids",) + first.include
    rows = {rid: i for i, rid in enumerate(got["ids"])}
    answers = []
    for r in reads:
        mine = [rows[rid] for rid in dict.fromkeys(r.ids) if rid in rows]
        answers.append({f: [got[f][i] for i in mine] if got.get(f) is not None else [] for f in fields})
    return answers


#: what Chroma's embedded engine (its local HNSW reader) says when the vector index of a client's view
#: lacks a record's vector: "Error finding id" when the index's id map lacks the id, "Error getting
#: embedding" when the map has it and the index data loaded with the view does not (seen with a
#: view opened while another client of the same database was persisting its index)
MISSING_VECTOR_ERRORS = ("error finding id", "error getting embedding")


def is_missing_vector(exc: BaseException) -> bool:
    """Whether ``exc`` is Chroma failing a read because the vector index lacks some record's vector."""
    return any(text in str(exc).lower() for text in MISSING_VECTOR_ERRORS)


def _get_present(read: Get, ids: list[str]) -> dict[str, Any]:
    """``collection.get`` of ``ids``, answering for those whose vector the collection's index holds.

    A get of vectors fails as a whole when one id has none in this client's index, which happens to
    ids another index named a moment before (the lexical index is written in the same transaction
    order, but a reader's view of Chroma can be older); those records are not results of this view,
    so they are left out, found by halving the request (``log2`` requests each)."""
    where = dict(read.where) if read.where else None
    wdoc = dict(read.where_document) if read.where_document else None
    try:
        return dict(read.collection.get(ids=ids, where=where, where_document=wdoc, include=list(read.include)))
    except Exception as exc:  # chromadb's InternalError("Error finding id ...")
        if not is_missing_vector(exc) or "embeddings" not in read.include:
            raise
        if len(ids) == 1:
            return {"ids": [], **{f: [] for f in read.include}}
    half = len(ids) // 2
    a, b = _get_present(read, ids[:half]), _get_present(read, ids[half:])
    return {f: _listed(a.get(f)) + _listed(b.get(f)) for f in ("ids", *read.include)}


def records(answer: Mapping[str, Any]) -> dict[str, tuple[dict[str, Any], str]]:
    """The records of a :class:`Get`'s answer read with metadatas and documents (its default), by id:
    ``(metadata, text)``.

    Example:
        >>> records({"ids": ["a"], "metadatas": [None], "documents": ["x"]})
        {'a': ({}, 'x')}
    """
    return {rid: (dict(m or {}), d or "") for rid, m, d in
            zip(answer["ids"], _listed(answer.get("metadatas")), _listed(answer.get("documents")), strict=True)}


def _listed(value: Any) -> list[Any]:
    return [] if value is None else list(value)

