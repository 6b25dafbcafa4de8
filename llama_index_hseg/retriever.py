"""LlamaIndex retriever: max-score parent retrieval over a Chroma collection of hseg nodes.

The search itself is :meth:`hseg.store.HierarchicalStore.search` on the vector store's collection
(one implementation for the core, LangChain and LlamaIndex); this module only translates
``QueryBundle`` → query and ``SearchHit`` → ``NodeWithScore``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle

try:  # the vector-store integration is optional: a bare chromadb collection works too
    from llama_index.vector_stores.chroma import ChromaVectorStore
except ImportError:  # pragma: no cover - installed with the llama-index extra
    ChromaVectorStore = None  # type: ignore[assignment,misc]

from hseg.chunking import check_unicode
from hseg.retrieval import SearchSettings
from hseg.store import HierarchicalStore
from llama_index_hseg.nodes import hit_to_node


def _hseg_store_of(store: Any) -> HierarchicalStore | None:
    """The core store of a HierarchicalSegmentVectorStore or a HierarchicalStore (else ``None``)."""
    from llama_index_hseg.vector_store import HierarchicalSegmentVectorStore

    if isinstance(store, HierarchicalSegmentVectorStore):
        return store.store
    return store if isinstance(store, HierarchicalStore) else None


def _collection_of(store: Any) -> Any:
    """The chromadb collection behind a ChromaVectorStore, a HierarchicalStore (or hseg's vector store)
    or a collection."""
    own = _hseg_store_of(store)
    if own is not None:
        return own.collection
    if ChromaVectorStore is not None and isinstance(store, ChromaVectorStore):
        return store._collection  # no public accessor (`.client` returns it too, under a misleading name)
    if hasattr(store, "query") and hasattr(store, "get") and hasattr(store, "name"):
        return store
    raise ValueError(
        f"vector_store must be a HierarchicalSegmentVectorStore, a ChromaVectorStore, a chromadb Collection or a "
        f"HierarchicalStore, got "
        f"{type(store).__name__}"
    )


class HierarchicalSegmentRetriever(BaseRetriever):
    """Retrieves parent clusters (or budget-aware passages) ranked by the max over their vectors.

    Args:
        vector_store: a :class:`~llama_index_hseg.HierarchicalSegmentVectorStore` (its store and encoder
            are used), a ``ChromaVectorStore`` (cosine collection) filled with
            :class:`~llama_index_hseg.HierarchicalSegmentNodeParser` nodes, its chromadb collection,
            or an :class:`hseg.store.HierarchicalStore`.
        encoder: the model that embedded the segments (a name, an hseg encoder, a
            ``BaseEmbedding``, ...); default all-MiniLM-L6-v2, loaded on the first string query.
            ``Settings.embed_model`` is never used.
        similarity_top_k: parents (or passages) per query: LlamaIndex's name for ``k``.
        settings: a :class:`hseg.retrieval.settings.SearchSettings` for every query.
        allow_encoder_mismatch: accept an encoder whose name differs from the one the collection records.
        callback_manager: LlamaIndex's callback manager.
        verbose: LlamaIndex's verbose flag.
        **search_fields: any field of :class:`~hseg.retrieval.settings.SearchSettings` (``budget_tokens``,
            ``unit``, ``mode``, ``cluster_weight``, ``neighbour_weight``, ``where``,
            ``where_document``), overriding ``settings``; its defaults otherwise.

    Raises:
        ValueError: a search setting out of range, or both ``similarity_top_k`` and ``k``.
        EncoderMismatchError: the collection was written with another encoder (unless
            ``allow_encoder_mismatch``).

    Each result is ``NodeWithScore(node=TextNode(id_=cluster id | passage id, text, start/end char
    idx, metadata=user metadata + the hseg_* result keys), score=hseg_score)``, best first: ids and
    metadata are those of the LangChain retriever (:func:`hseg.retrieval.results.result_for`).

    Example:
        >>> retriever = HierarchicalSegmentRetriever(vector_store, encoder=parser.hseg_encoder)  # doctest: +SKIP
        >>> engine = RetrieverQueryEngine.from_args(retriever, llm=llm)  # doctest: +SKIP
        >>> [(n.node_id, round(n.score, 3)) for n in retriever.retrieve("what causes tides?")]  # doctest: +SKIP
        [('clu-5d0c...', 0.612), ('clu-a9e1...', 0.574), ...]
    """

    def __init__(
        self,
        vector_store: Any,
        encoder: Any = None,
        *,
        similarity_top_k: int | None = None,
        settings: SearchSettings | None = None,
        allow_encoder_mismatch: bool = False,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **search_fields: Any,
    ) -> None:
        if similarity_top_k is not None:
            if "k" in search_fields:
                raise ValueError("give similarity_top_k or k, not both")
            search_fields["k"] = similarity_top_k
        self._settings = SearchSettings.resolve(settings, **search_fields)
        own = _hseg_store_of(vector_store)
        if own is not None and encoder is None:
            self._store = own
        else:
            self._store = HierarchicalStore.from_collection(
                _collection_of(vector_store), encoder, allow_encoder_mismatch=allow_encoder_mismatch,
                **({"oversample": own.oversample} if own is not None else {}),
            )
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @property
    def settings(self) -> SearchSettings:
        """The search settings every query of this retriever uses."""
        return self._settings

    @property
    def store(self) -> HierarchicalStore:
        """The core store that runs the searches."""
        return self._store

    # ------------------------------------------------------------------ retrieval
    def retrieve(self, str_or_query_bundle: Any) -> list[NodeWithScore]:
        return super().retrieve(_checked_query(str_or_query_bundle))

    async def aretrieve(self, str_or_query_bundle: Any) -> list[NodeWithScore]:
        return await super().aretrieve(_checked_query(str_or_query_bundle))

    def _query(self, query_bundle: QueryBundle) -> Any:
        if query_bundle.embedding is not None:
            return query_bundle.embedding
        if not isinstance(query_bundle.query_str, str):
            raise ValueError(f"query_bundle.query_str must be a str, got {type(query_bundle.query_str).__name__}"
                             + ("; decode it first" if isinstance(query_bundle.query_str, bytes) else ""))
        strs = query_bundle.embedding_strs
        if not strs:
            # LlamaIndex gives no embedding string for "": the store's own check refuses a blank query with
            # the message every door gives (LlamaIndex's vector retriever would return nodes ranked by nothing)
            return query_bundle.query_str
        if len(strs) == 1:
            return strs[0]  # embedded by the store's encoder, as in HierarchicalStore.search
        # several embedding strings: their mean, as LlamaIndex's vector retriever aggregates them (each
        # checked as the store checks one query: the tokenizer's own error names neither string nor offset)
        for i, s in enumerate(strs):
            check_unicode(f"query_bundle.embedding_strs[{i}]", s, why="the encoder takes valid Unicode only")
        return np.mean([self._store.encoder.encode_query(s) for s in strs], axis=0)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = self._query(query_bundle)
        # the lexical side (lexical_weight > 0) reads the question's words, whatever was embedded
        text = None if isinstance(query, str) else query_bundle.query_str
        hits = self._store.search(query, settings=self._settings, query_text=text)
        return [NodeWithScore(node=hit_to_node(hit), score=float(hit.score)) for hit in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # encoder and Chroma calls block: run them in a worker thread
        return await asyncio.to_thread(self._retrieve, query_bundle)

    # ------------------------------------------------------------------ one-call setup
    @classmethod
    def from_documents(
        cls,
        documents: Sequence[BaseNode],
        *,
        parser: Any = None,
        vector_store: Any = None,
        collection_name: str = "hseg",
        path: str | None = None,
        client: Any = None,
        host: str | None = None,
        port: int = 8000,
        **retriever_kwargs: Any,
    ) -> HierarchicalSegmentRetriever:
        """Parse ``documents``, write their nodes through hseg's store, and return a retriever over them.

        ``vector_store`` is a :class:`~llama_index_hseg.HierarchicalSegmentVectorStore`, a
        ``ChromaVectorStore`` (cosine collection) or a chromadb collection; otherwise the collection
        ``collection_name`` is opened or created (cosine) on ``path`` / ``client`` / ``host:port``
        (default: in memory). Re-adding a document replaces it as one unit: its new records are stored
        before the old ones it no longer has are deleted, and only the records hseg stored under its id
        (``hseg_doc_id``) are its own; a failed add leaves the old version as it was.

        Args:
            documents: the documents to parse and store.
            parser: a :class:`~llama_index_hseg.HierarchicalSegmentNodeParser` (default: one with its defaults).
            vector_store: where the nodes go (see above); not with ``path``, ``client`` or ``host``.
            collection_name: the collection opened or created without ``vector_store``.
            path: an embedded store's folder.
            client: a Chroma client to use.
            host: a Chroma server's host.
            port: that server's port.
            **retriever_kwargs: the retriever's arguments (``similarity_top_k``, search settings, ...).

        Returns:
            The retriever, its store holding the documents' nodes.

        Raises:
            ValueError: ``vector_store`` given with ``path``/``client``/``host``, a setting out of range,
                or metadata the store refuses.
            ServerUnreachableError: the Chroma server at ``host`` cannot be reached.

        Example:
            >>> retriever = HierarchicalSegmentRetriever.from_documents(docs, path="./chroma")  # doctest: +SKIP
        """
        from llama_index_hseg.node_parser import HierarchicalSegmentNodeParser
        from llama_index_hseg.vector_store import HierarchicalSegmentVectorStore

        parser = parser if parser is not None else HierarchicalSegmentNodeParser()
        encoder = parser.hseg_encoder
        if vector_store is None:
            # the core store creates the collection: cosine space, its HNSW settings, encoder name
            store = HierarchicalStore(collection_name, path=path, client=client, host=host, port=port, encoder=encoder)
        elif any(x is not None for x in (path, client, host)):
            raise ValueError("give vector_store or path/client/host, not both")
        else:
            store = HierarchicalStore.from_collection(_collection_of(vector_store), encoder)
        HierarchicalSegmentVectorStore(store).add(parser.get_nodes_from_documents(documents))
        return cls(store, **retriever_kwargs)


def _checked_query(query: Any) -> Any:
    """``retrieve``'s argument, refused before LlamaIndex reads ``.query_str`` of something that is neither a
    string nor a ``QueryBundle`` (its own error is ``AttributeError: 'bytes' object has no attribute ...``)."""
    if isinstance(query, (str, QueryBundle)):
        return query
    hint = "; decode it first (query.decode('utf-8'))" if isinstance(query, (bytes, bytearray)) else ""
    raise ValueError(f"str_or_query_bundle must be a str or a QueryBundle, got {type(query).__name__}{hint}")
