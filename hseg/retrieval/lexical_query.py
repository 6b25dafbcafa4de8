"""A query's words for the lexical (BM25) side: what is looked up, and why the stop words go.

The lexical index (:mod:`hseg.store.lexical`) is SQLite FTS5 with the tokenizer
``porter unicode61 remove_diacritics 2``: Unicode word characters, case and diacritics folded,
English words stemmed (Porter), any other script kept as it is. A query is cut into words the same
way (``\\w+``) and each word goes to FTS5 as a quoted string, so FTS5 applies its own tokenizer to
it and no query syntax (``AND``, ``NEAR``, ``*``, quotes) can be injected by the question.

How and why: docs/design.md, ``hseg.retrieval.lexical_query``.

Example:
    >>> query_terms("What is the Coriolis effect?")
    ['coriolis', 'effect']
    >>> fts5_match(["coriolis", "effect"])
    '"coriolis" OR "effect"'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from hseg.retrieval.plans import Lexical, Plan
from hseg.retrieval.unit_vectors import UnitKey

#: English function words (articles, pronouns, auxiliaries, prepositions, conjunctions, question words)
ENGLISH_STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves s t d ll m re ve
""".split())

_WORD = re.compile(r"\w+")


def query_terms(text: str, stop_words: frozenset[str] = ENGLISH_STOP_WORDS) -> list[str]:
    """The distinct words of a query, lower-cased, in order, stop words left out (all of them kept
    when the query has nothing else, e.g. "To be or not to be")."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    kept = [w for w in words if w not in stop_words]
    return kept or words


def fts5_match(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression: any of ``terms``, each a quoted string (quotes doubled)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


# --------------------------------------------------------------------------- one query's lexical side


def fuse(dense: Any, lexical: Any, weight: float) -> Any:
    """A unit's hybrid score: its ``dense`` score plus ``weight`` times its normalised ``lexical`` score
    (floats or arrays). Every path ranks by it, and bounds an unseen unit by it: the one fusion.

    Example:
        >>> fuse(0.5, 1.0, 0.3)
        0.8
    """
    return dense + weight * lexical


@dataclass(frozen=True)
class LexicalRow:
    """A segment as the lexical index knows it: what the selection walk needs, without reading Chroma."""

    segment_id: str
    doc_id: str
    cluster_id: str
    position: int
    tokens: int
    #: the record's sentence cuts as stored (``hseg_cuts``, JSON), read only where rule 6 may use them
    #: (:meth:`~hseg.store.lexical.LexicalIndex.following`); ``None`` otherwise or when it has none
    cuts: str | None = None


class LexicalSource(Protocol):
    """What a search reads of a lexical index (:class:`hseg.store.lexical.LexicalIndex`)."""

    def scored(self, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]: ...

    def scored_many(self, queries: Sequence[Sequence[str]]) -> list[tuple[np.ndarray, np.ndarray]]: ...

    def ids_at(self, rowids: Iterable[int]) -> dict[int, str]: ...

    def rowids_of(self, segment_ids: Iterable[str]) -> dict[str, int]: ...

    def rows(self, segment_ids: Iterable[str]) -> dict[str, LexicalRow]: ...

    def records(self, segment_ids: Iterable[str]) -> dict[str, tuple[dict[str, Any], str]]: ...

    def cluster_sizes(self, cluster_ids: Iterable[str]) -> dict[str, tuple[int, int]]: ...

    def cluster_segments(self, cluster_ids: Iterable[str]) -> dict[str, list[str]]: ...

    def following(self, segment_ids: Iterable[str], max_tokens: int) -> dict[str, list[LexicalRow]]: ...

    def count(self) -> int: ...


@dataclass
class LexicalPage:
    """The lexical side's best segments: their ids, normalised scores (best first), and ``floor``, a
    bound on the normalised score of every segment not in the page (0 once it holds every match)."""

    ids: list[str]
    scores: np.ndarray
    floor: float


@dataclass
class LexicalQuery:
    """One query's lexical side: its ``terms`` (:func:`query_terms`) on ``index``, its ``weight``
    (``lexical_weight``) and the normaliser, the query's best BM25 score (every match is scored
    once, on first use).

    ``lex(s) = bm25(q, s) / max_t bm25(q, t)`` over every segment of the collection (a ``where`` does
    not change the normaliser), so ``lex`` is in [0, 1] and 1 for the query's best segment.

    What it reads of the index it reads as values (:class:`~hseg.retrieval.plans.Lexical`): its
    methods that read are plans, run inside a search's plan with ``yield from`` (so that
    :func:`~hseg.retrieval.plans.run_many` answers many searches' lexical reads together), or alone
    with :func:`~hseg.retrieval.plans.run_one`.

    Example:
        >>> lq = run_one(lexical_query(index, "What causes tides?", 0.3))  # doctest: +SKIP
        >>> page = run_one(lq.page(20)); page.ids[0], float(page.scores[0])  # doctest: +SKIP
        ('seg-...', 1.0)
    """

    index: LexicalSource
    terms: tuple[str, ...]
    weight: float
    best: float | None = None
    _rowids: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # every match, best first
    _raw: np.ndarray = field(default_factory=lambda: np.empty(0))  # their BM25 scores
    _sorted: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # the matches' rowids, ascending
    _sorted_raw: np.ndarray = field(default_factory=lambda: np.empty(0))  # and their scores
    _ids: list[str] = field(default_factory=list)  # the segment ids of the best matches, as far as read
    _rowid_of: dict[str, int | None] = field(default_factory=dict)  # None: a segment the index lacks
    _sizes: dict[str, tuple[int, int]] = field(default_factory=dict)

    def _scored(self) -> Plan[None]:
        # every match scored once per query: the pages of later rounds and the dense side's
        # candidates are read from it (see LexicalIndex.scored)
        if self.best is None:
            self._rowids, self._raw = yield Lexical(self.index, "scored", self.terms)
            order = np.argsort(self._rowids)
            self._sorted, self._sorted_raw = self._rowids[order], self._raw[order]
            self.best = float(self._raw[0]) if len(self._raw) else 0.0

    def page(self, n: int) -> Plan[LexicalPage]:
        """The ``n`` best segments for the query, with their normalised scores."""
        yield from self._scored()
        if len(self._ids) < min(n, len(self._rowids)):
            more = tuple(self._rowids[len(self._ids):n].tolist())
            named = yield Lexical(self.index, "ids_at", more)
            self._ids += [named.get(r, "") for r in more]
        # the segments table and FTS5 are written in one transaction: a rowid without a name is not
        # expected, and is skipped as the join of earlier versions skipped it
        kept = [i for i, sid in enumerate(self._ids[:n]) if sid]
        scores = self._normalised(self._raw[kept])
        # past the last match every score is 0
        floor = float(self._normalised(self._raw[n - 1:n])[0]) if len(self._rowids) >= n else 0.0
        return LexicalPage([self._ids[i] for i in kept], scores, floor)

    def scores(self, segment_ids: Sequence[str]) -> Plan[np.ndarray]:
        """The segments' normalised scores (exact; 0 without a query word, or when the index lacks one)."""
        yield from self._scored()
        unknown = tuple(dict.fromkeys(sid for sid in segment_ids if sid not in self._rowid_of))
        if unknown:
            found = yield Lexical(self.index, "rowids_of", unknown)
            self._rowid_of.update((sid, found.get(sid)) for sid in unknown)
        raw = np.zeros(len(segment_ids))
        if len(self._sorted):
            at = np.array([-1 if self._rowid_of[sid] is None else self._rowid_of[sid] for sid in segment_ids],
                          dtype=np.int64)  # rowids are positive: -1 is no match
            pos = np.minimum(np.searchsorted(self._sorted, at), len(self._sorted) - 1)
            hit = self._sorted[pos] == at
            raw[hit] = self._sorted_raw[pos[hit]]
        return self._normalised(raw)

    def fused(self, dense: Any, lexical: Any) -> Any:
        """``dense + λ·lexical`` on the cosine scale (:func:`fuse` with this query's weight λ)."""
        return fuse(dense, lexical, self.weight)

    def reported(self, fused: Any) -> Any:
        """A fused score as results report it: divided by ``1 + λ``, so that it stays on the cosine scale."""
        return fused / (1.0 + self.weight)

    def score(self, segment_id: str) -> Plan[float]:
        """A segment's normalised score (:meth:`scores` of one)."""
        return float((yield from self.scores([segment_id]))[0])

    def rows(self, segment_ids: Iterable[str]) -> Plan[dict[str, LexicalRow]]:
        """``{segment id: row}`` of these segments (those the index holds)."""
        wanted = tuple(segment_ids)
        return (yield Lexical(self.index, "rows", wanted)) if wanted else {}

    def records(self, segment_ids: Iterable[str]) -> Plan[dict[str, tuple[dict[str, Any], str]]]:
        """``{segment id: (metadata, text)}`` of these segments as the index holds them
        (:meth:`LexicalSource.records`)."""
        wanted = tuple(segment_ids)
        return (yield Lexical(self.index, "records", wanted)) if wanted else {}

    def cluster_segments(self, cluster_ids: Iterable[str]) -> Plan[dict[str, list[str]]]:
        """``{cluster id: its segment ids in document order}``."""
        wanted = tuple(cluster_ids)
        return (yield Lexical(self.index, "cluster_segments", wanted)) if wanted else {}

    def unit_keys(self, rows: Sequence[LexicalRow]) -> Plan[list[UnitKey]]:
        """The rows' :class:`UnitKey` (cluster sizes read from the index once per cluster)."""
        wanted = tuple(dict.fromkeys(r.cluster_id for r in rows if r.cluster_id not in self._sizes))
        if wanted:
            self._sizes.update((yield Lexical(self.index, "cluster_sizes", wanted)))
        return [UnitKey(r.segment_id, r.cluster_id, r.position, r.tokens, *self._sizes[r.cluster_id]) for r in rows]

    def coverage(self) -> Plan[float]:
        """The share of the query's IDF mass that its best lexical match holds, in [0, 1].

        Each query word weighs its IDF in the index as FTS5's BM25 weighs it (``log((N - n + 0.5) /
        (n + 0.5))``, ``n`` of ``N`` segments holding it; a word no segment holds weighs the most); the
        coverage is the weight of the words the best-scoring segment holds over that of all of them: 1
        when that segment holds every word, 0 without any match. ``lexical_weighting="coverage"``
        scales ``lexical_weight`` by it, so that a question that shares few of its words with the text
        leans on the dense side (:mod:`hseg.retrieval.settings`)."""
        yield from self._scored()
        if not len(self._rowids):
            return 0.0
        best, rows = int(self._rowids[0]), int((yield Lexical(self.index, "count")))
        held = total = 0.0
        for term in self.terms:
            found, _ = yield Lexical(self.index, "scored", (term,))
            idf = max(math.log((rows - len(found) + 0.5) / (len(found) + 0.5)), 1e-6)
            total += idf
            held += idf if bool(np.any(found == best)) else 0.0
        return held / total if total > 0 else 0.0

    def _normalised(self, raw: Sequence[float] | np.ndarray) -> np.ndarray:
        best = self.best or 0.0
        x = np.asarray(raw, dtype=np.float64)
        return x / best if best > 0 else np.zeros_like(x)


def lexical_query(index: LexicalSource, text: str, weight: float, weighting: str = "fixed"
                  ) -> Plan[LexicalQuery | None]:
    """The lexical side of a query, or ``None`` when it has none (no weight, or no words to look up);
    ``weighting="coverage"`` scales ``weight`` by the query's :meth:`LexicalQuery.coverage` (read as
    values: this is a plan, :mod:`hseg.retrieval.plans`)."""
    if not weight:
        return None
    terms = query_terms(text)
    if not terms:
        return None
    lexical = LexicalQuery(index, tuple(terms), float(weight))
    if weighting == "coverage":
        lexical.weight = float(weight) * (yield from lexical.coverage())
    return lexical
