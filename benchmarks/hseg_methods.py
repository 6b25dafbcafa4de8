"""hseg's methods for ``benchmarks/retrieval.py``, run through the real product path.

Each corpus is chunked by :class:`hseg.HierarchicalChunker` and written to a real Chroma collection
(in memory) by :class:`hseg.store.HierarchicalStore`; queries go through ``store.search_many``:

- ``hseg_sc_<T>``: the paper's Segment+Cluster parents (max over segment and cluster vectors);
- ``hseg_c_<T>``: Cluster-only parents (the paper's ablation);
- ``hseg_seg_<T>``: segments as chunks (``unit="segment"``);
- ``hseg_auto_<T>``: the budget-aware unit (``unit="auto"``), asked once per setting;
- ``hseg_auto_<T>_hybrid`` / ``hseg_sc_<T>_hybrid`` / ``hseg_seg_<T>_hybrid``: the same with the
  lexical (BM25) score, ``lexical_weight`` = :data:`HYBRID_WEIGHT`.

``<T>`` is the target cluster size in tokens (256, 512, 1024). Methods without ``_hybrid`` or
``+lex<W>`` search with the product's default ``lexical_weight`` (0.2 since issue 27: hybrid);
``+lex0`` makes one dense. All methods share the run's
caching encoder, so each sentence is encoded once for all sizes. ``<name>@<segmenter>`` (see
:func:`variant`) runs a method with other segmenter weights, e.g. ``hseg_auto_512@old.pt``, and
``<name>+lex<W>`` with ``lexical_weight=W``, e.g. ``hseg_auto_512+lex0.3``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache, wraps
from typing import Any

import numpy as np
from evaluation import Chunk, Query, query_vectors

TARGETS = (256, 512, 1024)
#: the lexical weight of the ``_hybrid`` methods (docs/decisions.md, "Hybrid search and the defaults")
HYBRID_WEIGHT = 0.3


#: name -> (target, level, search settings) of every registered method, for :func:`variant`
SPECS: dict[str, tuple[int, str, dict[str, Any]]] = {}


def _flavoured_chunker(flavour: str | None) -> Any:
    """The chunker class of a flavour (:data:`FLAVOURS`): what is embedded as a segment's vector."""
    from hseg.chunking.chunker import HierarchicalChunker

    if flavour is None:
        return HierarchicalChunker
    if flavour not in FLAVOURS:
        raise ValueError(f"unknown flavour {flavour!r}; known: {sorted(FLAVOURS)}")
    if flavour.startswith("seg"):  # finer segments: the ones over N tokens cut at their weakest gap
        import functools

        return functools.partial(HierarchicalChunker, max_segment_tokens=int(flavour[3:]))

    class Flavoured(HierarchicalChunker):
        def _segments(self, text, doc_id, spans, ends, vectors, strength, tokens, headings=()):
            import dataclasses

            import numpy as np

            segments, vecs = super()._segments(text, doc_id, spans, ends, vectors, strength, tokens, headings)
            paths = [" > ".join(s.heading_path) for s in segments]
            if flavour == "ctxmean":  # the path as one more sentence of the segment's token-weighted mean
                distinct = sorted({p for p in paths if p})
                pv = dict(zip(distinct, self.encoder.encode(distinct))) if distinct else {}
                weights = [self.count_tokens(p) if p else 0 for p in paths]
                new = [v if not p else (v * s.token_count + pv[p] * w)
                       for v, p, s, w in zip(vecs, paths, segments, weights)]
            else:  # "enc": the segment text encoded; "ctxenc": its heading path, a blank line, the text
                texts = [(p + "\n\n" if p and flavour == "ctxenc" else "") + s.text.strip()
                         for p, s in zip(paths, segments)]
                new = list(self.encoder.encode(texts))
            out = np.stack([np.asarray(v, dtype=np.float32) / np.linalg.norm(v) for v in new])
            return [dataclasses.replace(s, embedding=v) for s, v in zip(segments, out)], out

    return Flavoured


#: chunker flavours a method name can ask for with ``~<flavour>`` (issue 27, round 4): ``enc`` the
#: segment text encoded instead of the mean of its sentence vectors; ``ctxenc`` the same with the
#: heading path in front ("Chapter > Section\n\ntext"); ``ctxmean`` the heading path as one more
#: sentence of the token-weighted mean (no second encoder pass). Clusters are means of these vectors.
#: ``seg64`` / ``seg96``: finer units, segments cut to at most 64 / 96 tokens (default: half the target).
FLAVOURS = ("enc", "ctxenc", "ctxmean", "seg64", "seg96")


@lru_cache(maxsize=8)
def _store(corpora_key: tuple[tuple[str, str], ...], target: int, encoder: Any, segmenter: str | None = None,
           flavour: str | None = None) -> Any:
    import chromadb

    from hseg.store import HierarchicalStore

    chunker = _flavoured_chunker(flavour)(encoder=encoder, target_tokens=target, segmenter=segmenter)
    chunkings = chunker.chunk_many([t for _, t in corpora_key], [c for c, _ in corpora_key])
    store = HierarchicalStore(f"bench-{uuid.uuid4().hex[:12]}", client=chromadb.EphemeralClient(), encoder=encoder)
    store.add(chunkings)
    return store, chunkings


def _setup(corpora: dict[str, str], target: int, encoder: Any, segmenter: str | None = None,
           flavour: str | None = None):
    return _store(tuple(sorted(corpora.items())), target, encoder, segmenter, flavour)


def _chunks(hits: list[Any], corpora: dict[str, str]) -> list[Chunk]:
    return [Chunk(h.doc_id, h.start, h.end, corpora[h.doc_id][h.start : h.end]) for h in hits]


def _units(chunkings: list[Any], level: str) -> list[Chunk]:
    out = []
    for ch in chunkings:
        for u in (ch.clusters if level == "cluster" else ch.segments):
            out.append(Chunk(ch.doc_id, u.start, u.end, u.text))
    return out


def _per_setting(store: Any, qv: Any, corpora: dict[str, str], budgets: Any, k: int, texts: list[str],
                 **search: Any) -> tuple[list[list[Chunk]], dict[str, list[list[Chunk]]]]:
    """Each setting asked of the store itself (k, then every budget), as a user would, all queries
    of a setting in one ``store.search_many`` (the answers of ``store.search``, in fewer Chroma
    calls); the longest budget's lists double as the method's ranked lists. ``texts`` are the
    questions, for the lexical side (the vectors are the run's cached query vectors)."""
    from hseg.retrieval.settings import SearchSettings

    if SearchSettings.resolve(**search).lexical_weight:  # the defaults' weight too (hseg_default)
        search = {**search, "query_texts": texts}
    per_setting = {f"k={k}": [_chunks(hits, corpora) for hits in store.search_many(list(qv), k=k, **search)]}
    for b in budgets:
        per_setting[f"B={b}"] = [_chunks(hits, corpora) for hits in store.search_many(list(qv), budget_tokens=b,
                                                                                       **search)]
    longest = per_setting[f"B={max(budgets)}"] if budgets else per_setting[f"k={k}"]
    return longest, per_setting


def store_method(target: int, level: str, retrieval_cls: Any, segmenter: str | None = None,
                 flavour: str | None = None, **search: Any) -> Callable[..., Any]:
    """A method answering every setting with ``store.search(**search)``; ``level`` names the units
    the index is made of (``"cluster"`` for parents, ``"segment"`` for passages); ``segmenter``
    (a name or a weights file) replaces the default segmenter.

    For parents, the store's budget rule is the evaluation's (parents in rank order while their
    cl100k tokens fit, at least one), so asking per setting equals truncating one deep list, at a
    fraction of the cost of ranking DEFAULT_DEPTH parents per query.
    """
    def method(corpora: dict[str, str], queries: list[Query], encoder: Any, *, budgets=(), k=5) -> Any:
        store, chunkings = _setup(corpora, target, encoder, segmenter, flavour)
        longest, per_setting = _per_setting(store, query_vectors(encoder, queries), corpora, budgets, k,
                                            [q.question for q in queries], **search)
        return retrieval_cls(longest, _units(chunkings, level), per_setting)

    return method


def default_method(retrieval_cls: Any) -> Callable[..., Any]:
    """``hseg_default``: what a user gets without choosing anything, read from the product's own
    defaults so that it is always the configuration measured: :class:`~hseg.chunking.config.ChunkerConfig`'s
    chunking (what ``hseg index`` builds) and :class:`~hseg.retrieval.settings.SearchSettings`' search
    (what ``store.search(budget_tokens=B)`` and both framework retrievers return)."""
    from hseg.chunking.config import ChunkerConfig
    from hseg.retrieval.settings import SearchSettings

    target = ChunkerConfig().effective_target_tokens
    assert target is not None  # the default chunker aims at a size
    level = "cluster" if SearchSettings(budget_tokens=1024).resolved_unit == "cluster" else "segment"
    return store_method(target, level, retrieval_cls)


@contextmanager
def rest_of_budget_off() -> Iterator[None]:
    """Inside the block, rule 5 of the auto unit is off (:mod:`hseg.retrieval.selection`: the rest of a
    budget continues the passages): searches return the passages as the walk took them, the default
    before round 6, for before/after comparisons in one process."""
    import hseg.retrieval.passages as passages

    def as_taken(collection: Any, hits: Any, *rest: Any) -> Any:
        return hits
        yield  # a plan with no reads

    real = passages.continued
    passages.continued = as_taken  # type: ignore[assignment]
    try:
        with read_ahead_off():  # what rules 5 and 6 would read is not read either
            yield
    finally:
        passages.continued = real


@contextmanager
def read_ahead_off() -> Iterator[None]:
    """Inside the block, the unit-index path does not read the records rules 5 and 6 will use with
    its passages' records: the rules read them in a second ``get`` (the default of round 10), for
    the latency of one read against two in one process. Answers are the same."""
    import hseg.retrieval.passages.indexed as indexed

    real = indexed._read_ahead
    indexed._read_ahead = lambda *args: []
    try:
        yield
    finally:
        indexed._read_ahead = real


@contextmanager
def cuts_off() -> Iterator[None]:
    """Inside the block, rule 6 of the auto unit is off (no passage ends inside a segment): rule 5
    alone spends the rest of a budget, the default of rounds 6 to 9."""
    import hseg.retrieval.continuation as continuation

    real = continuation.cut_passages
    continuation.cut_passages = lambda nexts, *rest: [None] * len(nexts)
    try:
        yield
    finally:
        continuation.cut_passages = real


@contextmanager
def round11_reads() -> Iterator[None]:
    """Inside the block, the auto unit reads as round 11 did: every scored segment of a cluster taken
    whole (not only its best, :func:`hseg.retrieval.passages.indexed._to_read`) and the lexical table's
    rows after a passage 8 positions at a time (not 2), for the latency of round 12's trims in one
    process. Answers are the same."""
    import hseg.retrieval.passages.indexed as indexed
    import hseg.store.lexical.reads as lexical_reads

    def every_scored_segment(keys: Any, score: Any, runs: Any) -> list[str]:
        whole = sorted({keys[run[0]].cluster_id for run, taken_whole in runs if taken_whole})
        return [keys[i].segment_id for run, _ in runs for i in run] + whole

    real_read, real_page = indexed._to_read, lexical_reads.FOLLOWING_PAGE
    indexed._to_read, lexical_reads.FOLLOWING_PAGE = every_scored_segment, 8
    try:
        yield
    finally:
        indexed._to_read, lexical_reads.FOLLOWING_PAGE = real_read, real_page


@contextmanager
def lexical_neighbours() -> Iterator[None]:
    """Inside the block, a segment's lexical score also takes its neighbours' (round 17, simulated):
    ``bm25(s) + v · mean(bm25(n) for the segments next to s in its document)`` with ``v`` the dense
    side's ``neighbour_weight`` (the segment's own score when it has no neighbour, as on the dense
    side), normalised by the query's best as before. The dense score already has neighbour context;
    this gives the lexical side the same. Every segment of the table is scored, exact, slow."""
    from hseg.retrieval.lexical_query import LexicalQuery
    from hseg.retrieval.settings import SearchSettings

    v = SearchSettings().neighbour_weight
    real = LexicalQuery._scored
    # the index held beside its arrays: an id alone could be reused by another index of the block
    tables: dict[int, tuple[Any, np.ndarray, np.ndarray]] = {}

    def neighbours(index: Any) -> tuple[np.ndarray, np.ndarray]:
        # (previous rowid, next rowid) per rowid, 0 where there is none: read once per index
        held = tables.get(id(index))
        if held is None or held[0] is not index:
            rows = index.db.rows("SELECT rowid, doc_id, position FROM segments")
            top = max((r for r, _, _ in rows), default=0) + 1
            at = {(d, pos): r for r, d, pos in rows}
            prev, nxt = np.zeros(top, np.int64), np.zeros(top, np.int64)
            for r, d, pos in rows:
                prev[r], nxt[r] = at.get((d, pos - 1), 0), at.get((d, pos + 1), 0)
            held = tables[id(index)] = (index, prev, nxt)
        return held[1], held[2]

    def smoothed(self: Any) -> None:
        if self.best is not None:
            return
        real(self)
        prev, nxt = neighbours(self.index)
        raw = np.zeros(len(prev))
        raw[self._rowids] = self._raw
        have = np.arange(len(prev)) > 0
        count = (prev > 0).astype(float) + (nxt > 0)
        around = np.where(count > 0, (raw[prev] * (prev > 0) + raw[nxt] * (nxt > 0)) / np.maximum(count, 1), raw)
        total = np.where(have, raw + v * around, 0.0)
        rowids = np.flatnonzero(total > 0)
        order = np.lexsort((rowids, -total[rowids]))
        self._rowids, self._raw = rowids[order], total[rowids][order]
        self._sorted, self._sorted_raw = rowids, total[rowids]
        self.best = float(self._raw[0]) if len(self._raw) else 0.0

    LexicalQuery._scored = smoothed  # type: ignore[method-assign]
    try:
        yield
    finally:
        LexicalQuery._scored = real  # type: ignore[method-assign]


def rrf_c() -> int:
    """The constant ``c`` of reciprocal rank fusion, ``1 / (c + rank)``, as the hybrid peer uses it:
    LangChain's EnsembleRetriever default (60, as in LlamaIndex's QueryFusionRetriever)."""
    from langchain_classic.retrievers import EnsembleRetriever

    return int(EnsembleRetriever.model_fields["c"].default)


@contextmanager
def lexical_ranks() -> Iterator[None]:
    """Inside the block, a segment's lexical score is its rank among the query's matches, not its
    BM25 over the best (round 18, simulated): ``c / (c + r)`` with ``r`` the number of matches that
    score more (1 for the best, as before; 0 without a query word) and ``c`` = :func:`rrf_c`. The
    lexical evidence then counts as reciprocal rank fusion counts it, by position; the dense side
    and the weight are unchanged. Monotone in BM25, so the pages' floors and the walk's bounds hold."""
    from hseg.retrieval.lexical_query import LexicalQuery

    real, c = LexicalQuery._normalised, rrf_c()

    def by_rank(self: Any, raw: Any) -> np.ndarray:
        x = np.asarray(raw, dtype=np.float64)
        if not len(self._raw):
            return np.zeros_like(x)
        ahead = np.searchsorted(-self._raw, -x, side="left")  # matches scoring more (best first)
        return np.where(x > 0, c / (c + ahead), 0.0)

    LexicalQuery._normalised = by_rank  # type: ignore[method-assign]
    try:
        yield
    finally:
        LexicalQuery._normalised = real  # type: ignore[method-assign]


def under(switch: Callable[[], Any], method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` run inside ``switch()`` (:func:`rest_of_budget_off`: ``benchmarks/paired.py
    hseg_default hseg_default_walk``; :func:`cuts_off`: ``hseg_default hseg_default_no_cuts``)."""
    @wraps(method)  # the harness reads the signature (budget-aware methods)
    def method_under(*args: Any, **kwargs: Any) -> Any:
        with switch():
            return method(*args, **kwargs)

    return method_under


#: ``hseg_default_<name>``: the default run inside a switch, measured only when named (a run of every
#: registered method measures what users get, not these simulations)
SWITCHES: dict[str, Callable[[], Any]] = {
    "walk": rest_of_budget_off,
    "no_cuts": cuts_off,
    "lexnb": lexical_neighbours,
    "lexrank": lexical_ranks,
}


def register_all(register: Callable[[str, Any], Any], retrieval_cls: Any) -> None:
    register("hseg_default", default_method(retrieval_cls))
    for t in TARGETS:
        # unit="cluster" named: with a budget and no unit the store answers with the auto unit
        SPECS[f"hseg_sc_{t}"] = (t, "cluster", {"unit": "cluster", "mode": "segment+cluster"})
        SPECS[f"hseg_c_{t}"] = (t, "cluster", {"unit": "cluster", "mode": "cluster"})
        SPECS[f"hseg_seg_{t}"] = (t, "segment", {"unit": "segment"})
        SPECS[f"hseg_auto_{t}"] = (t, "segment", {"unit": "auto"})
        SPECS[f"hseg_sc_{t}_hybrid"] = (t, "cluster", {"unit": "cluster", "mode": "segment+cluster",
                                                      "lexical_weight": HYBRID_WEIGHT})
        SPECS[f"hseg_seg_{t}_hybrid"] = (t, "segment", {"unit": "segment", "lexical_weight": HYBRID_WEIGHT})
        SPECS[f"hseg_auto_{t}_hybrid"] = (t, "segment", {"unit": "auto", "lexical_weight": HYBRID_WEIGHT})
    for name, (target, level, search) in SPECS.items():
        register(name, store_method(target, level, retrieval_cls, **search))


def variant(name: str, retrieval_cls: Any) -> Callable[..., Any] | None:
    """A registered hseg method with changes, ``<hseg method>[~<flavour>][+lex<W>][+nb<V>][@<segmenter>]``,
    or the default inside a switch, ``hseg_default_<switch>`` (:data:`SWITCHES`):
    ``~<flavour>`` chunks with that flavour (:data:`FLAVOURS`, ``hseg_auto_256~ctxenc``); ``+lex<W>``
    searches with ``lexical_weight=W`` (``hseg_auto_512+lex0.5``); ``+nb<V>`` with ``neighbour_weight=V``
    (the auto unit; other weights than the unit index's are searched on the gathered path);
    ``@<segmenter>`` chunks with that segmenter (a registered name or a saved weights file), to
    compare segmenters query by query
    (``benchmarks/paired.py hseg_auto_512@old.pt hseg_auto_512``). ``None`` for other names."""
    base, _, switch = name.partition("hseg_default_")
    if not base and switch in SWITCHES:
        return under(SWITCHES[switch], default_method(retrieval_cls))
    rest, at, segmenter = name.partition("@")
    if at and not segmenter:
        return None
    rest, nb, nb_weight = rest.partition("+nb")
    rest, plus, weight = rest.partition("+lex")
    base, tilde, flavour = rest.partition("~")
    if base not in SPECS or (tilde and flavour not in FLAVOURS) or not (at or plus or tilde or nb):
        return None
    target, level, search = SPECS[base]
    try:
        if plus:
            search = {**search, "lexical_weight": float(weight)}
        if nb:
            search = {**search, "neighbour_weight": float(nb_weight)}
    except ValueError:
        return None
    return store_method(target, level, retrieval_cls, segmenter=segmenter or None, flavour=flavour or None, **search)
