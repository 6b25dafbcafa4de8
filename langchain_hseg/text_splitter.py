"""``HierarchicalSegmentTextSplitter``: the hseg chunker behind LangChain's ``TextSplitter`` API.

How and why: docs/design.md, ``langchain_hseg.text_splitter``.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from hseg.chunking import (
    ChunkerConfig,
    Chunking,
    Cluster,
    HierarchicalChunker,
    Segment,
    chunk_metadata,
    chunk_pages,
    source_metadata,
)
from hseg.text import DEFAULT_PAGE_MODE, PAGE_MODES, JoinedDocument, join_documents, loader_page_key, source_name


def _meta(source: Mapping[str, Any] | None, chunking: Chunking, chunk: Cluster | Segment,
          add_start_index: bool) -> dict[str, Any]:
    try:  # the one rule of hseg_* keys: a re-split chunk's are dropped, a user's refused
        user = source_metadata(source)
    except ValueError as exc:
        raise ValueError(f"document {chunking.doc_id!r}: {exc}") from None
    # deep copy: chunks of one document must not share mutable metadata values
    meta = {**copy.deepcopy(user), **chunk_metadata(chunking, chunk),
            **loader_page_key("page", chunk_pages(chunking, chunk))}
    if add_start_index:  # LangChain's TextSplitter key, on request as there (always == hseg_start)
        meta["start_index"] = chunk.start
    return meta


def cluster_documents(chunking: Chunking, metadata: Mapping[str, Any] | None = None, *,
                      add_start_index: bool = False) -> list[Document]:
    """One ``Document`` per cluster (parent chunk) of a chunking, in document order.

    ``Document.id`` is the cluster id. Metadata: a deep copy of ``metadata`` (its ``hseg_*`` keys
    as :func:`hseg.chunking.schema.source_metadata` says: a re-split chunk's dropped, a user's refused)
    plus the cluster keys of :data:`hseg.chunking.schema.METADATA_KEYS`, the same keys and values
    as the cluster's store record and LlamaIndex node (offsets ``hseg_start``/``hseg_end``, end
    exclusive).

    Args:
        chunking: a chunking of one document (:meth:`hseg.chunking.chunker.HierarchicalChunker.chunk`).
        metadata: the source document's metadata, copied to every ``Document``.
        add_start_index: add LangChain's ``start_index`` (equal to ``hseg_start``).

    Returns:
        The cluster ``Document`` s.

    Raises:
        ValueError: ``metadata`` holds a key with the reserved ``hseg_`` prefix of its own (naming the
            document and the key).

    Example:
        >>> docs = cluster_documents(chunker.chunk(text, "a"), {"source": "a.md"})  # doctest: +SKIP
        >>> all(text[d.metadata["hseg_start"]:d.metadata["hseg_end"]] == d.page_content  # doctest: +SKIP
        ...     for d in docs)
        True
    """
    return [Document(id=c.id, page_content=c.text, metadata=_meta(metadata, chunking, c, add_start_index))
            for c in chunking.clusters]


def segment_documents(chunking: Chunking, metadata: Mapping[str, Any] | None = None, *,
                      add_start_index: bool = False) -> list[Document]:
    """One ``Document`` per segment, linked to its parent by ``hseg_cluster_id``.

    ``Document.id`` is the segment id; metadata as in :func:`cluster_documents`, with the segment
    keys of :data:`hseg.chunking.schema.METADATA_KEYS` (``hseg_prev_id``/``hseg_next_id`` included).

    Args:
        chunking: a chunking of one document.
        metadata: the source document's metadata, copied to every ``Document``.
        add_start_index: add LangChain's ``start_index`` (equal to ``hseg_start``).

    Returns:
        The segment ``Document`` s, in document order.

    Raises:
        ValueError: ``metadata`` holds a key with the reserved ``hseg_`` prefix of its own.

    Example:
        >>> segs = segment_documents(chunker.chunk(text, "a"))  # doctest: +SKIP
        >>> segs[1].metadata["hseg_prev_id"] == segs[0].id  # doctest: +SKIP
        True
    """
    return [Document(id=s.id, page_content=s.text, metadata=_meta(metadata, chunking, s, add_start_index))
            for s in chunking.segments]


class HierarchicalSegmentTextSplitter(TextSplitter):
    """Hierarchical segmentation chunking (Nguyen et al. 2025) as a LangChain ``TextSplitter``.

    ``split_text`` returns the cluster (parent chunk) texts; ``create_documents`` and
    ``split_documents`` return cluster ``Document`` objects with exact offsets; the segment level is
    available from :meth:`split_segments` and :meth:`split_documents_hierarchical`.

    Args:
        config: a :class:`hseg.chunking.config.ChunkerConfig`; its fields can also be given as keyword
            arguments (``encoder``, ``segmenter``, ``k``, ``target_tokens``, ``max_cluster_tokens``,
            ``min_segment_tokens``, ``max_segment_tokens``, ``tokenizer``, ``segment_vector``,
            ``segment_context``, ``cluster_vector``, ``clique_method``, ``structure``, ``cache``,
            ``show_progress``, ``backend``, ``device``, ``batch_size``: the same names, defaults and checks as
            :class:`hseg.chunking.chunker.HierarchicalChunker`), which replace the config's.
        chunker: an already-built ``HierarchicalChunker`` (then leave the arguments above unset).
        chunk_overlap: ``TextSplitter``'s overlap, 0: clusters never overlap.
        pages: what to do with page Documents (:data:`hseg.text.pages.PAGE_MODES`): ``"clean"`` (the
            default) joins consecutive pages of one source and drops their running headers and
            footers and rejoins hyphenated words, ``"exact"`` joins them as they are, ``"separate"``
            chunks each page alone; each chunk says its pages in every mode.
        **kwargs: ``TextSplitter`` arguments. ``length_function``, when given, is the chunker's
            ``tokenizer`` (token counts for all size limits). ``chunk_size`` is not used (sizes come
            from ``target_tokens`` and ``max_cluster_tokens``; a warning says so). ``add_start_index=True``
            adds LangChain's ``start_index`` (the offsets are always in ``hseg_start``/``hseg_end``);
            texts are never stripped.

    The chunker, and so the model, is built on first use. Arguments are checked at construction.

    Raises:
        ValueError: an unknown ``pages`` mode, a setting out of range (as the chunker's), ``config``
            that is not a ``ChunkerConfig``, ``chunker`` that is not a ``HierarchicalChunker`` or given
            with settings, or both ``tokenizer`` and ``length_function``.

    Example:
        >>> splitter = HierarchicalSegmentTextSplitter(target_tokens=256)  # doctest: +SKIP
        >>> source = Document(open("report.md").read(), id="report", metadata={"source": "report.md"})  # doctest: +SKIP
        >>> docs = splitter.split_documents([source])  # doctest: +SKIP
        >>> docs[0].id, docs[0].metadata["hseg_start"], docs[0].metadata["hseg_doc_id"]  # doctest: +SKIP
        ('clu-5d0c...', 0, 'report')
        >>> hseg.chunking.schema.heading_path(docs[1].metadata)  # doctest: +SKIP
        ('Quarterly report', 'Revenue')
    """

    def __init__(
        self,
        *,
        config: ChunkerConfig | None = None,
        chunker: HierarchicalChunker | None = None,
        chunk_overlap: int = 0,
        pages: str = DEFAULT_PAGE_MODE,
        **kwargs: Any,
    ) -> None:
        if pages not in PAGE_MODES:
            raise ValueError(f"pages must be one of {PAGE_MODES}, got {pages!r}")
        self.pages = pages
        settings = {name: kwargs.pop(name) for name in ChunkerConfig.field_names() if name in kwargs}
        length_function = kwargs.get("length_function")
        if length_function is not None:
            if settings.get("tokenizer") not in (None, length_function):
                raise ValueError("give tokenizer or length_function, not both")
            settings["tokenizer"] = length_function
        if "chunk_size" in kwargs:
            warnings.warn(
                "HierarchicalSegmentTextSplitter ignores chunk_size; use target_tokens / max_cluster_tokens",
                stacklevel=2,
            )
        super().__init__(chunk_overlap=chunk_overlap, **kwargs)
        if config is not None and not isinstance(config, ChunkerConfig):
            raise ValueError(f"config must be a ChunkerConfig, got {type(config).__name__}")
        if chunker is not None:
            if not isinstance(chunker, HierarchicalChunker):
                raise ValueError(f"chunker must be a HierarchicalChunker, got {type(chunker).__name__}")
            if settings or config is not None:
                given = sorted(settings) + (["config"] if config is not None else [])
                raise ValueError(f"give chunker or chunker settings, not both (got chunker and {given})")
            self.config = chunker.config
        else:  # validated here, purely: the model is loaded on first use
            self.config = (config or ChunkerConfig()).replace(**settings)
        self._chunker = chunker
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the core
    @property
    def chunker(self) -> HierarchicalChunker:
        """The ``HierarchicalChunker`` (built, with its model, on first access)."""
        if self._chunker is None:
            with self._lock:  # two threads (atransform_documents) must not load the model twice
                if self._chunker is None:
                    self._chunker = HierarchicalChunker(self.config)
        return self._chunker

    @property
    def encoder(self) -> Any:
        """The chunker's encoder; queries of a store built from this splitter must use it."""
        if self._chunker is None and self.config.encoder is not None:
            return self.config.encoder  # the same model, without building the chunker yet
        return self.chunker.encoder

    def chunk_texts(self, texts: Sequence[str], ids: Sequence[str | None] | None = None,
                    sources: Sequence[str | None] | None = None) -> list[Chunking]:
        """``chunker.chunk_many``: one :class:`hseg.chunking.chunks.Chunking` per text (id: given or a content
        hash; ``sources``: the file names or paths that tell plain text from markdown)."""
        return self.chunker.chunk_many(list(texts), None if ids is None else list(ids),
                                       sources=None if sources is None else list(sources))

    def chunk_documents(self, documents: Iterable[Document]) -> list[Chunking]:
        """Chunk documents once; ``Document.id`` (when set) becomes the hseg document id and the
        ``source`` metadata (:func:`hseg.text.structure.source_name`) names it for ``structure="auto"``.
        Consecutive pages of one source are one document (see ``pages``): one chunking for them, whose
        id is the first page's ``Document.id`` (or a hash of the joined text).

        The retriever's builders use this, so a corpus is embedded a single time.
        """
        return [ch for _, ch in self.chunk_joined(documents)]

    def chunk_joined(self, documents: Iterable[Document]) -> list[tuple[JoinedDocument, Chunking]]:
        """:meth:`chunk_documents` with what each chunking was made of: the Documents it joined, their
        metadata (without the page keys) and the source map of their pages."""
        docs = list(documents)
        joined = join_documents([(d.page_content, d.metadata) for d in docs], self.pages)
        chunkings = self.chunker.chunk_many([j.text for j in joined], [docs[j.indices[0]].id or None for j in joined],
                                            sources=[source_name(j.metadata) for j in joined],
                                            source_maps=[j.source_map for j in joined])
        return list(zip(joined, chunkings))

    # ------------------------------------------------------------------ TextSplitter API
    def split_text(self, text: str) -> list[str]:
        """Cluster (parent chunk) texts, in order; they join back into ``text`` exactly."""
        return [c.text for c in self.chunker.chunk(text).clusters]

    def create_documents(
        self,
        texts: list[str],
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
    ) -> list[Document]:
        """Cluster ``Document`` objects (see :func:`cluster_documents`) with exact offsets.

        ``ids`` are optional document ids (default: a hash of each text).
        """
        metas = _metadatas(metadatas, len(texts))
        if ids is not None and len(ids) != len(texts):
            raise ValueError(f"ids: got {len(ids)} for {len(texts)} texts")
        ids = list(ids) if ids is not None else [None] * len(texts)
        return self.split_documents([Document(page_content=t, metadata=dict(m or {}), id=i)
                                     for t, m, i in zip(texts, metas, ids)])

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        """Cluster ``Document`` objects; source metadata kept, ``Document.id`` becomes ``hseg_doc_id``."""
        return self.split_documents_hierarchical(documents)[0]

    def split_segments(self, documents: Iterable[Document]) -> list[Document]:
        """Segment-level ``Document`` objects (see :func:`segment_documents`)."""
        return self.split_documents_hierarchical(documents)[1]

    def split_documents_hierarchical(self, documents: Iterable[Document]) -> tuple[list[Document], list[Document]]:
        """``(cluster_docs, segment_docs)`` from one chunking pass.

        Example:
            >>> parents, children = splitter.split_documents_hierarchical(docs)  # doctest: +SKIP
            >>> {c.metadata["hseg_cluster_id"] for c in children} <= {p.id for p in parents}  # doctest: +SKIP
            True
        """
        clusters: list[Document] = []
        segments: list[Document] = []
        for joined, ch in self.chunk_joined(documents):
            clusters += cluster_documents(ch, joined.metadata, add_start_index=self._add_start_index)
            segments += segment_documents(ch, joined.metadata, add_start_index=self._add_start_index)
        return clusters, segments

    async def atransform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        """``transform_documents`` in a worker thread (the encoder blocks)."""
        return await asyncio.to_thread(self.transform_documents, documents, **kwargs)

    # ------------------------------------------------------------------ ingestion
    def add_to_vectorstore(self, store: Any, documents: Iterable[Document]) -> list[str]:
        """Chunk ``documents`` and write their segment and cluster records; returns the cluster ids.

        ``store`` is an :class:`hseg.store.HierarchicalStore` or a ``langchain_chroma.Chroma`` (its
        collection must use the cosine space). Each Document's metadata is kept on its records, checked
        as ``store.add`` checks it (the ``hseg_*`` keys of a re-split chunk or result dropped, a user's
        ``hseg_*`` key refused: :func:`hseg.chunking.schema.source_metadata`). Re-adding a document is an upsert.

        Example:
            >>> vs = Chroma("docs", embedding_function=emb,  # doctest: +SKIP
            ...             collection_configuration={"hnsw": {"space": "cosine"}})
            >>> splitter = HierarchicalSegmentTextSplitter(encoder=emb)  # doctest: +SKIP
            >>> ids = splitter.add_to_vectorstore(vs, docs)  # doctest: +SKIP
        """
        from hseg.store import HierarchicalStore

        if not isinstance(store, HierarchicalStore):
            collection = getattr(store, "_collection", None)
            if collection is None:
                raise ValueError(
                    f"store must be a HierarchicalStore or a langchain_chroma.Chroma, got {type(store).__name__}")
            store = HierarchicalStore.from_collection(collection, encoder=self.encoder)
        pairs = self.chunk_joined(documents)
        store.add([ch for _, ch in pairs], [joined.metadata for joined, _ in pairs])
        return [c.id for _, ch in pairs for c in ch.clusters]


def _metadatas(metadatas: Sequence[Mapping[str, Any] | None] | None, n: int) -> list[Mapping[str, Any] | None]:
    if metadatas is None:
        return [None] * n
    metas = list(metadatas)
    if len(metas) != n:
        raise ValueError(f"metadatas: got {len(metas)} for {n} texts")
    return metas
