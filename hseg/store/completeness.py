"""When a stored document is complete: the record-schema rules ``hseg index`` uses to skip it."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from hseg.chunking.schema import (
    CLUSTER,
    CLUSTER_INDEX_KEY,
    CONTENT_HASH_KEY,
    END_KEY,
    LEVEL_KEY,
    SEGMENT,
    SEGMENT_IDS_KEY,
    SETTINGS_KEY,
    START_KEY,
    listed_segment_ids,
)
from hseg.store.connection import ServerErrors
from hseg.store.paging import ids_without_vectors
from hseg.store.unit_index import UnitIndex


def is_complete(records: Mapping[str, dict[str, Any]], sha: str, settings: str, length: int,
                units: set[str] | None = None, lexical: tuple[set[str], str | None] | None = None, *,
                held: Sequence[set[str]] = ()) -> bool:
    """True if a document's stored records (``{id: metadata}``) are all there and came from this text and settings.

    The cluster records must tile ``[0, length)`` and the segments they list must be exactly the
    segment records present, so a document left half-written by a killed process is not mistaken
    for a complete one. Nor is one still holding records of its previous version (a process killed
    between ``add``'s upserts and its deletes of the old records): they carry another hash or
    settings, or, from another chunking of the same text, a cluster that breaks the tiling or a
    segment no cluster lists. With ``units`` (the segment ids the store's unit index holds for the
    document), the index must hold exactly the document's segments: a process killed after the
    records but before their unit-index records leaves the document incomplete. With ``lexical`` (the
    segment ids and text hash the lexical index holds for it), those must be its segments and hash.
    With ``held`` (for each index derived from the collection, the segment ids it holds rows of for
    the document, written from this text: :meth:`hseg.store.indexes.DerivedIndex.held`), each must
    be exactly its segments.

    Args:
        records: the document's stored records, ``{id: metadata}``.
        sha: the SHA-256 of the text (the ``content_sha256`` every record must carry).
        settings: the settings fingerprint every record must carry (``chunk_settings``).
        length: the length of the text the clusters must tile.
        units: the segment ids the unit index holds for the document, or ``None`` to leave it unchecked.
        lexical: ``(segment ids, text hash)`` the lexical index holds for it, or ``None`` to leave it
            unchecked.
        held: the segment ids each derived index holds for it (from this text); none: unchecked.

    Returns:
        Whether the document is stored whole, from this text and these settings.

    Raises:
        ValueError: a cluster record whose ``hseg_segment_ids`` is not a JSON list of strings (naming the key).
    """
    if not records or any(m.get(CONTENT_HASH_KEY) != sha or m.get(SETTINGS_KEY) != settings
                          for m in records.values()):
        return False
    segments = segment_ids(records)
    return tiled_length(records) == length and (units is None or units == segments) and \
        (lexical is None or lexical == (segments, sha)) and all(h == segments for h in held)


def segment_ids(records: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The ids of the segment records among a document's records (``{id: metadata}``)."""
    return {rid for rid, m in records.items() if m.get(LEVEL_KEY) == SEGMENT}


def tiled_length(records: Mapping[str, Mapping[str, Any]]) -> int | None:
    """The length of text a document's records (``{id: metadata}``) cover when they are whole, else ``None``.

    Whole: its cluster records tile ``[0, end)`` in order, and the segments they list are exactly the
    segment records present.

    Example:
        >>> tiled_length({"c": {"hseg_level": "cluster", "hseg_cluster_index": 0, "hseg_start": 0,
        ...                     "hseg_end": 9, "hseg_segment_ids": '["s"]'}, "s": {"hseg_level": "segment"}})
        9
    """
    clusters = sorted((m for m in records.values() if m.get(LEVEL_KEY) == CLUSTER),
                      key=lambda m: m.get(CLUSTER_INDEX_KEY, -1))
    segments = segment_ids(records)
    pos, listed = 0, []
    for i, c in enumerate(clusters):
        if c.get(CLUSTER_INDEX_KEY) != i or c.get(START_KEY) != pos:
            return None
        end = c.get(END_KEY)
        if not isinstance(end, int):
            return None
        pos = end
        listed += listed_segment_ids(c) if c.get(SEGMENT_IDS_KEY) else []
    if not clusters or len(listed) != len(segments) or set(listed) != segments:
        return None
    return pos


def completeness(records: Mapping[str, Mapping[str, Mapping[str, Any]]], units: Mapping[str, set[str]] | None,
                 vectorless: Collection[str] = (), indexed: Collection[str] = (),
                 lexical: Mapping[str, set[str]] | None = None) -> dict[str, Any]:
    """Whole and partial documents of a store (``records``: ``{doc id: {record id: metadata}}``;
    ``units``: the segment ids its unit index holds per document, ``None`` without one;
    ``vectorless``: the documents with a record or unit-index record whose vector is missing;
    ``indexed``: the documents ``hseg index`` wrote, from files; ``lexical``: the segment ids its
    lexical index holds per document, ``None`` where writers do not keep one), as ``hseg stats``
    reports them. A partial document is one ``hseg index`` would redo. The partial ones by remedy:
    ``documents_incomplete_from_files`` (a re-run of ``hseg index`` on their paths), and of those that
    came from no file, ``documents_unit_rows_only``, which lack nothing but unit-index or lexical rows,
    built again from their records (:meth:`hseg.store.maintenance.Maintenance.repair`, ``hseg repair``),
    ``documents_mixed_versions``, which hold records of two versions of their text (:func:`mixed_versions`:
    only their source says which is current), and ``documents_incomplete_without_path``, which lack
    records or vectors (only their source gives them back).

    Example:
        >>> completeness({}, {})["documents_incomplete"]
        0
    """
    incomplete, unit_rows_only, mixed = [], [], []
    segments = covered = 0
    for doc, recs in records.items():
        seg_ids = segment_ids(recs)
        segments += len(seg_ids)
        held = (units or {}).get(doc, set())
        covered += len(held & seg_ids)
        whole = tiled_length(recs) is not None and doc not in vectorless
        rows_off = (units is not None and held != seg_ids) or \
            (lexical is not None and lexical.get(doc, set()) != seg_ids)
        if not whole or rows_off:
            incomplete.append(doc)
            if whole:
                unit_rows_only.append(doc)
            elif doc not in indexed and mixed_versions(recs):
                mixed.append(doc)
    from_files = [d for d in incomplete if d in indexed]
    unit_rows_only = [d for d in unit_rows_only if d not in indexed]
    return {"documents_complete": len(records) - len(incomplete), "documents_incomplete": len(incomplete),
            "incomplete_documents": sorted(incomplete)[:20], "documents_incomplete_from_files": len(from_files),
            "documents_unit_rows_only": len(unit_rows_only), "documents_mixed_versions": len(mixed),
            "mixed_documents": sorted(mixed)[:20],
            "documents_incomplete_without_path": len(incomplete) - len(from_files) - len(unit_rows_only) - len(mixed),
            "unit_index_segments": None if units is None else covered, "segments_total": segments}


def mixed_versions(records: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether a document's records (``{id: metadata}``) hold two versions of it: two cluster records at
    one position, or a cluster starting inside another. What a writer that neither replaces nor deletes
    leaves when a document is written again from an edited text (a LlamaIndex ``IngestionPipeline`` into
    a ``ChromaVectorStore`` without a docstore: Chroma's ``add`` keeps a stored id's old record), and
    searches answer from both texts. Adding the document again through hseg replaces every record of
    the old version; nothing in the store says which text is current.

    Example:
        >>> from hseg.chunking.schema import CLUSTER, CLUSTER_INDEX_KEY, END_KEY, LEVEL_KEY, START_KEY
        >>> c = lambda i, s, e: {LEVEL_KEY: CLUSTER, CLUSTER_INDEX_KEY: i, START_KEY: s, END_KEY: e}
        >>> mixed_versions({"a": c(0, 0, 9), "b": c(0, 0, 12)}), mixed_versions({"a": c(0, 0, 9), "b": c(1, 9, 12)})
        (True, False)
    """
    clusters = sorted(((m.get(START_KEY), m.get(END_KEY), m.get(CLUSTER_INDEX_KEY)) for m in records.values()
                       if m.get(LEVEL_KEY) == CLUSTER), key=lambda c: (c[2] if isinstance(c[2], int) else -1,
                                                                        c[0] if isinstance(c[0], int) else -1))
    positions = [c[2] for c in clusters]
    if len(positions) != len(set(positions)):
        return True
    spans = sorted((s, e) for s, e, _ in clusters if isinstance(s, int) and isinstance(e, int))
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def documents_missing_vectors(collection: Any, unit_index: UnitIndex | None,
                              records: Mapping[str, Sequence[str]], errors: ServerErrors) -> set[str]:
    """The documents of ``records`` (``{doc id: record ids}``) with a record whose vector is missing,
    in ``collection`` or in its unit index: metadata alone does not make a document searchable.
    ``errors`` names a lost server (the store's backend's)."""
    owner = {rid: doc for doc, rids in records.items() for rid in rids}
    with errors("reading the collection's vectors"):
        bad = {owner[rid] for rid in ids_without_vectors(collection, list(owner))}
        if unit_index is not None:
            units = unit_index.unit_ids([d for d in records if d not in bad])
            unit_owner = {uid: doc for doc, uids in units.items() for uid in uids}
            companion = unit_index.existing
            if unit_owner and companion is not None:
                bad |= {unit_owner[u] for u in ids_without_vectors(companion, list(unit_owner))}
    return bad
