"""Chroma records of a chunked document: ids, vectors, texts and flat metadata.

Each cluster (parent) becomes one **cluster record** (the mean-pooled cluster vector; its
``document`` is the parent text, stored once) plus one **segment record** per segment (segment
vector; ``document`` = segment text). Their ``hseg_*`` keys are the schema's
(:mod:`hseg.chunking.schema`: :func:`~hseg.chunking.schema.chunk_metadata`).

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

from hseg.chunking.chunks import Chunking, Cluster, Segment

# the schema's names, imported from here before the schema had a module of its own
from hseg.chunking.schema import (  # noqa: F401
    BOOKKEEPING_KEYS,
    CONTENT_HASH_KEY,
    CUTS_KEY,
    ENCODER_KEY,
    HEADING_PATH_KEY,
    KINDS,
    METADATA_KEYS,
    MODEL_VISIBLE_KEYS,
    RESERVED_PREFIX,
    SCHEMA_VERSION,
    SETTINGS_KEY,
    MetadataKey,
    chunk_metadata,
    decode_cuts,
    encode_heading_path,
    heading_path,
    hidden_from_model,
    listed_segment_ids,
    metadata_keys,
    metadata_table,
    reserved_key,
    sentence_cuts,
    source_metadata,
    user_metadata,
)


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
            raise ValueError(reserved_key(full))
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


def check_unicode(what: str, text: str, *, why: str = "Chroma stores UTF-8 only") -> None:
    """``ValueError`` naming ``what`` and the offset if ``text`` cannot be encoded as UTF-8 (lone surrogates).

    Example:
        >>> check_unicode("query", "Broken \\ud800 text")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: query: not valid Unicode (a lone surrogate '\\ud800' at offset 7); ...
    """
    if text.isascii():  # the common case, without building a UTF-8 copy of a long text
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{what}: not valid Unicode (a lone surrogate {text[exc.start]!r} at offset {exc.start}); {why}: "
            "decode the source with errors='replace'"
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


def _vector(chunk: Any, what: str) -> np.ndarray:
    if chunk.embedding is None:
        raise ValueError(f"{what} {chunk.id!r} has no embedding; chunk with an encoder before storing")
    vec = np.asarray(chunk.embedding, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(vec))
    if not np.isfinite(norm) or norm == 0.0:
        raise ValueError(f"{what} {chunk.id!r}: embedding is zero or not finite")
    return vec


def records_for(chunking: Chunking, metadata: Mapping[str, Any] | None = None) -> list[Record]:
    """All records of one document: per cluster, the cluster record then its segment records.

    Each record's metadata is the flattened ``metadata`` (its ``hseg_*`` keys as :func:`source_metadata`
    says) plus :func:`chunk_metadata` plus, when the
    chunking names its encoder (``chunking.info["encoder"]``, set by the chunker), ``hseg_encoder``:
    a record carries a vector, and the key says whose, wherever the record is written. Raises
    ``ValueError`` before anything is written if a vector is missing, zero, non-finite, or of a
    different dimension than the others, if the text is not valid Unicode, or if the metadata
    cannot be flattened.

    Example:
        >>> recs = records_for(chunking, {"source": "a.md"})  # doctest: +SKIP
        >>> [r.metadata["hseg_level"] for r in recs][:3]  # doctest: +SKIP
        ['cluster', 'segment', 'segment']
    """
    doc_id = chunking.doc_id
    try:
        user = flatten_metadata(source_metadata(metadata))
    except ValueError as exc:  # which of a batch's documents: the key alone does not say
        raise ValueError(f"document {doc_id!r}: {exc}") from None
    check_unicode(f"doc_id {doc_id!r}", doc_id)
    check_unicode(f"document {doc_id!r}", chunking.text)
    if chunking.info.get("encoder"):
        user = {**user, ENCODER_KEY: str(chunking.info["encoder"])}
    records: list[Record] = []
    dim: int | None = None
    for cluster in chunking.clusters:
        chunks: tuple[Cluster | Segment, ...] = (cluster, *cluster.segments)
        for chunk in chunks:
            level = "cluster" if chunk is cluster else "segment"
            vec = _vector(chunk, level)
            if dim is None:
                dim = vec.shape[0]
            elif vec.shape[0] != dim:
                raise ValueError(f"{level} {chunk.id!r}: embedding dimension {vec.shape[0]} != {dim}")
            records.append(Record(chunk.id, vec, chunk.text, {**user, **chunk_metadata(chunking, chunk)}))
    return records
