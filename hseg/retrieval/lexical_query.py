"""A query's words for the lexical (BM25) side: what is looked up, and why the stop words go.

The lexical index (:mod:`hseg.store.lexical_index`) is SQLite FTS5 with the tokenizer
``porter unicode61 remove_diacritics 2``: Unicode word characters, case and diacritics folded,
English words stemmed (Porter), any other script kept as it is. A query is cut into words the same
way (``\\w+``) and each word goes to FTS5 as a quoted string, so FTS5 applies its own tokenizer to
it and no query syntax (``AND``, ``NEAR``, ``*``, quotes) can be injected by the question.

English stop words are left out of the query, not of the index: BM25 gives a word found in half
the segments almost no weight (FTS5 clamps its IDF at 1e-6), but FTS5 still scores every segment
that holds it, so "What is the ..." cost 30-60 ms on 40k segments with them and ~1 ms without
(``benchmarks/lexical_engines.py``). A question in another language keeps all its words.

Example:
    >>> query_terms("What is the Coriolis effect?")
    ['coriolis', 'effect']
    >>> fts5_match(["coriolis", "effect"])
    '"coriolis" OR "effect"'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from hseg.retrieval.unit_vectors import UnitKey

__all__ = ["ENGLISH_STOP_WORDS", "query_terms", "fts5_match", "LexicalRow", "LexicalSource", "LexicalQuery",
           "lexical_query"]

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


@dataclass(frozen=True)
class LexicalRow:
    """A segment as the lexical index knows it: what the selection walk needs, without reading Chroma."""

    segment_id: str
    doc_id: str
    cluster_id: str
    position: int
    tokens: int
    #: the record's sentence cuts as stored (``hseg_cuts``, JSON), read only where rule 6 may use them
    #: (:meth:`~hseg.store.lexical_index.LexicalIndex.following`); ``None`` otherwise or when it has none
    cuts: str | None = None


class LexicalSource(Protocol):
    """What a search reads of a lexical index (:class:`hseg.store.lexical_index.LexicalIndex`)."""

    def matches(self, match: str) -> list[tuple[str, float]]: ...

    def rows(self, segment_ids: Iterable[str]) -> dict[str, LexicalRow]: ...

    def cluster_sizes(self, cluster_ids: Iterable[str]) -> dict[str, tuple[int, int]]: ...

    def cluster_segments(self, cluster_ids: Iterable[str]) -> dict[str, list[str]]: ...

    def following(self, segment_ids: Iterable[str], max_tokens: int) -> dict[str, list[LexicalRow]]: ...


@dataclass
class LexicalPage:
    """The lexical side's best segments: their ids, normalised scores (best first), and ``floor``, a
    bound on the normalised score of every segment not in the page (0 once it holds every match)."""

    ids: list[str]
    scores: np.ndarray
    floor: float


@dataclass
class LexicalQuery:
    """One query's lexical side: its MATCH expression on ``index``, its ``weight`` (``lexical_weight``)
    and the normaliser, the query's best BM25 score (every match is scored once, on first use).

    ``lex(s) = bm25(q, s) / max_t bm25(q, t)`` over every segment of the collection (a ``where`` does
    not change the normaliser), so ``lex`` is in [0, 1] and 1 for the query's best segment.

    Example:
        >>> lq = lexical_query(store.lexical_index, "What causes tides?", 0.3)  # doctest: +SKIP
        >>> page = lq.page(20); page.rows[0].segment_id, float(page.scores[0])  # doctest: +SKIP
        ('seg-...', 1.0)
    """

    index: LexicalSource
    match: str
    weight: float
    best: float | None = None
    _ranked: list[tuple[str, float]] = field(default_factory=list)
    _score: dict[str, float] = field(default_factory=dict)
    _sizes: dict[str, tuple[int, int]] = field(default_factory=dict)

    def _matches(self) -> list[tuple[str, float]]:
        # every match scored once per query: the pages of later rounds and the dense side's
        # candidates are read from it (see LexicalIndex.matches for why not one by one)
        if self.best is None:
            self._ranked = self.index.matches(self.match)
            self._score = dict(self._ranked)
            self.best = self._ranked[0][1] if self._ranked else 0.0
        return self._ranked

    def page(self, n: int) -> LexicalPage:
        """The ``n`` best segments for the query, with their normalised scores."""
        hits = self._matches()[:n]
        scores = self._normalised([s for _, s in hits])
        floor = float(scores[-1]) if len(hits) >= n else 0.0  # past the last match every score is 0
        return LexicalPage([i for i, _ in hits], scores, floor)

    def score(self, segment_id: str) -> float:
        """A segment's normalised score (exact; 0 without a query word, or when the index lacks it)."""
        self._matches()
        x = self._score.get(segment_id, 0.0)
        return x / self.best if self.best else 0.0

    def rows(self, segment_ids: Iterable[str]) -> dict[str, LexicalRow]:
        """``{segment id: row}`` of these segments (those the index holds)."""
        return self.index.rows(segment_ids)

    def unit_key(self, row: LexicalRow) -> UnitKey:
        """The row's :class:`UnitKey` (cluster sizes read from the index once per cluster)."""
        if row.cluster_id not in self._sizes:
            self._sizes.update(self.index.cluster_sizes([row.cluster_id]))
        return UnitKey(row.segment_id, row.cluster_id, row.position, row.tokens, *self._sizes[row.cluster_id])

    def unit_keys(self, rows: Sequence[LexicalRow]) -> list[UnitKey]:
        wanted = {r.cluster_id for r in rows} - set(self._sizes)
        if wanted:
            self._sizes.update(self.index.cluster_sizes(wanted))
        return [self.unit_key(r) for r in rows]

    def _normalised(self, raw: Sequence[float]) -> np.ndarray:
        best = self.best or 0.0
        x = np.asarray(raw, dtype=np.float64)
        return x / best if best > 0 else np.zeros_like(x)


def lexical_query(index: LexicalSource, text: str, weight: float) -> LexicalQuery | None:
    """The lexical side of a query, or ``None`` when it has none (no weight, or no words to look up)."""
    if not weight:
        return None
    terms = query_terms(text)
    return LexicalQuery(index, fts5_match(terms), float(weight)) if terms else None

