"""The unit index: one vector per segment whose cosine with a query *is* its ``unit="auto"`` score.

How and why: docs/design.md, ``hseg.retrieval.unit_vectors``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from hseg.chunking.records import Record
from hseg.chunking.schema import (
    CLUSTER_ID_KEY,
    CONTENT_HASH_KEY,
    CUTS_KEY,
    DOC_ID_KEY,
    ENCODER_KEY,
    END_KEY,
    HEADING_PATH_KEY,
    INDEX_KEY,
    INDEXED_AT_KEY,
    LEVEL_KEY,
    PAGE_BREAKS_KEY,
    PAGE_END_KEY,
    PAGE_START_KEY,
    RESERVED_PREFIX,
    SEGMENT,
    SETTINGS_KEY,
    START_KEY,
    TEXT_KEY,
    TOKENS_KEY,
    neighbour_ids,
)

#: the companion collection of collection ``name`` is ``name + COMPANION_SUFFIX``
COMPANION_SUFFIX = "_hseg_units"
_SEP = "|"

#: the layout new unit indexes are written in (docs/design.md); an index records its own
UNIT_LAYOUT = 3
#: the keys a unit record of layout 2 or 3 keeps of its segment record (beside the user's), and the
#: lexical table's record of a segment: what a passage, rules 5 and 6 (:mod:`hseg.retrieval.continuation`)
#: and the encoder check read, the text's hash for ``hseg index`` and when the document was indexed (the
#: agent tools' list of documents), but for :data:`DERIVED_KEYS`
UNIT_RECORD_KEYS = (DOC_ID_KEY, START_KEY, HEADING_PATH_KEY, CUTS_KEY, ENCODER_KEY, CONTENT_HASH_KEY, PAGE_START_KEY,
                    PAGE_END_KEY, PAGE_BREAKS_KEY, INDEXED_AT_KEY)
#: what a search reads of a segment record that is not stored with :data:`UNIT_RECORD_KEYS`: its cluster,
#: its tokens (in a unit record's id, and in the lexical table's columns) and its end (its start plus its
#: text's length); :func:`with_derived` puts them back
DERIVED_KEYS = (CLUSTER_ID_KEY, TOKENS_KEY, END_KEY)


def companion_name(collection_name: str) -> str:
    """Name of the unit-index collection beside ``collection_name``.

    Example:
        >>> companion_name("docs")
        'docs_hseg_units'
    """
    return collection_name + COMPANION_SUFFIX


def fused_scale(cluster_weight: float, neighbour_weight: float) -> float:
    """M = 1 + w + v: the bound on ‖F_s‖, and the factor from cosine back to fused score."""
    return 1.0 + float(cluster_weight) + float(neighbour_weight)


class UnitKey(NamedTuple):
    """The id of a unit-index record: the segment and what the selection walk needs of it.

    ``cluster_segments``/``cluster_tokens`` are the number of segments of the segment's cluster and
    the sum of their tokens (what taking the rest of the cluster costs). A named tuple: a search
    parses a few hundred of these per query.

    Example:
        >>> key = UnitKey("segment-a1", "cluster-b2", 4, 87, 3, 250)
        >>> UnitKey.parse(key.encode()) == key
        True
    """

    segment_id: str
    cluster_id: str
    position: int
    tokens: int
    cluster_segments: int
    cluster_tokens: int

    def encode(self) -> str:
        for name in ("segment_id", "cluster_id"):
            if _SEP in getattr(self, name):
                raise ValueError(f"{name} {getattr(self, name)!r} contains {_SEP!r}, which unit-index ids reserve")
        return _SEP.join(map(str, self))

    @classmethod
    def parse(cls, record_id: str) -> UnitKey:
        parts = record_id.split(_SEP)
        if len(parts) != 6:
            raise ValueError(f"record_id {record_id!r} is not a unit-index id")
        seg, clu, position, tokens, n, total = parts
        return cls(seg, clu, int(position), int(tokens), int(n), int(total))


def query_vector(unit_query: np.ndarray) -> np.ndarray:
    """q' = [q̂, 0] for a unit query vector."""
    q = np.asarray(unit_query, dtype=np.float32).reshape(-1)
    return np.append(q, np.float32(0.0))


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def unit_metadata(metadata: Mapping[str, Any], text: str, layout: int = UNIT_LAYOUT) -> dict[str, Any]:
    """The metadata of a segment's unit record in ``layout``: the segment record's own (layout 1), or
    :func:`search_metadata` and its ``text`` (layout 2), or without it (layout 3).

    Example:
        >>> unit_metadata({"source": "a.md", "hseg_start": 0, "hseg_end": 6, "hseg_level": "segment"}, "Tides.", 2)
        {'source': 'a.md', 'hseg_start': 0, 'hseg_text': 'Tides.'}
    """
    if layout == 1:
        return dict(metadata)
    return {**search_metadata(metadata), TEXT_KEY: text} if layout == 2 else search_metadata(metadata)


def search_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """What a search reads of a segment record's metadata but for :data:`DERIVED_KEYS`: the user's
    keys and :data:`UNIT_RECORD_KEYS` (a unit record's of layout 2 or 3, and the lexical table's record).

    Example:
        >>> search_metadata({"source": "a.md", "hseg_start": 0, "hseg_end": 6, "hseg_level": "segment"})
        {'source': 'a.md', 'hseg_start': 0}
    """
    return {k: v for k, v in metadata.items() if _kept(k)}


def _kept(key: str) -> bool:
    """Whether :func:`search_metadata` keeps this key of a segment record: the user's keys (not the
    settings fingerprint, a long JSON no search reads) and :data:`UNIT_RECORD_KEYS`."""
    return (not key.startswith(RESERVED_PREFIX) and key != SETTINGS_KEY) or key in UNIT_RECORD_KEYS


def with_derived(metadata: Mapping[str, Any], cluster_id: str, tokens: int, text: str) -> dict[str, Any]:
    """:func:`search_metadata`'s ``metadata`` of a segment with :data:`DERIVED_KEYS` put back: its
    cluster, its tokens, and its end (its start plus its ``text``'s length).

    Example:
        >>> with_derived({"hseg_start": 7}, "clu-1", 2, "Tides.")
        {'hseg_start': 7, 'hseg_cluster_id': 'clu-1', 'hseg_tokens': 2, 'hseg_end': 13}
    """
    return {**metadata, CLUSTER_ID_KEY: cluster_id, TOKENS_KEY: int(tokens),
            END_KEY: int(metadata[START_KEY]) + len(text)}


def filter_keys(where: Mapping[str, Any] | None) -> set[str]:
    """The metadata keys a Chroma ``where`` filter names (through ``$and``/``$or``).

    Example:
        >>> sorted(filter_keys({"$and": [{"source": "a.md"}, {"hseg_tokens": {"$gt": 9}}]}))
        ['hseg_tokens', 'source']
    """
    keys: set[str] = set()
    for key, value in (where or {}).items():
        if key in ("$and", "$or"):
            for part in value:
                keys |= filter_keys(part)
        else:
            keys.add(key)
    return keys


def serves_filter(where: Mapping[str, Any] | None, layout: int) -> bool:
    """Whether a unit index of ``layout`` filters by ``where`` as the collection does: layout 1 holds
    every key; layouts 2 and 3 the user's and :data:`UNIT_RECORD_KEYS` only (not even
    :data:`DERIVED_KEYS`, nor ``hseg_level``, ``"segment"`` on every record it mirrors)."""
    return layout == 1 or all(_kept(k) for k in filter_keys(where))


def unit_records(records: Sequence[Record], cluster_weight: float, neighbour_weight: float,
                 layout: int = UNIT_LAYOUT) -> list[Record]:
    """Unit-index records of whole documents in ``layout``, from their store records
    (:func:`hseg.chunking.records.records_for` or what the store reads back, texts included).

    Raises ``ValueError`` if a segment's cluster or neighbour record is not among ``records``.

    Example:
        >>> recs = unit_records(records_for(chunking), 0.5, 0.2)  # doctest: +SKIP
        >>> len(recs) == len(chunking.segments)  # doctest: +SKIP
        True
    """
    by_id = {r.id: r for r in records}
    segments = [r for r in records if r.metadata.get(LEVEL_KEY) == SEGMENT]
    members: dict[str, list[Record]] = {}
    for seg in segments:
        members.setdefault(str(seg.metadata[CLUSTER_ID_KEY]), []).append(seg)
    scale = fused_scale(cluster_weight, neighbour_weight)
    out: list[Record] = []
    for seg in segments:
        meta = seg.metadata
        cid = str(meta[CLUSTER_ID_KEY])
        cluster = by_id.get(cid)
        if cluster is None:
            raise ValueError(f"records: segment {seg.id!r} without its cluster record {cid!r}")
        fused = _unit(seg.embedding) + cluster_weight * _unit(cluster.embedding)
        if neighbour_weight:
            fused += neighbour_weight * _neighbour_mean(seg, by_id)
        fused /= scale
        lift = np.sqrt(max(0.0, 1.0 - float(fused @ fused)))
        siblings = members[cid]
        key = UnitKey(seg.id, cid, int(meta[INDEX_KEY]), int(meta[TOKENS_KEY]), len(siblings),
                      sum(int(s.metadata[TOKENS_KEY]) for s in siblings))
        out.append(Record(key.encode(), np.append(fused, lift).astype(np.float32), "",
                          unit_metadata(meta, seg.document, layout)))
    return out


def _neighbour_mean(seg: Record, by_id: Mapping[str, Record]) -> np.ndarray:
    ids = neighbour_ids(seg.metadata)
    missing = [n for n in ids if n not in by_id]
    if missing:
        raise ValueError(f"records: segment {seg.id!r} without its neighbour records {missing}")
    if not ids:
        return _unit(seg.embedding)
    return np.mean([_unit(by_id[n].embedding) for n in ids], axis=0)


def segment_ids_of(unit_ids: Sequence[str]) -> list[str]:
    """The segment ids behind unit-index record ids."""
    return [UnitKey.parse(u).segment_id for u in unit_ids]
