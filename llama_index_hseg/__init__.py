"""LlamaIndex components for hierarchical segmentation chunking (hseg).

- :class:`HierarchicalSegmentNodeParser`: documents → cluster (parent) and segment (child) nodes
  with relationships, absolute offsets and embeddings already set.
- :class:`ClusterVectorizer`: restores mean-pooled cluster vectors after an embedding model.
- :class:`HierarchicalSegmentRetriever`: max-score parent retrieval over a ``ChromaVectorStore``.

Example:
    >>> import chromadb  # doctest: +SKIP
    >>> from llama_index.core.ingestion import IngestionPipeline  # doctest: +SKIP
    >>> from llama_index.vector_stores.chroma import ChromaVectorStore  # doctest: +SKIP
    >>> col = chromadb.PersistentClient("./db").get_or_create_collection(  # doctest: +SKIP
    ...     "docs", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
    >>> parser = HierarchicalSegmentNodeParser()  # doctest: +SKIP
    >>> vs = ChromaVectorStore(chroma_collection=col)  # doctest: +SKIP
    >>> IngestionPipeline(transformations=[parser], vector_store=vs).run(documents=docs)  # doctest: +SKIP
    >>> HierarchicalSegmentRetriever(vs, encoder=parser.hseg_encoder).retrieve("question")  # doctest: +SKIP
"""

from llama_index_hseg.node_parser import ClusterVectorizer, HierarchicalSegmentNodeParser
from llama_index_hseg.retriever import HierarchicalSegmentRetriever

__all__ = ["HierarchicalSegmentNodeParser", "ClusterVectorizer", "HierarchicalSegmentRetriever"]
