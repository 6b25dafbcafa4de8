"""What a store holds, as ``hseg stats`` reports it: counts and sizes of the records, which
documents are whole (their vectors included), the unit index's coverage, and the encoders the
records name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hseg.chunking.schema import (
    CLUSTER_INDEX_KEY,
    DOC_ID_KEY,
    ENCODER_KEY,
    END_KEY,
    INDEXED_AT_KEY,
    LEVEL_KEY,
    SCHEMA_KEY,
    SEGMENT_IDS_KEY,
    SETTINGS_KEY,
    START_KEY,
    TOKENS_KEY,
)
from hseg.retrieval.unit_vectors import UnitKey
from hseg.store.completeness import completeness
from hseg.store.connection import ServerErrors
from hseg.store.indexed_at import iso_utc
from hseg.store.paging import ids_without_vectors, level_stats, pages
from hseg.store.unit_index import UnitIndex

#: records per ``get`` while reading metadata
_PAGE = 5000

#: what the counts and the completeness rules read of a record's metadata: the rest (user metadata,
#: texts of listed ids, ...) is not kept, so a large store's stats hold a few keys per record
_KEPT = (LEVEL_KEY, DOC_ID_KEY, TOKENS_KEY, CLUSTER_INDEX_KEY, START_KEY, END_KEY, SEGMENT_IDS_KEY)


def collection_stats(collection: Any, unit_index: UnitIndex | None,
                     lexical_of: Callable[[list[str]], Mapping[str, set[str]] | None] | None = None, *,
                     errors: ServerErrors) -> dict[str, Any]:
    """The figures of :meth:`hseg.store.HierarchicalStore.stats` for ``collection`` and its unit
    index, read page by page; the vectors are read too, and a document with a record or unit-index
    record whose vector is missing (two processes that wrote an embedded store at once) is incomplete:
    metadata alone does not make it searchable. ``lexical_of(doc ids)`` gives the segment ids the
    lexical index holds per document, where writers keep one: a document without its rows there
    (written around hseg) is incomplete too. ``errors`` names a lost server (the store's backend's)."""
    by_doc: dict[str, dict[str, dict[str, Any]]] = {}
    metas = []
    encoders: dict[str, int] = {}
    indexed: set[str] = set()
    newest: int | None = None  # the latest hseg_indexed_at: when the store was last written
    with errors("reading the collection"):
        for got in pages(collection, None, ["metadatas"], _PAGE):
            for rid, raw in zip(got["ids"], got["metadatas"]):
                m = {k: raw[k] for k in _KEPT if k in raw} if raw else {}
                if raw and raw.get(ENCODER_KEY) and m.get(LEVEL_KEY) in ("cluster", "segment"):
                    name = str(raw[ENCODER_KEY])
                    encoders[name] = encoders.get(name, 0) + 1
                metas.append(m)
                if DOC_ID_KEY in m:
                    by_doc.setdefault(str(m[DOC_ID_KEY]), {})[rid] = m
                    if raw.get(SETTINGS_KEY):  # written by hseg index, from a file (every write hashes the text)
                        indexed.add(str(m[DOC_ID_KEY]))
                    at = raw.get(INDEXED_AT_KEY)
                    if isinstance(at, int) and (newest is None or at > newest):
                        newest = at
    with errors("reading the collection's vectors"):
        vectorless = ids_without_vectors(collection, [rid for recs in by_doc.values() for rid in recs])
    broken = {doc for doc, recs in by_doc.items() if not vectorless.isdisjoint(recs)}
    units: dict[str, set[str]] | None = None
    unit_vectorless: set[str] = set()
    if unit_index is not None:
        units = {}
        owner: dict[str, str] = {}
        companion = unit_index.existing  # a read: an index nobody created yet is an empty one
        with errors("reading the unit index"):
            for got in ([] if companion is None else pages(companion, None, ["metadatas"], _PAGE)):
                for uid, m in zip(got["ids"], got["metadatas"]):
                    owner[uid] = doc = str((m or {}).get(DOC_ID_KEY))
                    units.setdefault(doc, set()).add(UnitKey.parse(uid).segment_id)
            if companion is not None:
                unit_vectorless = ids_without_vectors(companion, list(owner))
        broken |= {owner[u] for u in unit_vectorless}
    lexical = None if lexical_of is None else lexical_of(list(by_doc))
    meta = collection.metadata or {}
    return {"collection": collection.name, "encoder": meta.get(ENCODER_KEY), "schema": meta.get(SCHEMA_KEY),
            **level_stats(metas), **completeness(by_doc, units, broken, indexed, lexical),
            "records_without_vectors": len(vectorless),
            "unit_records_without_vectors": None if unit_index is None else len(unit_vectorless),
            "record_encoders": encoders, "last_indexed": iso_utc(newest),
            "unit_index_records": None if unit_index is None else unit_index.count()}
