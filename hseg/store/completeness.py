"""When a stored document is complete: the record-schema rules ``hseg index`` uses to skip it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["is_complete"]


def is_complete(records: Mapping[str, dict[str, Any]], sha: str, settings: str, length: int,
                units: set[str] | None = None, lexical: tuple[set[str], str | None] | None = None) -> bool:
    """True if a document's stored records (``{id: metadata}``) are all there and came from this text and settings.

    The cluster records must tile ``[0, length)`` and the segments they list must be exactly the
    segment records present, so a document left half-written by a killed process is not mistaken
    for a complete one. Nor is one still holding records of its previous version (a process killed
    between ``add``'s upserts and its deletes of the old records): they carry another hash or
    settings, or, from another chunking of the same text, a cluster that breaks the tiling or a
    segment no cluster lists. With ``units`` (the segment ids the store's unit index holds for the
    document), the index must hold exactly the document's segments: a process killed after the
    records but before their unit-index records leaves the document incomplete.
    """
    if not records or any(m.get("content_sha256") != sha or m.get("chunk_settings") != settings
                          for m in records.values()):
        return False
    clusters = sorted((m for m in records.values() if m.get("hseg_level") == "cluster"),
                      key=lambda m: m.get("hseg_cluster_index", -1))
    segments = {rid for rid, m in records.items() if m.get("hseg_level") == "segment"}
    pos, listed = 0, []
    for i, c in enumerate(clusters):
        if c.get("hseg_cluster_index") != i or c.get("hseg_start") != pos:
            return False
        end = c.get("hseg_end")
        if not isinstance(end, int):
            return False
        pos = end
        listed += json.loads(c.get("hseg_segment_ids") or "[]")
    return pos == length and len(listed) == len(segments) and set(listed) == segments and \
        (units is None or units == segments) and (lexical is None or lexical == (segments, sha))
