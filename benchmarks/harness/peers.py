"""Lexical and hybrid peers for :mod:`benchmarks.retrieval`, each run through the library a user of
it would use, with that library's defaults. All index the chunks of ``lc_recursive_200_0``
(LangChain ``RecursiveCharacterTextSplitter`` 200/0, the report's separators, cl100k length):

- ``bm25_recursive_200``: LangChain ``BM25Retriever`` (langchain-community; ``rank_bm25.BM25Okapi``
  with k1 = 1.5, b = 0.75, epsilon = 0.25 and the retriever's default preprocessing
  ``text.split()``: case-sensitive, punctuation left on the words);
- ``hybrid_recursive_200``: LangChain ``EnsembleRetriever`` over the dense retriever of
  ``lc_recursive_200_0`` and that ``BM25Retriever``: weighted reciprocal rank fusion,
  weights 0.5 / 0.5 (its default: equal weights), c = 60, documents merged by ``page_content``;
- ``li_bm25_recursive_200``: LlamaIndex ``BM25Retriever`` (llama-index-retrievers-bm25, i.e.
  ``bm25s`` with its defaults: lower-cased ``\\w\\w+`` tokens, English stop words, Snowball English
  stemming; BM25 k1 = 1.5, b = 0.75, Lucene idf);
- ``li_fusion_recursive_200``: LlamaIndex ``QueryFusionRetriever`` over the same dense retriever and
  that LlamaIndex ``BM25Retriever``, in its default mode ``"simple"`` (each node keeps the max of
  its raw scores, then sorted by score), ``num_queries=1`` (the default, 4, asks an LLM for three
  more queries; no LLM here, and none is called with 1).
- ``li_rrf_recursive_200``: the same ``QueryFusionRetriever`` in mode ``"reciprocal_rerank"``:
  reciprocal rank fusion of the dense retriever and that ``BM25Retriever`` (bm25s, English stop
  words), ``1 / (60 + rank)`` summed over the two lists (LlamaIndex's k = 60, the RRF paper's),
  documents merged by their node hash (text and metadata).

The dense side is the harness's exact cosine ranking of the same chunks with the run's encoder
(what ``lc_recursive_200_0`` ranks by, and what a Chroma collection with cosine space returns). In
LlamaIndex it scores ``exp(-distance)`` with ``distance = 1 - cos``, the score LlamaIndex's
``ChromaVectorStore`` gives a hit: simple fusion compares these raw scores with BM25's.

Every ranked list is ``DEPTH`` long per retriever (``k`` / ``similarity_top_k``), so a fused list
holds 100-200 chunks. Ties: ``rank_bm25``'s ``get_top_n`` and ``bm25s``'s top-k leave the order of
equal scores to an unstable sort; the BM25 retrievers here are the libraries' own classes with only
that selection replaced by a stable one (score descending, then index order), on the scores the
library computes. The fusions are the libraries' own code, which is stable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from .baselines import recursive
from .evaluation import DEFAULT_DEPTH, Chunk, Query, query_vectors

DEPTH = DEFAULT_DEPTH
Ranked = tuple[list[list[Chunk]], list[Chunk]]


@lru_cache(maxsize=4)
def _units(corpora_key: tuple[tuple[str, str], ...]) -> list[Chunk]:
    """The chunks of ``lc_recursive_200_0`` (same chunker), pooled in corpus order."""
    chunker = recursive(200, 0)
    return [c for cid, text in corpora_key for c in chunker(cid, text, None)]


def units_of(corpora: dict[str, str]) -> list[Chunk]:
    return _units(tuple(corpora.items()))


def dense_ranking(units: Sequence[Chunk], queries: Sequence[Query], encoder: Any,
                  depth: int = DEPTH) -> tuple[np.ndarray, np.ndarray]:
    """``(order, cosine)`` per query: the indices of the top ``depth`` units and their cosine
    similarities, exactly :func:`evaluation.rank_by_similarity`'s ranking (stable on ties)."""
    vectors = np.asarray(encoder.encode([u.text for u in units]), dtype=np.float32)
    scores = query_vectors(encoder, queries) @ vectors.T
    order = np.argsort(-scores, axis=1, kind="stable")[:, : min(depth, len(units))]
    return order, np.take_along_axis(scores, order, axis=1)


def stable_top(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` highest scores, score descending, equal scores in index order."""
    return [int(i) for i in np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:k]]


# --------------------------------------------------------------------------- LangChain


def lc_bm25(units: Sequence[Chunk], k: int = DEPTH) -> Any:
    """A LangChain ``BM25Retriever`` over ``units`` with the defaults (``from_documents``),
    ``k`` results; each document's ``metadata["i"]`` is its unit index."""
    from langchain_community.retrievers import BM25Retriever
    from langchain_core.documents import Document

    class StableBM25Retriever(BM25Retriever):
        """``BM25Retriever`` with a stable top-k: ``vectorizer.get_top_n`` sorts the scores with
        ``np.argsort(...)[::-1]``, which orders equal scores arbitrarily."""

        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            scores = self.vectorizer.get_scores(self.preprocess_func(query))
            return [self.docs[i] for i in stable_top(scores, self.k)]

    docs = [Document(page_content=u.text, metadata={"i": i}) for i, u in enumerate(units)]
    return StableBM25Retriever.from_documents(docs, k=k)


def lc_fixed(ranked: dict[str, list[Any]]) -> Any:
    """A LangChain retriever answering each query text with a precomputed document list."""
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class FixedRetriever(BaseRetriever):
        answers: dict[str, list[Document]]

        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            return self.answers[query]

    return FixedRetriever(answers=ranked)


def bm25_method(corpora: dict[str, str], queries: list[Query], encoder: Any) -> Ranked:
    units = units_of(corpora)
    bm25 = lc_bm25(units)
    ranked = [[units[d.metadata["i"]] for d in bm25.invoke(q.question)] for q in queries]
    return ranked, units


def hybrid_method(corpora: dict[str, str], queries: list[Query], encoder: Any) -> Ranked:
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_core.documents import Document

    units = units_of(corpora)
    order, _ = dense_ranking(units, queries, encoder)
    docs = [Document(page_content=u.text, metadata={"i": i}) for i, u in enumerate(units)]
    dense = lc_fixed({q.question: [docs[int(i)] for i in row] for q, row in zip(queries, order)})
    ensemble = EnsembleRetriever(retrievers=[dense, lc_bm25(units)], weights=[0.5, 0.5])  # c = 60
    ranked = [[units[d.metadata["i"]] for d in ensemble.invoke(q.question)] for q in queries]
    return ranked, units


# --------------------------------------------------------------------------- LlamaIndex


def li_nodes(units: Sequence[Chunk]) -> list[Any]:
    """One ``TextNode`` per unit, id = unit index, no metadata (nothing but the text is indexed)."""
    from llama_index.core.schema import TextNode

    return [TextNode(text=u.text, id_=str(i)) for i, u in enumerate(units)]


def li_bm25(nodes: Sequence[Any], k: int = DEPTH) -> Any:
    """A LlamaIndex ``BM25Retriever`` over ``nodes`` with the defaults (``from_defaults``), top
    ``k``, the top-k taken stably from the scores ``bm25s`` computes for the same query tokens."""
    import bm25s
    from llama_index.core.schema import NodeWithScore, QueryBundle
    from llama_index.core.vector_stores.utils import metadata_dict_to_node
    from llama_index.retrievers.bm25 import BM25Retriever

    class StableBM25Retriever(BM25Retriever):
        """``BM25Retriever`` whose top-k is stable; tokens and scores as in ``_retrieve``."""

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            tokens = bm25s.tokenize(query_bundle.query_str, stemmer=None if self.skip_stemming else self.stemmer,
                                    token_pattern=self.token_pattern, return_ids=False, show_progress=False)[0]
            scores = self.bm25.get_scores(tokens) if tokens else np.zeros(int(self.bm25.scores["num_docs"]))
            return [NodeWithScore(node=metadata_dict_to_node(self.corpus[i]), score=float(scores[i]))
                    for i in stable_top(scores, self.similarity_top_k)]

    return StableBM25Retriever.from_defaults(nodes=list(nodes), similarity_top_k=k)


def li_fixed(ranked: dict[str, list[Any]]) -> Any:
    """A LlamaIndex retriever answering each query text with precomputed ``NodeWithScore`` lists."""
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle

    class FixedRetriever(BaseRetriever):
        def __init__(self, answers: dict[str, list[NodeWithScore]]) -> None:
            super().__init__()
            self.answers = answers

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return list(self.answers[query_bundle.query_str])

    return FixedRetriever(ranked)


def li_bm25_method(corpora: dict[str, str], queries: list[Query], encoder: Any) -> Ranked:
    units = units_of(corpora)
    bm25 = li_bm25(li_nodes(units))
    ranked = [[units[int(n.node.node_id)] for n in bm25.retrieve(q.question)] for q in queries]
    return ranked, units


def li_fusion(corpora: dict[str, str], queries: list[Query], encoder: Any, mode: str = "simple") -> Ranked:
    """LlamaIndex's ``QueryFusionRetriever`` over the dense retriever and ``li_bm25`` in ``mode``."""
    from llama_index.core.llms import MockLLM
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.retrievers.fusion_retriever import FUSION_MODES
    from llama_index.core.schema import NodeWithScore

    units = units_of(corpora)
    nodes = li_nodes(units)
    order, cosine = dense_ranking(units, queries, encoder)
    dense = li_fixed({q.question: [NodeWithScore(node=nodes[int(i)], score=math.exp(-(1.0 - float(c))))
                                   for i, c in zip(row, cos)]
                      for q, row, cos in zip(queries, order, cosine)})
    # equal retriever weights are the default; num_queries=1: no generated queries (the LLM is
    # required by the constructor, never called); use_async=False gives the same fusion
    fusion = QueryFusionRetriever([dense, li_bm25(nodes)], llm=MockLLM(), similarity_top_k=DEPTH,
                                  num_queries=1, use_async=False, mode=FUSION_MODES(mode))
    ranked = [[units[int(n.node.node_id)] for n in fusion.retrieve(q.question)] for q in queries]
    return ranked, units


def li_fusion_method(corpora: dict[str, str], queries: list[Query], encoder: Any) -> Ranked:
    return li_fusion(corpora, queries, encoder, "simple")  # the default mode


def li_rrf_method(corpora: dict[str, str], queries: list[Query], encoder: Any) -> Ranked:
    return li_fusion(corpora, queries, encoder, "reciprocal_rerank")


#: (corpora, queries, encoder) -> (ranked lists, the index's units)
Peer = Callable[[dict[str, str], list[Query], Any], tuple[list[list[Chunk]], list[Chunk]]]
PEERS: dict[str, Peer] = {
    "bm25_recursive_200": bm25_method,
    "hybrid_recursive_200": hybrid_method,
    "li_bm25_recursive_200": li_bm25_method,
    "li_fusion_recursive_200": li_fusion_method,
    "li_rrf_recursive_200": li_rrf_method,
}


def register_all(register: Callable[[str, Any], Any], retrieval_cls: Any) -> None:
    for name, fn in PEERS.items():
        def method(corpora: dict[str, str], queries: list[Query], encoder: Any, fn: Any = fn) -> Any:
            return retrieval_cls(*fn(corpora, queries, encoder))

        register(name, method)
