"""Chroma records of a chunked document: ids, vectors, texts and the ``hseg_*`` metadata schema.

Each cluster (parent) becomes one **cluster record** (the mean-pooled cluster vector; its
``document`` is the parent text, stored once) plus one **segment record** per segment (segment
vector; ``document`` = segment text).

Record metadata (schema version :data:`SCHEMA_VERSION`), scalar values only:

========================  ==================================================================
``hseg_level``           ``"segment"`` or ``"cluster"``
``hseg_cluster_id``      id of the parent cluster (on both levels)
``hseg_doc_id``          document id
``hseg_index``           segment index within the document, or the cluster index
``hseg_cluster_index``   index of the parent cluster within the document
``hseg_start/_end``      absolute character offsets of the record's own text in the document
``hseg_tokens``          tokens of the record's own text
``hseg_cluster_tokens``  tokens of the parent (both levels: token budgets need no extra fetch)
``hseg_n_segments``      cluster records only: number of segments
``hseg_segment_ids``     cluster records only: JSON list of the segment ids, in order
``hseg_prev_id/_next_id`` segment records only: ids of the neighbouring segments ("" at the edges)
``hseg_schema``          :data:`SCHEMA_VERSION`
========================  ==================================================================

User metadata is merged into every record of a document (so a ``where`` on it filters both
levels), after :func:`flatten_metadata`. Record ids are the dataclass ids (stable hashes of doc id,
level and span), so re-ingesting is an idempotent upsert.

"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hseg.chunks import Chunking

__all__ = ["SCHEMA_VERSION", "RESERVED_PREFIX", "Record", "flatten_metadata", "records_for", "check_unicode"]

SCHEMA_VERSION = 1
RESERVED_PREFIX = "hseg_"


@dataclass(frozen=True, eq=False)
class Record:
    """One Chroma record: what :meth:`HierarchicalStore.add` upserts."""

    id: str
    embedding: np.ndarray
    document: str
    metadata: dict[str, Any]


# --------------------------------------------------------------------------- metadata


def flatten_metadata(metadata: Mapping[str, Any] | None) -> dict[str, str | int | float | bool]:
    """Chroma- and LlamaIndex-safe flat metadata.

    Rules: ``None`` values are dropped; numpy scalars become Python scalars; nested mappings become
    dotted keys (``{"a": {"b": 1}}`` → ``{"a.b": 1}``); lists, tuples and arrays become JSON
    strings (Chroma rejects empty and mixed lists, LlamaIndex rejects every list, so one encoding
    works everywhere); any other type, a non-string or empty key, a key starting with ``#`` or
    ``$`` and keys with the reserved ``hseg_`` prefix raise ``ValueError``, and so do values Chroma
    would store wrongly or reject with a stack trace: NaN and infinite floats (read back as
    ``None``), ints outside 64 bits (read back as rounded floats) and strings that are not valid
    Unicode (lone surrogates, e.g. from ``errors="surrogateescape"``).

    Example:
        >>> flatten_metadata({"src": "a.md", "page": None, "tags": ["x", "y"], "meta": {"year": 2024}})
        {'src': 'a.md', 'tags': '["x", "y"]', 'meta.year': 2024}
    """
    out: dict[str, Any] = {}
    if metadata is None:
        return out
    if not isinstance(metadata, Mapping):
        raise ValueError(f"metadata must be a dict or None, got {type(metadata).__name__}")
    _flatten_into(out, metadata, "")
    return out


def _flatten_into(out: dict[str, Any], metadata: Mapping[str, Any], prefix: str) -> None:
    for key, value in metadata.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"metadata keys must be non-empty strings, got {key!r}")
        full = prefix + key
        if full.startswith(RESERVED_PREFIX):
            raise ValueError(f"metadata key {full!r} uses the reserved prefix {RESERVED_PREFIX!r}")
        if full.startswith(("#", "$")):
            raise ValueError(f"metadata key {full!r}: Chroma rejects keys starting with '#' or '$'")
        check_unicode(f"metadata key {full!r}", full)
        if value is None:
            continue
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, (bool, int, float, str)):
            if full in out:
                raise ValueError(f"metadata key {full!r} appears twice after flattening nested keys")
            _check_scalar(full, value)
            out[full] = value
        elif isinstance(value, Mapping):
            _flatten_into(out, value, full + ".")
        elif isinstance(value, (list, tuple, np.ndarray)):
            try:
                out[full] = json.dumps(_jsonable(value), ensure_ascii=False)
            except TypeError as exc:
                raise ValueError(f"metadata[{full!r}]: list items must be JSON scalars ({exc})") from None
            check_unicode(f"metadata[{full!r}]", out[full])
        else:
            raise ValueError(
                f"metadata[{full!r}]: unsupported type {type(value).__name__}; use str, int, float, bool, "
                "a dict or a list"
            )


_INT64 = (-(2**63), 2**63 - 1)


def check_unicode(what: str, text: str) -> None:
    """``ValueError`` naming ``what`` if ``text`` cannot be encoded as UTF-8 (lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{what}: not valid Unicode (a lone surrogate {text[exc.start]!r} at offset {exc.start}); Chroma "
            "stores UTF-8 only: decode the source with errors='replace'"
        ) from None


def _check_scalar(key: str, value: Any) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
        raise ValueError(f"metadata[{key!r}]: int {value} does not fit Chroma's 64 bits; store it as a string")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"metadata[{key!r}]: {value} cannot be stored (Chroma reads NaN/inf back as None); "
                         "use None to leave the key out")
    if isinstance(value, str):
        check_unicode(f"metadata[{key!r}]", value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------- records


def _vector(unit: Any, what: str) -> np.ndarray:
    if unit.embedding is None:
        raise ValueError(f"{what} {unit.id!r} has no embedding; chunk with an encoder before storing")
    vec = np.asarray(unit.embedding, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(vec))
    if not np.isfinite(norm) or norm == 0.0:
        raise ValueError(f"{what} {unit.id!r}: embedding is zero or not finite")
    return vec


def records_for(chunking: Chunking, metadata: Mapping[str, Any] | None = None) -> list[Record]:
    """All records of one document: per cluster, the cluster record then its segment records.

    Raises ``ValueError`` before anything is written if a vector is missing, zero, non-finite, or
    of a different dimension than the others, if the text is not valid Unicode, or if the metadata
    cannot be flattened.

    Example:
        >>> recs = records_for(chunking, {"source": "a.md"})  # doctest: +SKIP
        >>> [r.metadata["hseg_level"] for r in recs][:3]  # doctest: +SKIP
        ['cluster', 'segment', 'segment']
    """
    user = flatten_metadata(metadata)
    doc_id = chunking.doc_id
    check_unicode(f"doc_id {doc_id!r}", doc_id)
    check_unicode(f"document {doc_id!r}", chunking.text)
    records: list[Record] = []
    dim: int | None = None
    for cluster in chunking.clusters:
        base = {**user, "hseg_doc_id": doc_id, "hseg_cluster_id": cluster.id, "hseg_cluster_index": cluster.index,
                "hseg_cluster_tokens": int(cluster.token_count), "hseg_schema": SCHEMA_VERSION}
        units = [(cluster, "cluster")] + [(s, "segment") for s in cluster.segments]
        for unit, level in units:
            vec = _vector(unit, level)
            if dim is None:
                dim = vec.shape[0]
            elif vec.shape[0] != dim:
                raise ValueError(f"{level} {unit.id!r}: embedding dimension {vec.shape[0]} != {dim}")
            meta = {**base, "hseg_level": level, "hseg_index": unit.index, "hseg_start": unit.start,
                    "hseg_end": unit.end, "hseg_tokens": int(unit.token_count)}
            if level == "cluster":
                meta["hseg_n_segments"] = len(cluster.segments)
                meta["hseg_segment_ids"] = json.dumps(cluster.segment_ids)
            else:  # neighbours in the document, for the neighbour term of unit="auto" ("" at the edges)
                segs = chunking.segments
                meta["hseg_prev_id"] = segs[unit.index - 1].id if unit.index > 0 else ""
                meta["hseg_next_id"] = segs[unit.index + 1].id if unit.index + 1 < len(segs) else ""
            records.append(Record(unit.id, vec, unit.text, meta))
    return records
