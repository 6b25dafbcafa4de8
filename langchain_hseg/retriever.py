"""``HierarchicalSegmentRetriever``: max-score parent retrieval from an hseg store, as a LangChain retriever.

The adapter only translates: :meth:`hseg.store.HierarchicalStore.search` ranks the parents (paper
eq. 2, or the budget-aware unit of :mod:`hseg.retrieval.selection`) and each :class:`hseg.retrieval.parents.SearchHit`
becomes a ``Document`` (see :func:`hit_to_document`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, get_type_hints

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManager,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import get_config_list
from pydantic import ConfigDict, Field, create_model, field_validator, model_validator

from hseg.retrieval import SearchHit, SearchSettings, result_for
from hseg.text import loader_page_key
from langchain_hseg.text_splitter import HierarchicalSegmentTextSplitter


def hit_to_document(hit: SearchHit) -> Document:
    """A ``Document`` for one search hit: ``(id, metadata)`` from :func:`hseg.retrieval.results.result_for`.

    ``id`` is the cluster id for a whole parent, else the stable passage id; ``page_content`` is the
    hit's text; metadata is the stored user metadata plus the result keys of the metadata table of
    ``docs/api.md`` (``hseg_score``, ``hseg_start``/``hseg_end``, ``hseg_matched_text``, ...), exactly what
    the LlamaIndex retriever puts on its nodes; a hit of a paged document (``hseg_page_start``/``hseg_page_end``)
    also has LangChain's own ``page`` (0-based) of its first page.

    Args:
        hit: a hit of :meth:`hseg.store.HierarchicalStore.search`.

    Returns:
        The ``Document``.

    Raises:
        Nothing of its own.

    Example:
        >>> doc = hit_to_document(store.search("what causes tides?", k=1)[0])  # doctest: +SKIP
        >>> doc.id == doc.metadata["hseg_cluster_id"], doc.metadata["hseg_score"]  # doctest: +SKIP
        (True, 0.61)
    """
    result_id, meta = result_for(hit)
    return Document(id=result_id, page_content=hit.text, metadata={**meta, **loader_page_key("page", hit.pages)})


def _search_settings_fields() -> Any:
    """A ``BaseRetriever`` with one pydantic field per :class:`~hseg.retrieval.settings.SearchSettings`
    field: same name, type, default and description, so the retriever never re-declares a setting."""
    hints = get_type_hints(SearchSettings)
    docs = SearchSettings.docs()
    fields: dict[str, Any] = {
        f.name: (hints[f.name], Field(default=f.default, description=docs[f.name],
                                      strict=f.name in _STRICT_INTS or None))
        for f in dataclasses.fields(SearchSettings)
    }
    return create_model("_SearchSettingsFields", __base__=BaseRetriever, **fields)


#: counts that must be real ints (no "3", no True), as the core's own check wants them
_STRICT_INTS = ("k", "budget_tokens")


class HierarchicalSegmentRetriever(_search_settings_fields()):  # type: ignore[misc]
    """Parents (clusters) or budget-aware passages from an hseg store, as a LangChain retriever.

    Fields:
        store: an :class:`hseg.store.HierarchicalStore` (its encoder embeds the queries).
        splitter: the splitter that chunked the store's documents (used by :meth:`add_documents`).
        k, budget_tokens, unit, mode, cluster_weight, neighbour_weight, where, where_document: the
            fields of :class:`hseg.retrieval.settings.SearchSettings`, with its defaults (``k=None``:
            4 results unless ``budget_tokens`` is set).

    ``invoke(query, k=..., budget_tokens=..., unit=..., where=...)`` overrides any of these for one
    call (``ainvoke`` too); a per-call ``k`` replaces a configured budget and the reverse.
    ``batch(queries)`` and ``abatch`` answer many queries in one batched store search (:meth:`batch`).
    Each result's metadata holds ``hseg_score`` and the matched record; see :func:`hit_to_document`.

    Example:
        >>> retriever = HierarchicalSegmentRetriever.from_documents(docs, path="./chroma", k=3)  # doctest: +SKIP
        >>> top = retriever.invoke("what causes tides?")[0]  # doctest: +SKIP
        >>> top.metadata["hseg_score"], top.metadata["hseg_matched_text"][:40]  # doctest: +SKIP
        (0.61, 'Tides are caused by the gravitational...')
    """

    store: Any
    splitter: Any = None

    model_config = ConfigDict(arbitrary_types_allowed=True, validate_assignment=True)

    # ------------------------------------------------------------------ validation
    # the store checks these too, but only at query time; failing at construction names the field
    @field_validator("store")
    @classmethod
    def _check_store(cls, v: Any) -> Any:
        if not (hasattr(v, "search") and hasattr(v, "asearch")):
            raise ValueError(f"store must be an hseg HierarchicalStore, got {type(v).__name__}")
        return v

    @model_validator(mode="after")
    def _check_search(self) -> HierarchicalSegmentRetriever:
        self.search_settings()  # the core's one check of search settings
        return self

    def search_settings(self, **overrides: Any) -> SearchSettings:
        """The :class:`~hseg.retrieval.settings.SearchSettings` of these fields, with one call's ``overrides``."""
        fields = {name: getattr(self, name) for name in SearchSettings.field_names()}
        return SearchSettings(**fields).override(**overrides)

    # ------------------------------------------------------------------ retrieval
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        hits = self.store.search(query, settings=self.search_settings(**overrides))
        return [hit_to_document(h) for h in hits]

    # LangChain's default _aget_relevant_documents takes only query and run_manager: ainvoke(..., k=...)
    # would raise TypeError without this override
    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        hits = await self.store.asearch(query, settings=self.search_settings(**overrides))
        return [hit_to_document(h) for h in hits]

    # ------------------------------------------------------------------ batches
    def batch(
        self,
        inputs: list[str],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """The answers ``invoke`` gives each query, from one
        :meth:`hseg.store.HierarchicalStore.search_many`: the Chroma reads of all the queries go
        out together (LangChain's default ``batch`` runs ``invoke`` once per query in a thread pool).

        Each query is still its own retriever run for callbacks and tracing; keyword arguments
        (``k``, ``budget_tokens``, ``unit``, ``where``) apply to every query. The search is one
        call, so an error fails the whole batch: it is raised, or with ``return_exceptions``
        returned in place of every query's answer.

        Example:
            >>> questions = ["what causes tides?", "who saw Jupiter's moons?"]
            >>> answers = retriever.batch(questions, budget_tokens=1024)  # doctest: +SKIP
            >>> len(answers), answers[0][0].metadata["hseg_score"]  # doctest: +SKIP
            (2, 0.61)
        """
        if not inputs:
            return []
        configs = get_config_list(config, len(inputs))
        runs = [self._callbacks(cfg, kwargs).on_retriever_start(None, query, **self._run_args(cfg, i, kwargs))
                for i, (query, cfg) in enumerate(zip(inputs, configs))]
        try:
            answers = self.store.search_many(list(inputs), settings=self.search_settings(**_search_args(kwargs)))
        except Exception as exc:
            for run in runs:
                run.on_retriever_error(exc)
            if return_exceptions:
                return [exc] * len(inputs)
            raise
        documents = [[hit_to_document(h) for h in hits] for hits in answers]
        for run, docs in zip(runs, documents):
            run.on_retriever_end(docs)
        return documents

    async def abatch(
        self,
        inputs: list[str],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """:meth:`batch` in a worker thread (the encoder and the Chroma calls block, as in ``asearch``)."""
        return await asyncio.to_thread(self.batch, inputs, config, return_exceptions=return_exceptions, **kwargs)

    def _run_args(self, config: RunnableConfig, i: int, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        # a run_id keyword names the first query's run, as a run_id in a single config does
        run_id = config.get("run_id") or (kwargs.get("run_id") if i == 0 else None)
        return {"name": config.get("run_name") or self.get_name(), "run_id": run_id}

    def _callbacks(self, config: RunnableConfig, kwargs: Mapping[str, Any]) -> CallbackManager:
        """The callback manager of one query's run, configured as ``BaseRetriever.invoke`` does."""
        return CallbackManager.configure(
            config.get("callbacks"),
            None,
            verbose=kwargs.get("verbose", False),
            inheritable_tags=config.get("tags"),
            local_tags=self.tags,
            inheritable_metadata={**(config.get("metadata") or {}), **self._get_ls_params(**kwargs)},
            local_metadata=self.metadata,
        )

    # ------------------------------------------------------------------ ingestion
    def add_documents(self, documents: Iterable[Document]) -> list[str]:
        """Chunk ``documents`` with :attr:`splitter` and upsert them into the store.

        Args:
            documents: the documents (``Document.id``, when set, is the hseg document id).

        Returns:
            The cluster ids written.

        Raises:
            ValueError: the retriever has no splitter, or the store refuses a document's metadata.
        """
        if self.splitter is None:
            raise ValueError("add_documents needs a splitter: build the retriever with from_documents/"
                             "from_vectorstore or pass splitter=HierarchicalSegmentTextSplitter(...)")
        return self.splitter.add_to_vectorstore(self.store, documents)

    async def aadd_documents(self, documents: Iterable[Document]) -> list[str]:
        """:meth:`add_documents` in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self.add_documents, list(documents))

    def delete(self, doc_id: str) -> int:
        """Remove every record of a document (its ``hseg_doc_id``); returns how many were removed."""
        return int(self.store.delete(doc_id))

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        *,
        splitter: HierarchicalSegmentTextSplitter | Mapping[str, Any] | None = None,
        encoder: Any = None,
        collection_name: str = "hseg",
        path: str | None = None,
        client: Any = None,
        host: str | None = None,
        port: int = 8000,
        **retriever_kwargs: Any,
    ) -> HierarchicalSegmentRetriever:
        """Chunk ``documents`` once, store them in Chroma and return a retriever over them.

        ``Document.id`` (when set) is the hseg document id; metadata is kept on every record.

        Args:
            documents: the documents to chunk and store.
            splitter: a :class:`HierarchicalSegmentTextSplitter`, or a dict of its arguments.
            encoder: shorthand for ``splitter={"encoder": encoder}`` (not with a splitter instance).
            collection_name: the store's collection (see :class:`hseg.store.HierarchicalStore`).
            path: an embedded store's folder (with none of path/client/host, the store is in memory).
            client: a Chroma client to use.
            host: a Chroma server's host.
            port: that server's port.
            **retriever_kwargs: the retriever's fields (``k``, ``unit``, ``budget_tokens``, ...).

        Returns:
            The retriever, its store holding ``documents``.

        Raises:
            ValueError: bad splitter or retriever settings (before anything is chunked), an encoder
                given twice, or metadata the store refuses.
            ServerUnreachableError: the Chroma server at ``host`` cannot be reached.

        Example:
            >>> r = HierarchicalSegmentRetriever.from_documents(docs, splitter={"target_tokens": 256},  # doctest: +SKIP
            ...                                                  path="./chroma", k=2)
        """
        from hseg.store import HierarchicalStore

        splitter = _as_splitter(splitter, encoder)
        store = HierarchicalStore(collection_name, path=path, client=client, host=host, port=port,
                                  encoder=splitter.encoder)
        retriever = cls(store=store, splitter=splitter, **retriever_kwargs)  # validate before the slow part
        retriever.add_documents(documents)
        return retriever

    @classmethod
    def from_texts(
        cls,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> HierarchicalSegmentRetriever:
        """:meth:`from_documents` on plain texts (optional metadatas and document ids)."""
        n = len(texts)
        metas = list(metadatas) if metadatas is not None else [None] * n
        doc_ids = list(ids) if ids is not None else [None] * n
        if len(metas) != n or len(doc_ids) != n:
            raise ValueError(f"metadatas and ids must have one item per text ({n})")
        docs = [Document(page_content=t, metadata=dict(m or {}), id=i) for t, m, i in zip(texts, metas, doc_ids)]
        return cls.from_documents(docs, **kwargs)

    @classmethod
    def from_vectorstore(
        cls,
        vectorstore: Any,
        encoder: Any = None,
        *,
        splitter: HierarchicalSegmentTextSplitter | Mapping[str, Any] | None = None,
        **retriever_kwargs: Any,
    ) -> HierarchicalSegmentRetriever:
        """A retriever on the collection of a ``langchain_chroma.Chroma`` vector store.

        The collection must use the cosine space (``collection_metadata={"hnsw:space": "cosine"}``, or
        ``collection_configuration={"hnsw": {"space": "cosine"}}``); langchain_chroma's default is l2.
        ``encoder`` defaults to the splitter's, then to the vector store's ``embeddings``, so hseg records
        and the store's own searches share one vector space.
        Fill it with :meth:`add_documents`; records of other writers in it are ignored.

        Args:
            vectorstore: a ``langchain_chroma.Chroma``.
            encoder: the sentence encoder (default: the splitter's, then the vector store's ``embeddings``).
            splitter: a :class:`HierarchicalSegmentTextSplitter`, or a dict of its arguments.
            **retriever_kwargs: the retriever's fields (``k``, ``unit``, ``budget_tokens``, ...).

        Returns:
            The retriever on the vector store's collection.

        Raises:
            ValueError: ``vectorstore`` is not a ``langchain_chroma.Chroma``, its collection is not in the
                cosine space, an encoder is given twice, or a setting is out of range.
            EncoderMismatchError: the collection holds hseg records of another encoder.

        Example:
            >>> vs = Chroma("docs", embedding_function=emb,  # doctest: +SKIP
            ...             collection_configuration={"hnsw": {"space": "cosine"}})
            >>> retriever = HierarchicalSegmentRetriever.from_vectorstore(vs, k=3)  # doctest: +SKIP
            >>> retriever.add_documents(docs)  # doctest: +SKIP
        """
        from hseg.store import HierarchicalStore, collection_space

        collection = getattr(vectorstore, "_collection", None)
        if collection is None:
            raise ValueError(f"vectorstore must be a langchain_chroma.Chroma, got {type(vectorstore).__name__}")
        if encoder is None and not isinstance(splitter, HierarchicalSegmentTextSplitter) \
                and (splitter or {}).get("encoder") is None:
            encoder = getattr(vectorstore, "embeddings", None)  # one vector space for both readers
        space = collection_space(collection)
        if space != "cosine":  # the core's refusal names no langchain_chroma argument
            raise ValueError(
                f"vectorstore: its collection {collection.name!r} uses the {space!r} distance space; hseg needs "
                "'cosine', fixed when the collection is created: make the store with "
                "Chroma(..., collection_metadata={'hnsw:space': 'cosine'}) under a new collection name")
        splitter = _as_splitter(splitter, encoder)  # also rejects an encoder given twice
        store = HierarchicalStore.from_collection(collection, encoder=splitter.encoder)
        return cls(store=store, splitter=splitter, **retriever_kwargs)


def _search_args(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """A batch's keyword arguments less what names its runs (``invoke`` takes ``run_id`` out too)."""
    return {name: value for name, value in kwargs.items() if name != "run_id"}


def _as_splitter(splitter: Any, encoder: Any) -> HierarchicalSegmentTextSplitter:
    if isinstance(splitter, HierarchicalSegmentTextSplitter):
        if encoder is not None:
            raise ValueError("give encoder or a splitter instance, not both (set the encoder on the splitter)")
        return splitter
    if splitter is None:
        splitter = {}
    if not isinstance(splitter, Mapping):
        raise ValueError(f"splitter must be a HierarchicalSegmentTextSplitter or a dict, got {type(splitter).__name__}")
    params = dict(splitter)
    if encoder is not None:
        if params.get("encoder") is not None and params["encoder"] is not encoder:
            raise ValueError("give encoder or splitter['encoder'], not both")
        params["encoder"] = encoder
    return HierarchicalSegmentTextSplitter(**params)
