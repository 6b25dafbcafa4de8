"""Chroma records of a chunked document: ids, vectors, texts and the ``hseg_*`` metadata schema.

Each cluster (parent) becomes one **cluster record** (the mean-pooled cluster vector; its
``document`` is the parent text, stored once) plus one **segment record** per segment (segment
vector; ``document`` = segment text).

The ``hseg_*`` keys are declared once, in :data:`METADATA_KEYS`: on chunks (cluster and segment
records, built by :func:`chunk_metadata`) and on search results (built by
:func:`hseg.retrieval.results.result_for`). The LangChain splitter's Documents and the LlamaIndex parser's
nodes carry the same keys and values as the records; the metadata table of ``docs/api.md`` is
:func:`metadata_table`. Scalar values only (lists are JSON strings), schema version
:data:`SCHEMA_VERSION`.

User metadata is merged into every record of a document (so a ``where`` on it filters both
levels), after :func:`flatten_metadata`. Record ids are the dataclass ids (stable hashes of doc id,
level and span), so re-ingesting is an idempotent upsert.

"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hseg.chunking.chunks import Chunking, Cluster, Segment, check_cuts

__all__ = [
    "SCHEMA_VERSION",
    "RESERVED_PREFIX",
    "KINDS",
    "MetadataKey",
    "METADATA_KEYS",
    "metadata_keys",
    "metadata_table",
    "Record",
    "chunk_metadata",
    "user_metadata",
    "source_metadata",
    "hidden_from_model",
    "BOOKKEEPING_KEYS",
    "CONTENT_HASH_KEY",
    "SETTINGS_KEY",
    "MODEL_VISIBLE_KEYS",
    "flatten_metadata",
    "records_for",
    "check_unicode",
    "HEADING_PATH_KEY",
    "ENCODER_KEY",
    "CUTS_KEY",
    "sentence_cuts",
    "decode_cuts",
    "encode_heading_path",
    "heading_path",
    "listed_segment_ids",
]

SCHEMA_VERSION = 1
RESERVED_PREFIX = "hseg_"

# --------------------------------------------------------------------------- the schema

#: what carries ``hseg_*`` metadata: cluster chunks, segment chunks, search results
KINDS = ("cluster", "segment", "result")
_CHUNKS = ("cluster", "segment")


@dataclass(frozen=True)
class MetadataKey:
    """One ``hseg_*`` metadata key: its name, the kinds that carry it (:data:`KINDS`), its meaning.

    Example:
        >>> next(k for k in METADATA_KEYS if k.name == "hseg_score").kinds
        ('result',)
    """

    name: str
    kinds: tuple[str, ...]
    meaning: str
    #: carried only by what carries the chunk's vector (store records, LlamaIndex nodes), not by a
    #: LangChain Document, which has none
    vector: bool = False


#: the key of a unit's heading path, a JSON list (Chroma refuses empty lists, LlamaIndex every list)
HEADING_PATH_KEY = "hseg_heading_path"
#: the key of a segment's sentence cuts (:attr:`hseg.chunking.chunks.Segment.cuts`), a JSON list of pairs
CUTS_KEY = "hseg_cuts"
#: the key of the encoder that made a record's vector (the collection's own metadata uses the same name)
ENCODER_KEY = "hseg_encoder"

#: keys ``hseg index`` stores on every record to skip unchanged documents: the SHA-256 of the text
#: and the settings fingerprint (:func:`hseg.ingest.fingerprint.chunk_settings`). Bookkeeping of the
#: store, not the user's metadata: search results leave them out.
CONTENT_HASH_KEY = "content_sha256"
SETTINGS_KEY = "chunk_settings"
BOOKKEEPING_KEYS = (CONTENT_HASH_KEY, SETTINGS_KEY)

#: the ``hseg_*`` keys a framework shows to the LLM and to the embedder next to a result's text. The
#: rule: only what helps to answer, at most the text's position and heading path; hseg shows none of
#: its keys today (the heading titles already open a markdown segment's text, and ids, offsets and
#: scores are for code): the model sees the text and the user's own metadata, nothing else.
MODEL_VISIBLE_KEYS: tuple[str, ...] = ()

#: every ``hseg_*`` key, in the order of the table in ``docs/api.md``. A cluster or segment chunk has exactly the
#: keys of its kind (a store record, a LangChain Document and a LlamaIndex node alike), a search
#: result exactly the ``"result"`` keys, each next to the user's metadata.
METADATA_KEYS: tuple[MetadataKey, ...] = (
    MetadataKey("hseg_level", _CHUNKS, '`"cluster"` or `"segment"`'),
    MetadataKey("hseg_doc_id", KINDS, "id of the source document"),
    MetadataKey("hseg_cluster_id", KINDS, "id of the cluster (parent) the text belongs to; a cluster's own id"),
    MetadataKey("hseg_index", _CHUNKS, "position of the chunk among the document's clusters (or segments), from 0"),
    MetadataKey("hseg_cluster_index", _CHUNKS, "position of its cluster among the document's clusters"),
    MetadataKey("hseg_start", KINDS, "absolute character offset of the text in its document"),
    MetadataKey("hseg_end", KINDS, "end offset, exclusive: `document[hseg_start:hseg_end] == text`"),
    MetadataKey("hseg_tokens", KINDS, "tokens of the text (the chunker's tokenizer, cl100k by default)"),
    MetadataKey("hseg_cluster_tokens", _CHUNKS, "tokens of its cluster"),
    MetadataKey("hseg_n_segments", ("cluster",), "number of segments in the cluster"),
    MetadataKey("hseg_segment_ids", ("cluster", "result"),
                "JSON list of the ids of the segments the text is made of, in document order (an `\"auto\"` "
                "passage's last may be cut short, see `hseg_cuts`)"),
    MetadataKey("hseg_prev_id", ("segment",), 'id of the previous segment in the document (`""` for the first)'),
    MetadataKey("hseg_next_id", ("segment",), 'id of the next segment in the document (`""` for the last)'),
    MetadataKey(CUTS_KEY, ("segment",),
                "JSON list of `[offset, tokens]` pairs, one per sentence end before the segment's end: the offset "
                "from `hseg_start` and the tokens of the segment's text up to it. An `\"auto\"` passage "
                "may end at one where the budget has room for only part of the next segment (`\"[]\"`: no cut)"),
    MetadataKey(HEADING_PATH_KEY, KINDS,
                'JSON list of the titles of the markdown headings the text lies under, outermost first, heading '
                'markup stripped (`["Chapter 2", "2.1 Orbits"]`); a cluster\'s or passage\'s is the common prefix of '
                'its segments\'; `"[]"` outside any heading or for text not read as markdown'),
    MetadataKey("hseg_schema", _CHUNKS, "version of this schema"),
    MetadataKey(ENCODER_KEY, _CHUNKS,
                "the encoder (model name) that made the record's vector; only on what carries a vector (store "
                "records, LlamaIndex nodes), not on LangChain Documents; absent when unknown (a chunking made without "
                "the chunker, records written before the key existed). A search refuses hits of another encoder "
                "than its queries'", vector=True),
    MetadataKey("hseg_unit", ("result",),
                '`"cluster"` (a whole parent), or `"segment"`/`"auto"` (a passage of adjacent segments of one '
                'cluster; an `"auto"` passage may go on into the segments after it, where the budget left room, and '
                'end at a sentence inside one)'),
    MetadataKey("hseg_score", ("result",),
                "relevance on the cosine scale, higher is better: the best cosine of the cluster's vectors "
                '(`"cluster"`), of the passage\'s segments (`"segment"`) or their fused score (`"auto"`); with '
                "`lexical_weight` λ > 0, that plus λ × the normalised BM25 score, divided by 1 + λ"),
    MetadataKey("hseg_matched_id", ("result",), "id of the record that gave the score (a segment or the cluster)"),
    MetadataKey("hseg_matched_level", ("result",), '`"segment"` or `"cluster"`: the level of that record'),
    MetadataKey("hseg_matched_start", ("result",), "absolute start offset of that record's text"),
    MetadataKey("hseg_matched_end", ("result",), "absolute end offset of that record's text"),
    MetadataKey("hseg_matched_text", ("result",), "that record's text (a slice of the result's text)"),
)


def encode_heading_path(path: tuple[str, ...] | list[str]) -> str:
    """The ``hseg_heading_path`` value of a heading path.

    Example:
        >>> encode_heading_path(("Chapter 2", "2.1 Orbits"))
        '["Chapter 2", "2.1 Orbits"]'
    """
    return json.dumps(list(path), ensure_ascii=False)


def heading_path(metadata: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The heading path of a chunk or result from its metadata (a store record's, a LangChain
    ``Document``'s or a LlamaIndex node's); ``()`` when the key is absent (records written before
    it existed). ``ValueError`` naming ``hseg_heading_path`` when its value is not a JSON list of strings.

    Example:
        >>> heading_path({"hseg_heading_path": '["Chapter 2", "2.1 Orbits"]'})
        ('Chapter 2', '2.1 Orbits')
    """
    if (metadata or {}).get(HEADING_PATH_KEY) is None:
        return ()
    return tuple(_json_strings(metadata or {}, HEADING_PATH_KEY))


def _json_list(raw: Any) -> list[Any] | None:
    """The JSON list a metadata value holds, or ``None`` when it holds none."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None


def _json_strings(metadata: Mapping[str, Any], key: str) -> list[str]:
    """The JSON list of strings stored under ``key``; ``ValueError`` naming ``key`` otherwise."""
    value = _json_list(metadata.get(key))
    if value is None or not all(isinstance(t, str) for t in value):
        raise ValueError(f"{key}: expected a JSON list of strings, got {metadata.get(key)!r:.80}")
    return value


def listed_segment_ids(metadata: Mapping[str, Any]) -> list[str]:
    """The segment ids a cluster record lists (``hseg_segment_ids``, a JSON list), in document order.
    ``ValueError`` naming the key when it is absent or not a JSON list of strings.

    Example:
        >>> listed_segment_ids({"hseg_segment_ids": '["seg-a", "seg-b"]'})
        ['seg-a', 'seg-b']
    """
    return _json_strings(metadata, "hseg_segment_ids")


def metadata_keys(kind: str, *, vector: bool = True) -> tuple[str, ...]:
    """The ``hseg_*`` keys that ``kind`` (``"cluster"``, ``"segment"`` or ``"result"``) carries;
    ``vector=False``: the keys of a chunk without its vector (a LangChain Document).

    Example:
        >>> metadata_keys("segment")[:3]
        ('hseg_level', 'hseg_doc_id', 'hseg_cluster_id')
        >>> "hseg_encoder" in metadata_keys("segment", vector=False)
        False
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return tuple(k.name for k in METADATA_KEYS if kind in k.kinds and (vector or not k.vector))


def metadata_table() -> str:
    """:data:`METADATA_KEYS` as the Markdown table of ``docs/api.md`` (a test keeps the two equal).

    Example:
        >>> metadata_table().splitlines()[0]
        '| key | cluster | segment | result | meaning |'
    """
    rows = ["| key | " + " | ".join(KINDS) + " | meaning |", "|---|" + ":-:|" * len(KINDS) + "---|"]
    for key in METADATA_KEYS:
        marks = " | ".join("✓" if kind in key.kinds else "" for kind in KINDS)
        rows.append(f"| `{key.name}` | {marks} | {key.meaning} |")
    return "\n".join(rows) + "\n"


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
            raise ValueError(_reserved(full))
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


def chunk_metadata(chunking: Chunking, chunk: Cluster | Segment) -> dict[str, Any]:
    """The ``hseg_*`` metadata of one cluster or segment of ``chunking``: its keys are
    ``metadata_keys(level)``; store records, LangChain Documents and LlamaIndex nodes all carry it.

    Raises ``ValueError`` naming ``chunk`` when it is not a cluster or segment of ``chunking``.

    Example:
        >>> meta = chunk_metadata(chunking, chunking.segments[0])  # doctest: +SKIP
        >>> meta["hseg_level"], meta["hseg_prev_id"], meta["hseg_start"]  # doctest: +SKIP
        ('segment', '', 0)
    """
    level = "cluster" if isinstance(chunk, Cluster) else "segment"
    chunks = chunking.clusters if level == "cluster" else chunking.segments
    if not isinstance(chunk, (Cluster, Segment)) or not 0 <= chunk.index < len(chunks) \
            or chunks[chunk.index] is not chunk:
        raise ValueError(f"chunk must be a cluster or segment of the chunking of {chunking.doc_id!r}, "
                         f"got {chunk!r:.80}")
    # segments tile the document in cluster order, so a segment's cluster is the last one starting at or before it
    cluster = chunk if isinstance(chunk, Cluster) else \
        chunking.clusters[bisect.bisect_right(chunking.clusters, chunk.start, key=lambda c: c.start) - 1]
    meta: dict[str, Any] = {
        "hseg_doc_id": chunking.doc_id, "hseg_cluster_id": cluster.id, "hseg_cluster_index": cluster.index,
        "hseg_cluster_tokens": int(cluster.token_count), "hseg_schema": SCHEMA_VERSION, "hseg_level": level,
        "hseg_index": chunk.index, "hseg_start": chunk.start, "hseg_end": chunk.end,
        "hseg_tokens": int(chunk.token_count),
        HEADING_PATH_KEY: encode_heading_path(chunk.heading_path),
    }
    if isinstance(chunk, Cluster):
        meta["hseg_n_segments"] = len(chunk.segments)
        meta["hseg_segment_ids"] = json.dumps(chunk.segment_ids)
    else:  # neighbours in the document, for the neighbour term of chunk="auto" ("" at the edges)
        segs = chunking.segments
        meta["hseg_prev_id"] = segs[chunk.index - 1].id if chunk.index > 0 else ""
        meta["hseg_next_id"] = segs[chunk.index + 1].id if chunk.index + 1 < len(segs) else ""
        meta[CUTS_KEY] = json.dumps([list(c) for c in chunk.cuts], separators=(",", ":"))
    return meta


def sentence_cuts(metadata: Mapping[str, Any] | None) -> list[tuple[int, int]]:
    """A segment record's cuts (``hseg_cuts``) as ``(offset, tokens)`` pairs; ``[]`` when the key is
    absent (records written before it existed: such a segment is never cut). ``ValueError`` naming
    the key when its value is not a valid list of cuts for the record's span.

    Example:
        >>> sentence_cuts({"hseg_start": 0, "hseg_end": 40, "hseg_cuts": "[[12,3],[30,8]]"})
        [(12, 3), (30, 8)]
    """
    metadata = metadata or {}
    cuts = decode_cuts(metadata.get(CUTS_KEY))
    if cuts:
        check_cuts(CUTS_KEY, tuple(cuts), int(metadata.get("hseg_end", 0)) - int(metadata.get("hseg_start", 0)))
    return cuts


def decode_cuts(value: Any) -> list[tuple[int, int]]:
    """An ``hseg_cuts`` value as ``(offset, tokens)`` pairs, without the record's span to check them
    against (:func:`sentence_cuts` checks them): ``[]`` for ``None``; ``ValueError`` naming the key
    when it is not a JSON list of pairs.

    Example:
        >>> decode_cuts("[[12,3],[30,8]]")
        [(12, 3), (30, 8)]
    """
    if value is None:
        return []
    listed = _json_list(value)
    if listed is None or not all(isinstance(c, list) and len(c) == 2 for c in listed):
        raise ValueError(f"{CUTS_KEY}: expected a JSON list of [offset, tokens] pairs, got {value!r:.80}")
    return [(c[0], c[1]) for c in listed]


def hidden_from_model(metadata: Mapping[str, Any]) -> list[str]:
    """The keys of a result's ``metadata`` that a framework must not show to the LLM or the embedder:
    every ``hseg_*`` key but :data:`MODEL_VISIBLE_KEYS`, and :data:`BOOKKEEPING_KEYS`. The one rule
    both adapters apply (LlamaIndex as ``excluded_llm_metadata_keys``/``excluded_embed_metadata_keys``).

    Example:
        >>> hidden_from_model({"source": "a.md", "hseg_score": 0.7, "content_sha256": "9f2c"})
        ['hseg_score', 'content_sha256']
    """
    return [k for k in metadata
            if (k.startswith(RESERVED_PREFIX) and k not in MODEL_VISIBLE_KEYS) or k in BOOKKEEPING_KEYS]


def user_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """``metadata`` without its ``hseg_*`` keys: what a chunk or result keeps of its source's metadata.

    The adapters take their source's metadata through this, so a Document or node that was itself a
    chunk or a result (e.g. re-split) does not pass stale ``hseg_*`` values on. Values are not copied.

    Example:
        >>> user_metadata({"source": "a.md", "hseg_score": 0.7})
        {'source': 'a.md'}
    """
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValueError(f"metadata must be a dict or None, got {type(metadata).__name__}")
    return {k: v for k, v in (metadata or {}).items() if not (isinstance(k, str) and k.startswith(RESERVED_PREFIX))}


#: the ``hseg_*`` keys that every chunk, record and result carries: metadata holding them all is hseg's
#: own output (:func:`source_metadata`)
_OUTPUT_KEYS = tuple(k.name for k in METADATA_KEYS if k.kinds == KINDS)


def _reserved(key: str) -> str:
    return (f"metadata key {key!r} uses the reserved prefix {RESERVED_PREFIX!r} (hseg writes its own "
            f"{RESERVED_PREFIX}* keys on every chunk: a document's id is its doc_id, Document.id or node id); "
            "rename the key")


def source_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The metadata of a document about to be chunked, as every door takes it (``store.add``, the
    LangChain splitter, the LlamaIndex parser): the one rule for ``hseg_*`` keys.

    Metadata that is hseg's own output (it carries every key of :data:`_OUTPUT_KEYS`: a chunk, record
    or search result chunked again) loses its ``hseg_*`` keys, which describe the old chunk. Any other
    ``hseg_*`` key is the user's, and is refused: it would be overwritten by hseg's own key or hidden
    from the model (``ValueError`` naming it). Values are not copied or checked here (see
    :func:`flatten_metadata`).

    Example:
        >>> source_metadata({"source": "a.md", "hseg_doc_id": "a", "hseg_start": 0, "hseg_end": 9,
        ...                  "hseg_cluster_id": "c", "hseg_tokens": 3, "hseg_heading_path": "[]"})
        {'source': 'a.md'}
        >>> source_metadata({"hseg_doc_id": "mine"})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: metadata key 'hseg_doc_id' uses the reserved prefix 'hseg_' ...
    """
    user = user_metadata(metadata)
    if metadata and len(user) != len(metadata) and not all(k in metadata for k in _OUTPUT_KEYS):
        raise ValueError(_reserved(next(k for k in metadata if k not in user)))
    return user


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
