"""Multi-vector Chroma store for hierarchical chunks, with max-score parent retrieval.

Each cluster (parent) is written as one **cluster record** (the mean-pooled cluster vector; its
``document`` is the parent text, stored once) plus one **segment record** per segment (segment
vector; ``document`` = segment text). :meth:`HierarchicalStore.search` ranks parents by the max
cosine over their vectors (paper eq. 2), see :mod:`hseg.retrieval.parents`.

The records are built by :mod:`hseg.chunking.records`, their metadata keys declared in :mod:`hseg.chunking.schema`.

The collection's own metadata holds ``hseg_schema`` and ``hseg_encoder`` (the encoder name).

Beside it lives the **unit index** (:mod:`hseg.retrieval.unit_vectors`, kept by :mod:`hseg.store.unit_index`), a
companion collection with one
vector per segment whose cosine with a query is the segment's ``unit="auto"`` score; :meth:`add`
and :meth:`delete` keep it in step (its records are written after, and deleted before, the records
they point to, so it never names a record the collection lacks).

Beside both lives the **lexical index** (:mod:`hseg.store.lexical`): BM25 over the segments in
SQLite FTS5, a file in the Chroma folder of an embedded store (kept in step by every write, repaired
after a cut-short one) or a per-client cache derived from a server's collection.

Both are derived indexes (:mod:`hseg.store.indexes`): rows the collection's records determine,
written in one order around every write and rebuilt from the records, behind one contract.

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
from hseg.store.lock import WriterBusyError
from hseg.store.maintenance import Expected
from hseg.store.reading import where_in
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
]
