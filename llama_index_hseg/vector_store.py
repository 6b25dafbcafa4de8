"""LlamaIndex vector store over :class:`hseg.store.HierarchicalStore`: an ``IngestionPipeline`` (or a
``VectorStoreIndex``) writes through hseg's own write path.

A translation only: :meth:`HierarchicalSegmentVectorStore.add` turns the nodes of
:class:`~llama_index_hseg.HierarchicalSegmentNodeParser` back into the records they were made from
(:class:`hseg.chunking.records.Record`: the node's id, vector, text and metadata), grouped by the
document hseg chunked, and hands each document whole to
:meth:`~hseg.store.HierarchicalStore.add_records`: its turn, the writer lock, its unit-index and
lexical rows, its old version replaced as one unit. :meth:`~HierarchicalSegmentVectorStore.query` is
:meth:`~hseg.store.HierarchicalStore.search`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryResult,
)

from hseg.chunking import DOC_ID_KEY, LEVEL_KEY, Record
from hseg.retrieval import SearchSettings
from hseg.store import HierarchicalStore, where_in
from llama_index_hseg.nodes import hit_to_node

_OPERATORS = {FilterOperator.EQ: "$eq", FilterOperator.NE: "$ne", FilterOperator.GT: "$gt",
              FilterOperator.GTE: "$gte", FilterOperator.LT: "$lt", FilterOperator.LTE: "$lte",
              FilterOperator.IN: "$in", FilterOperator.NIN: "$nin"}


class HierarchicalSegmentVectorStore(BasePydanticVectorStore):
    """hseg's store as a LlamaIndex vector store: what an ``IngestionPipeline`` writes goes through
    the write of :meth:`hseg.store.HierarchicalStore.add`.

    Args:
        store: a :class:`hseg.store.HierarchicalStore`; or, instead, the arguments that open one:
        collection_name, path, client, host, port, encoder, store_kwargs: as for
            :class:`~hseg.store.HierarchicalStore` (``encoder``: the model that embedded the nodes, e.g.
            ``parser.hseg_encoder``; it embeds the queries).
        settings: the :class:`~hseg.retrieval.settings.SearchSettings` of :meth:`query` (``k`` comes
            from the query's ``similarity_top_k``).

    :meth:`add` takes the nodes of :class:`~llama_index_hseg.HierarchicalSegmentNodeParser`, every
    node of a document in one call (as a pipeline passes them), and replaces each document as one unit:
    its new records are written before the records of its old version that it no longer has are
    deleted, so no search answers from both texts and none finds it missing. Nodes of other parsers,
    or a part of a document, are refused with a ``ValueError`` before anything is written. Re-running
    a pipeline with the same documents rewrites the same ids (idempotent, with or without a docstore;
    a docstore with ``DocstoreStrategy.DUPLICATES_ONLY`` skips unchanged documents and lets changed ones
    be replaced here, where the default ``UPSERTS`` deletes a changed document before parsing it again).
    :meth:`delete` removes the document hseg chunked under that id (its ``hseg_doc_id``: the
    ``Document``'s ``id_``), nothing matched by user metadata. Queries are embedded by the store's
    encoder (``is_embedding_query`` is ``False``): pass ``embed_model`` to ``VectorStoreIndex`` only
    because LlamaIndex asks for one.

    Example:
        >>> parser = HierarchicalSegmentNodeParser()  # doctest: +SKIP
        >>> vector_store = HierarchicalSegmentVectorStore(  # doctest: +SKIP
        ...     path="./chroma-db", encoder=parser.hseg_encoder)
        >>> IngestionPipeline(transformations=[parser], vector_store=vector_store).run(documents=docs)  # doctest: +SKIP
        >>> HierarchicalSegmentRetriever(vector_store, similarity_top_k=4).retrieve("question")  # doctest: +SKIP
    """

    stores_text: bool = True
    flat_metadata: bool = True
    is_embedding_query: bool = False

    _store: HierarchicalStore = PrivateAttr()
    _settings: SearchSettings = PrivateAttr()

    def __init__(self, store: HierarchicalStore | None = None, *, collection_name: str = "hseg",
                 path: str | None = None, client: Any = None, host: str | None = None, port: int = 8000,
                 encoder: Any = None, settings: SearchSettings | None = None, **store_kwargs: Any) -> None:
        super().__init__(stores_text=True)
        if store is not None:
            if not isinstance(store, HierarchicalStore):
                raise ValueError(f"store must be an hseg.store.HierarchicalStore, got {type(store).__name__}")
            if any(x is not None for x in (path, client, host, encoder)) or store_kwargs:
                raise ValueError("give store or the arguments that open one (path/client/host/encoder/...), not both")
        else:
            store = HierarchicalStore(collection_name, path=path, client=client, host=host, port=port,
                                      encoder=encoder, **store_kwargs)
        self._store = store
        self._settings = settings if settings is not None else SearchSettings()

    @classmethod
    def class_name(cls) -> str:
        return "HierarchicalSegmentVectorStore"

    @property
    def client(self) -> HierarchicalStore:
        """The :class:`hseg.store.HierarchicalStore` this writes to and searches."""
        return self._store

    @property
    def store(self) -> HierarchicalStore:
        """The :class:`hseg.store.HierarchicalStore` this writes to and searches (``client`` too)."""
        return self._store

    # ------------------------------------------------------------------ writes
    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Write these nodes' documents, each whole and as one unit; returns the node ids."""
        self._store.add_records(_documents_of(nodes))
        return [n.node_id for n in nodes]

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        return await asyncio.to_thread(self.add, nodes, **kwargs)

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete the document hseg chunked under ``ref_doc_id`` (its records and index rows)."""
        if not isinstance(ref_doc_id, str) or not ref_doc_id:
            raise ValueError(f"ref_doc_id must be a non-empty str, got {ref_doc_id!r}")
        self._store.delete(ref_doc_id)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)

    def clear(self) -> None:
        """Delete every document of the store (the collection stays, with its settings)."""
        for doc_id in self._store.doc_ids():
            self._store.delete(doc_id)

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)

    # ------------------------------------------------------------------ reads
    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The best parents (or passages, per ``settings``) for ``query``: :meth:`hseg.store.HierarchicalStore.search`,
        with the query's ``similarity_top_k``, ``filters`` and ``doc_ids``."""
        where = _where(query)
        if query.query_embedding is not None:
            hits = self._store.search(np.asarray(query.query_embedding, dtype=np.float32), settings=self._settings,
                                      k=query.similarity_top_k, query_text=query.query_str, where=where)
        elif query.query_str is not None:
            hits = self._store.search(query.query_str, settings=self._settings, k=query.similarity_top_k, where=where)
        else:
            raise ValueError("query: give query_str or query_embedding")
        nodes = [hit_to_node(h) for h in hits]
        return VectorStoreQueryResult(nodes=list(nodes), similarities=[float(h.score) for h in hits],
                                      ids=[n.node_id for n in nodes])

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return await asyncio.to_thread(self.query, query, **kwargs)


def _documents_of(nodes: Sequence[BaseNode]) -> dict[str, list[Record]]:
    """``{hseg doc id: records}`` of the parser's nodes, in the order given; ``ValueError`` naming a node
    that is not one (no ``hseg_*`` level or document, or no vector), or whose SOURCE is another document
    than the one hseg chunked (its ``ref_doc_id`` would not find it again)."""
    out: dict[str, list[Record]] = {}
    for i, n in enumerate(nodes):
        meta = dict(n.metadata)
        if meta.get(LEVEL_KEY) is None or meta.get(DOC_ID_KEY) is None:
            raise ValueError(f"nodes[{i}] ({n.node_id!r}) is not a node of HierarchicalSegmentNodeParser (no "
                             f"{LEVEL_KEY}/{DOC_ID_KEY} metadata); parse the documents with it first")
        if n.embedding is None:
            raise ValueError(f"nodes[{i}] ({n.node_id!r}) has no embedding; the parser sets one (an embedding "
                             "model after it needs ClusterVectorizer)")
        doc = str(meta[DOC_ID_KEY])
        if n.ref_doc_id is not None and n.ref_doc_id != doc:
            raise ValueError(f"nodes[{i}] ({n.node_id!r}) comes from document {n.ref_doc_id!r} through another "
                             f"node ({doc!r}); parse Documents with HierarchicalSegmentNodeParser directly, so that "
                             "delete(ref_doc_id) finds what they wrote")
        out.setdefault(doc, []).append(Record(n.node_id, np.asarray(n.embedding, dtype=np.float32),
                                              n.get_content(metadata_mode=MetadataMode.NONE), meta))
    return out


def _where(query: VectorStoreQuery) -> dict[str, Any] | None:
    """A Chroma ``where`` of the query's ``filters`` and ``doc_ids`` (hseg's document key)."""
    parts = []
    if query.filters is not None:
        parts.append(_filters(query.filters))
    if query.doc_ids:
        parts.append(where_in(DOC_ID_KEY, list(query.doc_ids)))
    if query.node_ids:
        raise ValueError("query.node_ids: an hseg search answers with parents and passages, not stored nodes; "
                         "filter by doc_ids or metadata instead")
    return None if not parts else parts[0] if len(parts) == 1 else {"$and": parts}


def _filters(filters: MetadataFilters) -> dict[str, Any]:
    parts = [_filters(f) if isinstance(f, MetadataFilters) else _filter(f) for f in filters.filters]
    if not parts:
        raise ValueError("filters: an empty MetadataFilters; leave filters out instead")
    if len(parts) == 1:
        return parts[0]
    op = {FilterCondition.AND: "$and", FilterCondition.OR: "$or"}.get(filters.condition or FilterCondition.AND)
    if op is None:
        raise ValueError(f"filters.condition {filters.condition!r}: only 'and' and 'or' are supported")
    return {op: parts}


def _filter(f: MetadataFilter | Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(f, MetadataFilter):
        raise ValueError(f"filters: expected MetadataFilter or MetadataFilters, got {type(f).__name__}")
    op = _OPERATORS.get(FilterOperator(f.operator))
    if op is None:
        raise ValueError(f"filter on {f.key!r}: operator {f.operator!r} is not supported; use one of "
                         f"{sorted(o.value for o in _OPERATORS)}")
    return {f.key: {op: f.value}}
