"""Multi-vector Chroma store for hierarchical chunks, with max-score parent retrieval.

How and why: docs/design.md, ``hseg.store``.

Example:
    >>> store = HierarchicalStore("docs", path="./chroma")  # doctest: +SKIP
    >>> store.add(HierarchicalChunker().chunk(text, doc_id="report"))  # doctest: +SKIP
    >>> hit = store.search("what causes tides?", k=3)[0]  # doctest: +SKIP
    >>> text[hit.start:hit.end] == hit.text  # doctest: +SKIP
    True
"""

from __future__ import annotations

from hseg.chunking.records import Record, flatten_metadata, records_for
from hseg.chunking.schema import SCHEMA_VERSION
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.settings import MODES, UNITS, SearchSettings
from hseg.store.backends import server_address
from hseg.store.connection import DEFAULT_HNSW, check_schema, collection_space
from hseg.store.listing import DocumentPage, StoredDocument
from hseg.store.lock import WriterBusyError
from hseg.store.maintenance import Expected
from hseg.store.paging import where_in
from hseg.store.store import HierarchicalStore

#: the name of :class:`SearchHit` before 0.4 (it was never only a parent)
ParentHit = SearchHit

__all__ = [
    "SCHEMA_VERSION",
    "DEFAULT_HNSW",
    "HierarchicalStore",
    "check_schema",
    "server_address",
    "SearchHit",
    "ParentHit",
    "SearchSettings",
    "UNITS",
    "Record",
    "MODES",
    "flatten_metadata",
    "records_for",
    "WriterBusyError",
    "Expected",
    "collection_space",
    "where_in",
    "DocumentPage",
    "StoredDocument",
]
