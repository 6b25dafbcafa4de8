"""What one search asks for: :class:`SearchSettings`, declared and validated once.

Every door derives its options from these fields and their defaults: the store's ``search`` /
``search_many`` (and their async twins) take a ``SearchSettings`` or its fields, the LangChain
retriever's fields and the LlamaIndex retriever's keyword arguments are these fields, and
``hseg query`` builds its options from :meth:`SearchSettings.docs`.

Example:
    >>> s = SearchSettings(budget_tokens=1024, unit="auto")
    >>> s.effective_k is None, s.override(k=3).budget_tokens
    (True, None)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hseg.chunking.config import is_int, setting

#: which vectors score a whole parent (unit="cluster"): the paper's eq. 2, its Cluster Only ablation, segments only
MODES = ("segment+cluster", "cluster", "segment")
#: what a result is: a whole parent (the paper), a passage of segments, or passages chosen for a budget
UNITS = ("cluster", "segment", "auto")
DEFAULT_K = 4
#: the cluster's share in a unit="auto" score (docs/decisions.md, "The budget-aware unit")
DEFAULT_CLUSTER_WEIGHT = 0.5
#: the share of the mean score of a segment's two neighbours in a unit="auto" score
DEFAULT_NEIGHBOUR_WEIGHT = 0.2
#: the lexical (BM25) score's weight: hybrid by default. Chosen on the development sets (Chroma's
#: corpora, two textbook question sets; docs/decisions.md, "Hybrid search and the defaults"): 0.1-0.3
#: all beat every dense and BM25 peer there, 0.2 had the best mean; above 0.5 the lexical score
#: overrides paraphrase matches and Chroma's corpora lose
DEFAULT_LEXICAL_WEIGHT = 0.2
#: how ``lexical_weight`` applies to a query: as given to every query, or scaled per query by the share of
#: the query's IDF mass its best lexical match holds (:meth:`hseg.retrieval.lexical_query.LexicalQuery.coverage`;
#: issue 48, measured and off by default: docs/decisions.md, "Hybrid search and the defaults")
LEXICAL_WEIGHTINGS = ("fixed", "coverage")
#: what a search returns when no unit is chosen: with a token budget the budget-aware passages, which
#: beat whole parents at every fixed reader budget measured (benchmarks/RESULTS.md); with ``k`` (or a
#: ``mode``) whole parents, the paper's, so that ``k`` counts results as a framework's k does
DEFAULT_UNIT = None
#: rule 3 of :mod:`hseg.retrieval.selection`: a parent is taken whole once this many of its segments are
#: taken, if its rest costs at most this share of the budget left: two of a discussion's segments ranking
#: high say the question asks for the discussion, and the default parents hold one (docs/decisions.md, issue 56)
DEFAULT_WHOLE_CLUSTER_MIN = 2
DEFAULT_WHOLE_CLUSTER_SHARE = 0.5
#: rule 5a of :mod:`hseg.retrieval.selection`: the share of the budget the best passage may grow to by
#: reading on through its parent, the last passages dropped to pay for it (docs/decisions.md, issue 56)
DEFAULT_READ_ON_SHARE = 0.375
#: ... only when the best passage's score leads the next one's by more than this (cosine scale): of two
#: passages near a tie either may hold the answer, and breadth is worth more than reading on
DEFAULT_READ_ON_MARGIN = 0.01
_MAX_WEIGHT = 10
#: the float settings and their closed ranges, validated alike (a margin is a difference of two scores
#: on the cosine scale, so at most 2)
_NUMBER_BOUNDS = {"cluster_weight": (0, _MAX_WEIGHT), "neighbour_weight": (0, _MAX_WEIGHT),
                  "lexical_weight": (0, _MAX_WEIGHT), "whole_cluster_share": (0, 1), "read_on_share": (0, 1),
                  "read_on_margin": (0, 2)}
#: bounds past any use (more results than a reader reads; a budget past any model's context), so that
#: a mistyped number is refused here, not deep inside Chroma as an integer overflow
MAX_K = 100_000
MAX_BUDGET_TOKENS = 10_000_000


@dataclass(frozen=True)
class SearchSettings:
    """The settings of one search, validated at construction (``ValueError`` naming the field).

    Attributes:
        k: results per query (``None``: 4, unless ``budget_tokens`` is set); excludes ``budget_tokens``.
        budget_tokens: return results in rank order while their total ``hseg_tokens`` fits this
            many reader tokens (always at least one): the equal-reader-input rule.
        unit: ``"auto"`` (segments ranked with their cluster and neighbours, adjacent ones merged;
            :mod:`hseg.retrieval.selection`), ``"cluster"`` (whole parents, the paper) or
            ``"segment"`` (passages of segments ranked by their own similarity). ``None`` (the
            default): ``"auto"`` with ``budget_tokens``, ``"cluster"`` otherwise (:attr:`resolved_unit`).
        mode: for ``unit="cluster"``, the vectors that score a parent: ``"segment+cluster"`` (eq. 2),
            ``"cluster"`` or ``"segment"``.
        cluster_weight, neighbour_weight: shares of the cluster's and of the neighbours' cosine in
            a ``unit="auto"`` score, each in [0, 10].
        lexical_weight: the weight λ in [0, 10] of the lexical score: every unit is ranked by its
            dense score (on the cosine scale) ``+ λ · lex``, where ``lex`` is the BM25 score of its
            text (a parent's: its best segment's) divided by the query's best BM25 score, so in
            [0, 1]; scores are reported divided by ``1 + λ``. 0 is a dense search, with results
            identical to a store without a lexical index; the default is 0.2 (hybrid). The query's
            text is needed: a string query, or ``query_text=`` beside a vector; a vector without
            text is searched densely, with a warning once per store (:mod:`hseg.retrieval.lexical_query`).
            With a lexical side, ``unit="auto"`` also spends what its walk leaves of a budget on the
            segments after its passages, then on the first sentences of the next (rules 5 and 6 of
            :mod:`hseg.retrieval.selection`).
        whole_cluster_min, whole_cluster_share: rule 3 of :mod:`hseg.retrieval.selection` (``unit="auto"``):
            once ``whole_cluster_min`` (an int >= 1) segments of one parent are taken, the rest of the
            parent is taken too if it costs at most ``whole_cluster_share`` (in [0, 1]) of the budget
            left. A lower count and a larger share buy whole discussions when parents hold one.
        read_on_share: rule 5a of :mod:`hseg.retrieval.selection` (``unit="auto"`` with a budget and a
            lexical side): the best passage takes the segments after it in its parent while it holds
            at most this share (in [0, 1]) of the budget, and the last passages are dropped to pay
            for them; 0 turns it off. It buys the rest of a discussion when a question's answer runs
            on past the segment that matched it, at the cost of breadth.
        read_on_margin: rule 5a applies only when the best passage's score leads the next passage's
            by more than this (>= 0, on the reported score scale).
        lexical_weighting: ``"fixed"`` (the default: λ is ``lexical_weight`` for every query) or
            ``"coverage"``: λ is ``lexical_weight`` times the share of the query's IDF mass that its
            best lexical match holds, so a question sharing few of its words with the text leans
            on the dense side (:meth:`hseg.retrieval.lexical_query.LexicalQuery.coverage`).
        where: a Chroma metadata filter, on segment and cluster records alike.
        where_document: a Chroma document filter (e.g. ``{"$contains": "tide"}``).

    Example:
        >>> SearchSettings(k=3, unit="auto").effective_k
        3
        >>> SearchSettings(k=3, budget_tokens=512)
        Traceback (most recent call last):
        ...
        ValueError: k and budget_tokens are mutually exclusive, got k=3, budget_tokens=512
    """

    k: int | None = setting(None, "results per query (default 4); excludes budget_tokens")
    budget_tokens: int | None = setting(None, "return results in rank order while their total tokens fit this "
                                               "budget (instead of k); at least one, even one larger than the "
                                               "budget")
    unit: str | None = setting(DEFAULT_UNIT, "what a result is: a whole cluster ('cluster'), a passage of "
                                             "segments ('segment') or passages chosen for the budget ('auto'); "
                                             "None: 'auto' with a budget, else 'cluster'")
    mode: str = setting("segment+cluster", "vectors that score a whole cluster (unit 'cluster' only): "
                                            "'segment+cluster', 'cluster' or 'segment'")
    cluster_weight: float = setting(DEFAULT_CLUSTER_WEIGHT, "the cluster's share in a unit 'auto' score")
    neighbour_weight: float = setting(DEFAULT_NEIGHBOUR_WEIGHT, "the neighbouring segments' share in a unit "
                                                                 "'auto' score")
    lexical_weight: float = setting(DEFAULT_LEXICAL_WEIGHT, "weight of the lexical (BM25) score, divided by the "
                                                             "query's best, added to every unit's dense score; "
                                                             "0 turns the lexical side off")
    lexical_weighting: str = setting("fixed", "'fixed': lexical_weight for every query; 'coverage': lexical_weight "
                                              "times the share of the query's IDF mass its best lexical match "
                                              "holds")
    whole_cluster_min: int = setting(DEFAULT_WHOLE_CLUSTER_MIN, "unit 'auto': a parent is taken whole once this "
                                                                 "many of its segments are taken (if cheap enough)")
    whole_cluster_share: float = setting(DEFAULT_WHOLE_CLUSTER_SHARE, "unit 'auto': the largest share of the budget "
                                                                     "left that the rest of such a parent may cost")
    read_on_share: float = setting(DEFAULT_READ_ON_SHARE, "unit 'auto': the share of the budget the best passage may "
                                                          "grow to with the rest of its parent after it (0: off)")
    read_on_margin: float = setting(DEFAULT_READ_ON_MARGIN, "unit 'auto': the lead over the next passage's score "
                                                            "the best passage needs to read on")
    where: Mapping[str, Any] | None = setting(None, "a Chroma metadata filter, e.g. {\"source\": \"a.md\"}")
    where_document: Mapping[str, Any] | None = setting(None, "a Chroma document filter, e.g. "
                                                              "{\"$contains\": \"tide\"}")

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.unit is not None and self.unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS} or None, got {self.unit!r}")
        if self.lexical_weighting not in LEXICAL_WEIGHTINGS:
            raise ValueError(f"lexical_weighting must be one of {LEXICAL_WEIGHTINGS}, got {self.lexical_weighting!r}")
        if self.unit not in (None, "cluster") and self.mode != "segment+cluster":
            raise ValueError(f"mode applies to unit='cluster' only, got mode={self.mode!r} with unit={self.unit!r}")
        for name, (low, high) in _NUMBER_BOUNDS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not low <= value <= high:
                raise ValueError(f"{name} must be a number in [{low}, {high}], got {value!r}")
            object.__setattr__(self, name, float(value))
        least = self.whole_cluster_min
        if not is_int(least) or not 1 <= least <= MAX_K:
            raise ValueError(f"whole_cluster_min must be a positive int up to {MAX_K:,}, got {least!r}")
        object.__setattr__(self, "whole_cluster_min", int(least))
        for name in ("where", "where_document"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Mapping):
                raise ValueError(f"{name} must be a dict or None, got {type(value).__name__}")
            object.__setattr__(self, name, dict(value) if value else None)
        if self.budget_tokens is not None:
            if self.k is not None:
                raise ValueError(f"k and budget_tokens are mutually exclusive, got k={self.k!r}, "
                                 f"budget_tokens={self.budget_tokens!r}")
            if not is_int(self.budget_tokens) or not 0 < self.budget_tokens <= MAX_BUDGET_TOKENS:
                raise ValueError(f"budget_tokens must be a positive int up to {MAX_BUDGET_TOKENS:,}, "
                                 f"got {self.budget_tokens!r}")
            object.__setattr__(self, "budget_tokens", int(self.budget_tokens))
        elif self.k is not None:
            if not is_int(self.k) or not 0 < self.k <= MAX_K:
                raise ValueError(f"k must be a positive int up to {MAX_K:,}, got {self.k!r}")
            object.__setattr__(self, "k", int(self.k))

    @property
    def resolved_unit(self) -> str:
        """The unit searched: ``unit``, or without one ``"cluster"`` when a ``mode`` or ``k`` asks for
        parents and ``"auto"`` with a budget.

        Example:
            >>> SearchSettings().resolved_unit, SearchSettings(budget_tokens=1024).resolved_unit
            ('cluster', 'auto')
        """
        if self.unit is not None:
            return self.unit
        if self.mode != "segment+cluster" or self.budget_tokens is None:
            return "cluster"
        return "auto"

    @property
    def read_on_tokens(self) -> int:
        """The tokens the best passage may read on to (rule 5a): ``read_on_share`` of the budget, 0 without one.

        Example:
            >>> SearchSettings(budget_tokens=1000, read_on_share=0.25).read_on_tokens
            250
        """
        return int(self.read_on_share * self.budget_tokens) if self.budget_tokens is not None else 0

    @property
    def effective_k(self) -> int | None:
        """The number of results asked for: ``k``, 4 when neither ``k`` nor a budget is set, ``None`` with a budget."""
        if self.budget_tokens is not None:
            return None
        return DEFAULT_K if self.k is None else self.k

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """``{field: default}``: the one place every door takes its defaults from."""
        return {f.name: f.default for f in dataclasses.fields(cls)}

    @classmethod
    def docs(cls) -> dict[str, str]:
        """``{field: one-line description}`` for help texts and framework field descriptions."""
        return {f.name: f.metadata["doc"] for f in dataclasses.fields(cls)}

    @classmethod
    def resolve(cls, settings: SearchSettings | None = None, **fields: Any) -> SearchSettings:
        """``settings`` (default: the defaults) with ``fields`` overriding it (see :meth:`override`)."""
        base = cls() if settings is None else settings
        if not isinstance(base, SearchSettings):
            raise ValueError(f"settings must be a SearchSettings or None, got {type(base).__name__}")
        return base.override(**fields) if fields else base

    def override(self, **changes: Any) -> SearchSettings:
        """A copy with ``changes``; a ``k`` or ``budget_tokens`` given here replaces the size rule of
        these settings (a per-call ``k`` clears a configured budget and the reverse).

        Example:
            >>> SearchSettings(budget_tokens=1024).override(k=2).k
            2
        """
        unknown = sorted(set(changes) - set(self.field_names()))
        if unknown:
            raise TypeError(f"unknown search setting(s) {', '.join(map(repr, unknown))}; the settings are "
                             f"{', '.join(self.field_names())}")
        if changes.get("k") is not None and "budget_tokens" not in changes:
            changes["budget_tokens"] = None
        if changes.get("budget_tokens") is not None and "k" not in changes:
            changes["k"] = None
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (for logs and JSON)."""
        return {name: getattr(self, name) for name in self.field_names()}
