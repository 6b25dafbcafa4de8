"""Search results as ``(id, metadata)``: the one description of a hit that every front end shares.

:func:`result_for` turns a :class:`hseg.retrieval.parents.SearchHit` into the id and metadata that the
LangChain retriever's ``Document`` and the LlamaIndex retriever's ``TextNode`` carry unchanged:
the user's metadata as stored plus the ``"result"`` keys of :data:`hseg.chunking.schema.METADATA_KEYS`.

Ids: a whole parent (``unit="cluster"``) is its cluster id; a passage (``unit="segment"`` or
``"auto"``) is ``chunk_id(doc_id, "passage", start, end)``, also when it is one segment or a whole
cluster, so a result's id depends only on what was returned and how (its unit and span).
"""

from __future__ import annotations

from typing import Any

from hseg.chunking.chunks import chunk_id
from hseg.chunking.schema import BOOKKEEPING_KEYS, SEGMENT_IDS_KEY, ResultMeta, encode_segment_ids, user_metadata
from hseg.retrieval.hits import SearchHit

#: keys a LlamaIndex ``ChromaVectorStore`` writes next to a node's metadata (the serialised node and
#: its document id under three names); storage, not the user's metadata, so results leave them out
LLAMA_INDEX_STORAGE_KEYS = ("_node_content", "_node_type", "document_id", "doc_id", "ref_doc_id")


def result_id(hit: SearchHit) -> str:
    """The id of a result: the cluster id of a whole parent, else the stable passage id.

    Example:
        >>> hit = store.search("tides", k=1, unit="auto", budget_tokens=200)[0]  # doctest: +SKIP
        >>> result_id(hit)  # doctest: +SKIP
        'pas-3f0d9c...'
    """
    if hit.unit == "cluster":
        return hit.cluster_id
    return chunk_id(hit.doc_id, "passage", int(hit.start), int(hit.end))


def result_for(hit: SearchHit) -> tuple[str, dict[str, Any]]:
    """``(id, metadata)`` of one search hit, as both adapters' retrievers return it.

    ``metadata`` is the stored user metadata (the ``hseg_*`` keys, ``hseg index``'s
    :data:`~hseg.chunking.schema.BOOKKEEPING_KEYS` and a LlamaIndex vector store's
    :data:`LLAMA_INDEX_STORAGE_KEYS` left out) plus exactly ``metadata_keys("result")``:
    ``hseg_score`` (the hit's score), its span and size, the record that matched with its text,
    ``hseg_segment_ids`` and ``hseg_heading_path`` (JSON lists), and ``hseg_page_start``/``hseg_page_end``
    for a document chunked with a source map. Raises ``ValueError`` naming ``hit`` when it is not a
    ``SearchHit`` or its matched span lies outside its text.

    Example:
        >>> rid, meta = result_for(store.search("what causes tides?", k=1)[0])  # doctest: +SKIP
        >>> rid == meta["hseg_cluster_id"], meta["hseg_score"], meta["hseg_matched_text"][:30]  # doctest: +SKIP
        (True, 0.61, 'Tides are caused by the gravit')
    """
    if not isinstance(hit, SearchHit):
        raise ValueError(f"hit must be an hseg.retrieval.parents.SearchHit, got {type(hit).__name__}")
    start, end = int(hit.start), int(hit.end)
    m_start, m_end = int(hit.matched_start), int(hit.matched_end)
    if not start <= m_start <= m_end <= end:
        raise ValueError(f"hit: matched span [{m_start}, {m_end}) of {hit.matched_id!r} is outside the hit's "
                         f"span [{start}, {end})")
    stored = hit.metadata or {}
    user = {k: v for k, v in user_metadata(stored).items() if k not in BOOKKEEPING_KEYS}
    if "_node_content" in stored:  # written by ChromaVectorStore: its storage keys are not the user's
        user = {k: v for k, v in user.items() if k not in LLAMA_INDEX_STORAGE_KEYS}
    if hit.segment_ids:
        segment_ids = encode_segment_ids(hit.segment_ids)
    elif SEGMENT_IDS_KEY in stored:  # a whole parent: its cluster record lists them
        segment_ids = str(stored[SEGMENT_IDS_KEY])
    else:
        raise ValueError(f"hit: {hit.cluster_id!r} has no segment_ids and its metadata no {SEGMENT_IDS_KEY}")
    result = ResultMeta(float(hit.score), hit.unit, hit.doc_id, hit.cluster_id, start, end, int(hit.token_count),
                        segment_ids, hit.matched_id, hit.matched_level, m_start, m_end,
                        hit.text[m_start - start : m_end - start], hit.heading_path, hit.pages)
    return result_id(hit), {**user, **result.metadata()}
