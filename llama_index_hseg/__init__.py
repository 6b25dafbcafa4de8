"""LlamaIndex components for hierarchical segmentation chunking (hseg).

- :class:`HierarchicalSegmentNodeParser`: documents → cluster (parent) and segment (child) nodes.
- :class:`ClusterVectorizer`: restores mean-pooled cluster vectors after an embedding model.
- :class:`HierarchicalSegmentVectorStore`: hseg's store as a vector store, written through hseg's write path.
- :class:`HierarchicalSegmentRetriever`: max-score parent retrieval over it (or a ``ChromaVectorStore``).
- :func:`hseg_tools`: hseg's retrieval tools (:mod:`hseg.tools`) as ``FunctionTool`` objects for an agent.

Example:
    >>> from llama_index.core.ingestion import IngestionPipeline  # doctest: +SKIP
    >>> parser = HierarchicalSegmentNodeParser()  # doctest: +SKIP
    >>> vs = HierarchicalSegmentVectorStore(path="./db", encoder=parser.hseg_encoder)  # doctest: +SKIP
    >>> IngestionPipeline(transformations=[parser], vector_store=vs).run(documents=docs)  # doctest: +SKIP
    >>> HierarchicalSegmentRetriever(vs).retrieve("question")  # doctest: +SKIP
"""

from llama_index_hseg.node_parser import ClusterVectorizer, HierarchicalSegmentNodeParser
from llama_index_hseg.retriever import HierarchicalSegmentRetriever
from llama_index_hseg.tools import hseg_tools
from llama_index_hseg.vector_store import HierarchicalSegmentVectorStore

__all__ = ["HierarchicalSegmentNodeParser", "ClusterVectorizer", "HierarchicalSegmentVectorStore",
           "HierarchicalSegmentRetriever", "hseg_tools"]
