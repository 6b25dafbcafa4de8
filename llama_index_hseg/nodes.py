"""A search hit as a LlamaIndex node: the one translation the retriever
(:class:`~llama_index_hseg.HierarchicalSegmentRetriever`) and the vector store's query
(:meth:`~llama_index_hseg.HierarchicalSegmentVectorStore.query`) share, so both give the same nodes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from hseg.chunking import hidden_from_model
from hseg.retrieval import SearchHit, result_for
from hseg.text import loader_page_key

#: formatting fields of the stored node that the returned parent keeps
_FORMAT_FIELDS = ("excluded_embed_metadata_keys", "excluded_llm_metadata_keys", "metadata_template",
                  "metadata_separator", "text_template")


def hit_to_node(hit: SearchHit) -> TextNode:
    """A parent (or passage) hit as a TextNode: id and metadata from :func:`hseg.retrieval.results.result_for`
    (as on LangChain's Documents), formatting fields of the stored node, SOURCE the document.

    Args:
        hit: a hit of :meth:`hseg.store.HierarchicalStore.search`.

    Returns:
        The node, with the hit's exact span (``start_char_idx``/``end_char_idx``).
    """
    node_id, meta = result_for(hit)
    stored = _stored_node_fields(hit.metadata)
    # the core's one rule of what a model sees: ids, offsets and scores are for code, not prompts
    hidden = hidden_from_model(meta)
    for key in ("excluded_embed_metadata_keys", "excluded_llm_metadata_keys"):
        kept = list(stored.get(key) or [])
        stored[key] = kept + [k for k in hidden if k not in kept]
    ref = hit.metadata.get("ref_doc_id") if "_node_content" in hit.metadata else None  # a ChromaVectorStore's
    if not ref or ref == "None":  # ChromaVectorStore writes "None" for a node without SOURCE
        ref = hit.doc_id
    return TextNode(
        id_=node_id,
        text=hit.text,
        metadata={**meta, **loader_page_key("page_label", hit.pages)},  # LlamaIndex's own page key too
        start_char_idx=hit.start,
        end_char_idx=hit.end,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=str(ref))},
        **stored,
    )


def _stored_node_fields(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Formatting fields of the node ChromaVectorStore serialised in ``_node_content`` (if any)."""
    raw = meta.get("_node_content")
    if not isinstance(raw, str):
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return {k: data[k] for k in _FORMAT_FIELDS if data.get(k) is not None}
