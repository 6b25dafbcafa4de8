"""hseg: hierarchical segmentation chunking for RAG (Nguyen et al. 2025).

Sentences → segments (a segmenter) → clusters of adjacent related segments (maximal cliques of a
relatedness graph) → multi-vector retrieval of clusters on Chroma.

Example:
    >>> from hseg import HierarchicalChunker  # doctest: +SKIP
    >>> chunking = HierarchicalChunker(target_tokens=512).chunk(text, doc_id="a")  # doctest: +SKIP
    >>> for c in chunking.clusters:  # doctest: +SKIP
    ...     print(c.start, c.end, c.token_count, len(c.segments))
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from hseg.chunking.chunks import Chunking, Cluster, Segment
from hseg.errors import (
    ChromaVersionError,
    CliError,
    CollectionNotFoundError,
    DatabaseReadOnlyError,
    DatabaseStorageError,
    EncoderLoadError,
    EncoderMismatchError,
    FormatSupportMissing,
    HsegError,
    IndexOutOfStepError,
    IngestWriteError,
    LexicalIndexStorageError,
    LexicalIndexUnavailable,
    SchemaTooNewError,
    ServerUnreachableError,
    StoreMovedError,
    StoreNotFoundError,
    StoreReplacedError,
    UnreadableDocumentError,
    WriterBusyError,
)
from hseg.text.spans import Span

try:
    __version__ = version("hseg")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0"

#: the public API of hseg is what this face and the package faces (hseg.text, hseg.chunking, hseg.retrieval,
#: hseg.store, hseg.ingest, ...) export; their other modules are private by contract (docs/api.md, "Public API")
__all__ = ["HierarchicalChunker", "HierarchicalStore", "SearchSettings", "Chunking", "Cluster", "Segment", "Span",
           "split_sentences", "__version__",
           # the errors hseg raises on purpose, by kind (hseg.errors)
           "HsegError", "EncoderMismatchError", "SchemaTooNewError", "IndexOutOfStepError", "ServerUnreachableError",
           "DatabaseStorageError", "DatabaseReadOnlyError", "WriterBusyError", "StoreMovedError", "StoreReplacedError",
           "ChromaVersionError", "CollectionNotFoundError", "StoreNotFoundError", "LexicalIndexStorageError",
           "LexicalIndexUnavailable", "EncoderLoadError", "IngestWriteError", "CliError", "FormatSupportMissing",
           "UnreadableDocumentError"]


def __getattr__(name: str) -> Any:
    # the chunker pulls in numpy-heavy modules; keep `import hseg` light for the CLI's --help
    if name == "HierarchicalChunker":
        from hseg.chunking.chunker import HierarchicalChunker

        return HierarchicalChunker
    if name == "split_sentences":
        from hseg.text.sentences import split_sentences

        return split_sentences
    if name == "SearchSettings":
        from hseg.retrieval.settings import SearchSettings

        return SearchSettings
    if name == "HierarchicalStore":
        from hseg.store import HierarchicalStore

        return HierarchicalStore
    raise AttributeError(f"module 'hseg' has no attribute {name!r}")
