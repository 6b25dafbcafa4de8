"""Ingestion, the ``hseg index`` job: the whole job in one call (:func:`index_paths`, :mod:`~hseg.ingest.job`),
finding and reading files (:mod:`~hseg.ingest.files`; PDF, DOCX, PPTX and HTML through :mod:`hseg.convert`),
the settings fingerprint (:mod:`~hseg.ingest.fingerprint`), the batch loop (:mod:`~hseg.ingest.run`),
pruning (:mod:`~hseg.ingest.prune`) and the Ray Data job (:func:`index_dataset`; Ray itself is imported
when it runs).

Example:
    >>> summary = index_paths(["docs/", "notes/*.md"], HierarchicalStore(path="db"))  # doctest: +SKIP
    >>> files, problems = discover(["docs/", "notes/*.md"])  # doctest: +SKIP
    >>> summary = ingest(files, HierarchicalChunker(), HierarchicalStore(path="db"))  # doctest: +SKIP
"""

from hseg.ingest.files import (
    SUPPORTED_SUFFIXES,
    TEXT_SUFFIXES,
    SourceFile,
    discover,
    read_files,
    read_source,
    read_sources,
    read_text_file,
)
from hseg.ingest.fingerprint import chunk_settings, segmenter_config, settings_key, token_counter_name
from hseg.ingest.job import Found, IndexSummary, find, index_paths
from hseg.ingest.lazy import LazyChunker
from hseg.ingest.prune import prune, prune_scope, stale_documents, stored_sources
from hseg.ingest.ray import index_dataset
from hseg.ingest.relocation import StoreMovedError
from hseg.ingest.run import IngestInterrupted, IngestSummary, IngestWriteError, ingest, ingest_batch
from hseg.store.completeness import is_complete

__all__ = [
    "SUPPORTED_SUFFIXES", "SourceFile", "IngestSummary", "IngestWriteError", "IngestInterrupted", "discover",
    "read_text_file", "read_files", "read_source", "read_sources", "TEXT_SUFFIXES",
    "chunk_settings", "token_counter_name", "segmenter_config", "is_complete", "ingest", "ingest_batch",
    "prune_scope", "stored_sources", "stale_documents", "prune", "Found", "IndexSummary", "find", "index_paths",
    "settings_key", "LazyChunker", "index_dataset", "StoreMovedError",
]
