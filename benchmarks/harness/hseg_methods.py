"""hseg's methods for :mod:`benchmarks.retrieval`, run through the real product path.

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
:func:`variant`) runs a method with other segmenter weights, e.g. ``hseg_auto_512@old.pt``,
``<name>+lex<W>`` with ``lexical_weight=W``, e.g. ``hseg_auto_512+lex0.3``, and ``<name>~<flavour>``
with another chunker option (:data:`FLAVOURS`). Every variant is a documented option of the
library; what the library does not offer is not measured here (docs/decisions.md keeps the answers
of the simulations that were).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from .evaluation import Chunk, Query, query_vectors
from .vector_cache import MemoSegmenter

TARGETS = (256, 512, 1024)
#: the lexical weight of the ``_hybrid`` methods (docs/decisions.md, "Hybrid search and the defaults")
HYBRID_WEIGHT = 0.3


#: name -> (target, level, search settings) of every registered method, for :func:`variant`
SPECS: dict[str, tuple[int, str, dict[str, Any]]] = {}


#: chunker flavours a method name can ask for with ``~<flavour>``, each a documented option of
#: :class:`hseg.HierarchicalChunker`: ``enc`` the segment text encoded instead of the mean of its
#: sentence vectors (``segment_vector="encode"``); ``seg64`` / ``seg96`` / ``seg128`` finer units, segments
#: cut to at most 64 / 96 / 128 tokens (``max_segment_tokens``; default: half the target, at most 192).
FLAVOURS: dict[str, dict[str, Any]] = {
    "enc": {"segment_vector": "encode"},
    "seg64": {"max_segment_tokens": 64},
    "seg96": {"max_segment_tokens": 96},
    "seg128": {"max_segment_tokens": 128},
    # issue 48: the heading path in a segment's vector (one more sentence of its mean; with "encode", in
    # front of the text), and cluster vectors encoded from their text
    "ctx": {"segment_context": "heading"},
    "ctxenc": {"segment_context": "heading", "segment_vector": "encode"},
    "cenc": {"cluster_vector": "encode"},
    # issue 56: the relatedness graph off (parents from neighbour-joining and the cap alone); parents of
    # the paper's larger sizes (``hseg_default~t1024~seg128``: the default search over 1024-token parents
    # of the default's segments)
    "nograph": {"clique_method": "none"},
    "t256": {"target_tokens": 256},
    "t512": {"target_tokens": 512},
    "t1024": {"target_tokens": 1024},
}

#: search flavours a method name can ask for with ``~<flavour>``, each a documented search setting
#: (:class:`hseg.retrieval.settings.SearchSettings`): ``lexcov`` the lexical weight scaled per question
#: by the share of its IDF mass its best lexical match holds (``lexical_weighting="coverage"``);
#: ``discussion`` (issue 56) a parent taken whole once 2 of its segments are taken, if its rest costs at most
#: half the budget left (``whole_cluster_min=2, whole_cluster_share=0.5``), for parents that hold a
#: discussion: ``hseg_default~t1024~seg128~discussion``
SEARCH_FLAVOURS: dict[str, dict[str, Any]] = {
    "lexcov": {"lexical_weighting": "coverage"},
    "discussion": {"whole_cluster_min": 2, "whole_cluster_share": 0.5},
}
#: search flavours with a value: ``wcm<N>`` ``whole_cluster_min=N``, ``wcs<S>`` ``whole_cluster_share=S``,
#: ``ro<S>`` ``read_on_share=S``, ``rom<M>`` ``read_on_margin=M``
#: (``hseg_default~t1024~seg128~wcm2~wcs1``)
VALUED_FLAVOURS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "wcm": ("whole_cluster_min", int),
    "wcs": ("whole_cluster_share", float),
    "rom": ("read_on_margin", float),  # before "ro", which it starts with
    "ro": ("read_on_share", float),
}


def search_flavour(name: str) -> dict[str, Any] | None:
    """The search settings of flavour ``name`` (:data:`SEARCH_FLAVOURS`, :data:`VALUED_FLAVOURS`), or ``None``."""
    if name in SEARCH_FLAVOURS:
        return SEARCH_FLAVOURS[name]
    for prefix, (field, parse) in VALUED_FLAVOURS.items():
        if name.startswith(prefix):
            try:
                return {field: parse(name[len(prefix):])}
            except ValueError:
                return None
    return None


@lru_cache(maxsize=8)
def _store(corpora_key: tuple[tuple[str, str], ...], target: int, encoder: Any, segmenter: str | None = None,
           flavour: str | None = None) -> Any:
    import chromadb

    from hseg.chunking.chunker import HierarchicalChunker
    from hseg.store import HierarchicalStore

    options = {k: v for f in (flavour.split("~") if flavour else ()) for k, v in FLAVOURS[f].items()}
    # a flavour's setting wins over the method's target (``t1024``)
    chunker = HierarchicalChunker(**{"encoder": encoder, "target_tokens": target, "segmenter": segmenter, **options})
    # every method of a run (and, with a vector cache, of later runs) segments a document once with the
    # default segmenter (other weights may share its name)
    memo = MemoSegmenter(chunker.segmenter, getattr(getattr(encoder, "path", None), "parent", None)) \
        if segmenter is None else None
    if memo is not None:
        chunker.segmenter = memo
    chunkings = chunker.chunk_many([t for _, t in corpora_key], [c for c, _ in corpora_key])
    if memo is not None:
        memo.save()
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


def _default_spec() -> tuple[int, str, dict[str, Any]]:
    """``hseg_default``'s (target, level, search settings): the product's defaults, nothing named."""
    from hseg.chunking.config import ChunkerConfig
    from hseg.retrieval.settings import SearchSettings

    target = ChunkerConfig().effective_target_tokens
    assert target is not None  # the default chunker aims at a size
    level = "cluster" if SearchSettings(budget_tokens=1024).resolved_unit == "cluster" else "segment"
    return target, level, {}


def default_method(retrieval_cls: Any) -> Callable[..., Any]:
    """``hseg_default``: what a user gets without choosing anything, read from the product's own
    defaults so that it is always the configuration measured: :class:`~hseg.chunking.config.ChunkerConfig`'s
    chunking (what ``hseg index`` builds) and :class:`~hseg.retrieval.settings.SearchSettings`' search
    (what ``store.search(budget_tokens=B)`` and both framework retrievers return)."""
    target, level, search = _default_spec()
    return store_method(target, level, retrieval_cls, **search)


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
    """A registered hseg method (``hseg_default`` too) with changes,
    ``<hseg method>[~<flavour>...][+lex<W>][+nb<V>][@<segmenter>]``: ``~<flavour>`` chunks with that
    flavour (:data:`FLAVOURS`, ``hseg_auto_256~enc``) or searches with it (:data:`SEARCH_FLAVOURS`,
    ``hseg_default~lexcov``, ``hseg_default~t1024~seg128~discussion``), several joined by ``~``; ``+lex<W>``
    searches with ``lexical_weight=W`` (``hseg_auto_512+lex0.5``); ``+nb<V>`` with ``neighbour_weight=V``
    (the auto unit; other weights than the unit index's are searched on the gathered path);
    ``@<segmenter>`` chunks with that segmenter (a registered name or a saved weights file), to
    compare segmenters query by query
    (``python -m benchmarks.paired hseg_auto_512@old.pt hseg_auto_512``). ``None`` for other names."""
    rest, at, segmenter = name.partition("@")
    if at and not segmenter:
        return None
    rest, nb, nb_weight = rest.partition("+nb")
    rest, plus, weight = rest.partition("+lex")
    base, tilde, flavour = rest.partition("~")
    flavours = flavour.split("~") if tilde else []
    if base not in {*SPECS, "hseg_default"} or any(f not in FLAVOURS and search_flavour(f) is None for f in flavours) \
            or not (at or plus or tilde or nb):
        return None
    target, level, search = SPECS[base] if base in SPECS else _default_spec()
    for f in flavours:
        search = {**search, **(search_flavour(f) or {})}
    flavour = "~".join(f for f in flavours if f in FLAVOURS)
    try:
        if plus:
            search = {**search, "lexical_weight": float(weight)}
        if nb:
            search = {**search, "neighbour_weight": float(nb_weight)}
    except ValueError:
        return None
    return store_method(target, level, retrieval_cls, segmenter=segmenter or None, flavour=flavour or None, **search)
