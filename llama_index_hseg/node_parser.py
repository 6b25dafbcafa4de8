"""LlamaIndex node parser: hierarchical segmentation → cluster (parent) and segment (child) nodes.

A thin translation of :class:`hseg.chunking.chunker.HierarchicalChunker` output into ``TextNode``s. The
node ids, texts, embeddings and ``hseg_*`` metadata are exactly the records that
:func:`hseg.chunking.records.records_for` builds (the keys of :data:`hseg.chunking.schema.METADATA_KEYS`, as on the
LangChain splitter's Documents), so a ``ChromaVectorStore`` collection filled with these nodes is
searchable by :class:`hseg.store.HierarchicalStore` (and by our retriever) like one filled by the
core store.

Page Documents (``SimpleDirectoryReader``'s PDF pages: ``file_path`` and ``page_label``; LangChain's
``source`` and ``page``): consecutive pages of one source are joined into one text before chunking (the
``pages`` field, :func:`hseg.text.pages.join_documents`), and every node carries the pages it spans
(``hseg_page_start``/``hseg_page_end``) and LlamaIndex's own ``page_label`` (its first page). The nodes'
SOURCE is the joined document, whose id is the first page's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import typing
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.bridge.pydantic import Field, PrivateAttr, create_model, field_serializer, model_validator
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload
from llama_index.core.node_parser import NodeParser
from llama_index.core.node_parser.node_utils import default_id_func
from llama_index.core.schema import (
    BaseNode,
    Document,
    MetadataMode,
    NodeRelationship,
    RelatedNodeInfo,
    TextNode,
    TransformComponent,
)

from hseg import __version__ as HSEG_VERSION
from hseg.chunking import (
    CLUSTER,
    CLUSTER_ID_KEY,
    ENCODER_KEY,
    END_KEY,
    LEVEL_KEY,
    NEXT_ID_KEY,
    PREV_ID_KEY,
    SEGMENT,
    SEGMENT_IDS_KEY,
    START_KEY,
    TOKENS_KEY,
    ChunkerConfig,
    Chunking,
    Cluster,
    HierarchicalChunker,
    Segment,
    describe,
    encode_segment_ids,
    hidden_from_model,
    listed_segment_ids,
    mean_vector,
    page_range,
    records_for,
)
from hseg.encoders import DEFAULT_MODEL, as_encoder, l2_normalize
from hseg.text import DEFAULT_PAGE_MODE, PAGE_MODES, JoinedDocument, join_documents, loader_page_key, source_name

# one lock for all parsers: building a chunker loads a model, do it once even under asyncio.to_thread
_BUILD_LOCK = threading.Lock()


def _chunker_fields() -> dict[str, Any]:
    """Pydantic fields for the chunker settings, derived from :class:`hseg.chunking.config.ChunkerConfig`
    (names, types, defaults, descriptions), except ``encoder``, which the parser splits in two."""
    hints = typing.get_type_hints(ChunkerConfig)
    return {f.name: (hints[f.name], Field(default=f.default, description=f.metadata["doc"]))
            for f in dataclasses.fields(ChunkerConfig) if f.name != "encoder"}


# a base class holding one field per chunker setting: declared once, in hseg.chunking.config
if typing.TYPE_CHECKING:  # a class made at run time is no type to mypy; the fields are checked by pydantic
    _ChunkerSettings = NodeParser
else:
    _ChunkerSettings = create_model("_ChunkerSettings", __base__=NodeParser, **_chunker_fields())


def _info(node: TextNode) -> RelatedNodeInfo:
    # like node.as_related_node_info() but without a copy of the metadata: every CHILD entry is
    # serialised again into each vector-store record, so a cluster record would carry its
    # segments' metadata once per segment
    return RelatedNodeInfo(node_id=node.node_id, node_type=node.get_type(), hash=node.hash)


def _merge_keys(keys: Sequence[str], extra: Sequence[str]) -> list[str]:
    return list(keys) + [k for k in extra if k not in keys]


class HierarchicalSegmentNodeParser(_ChunkerSettings):
    """Hierarchical segmentation (Nguyen et al. 2025) as a LlamaIndex node parser.

    For each document it emits, in document order, one **cluster** node (the parent chunk) followed
    by its **segment** nodes. Every node has a deterministic ``id_`` (the hseg id), absolute
    ``start_char_idx``/``end_char_idx``, ``hseg_*`` metadata (excluded from embed and LLM content),
    the document metadata flattened and checked as ``store.add`` does (a value Chroma would store altered
    is refused, and so is a user's ``hseg_*`` key), and its ``embedding`` already set: the segment vector, or the
    mean-pooled cluster vector. Relationships: SOURCE on all; a cluster has CHILD (its segments)
    and PREVIOUS/NEXT (neighbouring clusters); a segment has PARENT (its cluster) and PREVIOUS/NEXT
    (neighbouring segments).

    The chunker settings are the :class:`hseg.chunking.chunker.HierarchicalChunker` arguments under the same
    names. The encoder is a model name (``encoder_name``) or any object ``hseg.encoders.as_encoder``
    accepts, passed as ``encoder`` (a LlamaIndex ``BaseEmbedding`` works): the object is left out of
    dumps, and ``encoder_name`` is set to its name so IngestionPipeline cache keys still tell
    models apart. Offsets are into the parsed node's text (the ``Document.text``). With
    ``structure="auto"`` a document whose ``file_path``/``file_name``/``source`` metadata ends in
    ``.txt`` is plain text, every other one markdown (``hseg_heading_path`` names a node's headings;
    :func:`hseg.chunking.schema.heading_path` decodes it).

    Example:
        >>> from llama_index.core import Document  # doctest: +SKIP
        >>> parser = HierarchicalSegmentNodeParser(target_tokens=256)  # doctest: +SKIP
        >>> nodes = parser.get_nodes_from_documents([Document(text=text, id_="report")])  # doctest: +SKIP
        >>> [n.metadata["hseg_level"] for n in nodes][:3]  # doctest: +SKIP
        ['cluster', 'segment', 'segment']
    """

    encoder_name: str = Field(default=DEFAULT_MODEL, description="Sentence-embedding model (name of `encoder`).")
    encoder: Any = Field(
        default=None, exclude=True, description="Optional encoder object; overrides encoder_name (not serialised)."
    )
    include_segments: bool = Field(default=True, description="Emit segment nodes (needed for retrieval).")
    pages: str = Field(default=DEFAULT_PAGE_MODE, description=(
        "Page Documents of one source: 'clean' joins them, dropping running headers/footers and rejoining "
        "hyphenated words; 'exact' joins them as they are; 'separate' chunks each page alone."))
    hseg_version: str = Field(default=HSEG_VERSION, description="hseg version (part of the cache key).")

    _chunker: HierarchicalChunker | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "HierarchicalSegmentNodeParser"

    @classmethod
    def from_defaults(
        cls,
        encoder: Any = None,
        *,
        embed_model: Any = None,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> HierarchicalSegmentNodeParser:
        """The constructor, with ``embed_model`` as a LlamaIndex-style alias of ``encoder``.

        Args:
            encoder: the sentence encoder (a name, an hseg encoder, a ``BaseEmbedding``, ...).
            embed_model: LlamaIndex's name for ``encoder``.
            callback_manager: LlamaIndex's callback manager (default: an empty one).
            **kwargs: the parser's fields (the chunker settings, ...).

        Returns:
            The parser.

        Raises:
            ValueError: both ``encoder`` and ``embed_model``, or a setting out of range.
        """
        if encoder is not None and embed_model is not None:
            raise ValueError("give encoder or embed_model, not both")
        kwargs.setdefault("callback_manager", callback_manager or CallbackManager([]))
        return cls(encoder=encoder if encoder is not None else embed_model, **kwargs)

    # ------------------------------------------------------------------ validation, serialisation
    @model_validator(mode="before")
    @classmethod
    def _encoder_to_name(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        enc = data.get("encoder")
        if isinstance(enc, str):  # a model name is just the serialisable field
            data["encoder_name"], data["encoder"] = enc, None
        elif enc is not None:
            data["encoder_name"] = str(as_encoder(enc).name)
        return data

    @model_validator(mode="after")
    def _check_settings(self) -> HierarchicalSegmentNodeParser:
        _ = self.chunker_config  # fail at construction, not at the first document (pure: loads nothing)
        if self.pages not in PAGE_MODES:
            raise ValueError(f"pages must be one of {PAGE_MODES}, got {self.pages!r}")
        return self

    @field_serializer("segmenter", "tokenizer")
    def _serialize_object(self, value: Any) -> Any:
        return describe(value)

    @property
    def chunker_config(self) -> ChunkerConfig:
        """The settings as a validated :class:`hseg.chunking.config.ChunkerConfig`."""
        encoder = self.encoder if self.encoder is not None else self.encoder_name
        return ChunkerConfig(encoder=encoder, **{n: getattr(self, n) for n in ChunkerConfig.field_names()
                                                  if n != "encoder"})

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in type(self).model_fields:
            self._chunker = None  # settings changed: rebuild on next use

    def __getstate__(self) -> dict[str, Any]:
        # the chunker (a loaded model) is rebuilt from the public fields after unpickling anyway
        # (BaseComponent.__setstate__ re-runs __init__), so do not pay for pickling it
        chunker, self._chunker = self._chunker, None
        try:
            return super().__getstate__()
        finally:
            self._chunker = chunker

    # ------------------------------------------------------------------ the chunker
    @property
    def chunker(self) -> HierarchicalChunker:
        """The :class:`HierarchicalChunker`, built (and its model loaded) on first use."""
        if self._chunker is None:
            with _BUILD_LOCK:
                if self._chunker is None:
                    self._chunker = HierarchicalChunker(self.chunker_config)
        return self._chunker

    @property
    def hseg_encoder(self) -> Any:
        """The encoder that embeds the segments; queries must be embedded with it too."""
        return self.chunker.encoder

    # ------------------------------------------------------------------ parsing
    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        # one chunk_many call: sentences of all documents share encoder batches. Progress bars
        # follow the `show_progress` field (the chunker is shared between calls, so no per-call flag)
        texts = [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
        joined = join_documents([(t, n.metadata) for t, n in zip(texts, nodes)], self.pages)
        chunkings = self.chunker.chunk_many([j.text for j in joined], [nodes[j.indices[0]].node_id for j in joined],
                                            sources=[source_name(j.metadata) for j in joined],
                                            source_maps=[j.source_map for j in joined])
        return [out for j, ch in zip(joined, chunkings) for out in self._nodes_for(_source(nodes, j), ch)]

    async def _aparse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        # the encoder is torch work: keep it off the event loop
        return await asyncio.to_thread(self._parse_nodes, nodes, show_progress, **kwargs)

    # The base class post-processes nodes (re-finds offsets with str.find, chains PREVIOUS/NEXT
    # across both levels, merges metadata): wrong for two levels, where a cluster and its segments
    # cover the same text and PREVIOUS/NEXT must link nodes of one level. _parse_nodes already does
    # the metadata merge, so these keep only the callback event.
    def get_nodes_from_documents(
        self, documents: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        with self.callback_manager.event(CBEventType.NODE_PARSING, payload={EventPayload.DOCUMENTS: documents}) as ev:
            nodes = self._parse_nodes(documents, show_progress=show_progress, **kwargs)
            ev.on_end({EventPayload.NODES: nodes})
        return nodes

    async def aget_nodes_from_documents(
        self, documents: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        with self.callback_manager.event(CBEventType.NODE_PARSING, payload={EventPayload.DOCUMENTS: documents}) as ev:
            nodes = await self._aparse_nodes(documents, show_progress=show_progress, **kwargs)
            ev.on_end({EventPayload.NODES: nodes})
        return nodes

    def _nodes_for(self, doc: BaseNode, chunking: Chunking) -> list[TextNode]:
        # the store's records, user metadata included, so the core search reads these nodes, and metadata
        # that store.add refuses (NaN, ints beyond 64 bits, a datetime, a user's hseg_* key) is refused here
        # too, before ChromaVectorStore would store it altered (NaN as '', 2**63 as a float, a datetime as text)
        records = records_for(chunking, doc.metadata if self.include_metadata else None)
        if not self.include_segments:
            records = [r for r in records if r.metadata[LEVEL_KEY] == CLUSTER]
        ids = {r.id: r.id for r in records}
        if self.id_func is not default_id_func:  # a user-chosen id scheme; hseg ids follow it
            ids = {r.id: self.id_func(i, doc) for i, r in enumerate(records)}
        # computed once per document: it hashes the whole text (node_utils.build_nodes_from_splits)
        source = doc.source_node or doc.as_related_node_info()
        nodes: dict[str, TextNode] = {}
        for r in records:
            meta = _remap_ids(r.metadata, ids)
            meta.update(loader_page_key("page_label", page_range(meta)))  # LlamaIndex's own key, as PDFReader's
            hidden = hidden_from_model(meta)  # the core's one rule of what a model sees
            nodes[r.id] = TextNode(
                id_=ids[r.id],
                text=r.document,
                embedding=r.embedding.tolist(),
                metadata=meta,
                start_char_idx=int(meta[START_KEY]),
                end_char_idx=int(meta[END_KEY]),
                excluded_embed_metadata_keys=_merge_keys(doc.excluded_embed_metadata_keys, hidden),
                excluded_llm_metadata_keys=_merge_keys(doc.excluded_llm_metadata_keys, hidden),
                metadata_template=doc.metadata_template,
                metadata_separator=doc.metadata_separator,
                text_template=getattr(doc, "text_template", TextNode.model_fields["text_template"].default),
                relationships={NodeRelationship.SOURCE: source},
            )
        self._link(chunking, nodes)
        return list(nodes.values())

    def _link(self, chunking: Chunking, nodes: dict[str, TextNode]) -> None:
        infos = {rid: _info(n) for rid, n in nodes.items()}
        levels: list[Sequence[Segment | Cluster]] = [chunking.clusters]
        if self.include_segments:
            levels.append(chunking.segments)
        for level in levels:
            for i, unit in enumerate(level):
                rel = nodes[unit.id].relationships
                if self.include_prev_next_rel and i > 0:
                    rel[NodeRelationship.PREVIOUS] = infos[level[i - 1].id]
                if self.include_prev_next_rel and i + 1 < len(level):
                    rel[NodeRelationship.NEXT] = infos[level[i + 1].id]
        if self.include_segments:
            for cluster in chunking.clusters:
                nodes[cluster.id].relationships[NodeRelationship.CHILD] = [infos[s.id] for s in cluster.segments]
                for s in cluster.segments:
                    nodes[s.id].relationships[NodeRelationship.PARENT] = infos[cluster.id]


def _source(nodes: Sequence[BaseNode], joined: JoinedDocument) -> BaseNode:
    """The document the nodes of ``joined`` come from: the one given, or its pages joined (a
    ``Document`` of the joined text and metadata under the first page's id and settings)."""
    first = nodes[joined.indices[0]]
    if joined.source_map is None:
        return first
    return Document(id_=first.node_id, text=joined.text, metadata=joined.metadata,
                    excluded_embed_metadata_keys=list(first.excluded_embed_metadata_keys),
                    excluded_llm_metadata_keys=list(first.excluded_llm_metadata_keys),
                    metadata_template=first.metadata_template, metadata_separator=first.metadata_separator,
                    text_template=getattr(first, "text_template", TextNode.model_fields["text_template"].default))


def _remap_ids(meta: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """The record metadata with hseg ids replaced by node ids (identity unless id_func is set)."""
    if all(k == v for k, v in ids.items()):
        return dict(meta)
    out = {**meta, CLUSTER_ID_KEY: ids.get(meta[CLUSTER_ID_KEY], meta[CLUSTER_ID_KEY])}
    for key in (PREV_ID_KEY, NEXT_ID_KEY):  # the neighbour term of unit="auto" looks these ids up
        if meta.get(key):
            out[key] = ids.get(meta[key], meta[key])
    if SEGMENT_IDS_KEY in meta:
        out[SEGMENT_IDS_KEY] = encode_segment_ids([ids.get(s, s) for s in listed_segment_ids(meta)])
    return out


class ClusterVectorizer(TransformComponent):
    """Resets each cluster node's embedding to the normalised token-weighted mean of its segment nodes' embeddings.

    An embedding model in an ``IngestionPipeline`` overwrites every node's embedding, including the
    mean-pooled cluster vector, with an embedding of the cluster's whole text, which the model
    truncates at its input limit (256 word pieces for all-MiniLM-L6-v2), so a long cluster would be
    represented by its opening only. Put this transformation after it. Clusters whose
    segments are not in the same batch (or not yet embedded) are left as they are.

    The embedding model replaced the parser's vectors, so the parser's ``hseg_encoder`` no longer
    names their model: this transformation sets it to ``encoder_name`` (the embedding model's name,
    which hseg then checks against the queries' encoder) or, without one, removes it (unknown).

    Example:
        >>> pipeline = IngestionPipeline(transformations=[  # doctest: +SKIP
        ...     HierarchicalSegmentNodeParser(), embed_model, ClusterVectorizer(encoder_name=embed_model.model_name)])
    """

    encoder_name: str | None = Field(
        default=None, description="Name of the embedding model before this step, recorded as hseg_encoder.")

    @classmethod
    def class_name(cls) -> str:
        return "ClusterVectorizer"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for n in nodes:
            if n.metadata.get(LEVEL_KEY) in (CLUSTER, SEGMENT):
                if self.encoder_name:
                    n.metadata[ENCODER_KEY] = self.encoder_name
                else:
                    n.metadata.pop(ENCODER_KEY, None)
        members: dict[str, list[tuple[Any, int]]] = {}
        for n in nodes:
            if n.metadata.get(LEVEL_KEY) == SEGMENT and n.embedding is not None:
                weight = n.metadata.get(TOKENS_KEY, 1)
                members.setdefault(n.metadata[CLUSTER_ID_KEY], []).append((n.embedding, weight))
        for n in nodes:
            if n.metadata.get(LEVEL_KEY) != CLUSTER:
                continue
            rows = members.get(n.metadata.get(CLUSTER_ID_KEY, ""))
            if rows:
                # unit rows first: the core's cluster vector is the token-weighted mean of unit segment vectors
                vectors = l2_normalize(np.asarray([v for v, _ in rows], dtype=np.float32))
                n.embedding = mean_vector(vectors, np.asarray([t for _, t in rows])).tolist()
        return nodes
