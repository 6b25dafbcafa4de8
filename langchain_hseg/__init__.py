"""LangChain components for hseg: hierarchical segmentation chunking and max-score parent retrieval.

Example:
    >>> from langchain_hseg import HierarchicalSegmentRetriever, HierarchicalSegmentTextSplitter  # doctest: +SKIP
    >>> splitter = HierarchicalSegmentTextSplitter(target_tokens=256)  # doctest: +SKIP
    >>> retriever = HierarchicalSegmentRetriever.from_documents(  # doctest: +SKIP
    ...     docs, splitter=splitter, path="./chroma")
    >>> retriever.invoke("what causes tides?", k=2)  # doctest: +SKIP
"""

from __future__ import annotations

try:
    import langchain_core  # noqa: F401
    import langchain_text_splitters  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError('langchain_hseg needs the "langchain" extra: pip install -e ".[langchain]" in the hseg '
                      'clone') from exc

from langchain_hseg.retriever import HierarchicalSegmentRetriever, hit_to_document
from langchain_hseg.text_splitter import HierarchicalSegmentTextSplitter, cluster_documents, segment_documents
from langchain_hseg.tools import hseg_tools

__all__ = [
    "HierarchicalSegmentRetriever",
    "HierarchicalSegmentTextSplitter",
    "cluster_documents",
    "hit_to_document",
    "hseg_tools",
    "segment_documents",
]
