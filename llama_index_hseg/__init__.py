"""LlamaIndex components for hierarchical segmentation chunking (hseg).

- :class:`HierarchicalSegmentNodeParser`: documents → cluster (parent) and segment (child) nodes
  with relationships, absolute offsets and embeddings already set.
- :class:`ClusterVectorizer`: restores mean-pooled cluster vectors after an embedding model.
- :class:`HierarchicalSegmentVectorStore`: hseg's store as a LlamaIndex vector store, so that an
  ``IngestionPipeline`` writes through hseg's write path (turns, lock, unit-index and lexical rows,
  a document's old version replaced as one unit).
- :class:`HierarchicalSegmentRetriever`: max-score parent retrieval over that store (or a
  ``ChromaVectorStore``).
- :func:`hseg_tools`: search, read, expand, lexical_search and list_documents as LlamaIndex
  ``FunctionTool`` objects for an agent, every result with exact spans (:mod:`hseg.tools`).

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
