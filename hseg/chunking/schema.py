"""The record schema: every ``hseg_*`` key, what carries it, how its value is encoded, and typed views.

The one reader and writer of hseg's metadata keys. A chunk's records (a cluster record and a record
per segment, :mod:`hseg.chunking.records`), a LangChain Document and a LlamaIndex node carry the keys
of their kind (:func:`chunk_metadata`); a search result carries the ``"result"`` keys
(:class:`ResultMeta`); the collection, its unit index and ``hseg index`` keep a few keys of their own
in collection metadata. Each key is a constant here, and code elsewhere names keys only through them.

How and why: docs/design.md, ``hseg.chunking.schema``.

Example:
    >>> meta = {DOC_ID_KEY: "a", CLUSTER_ID_KEY: "clu-1", START_KEY: 0, END_KEY: 6, TOKENS_KEY: 2,
    ...         HEADING_PATH_KEY: '["Tides"]'}
    >>> SegmentMeta.of(meta).heading_path
    ('Tides',)
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hseg.chunking.chunks import Chunking, Cluster, Segment, check_cuts
from hseg.text.structure import common_prefix

SCHEMA_VERSION = 1
RESERVED_PREFIX = "hseg_"

# --------------------------------------------------------------------------- the keys

#: ``"cluster"`` or ``"segment"``: the record's level
LEVEL_KEY = "hseg_level"
DOC_ID_KEY = "hseg_doc_id"
CLUSTER_ID_KEY = "hseg_cluster_id"
#: a chunk's position among its document's clusters (or segments)
INDEX_KEY = "hseg_index"
CLUSTER_INDEX_KEY = "hseg_cluster_index"
START_KEY = "hseg_start"
END_KEY = "hseg_end"
TOKENS_KEY = "hseg_tokens"
CLUSTER_TOKENS_KEY = "hseg_cluster_tokens"
N_SEGMENTS_KEY = "hseg_n_segments"
#: a JSON list of segment ids (:func:`encode_segment_ids`)
SEGMENT_IDS_KEY = "hseg_segment_ids"
PREV_ID_KEY = "hseg_prev_id"
NEXT_ID_KEY = "hseg_next_id"
#: a segment's sentence cuts (:attr:`hseg.chunking.chunks.Segment.cuts`), a JSON list of pairs (:func:`encode_cuts`)
CUTS_KEY = "hseg_cuts"
#: a unit's heading path, a JSON list (Chroma refuses empty lists, LlamaIndex every list)
HEADING_PATH_KEY = "hseg_heading_path"
#: the first and last page (or slide) a unit's text is on, from 1: only on the chunks of a document
#: chunked with a :class:`hseg.text.provenance.SourceMap` (:func:`page_range` reads them)
PAGE_START_KEY = "hseg_page_start"
PAGE_END_KEY = "hseg_page_end"
#: where in a segment each page after its first begins, a JSON list of ``[offset, page]`` pairs
#: (:func:`encode_page_breaks`), so that a passage ending inside the segment knows its last page
PAGE_BREAKS_KEY = "hseg_page_breaks"
#: the schema version, on chunks and in a collection's metadata
SCHEMA_KEY = "hseg_schema"
#: the encoder that made a record's vector (the collection's own metadata uses the same name)
ENCODER_KEY = "hseg_encoder"
#: a result's unit: ``"cluster"``, ``"segment"`` or ``"auto"``
UNIT_KEY = "hseg_unit"
SCORE_KEY = "hseg_score"
MATCHED_ID_KEY = "hseg_matched_id"
MATCHED_LEVEL_KEY = "hseg_matched_level"
MATCHED_START_KEY = "hseg_matched_start"
MATCHED_END_KEY = "hseg_matched_end"
MATCHED_TEXT_KEY = "hseg_matched_text"

#: keys the store keeps on every record: the SHA-256 of the document's text (:func:`content_sha256`;
#: every write sets it, so that a text already stored under another id is found by one lookup) and,
#: from ``hseg index``, the settings fingerprint (:func:`hseg.ingest.fingerprint.chunk_settings`); the
#: two let ``hseg index`` skip unchanged documents. Bookkeeping of the store, not the user's metadata:
#: search results leave them out.
CONTENT_HASH_KEY = "content_sha256"
SETTINGS_KEY = "chunk_settings"
#: when the document was indexed, in whole seconds since the epoch (UTC), on every record of it: the
#: time of the write that last changed its records (the server's clock for a client of a ``chroma run``
#: server); a write that changes nothing keeps it (:mod:`hseg.store.indexed_at`). Absent on records
#: written before hseg kept it
INDEXED_AT_KEY = "hseg_indexed_at"
BOOKKEEPING_KEYS = (CONTENT_HASH_KEY, SETTINGS_KEY, INDEXED_AT_KEY)


def content_sha256(text: str) -> str:
    """The :data:`CONTENT_HASH_KEY` of a document's text: the SHA-256 of its UTF-8 (a lone surrogate kept).

    Example:
        >>> content_sha256("")[:12]
        'e3b0c44298fc'
    """
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


#: the ``hseg_*`` keys a framework shows to the LLM and to the embedder next to a result's text. The
#: rule: only what helps to answer, at most the text's position and heading path; hseg shows none of
#: its keys today (the heading titles already open a markdown segment's text, and ids, offsets and
#: scores are for code): the model sees the text and the user's own metadata, nothing else.
MODEL_VISIBLE_KEYS: tuple[str, ...] = ()

#: the metadata key of a layout-2 unit record's text (:mod:`hseg.retrieval.unit_vectors`)
TEXT_KEY = "hseg_text"
#: the unit index's own collection metadata: the weights its vectors fuse, its records' layout, and
#: the record and unit counts it was last known to be in step with
CLUSTER_WEIGHT_KEY = "hseg_cluster_weight"
NEIGHBOUR_WEIGHT_KEY = "hseg_neighbour_weight"
UNIT_LAYOUT_KEY = "hseg_unit_layout"
SYNCED_RECORDS_KEY = "hseg_synced_records"
SYNCED_UNITS_KEY = "hseg_synced_units"
#: a collection's metadata: the chunk options ``hseg index`` ran with, and the fingerprint of the
#: last chunker built for it (:mod:`hseg.store.remembered`)
CHUNK_OPTIONS_KEY = "hseg_chunk_options"
FINGERPRINT_KEY = "hseg_chunk_fingerprint"

#: the values of :data:`LEVEL_KEY`
CLUSTER, SEGMENT = "cluster", "segment"

# --------------------------------------------------------------------------- the declaration

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
    #: carried only by the chunks (and results) of a document chunked with a source map
    #: (:class:`hseg.text.provenance.SourceMap`): its pages or slides
    paged: bool = False


#: every ``hseg_*`` key, in the order of the table in ``docs/api.md``. A cluster or segment chunk has exactly the
#: keys of its kind (a store record, a LangChain Document and a LlamaIndex node alike), a search
#: result exactly the ``"result"`` keys, each next to the user's metadata.
METADATA_KEYS: tuple[MetadataKey, ...] = (
    MetadataKey(LEVEL_KEY, _CHUNKS, '`"cluster"` or `"segment"`'),
    MetadataKey(DOC_ID_KEY, KINDS, "id of the source document"),
    MetadataKey(CLUSTER_ID_KEY, KINDS, "id of the cluster (parent) the text belongs to; a cluster's own id"),
    MetadataKey(INDEX_KEY, _CHUNKS, "position of the chunk among the document's clusters (or segments), from 0"),
    MetadataKey(CLUSTER_INDEX_KEY, _CHUNKS, "position of its cluster among the document's clusters"),
    MetadataKey(START_KEY, KINDS, "absolute character offset of the text in its document"),
    MetadataKey(END_KEY, KINDS, "end offset, exclusive: `document[hseg_start:hseg_end] == text`"),
    MetadataKey(TOKENS_KEY, KINDS, "tokens of the text (the chunker's tokenizer, cl100k by default)"),
    MetadataKey(CLUSTER_TOKENS_KEY, _CHUNKS, "tokens of its cluster"),
    MetadataKey(N_SEGMENTS_KEY, ("cluster",), "number of segments in the cluster"),
    MetadataKey(SEGMENT_IDS_KEY, ("cluster", "result"),
                "JSON list of the ids of the segments the text is made of, in document order (an `\"auto\"` "
                "passage's last may be cut short, see `hseg_cuts`)"),
    MetadataKey(PREV_ID_KEY, ("segment",), 'id of the previous segment in the document (`""` for the first)'),
    MetadataKey(NEXT_ID_KEY, ("segment",), 'id of the next segment in the document (`""` for the last)'),
    MetadataKey(CUTS_KEY, ("segment",),
                "JSON list of `[offset, tokens]` pairs, one per sentence end before the segment's end: the offset "
                "from `hseg_start` and the tokens of the segment's text up to it. An `\"auto\"` passage "
                "may end at one where the budget has room for only part of the next segment (`\"[]\"`: no cut)"),
    MetadataKey(HEADING_PATH_KEY, KINDS,
                'JSON list of the titles of the markdown headings the text lies under, outermost first, heading '
                'markup stripped (`["Chapter 2", "2.1 Orbits"]`); a cluster\'s or passage\'s is the common prefix of '
                'its segments\'; `"[]"` outside any heading or for text not read as markdown'),
    MetadataKey(PAGE_START_KEY, KINDS,
                "first page (a presentation's slide) the text is on, from 1 (LangChain's `page` is this minus 1); "
                "only for a document chunked with a source map (pages joined by an adapter, a converted PDF or "
                "PPTX); leading and trailing whitespace is on no page", paged=True),
    MetadataKey(PAGE_END_KEY, KINDS, "last page (slide) the text is on (inclusive); with `hseg_page_start`",
                paged=True),
    MetadataKey(PAGE_BREAKS_KEY, ("segment",),
                "JSON list of `[offset, page]` pairs, one per page after `hseg_page_start` the segment's text reaches: "
                "the offset from `hseg_start` of that page's first character that is not whitespace (`\"[]\"`: "
                "one page). A passage that ends inside the segment is on the pages before its end", paged=True),
    MetadataKey(SCHEMA_KEY, _CHUNKS, "version of this schema"),
    MetadataKey(ENCODER_KEY, _CHUNKS,
                "the encoder (model name) that made the record's vector; only on what carries a vector (store "
                "records, LlamaIndex nodes), not on LangChain Documents; absent when unknown (a chunking made without "
                "the chunker, records written before the key existed). A search refuses hits of another encoder "
                "than its queries'", vector=True),
    MetadataKey(UNIT_KEY, ("result",),
                '`"cluster"` (a whole parent), or `"segment"`/`"auto"` (a passage of adjacent segments of one '
                'cluster; an `"auto"` passage may go on into the segments after it, where the budget left room, and '
                'end at a sentence inside one)'),
    MetadataKey(SCORE_KEY, ("result",),
                "relevance on the cosine scale, higher is better: the best cosine of the cluster's vectors "
                '(`"cluster"`), of the passage\'s segments (`"segment"`) or their fused score (`"auto"`); with '
                "`lexical_weight` λ > 0, that plus λ × the normalised BM25 score, divided by 1 + λ"),
    MetadataKey(MATCHED_ID_KEY, ("result",), "id of the record that gave the score (a segment or the cluster)"),
    MetadataKey(MATCHED_LEVEL_KEY, ("result",), '`"segment"` or `"cluster"`: the level of that record'),
    MetadataKey(MATCHED_START_KEY, ("result",), "absolute start offset of that record's text"),
    MetadataKey(MATCHED_END_KEY, ("result",), "absolute end offset of that record's text"),
    MetadataKey(MATCHED_TEXT_KEY, ("result",), "that record's text (a slice of the result's text)"),
)


def metadata_keys(kind: str, *, vector: bool = True, paged: bool = False) -> tuple[str, ...]:
    """The ``hseg_*`` keys that ``kind`` (``"cluster"``, ``"segment"`` or ``"result"``) carries;
    ``vector=False``: the keys of a chunk without its vector (a LangChain Document); ``paged=True``:
    with the page keys of a document chunked with a source map.

    Example:
        >>> metadata_keys("segment")[:3]
        ('hseg_level', 'hseg_doc_id', 'hseg_cluster_id')
        >>> "hseg_encoder" in metadata_keys("segment", vector=False)
        False
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return tuple(k.name for k in METADATA_KEYS
                 if kind in k.kinds and (vector or not k.vector) and (paged or not k.paged))


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


# --------------------------------------------------------------------------- levels and filters


def level_of(metadata: Mapping[str, Any] | None) -> str | None:
    """``"cluster"`` or ``"segment"`` for a chunk's record, ``None`` for another writer's record.

    Example:
        >>> level_of({"hseg_level": "segment", "hseg_cluster_id": "clu-1"}), level_of({"source": "a.md"})
        ('segment', None)
    """
    level = (metadata or {}).get(LEVEL_KEY)
    return level if level in _CHUNKS and CLUSTER_ID_KEY in (metadata or {}) else None


def level_is(level: str) -> dict[str, str]:
    """The Chroma ``where`` of the records of one level.

    Example:
        >>> level_is("cluster")
        {'hseg_level': 'cluster'}
    """
    return {LEVEL_KEY: level}


def of_document(doc_id: str) -> dict[str, str]:
    """The Chroma ``where`` of one document's records.

    Example:
        >>> of_document("a")
        {'hseg_doc_id': 'a'}
    """
    return {DOC_ID_KEY: doc_id}


# --------------------------------------------------------------------------- codecs


def encode_heading_path(path: Sequence[str]) -> str:
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


def encode_segment_ids(segment_ids: Sequence[str]) -> str:
    """The ``hseg_segment_ids`` value of a list of segment ids.

    Example:
        >>> encode_segment_ids(["seg-a", "seg-b"])
        '["seg-a", "seg-b"]'
    """
    return json.dumps(list(segment_ids))


def listed_segment_ids(metadata: Mapping[str, Any]) -> list[str]:
    """The segment ids a cluster record lists (``hseg_segment_ids``, a JSON list), in document order.
    ``ValueError`` naming the key when it is absent or not a JSON list of strings.

    Example:
        >>> listed_segment_ids({"hseg_segment_ids": '["seg-a", "seg-b"]'})
        ['seg-a', 'seg-b']
    """
    return _json_strings(metadata, SEGMENT_IDS_KEY)


def encode_cuts(cuts: Iterable[tuple[int, int]]) -> str:
    """The ``hseg_cuts`` value of a segment's sentence cuts.

    Example:
        >>> encode_cuts([(12, 3), (30, 8)])
        '[[12,3],[30,8]]'
    """
    return json.dumps([list(c) for c in cuts], separators=(",", ":"))


def sentence_cuts(metadata: Mapping[str, Any] | None) -> list[tuple[int, int]]:
    """A segment record's cuts (``hseg_cuts``) as ``(offset, tokens)`` pairs; ``[]`` when the key is
    absent (records written before it existed: such a segment is never cut). ``ValueError`` naming
    the key when its value is not a valid list of cuts for the record's span.

    Example:
        >>> sentence_cuts({"hseg_start": 0, "hseg_end": 40, "hseg_cuts": "[[12,3],[30,8]]"})
        [(12, 3), (30, 8)]
    """
    metadata = metadata or {}
    return _checked_cuts(metadata.get(CUTS_KEY), int(metadata.get(END_KEY, 0)) - int(metadata.get(START_KEY, 0)))


def _checked_cuts(value: Any, length: int) -> list[tuple[int, int]]:
    cuts = decode_cuts(value)
    if cuts:
        check_cuts(CUTS_KEY, tuple(cuts), length)
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


def page_range(metadata: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """The ``(first, last)`` pages of a chunk or result from its metadata; ``None`` when it has no
    page keys (a document chunked without a source map). ``ValueError`` naming the key when only one
    is there or they are not pages from 1 in order.

    Example:
        >>> page_range({"hseg_page_start": 12, "hseg_page_end": 13}), page_range({"source": "a.md"})
        ((12, 13), None)
    """
    metadata = metadata or {}
    first, last = metadata.get(PAGE_START_KEY), metadata.get(PAGE_END_KEY)
    if first is None and last is None:
        return None
    ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (first, last)) and 1 <= first <= last  # type: ignore[operator]
    if not ok:
        raise ValueError(f"{PAGE_START_KEY}/{PAGE_END_KEY}: expected two page numbers from 1 in order, got "
                         f"{first!r} and {last!r}")
    return first, last  # type: ignore[return-value]


def encode_page_breaks(breaks: Iterable[tuple[int, int]]) -> str:
    """The ``hseg_page_breaks`` value of a segment's page breaks.

    Example:
        >>> encode_page_breaks([(120, 13)])
        '[[120,13]]'
    """
    return json.dumps([list(b) for b in breaks], separators=(",", ":"))


def decode_page_breaks(value: Any) -> list[tuple[int, int]]:
    """An ``hseg_page_breaks`` value as ``(offset, page)`` pairs (``[]`` for ``None``); ``ValueError``
    naming the key when it is not a JSON list of int pairs.

    Example:
        >>> decode_page_breaks("[[120,13]]")
        [(120, 13)]
    """
    if value is None:
        return []
    listed = _json_list(value)
    if listed is None or not all(isinstance(b, list) and len(b) == 2 and all(isinstance(x, int) for x in b)
                                 for b in listed):
        raise ValueError(f"{PAGE_BREAKS_KEY}: expected a JSON list of [offset, page] pairs, got {value!r:.80}")
    return [(b[0], b[1]) for b in listed]


def joined_pages(ranges: Iterable[tuple[int, int] | None]) -> tuple[int, int] | None:
    """The pages of text made of units with these page ranges, in document order (``None``: a unit
    on no page): from the first unit's first page to the last one's last.

    Example:
        >>> joined_pages([(3, 3), None, (3, 5)]), joined_pages([None])
        ((3, 5), None)
    """
    known = [r for r in ranges if r is not None]
    return (min(r[0] for r in known), max(r[1] for r in known)) if known else None


def page_metadata(pages: tuple[int, int] | None) -> dict[str, int]:
    """The page keys of a unit on ``pages`` (none for ``None``).

    Example:
        >>> page_metadata((12, 13))
        {'hseg_page_start': 12, 'hseg_page_end': 13}
    """
    return {} if pages is None else {PAGE_START_KEY: pages[0], PAGE_END_KEY: pages[1]}


def neighbour_ids(metadata: Mapping[str, Any]) -> list[str]:
    """The ids of a segment record's neighbours in its document (none at its edges).

    Example:
        >>> neighbour_ids({"hseg_prev_id": "", "hseg_next_id": "seg-b"})
        ['seg-b']
    """
    return [n for n in (metadata.get(PREV_ID_KEY), metadata.get(NEXT_ID_KEY)) if n]


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


def _required(metadata: Mapping[str, Any], key: str, kind: str) -> Any:
    try:
        return metadata[key]
    except KeyError:
        raise ValueError(f"{kind} record metadata lacks {key}: {dict(metadata)!r:.120}") from None


# --------------------------------------------------------------------------- views


@dataclass(frozen=True, slots=True)
class SegmentMeta:
    """What a search reads of a segment record's metadata, checked once: its document, cluster, span,
    tokens and heading path, decoded (its sentence cuts only when asked: :meth:`cuts`).

    Built from a store record's metadata, a LlamaIndex node's, or what a unit record or the lexical
    table keeps of one (:func:`hseg.retrieval.unit_vectors.with_derived`).

    Example:
        >>> seg = SegmentMeta.of({"hseg_doc_id": "a", "hseg_cluster_id": "clu-1", "hseg_start": 7,
        ...                       "hseg_end": 13, "hseg_tokens": 2, "hseg_cuts": "[[3,1]]"})
        >>> seg.start, seg.heading_path, seg.cuts()
        (7, (), [(3, 1)])
    """

    doc_id: str
    cluster_id: str
    start: int
    end: int
    tokens: int
    heading_path: tuple[str, ...]
    #: the stored ``hseg_cuts`` value, decoded by :meth:`cuts` (only where a passage may end inside the segment)
    stored_cuts: str | None = None
    #: its first and last page (:func:`page_range`), ``None`` for a document without a source map
    pages: tuple[int, int] | None = None
    #: the stored ``hseg_page_breaks`` value, decoded by :meth:`pages_before`
    stored_page_breaks: str | None = None

    @classmethod
    def of(cls, metadata: Mapping[str, Any]) -> SegmentMeta:
        """The view of ``metadata``; ``ValueError`` naming the key that is missing or malformed."""
        return cls(str(_required(metadata, DOC_ID_KEY, SEGMENT)), str(_required(metadata, CLUSTER_ID_KEY, SEGMENT)),
                   int(_required(metadata, START_KEY, SEGMENT)), int(_required(metadata, END_KEY, SEGMENT)),
                   int(_required(metadata, TOKENS_KEY, SEGMENT)), heading_path(metadata), metadata.get(CUTS_KEY),
                   page_range(metadata), metadata.get(PAGE_BREAKS_KEY))

    @classmethod
    def read(cls, metadata: Mapping[str, Any] | None) -> SegmentMeta | None:
        """The view of ``metadata``, or ``None`` when it is not a segment record's as this schema
        writes it (another writer's record, or one damaged since)."""
        try:
            return cls.of(metadata or {})
        except (ValueError, TypeError):
            return None

    def pages_before(self, offset: int) -> tuple[int, int] | None:
        """The pages of the segment's text up to ``offset`` (from its start; a sentence cut, which
        ends on a character that is not whitespace): from its first page to the last page that begins
        before ``offset`` (:data:`PAGE_BREAKS_KEY`).

        Example:
            >>> seg = SegmentMeta("d", "c", 0, 300, 60, (), None, (12, 13), "[[120,13]]")
            >>> seg.pages_before(100), seg.pages_before(200)
            ((12, 12), (12, 13))
        """
        if self.pages is None:
            return None
        last = max((page for at, page in decode_page_breaks(self.stored_page_breaks) if at < offset),
                   default=self.pages[0])
        return self.pages[0], last

    def cuts(self) -> list[tuple[int, int]]:
        """The segment's sentence cuts as ``(offset, tokens)`` pairs (:func:`sentence_cuts`)."""
        return _checked_cuts(self.stored_cuts, self.end - self.start)


@dataclass(frozen=True, slots=True)
class ClusterMeta:
    """What a search reads of a cluster record's metadata, checked once: its document, span, tokens,
    the segments it lists and its heading path, decoded.

    Example:
        >>> clu = ClusterMeta.of({"hseg_doc_id": "a", "hseg_cluster_id": "clu-1", "hseg_start": 0,
        ...                       "hseg_end": 13, "hseg_tokens": 4, "hseg_segment_ids": '["s1", "s2"]',
        ...                       "hseg_heading_path": '["Tides"]'})
        >>> clu.segment_ids, clu.heading_path
        (('s1', 's2'), ('Tides',))
    """

    doc_id: str
    cluster_id: str
    start: int
    end: int
    tokens: int
    segment_ids: tuple[str, ...]
    heading_path: tuple[str, ...]
    #: its first and last page (:func:`page_range`), ``None`` for a document without a source map
    pages: tuple[int, int] | None = None

    @classmethod
    def of(cls, metadata: Mapping[str, Any]) -> ClusterMeta:
        """The view of ``metadata``; ``ValueError`` naming the key that is missing or malformed."""
        return cls(str(metadata.get(DOC_ID_KEY, "")), str(_required(metadata, CLUSTER_ID_KEY, CLUSTER)),
                   int(_required(metadata, START_KEY, CLUSTER)), int(_required(metadata, END_KEY, CLUSTER)),
                   int(_required(metadata, TOKENS_KEY, CLUSTER)), tuple(listed_segment_ids(metadata)),
                   heading_path(metadata), page_range(metadata))

    @classmethod
    def joined(cls, cluster_id: str, segments: Sequence[tuple[str, SegmentMeta]]) -> ClusterMeta | None:
        """The view of a cluster made of its segments' (``(id, view)`` in document order), or ``None``
        unless they are of that cluster and tile its span.

        Example:
            >>> a = SegmentMeta("d", "clu-1", 0, 6, 2, ("Tides",))
            >>> b = SegmentMeta("d", "clu-1", 6, 13, 2, ("Tides", "Why"))
            >>> clu = ClusterMeta.joined("clu-1", [("s1", a), ("s2", b)])
            >>> clu.start, clu.end, clu.tokens, clu.segment_ids, clu.heading_path
            (0, 13, 4, ('s1', 's2'), ('Tides',))
        """
        views = [view for _, view in segments]
        if not views or any(v.cluster_id != cluster_id for v in views) \
                or any(a.end != b.start for a, b in zip(views, views[1:])):
            return None
        return cls(views[0].doc_id, cluster_id, views[0].start, views[-1].end, sum(v.tokens for v in views),
                   tuple(sid for sid, _ in segments), common_prefix(v.heading_path for v in views),
                   joined_pages(v.pages for v in views))


@dataclass(frozen=True)
class ResultMeta:
    """The ``"result"`` keys of a search result (:func:`hseg.retrieval.results.result_for`), typed;
    :meth:`metadata` writes them.

    Example:
        >>> r = ResultMeta(0.61, "auto", "a", "clu-1", 0, 13, 4, '["s1", "s2"]', "s1", "segment", 0, 6,
        ...                "Tides.", ("Tides",))
        >>> r.metadata()["hseg_heading_path"]
        '["Tides"]'
    """

    score: float
    unit: str
    doc_id: str
    cluster_id: str
    start: int
    end: int
    tokens: int
    #: a JSON list, as a cluster record stores it (:func:`encode_segment_ids`)
    segment_ids: str
    matched_id: str
    matched_level: str
    matched_start: int
    matched_end: int
    matched_text: str
    heading_path: tuple[str, ...]
    #: the first and last page of the result's text; ``None`` (no page keys) without a source map
    pages: tuple[int, int] | None = None

    def metadata(self) -> dict[str, Any]:
        """The result's ``hseg_*`` metadata: exactly ``metadata_keys("result", paged=...)``."""
        return {
            SCORE_KEY: self.score, UNIT_KEY: self.unit, DOC_ID_KEY: self.doc_id, CLUSTER_ID_KEY: self.cluster_id,
            START_KEY: self.start, END_KEY: self.end, TOKENS_KEY: self.tokens, SEGMENT_IDS_KEY: self.segment_ids,
            MATCHED_ID_KEY: self.matched_id, MATCHED_LEVEL_KEY: self.matched_level,
            MATCHED_START_KEY: self.matched_start, MATCHED_END_KEY: self.matched_end,
            MATCHED_TEXT_KEY: self.matched_text, HEADING_PATH_KEY: encode_heading_path(self.heading_path),
            **page_metadata(self.pages),
        }


def chunk_metadata(chunking: Chunking, chunk: Cluster | Segment) -> dict[str, Any]:
    """The ``hseg_*`` metadata of one cluster or segment of ``chunking``: its keys are
    ``metadata_keys(level)``; store records, LangChain Documents and LlamaIndex nodes all carry it.

    Raises ``ValueError`` naming ``chunk`` when it is not a cluster or segment of ``chunking``.

    Example:
        >>> meta = chunk_metadata(chunking, chunking.segments[0])  # doctest: +SKIP
        >>> meta["hseg_level"], meta["hseg_prev_id"], meta["hseg_start"]  # doctest: +SKIP
        ('segment', '', 0)
    """
    level = CLUSTER if isinstance(chunk, Cluster) else SEGMENT
    chunks = chunking.clusters if level == CLUSTER else chunking.segments
    if not isinstance(chunk, (Cluster, Segment)) or not 0 <= chunk.index < len(chunks) \
            or chunks[chunk.index] is not chunk:
        raise ValueError(f"chunk must be a cluster or segment of the chunking of {chunking.doc_id!r}, "
                         f"got {chunk!r:.80}")
    # segments tile the document in cluster order, so a segment's cluster is the last one starting at or before it
    cluster = chunk if isinstance(chunk, Cluster) else \
        chunking.clusters[bisect.bisect_right(chunking.clusters, chunk.start, key=lambda c: c.start) - 1]
    meta: dict[str, Any] = {
        DOC_ID_KEY: chunking.doc_id, CLUSTER_ID_KEY: cluster.id, CLUSTER_INDEX_KEY: cluster.index,
        CLUSTER_TOKENS_KEY: int(cluster.token_count), SCHEMA_KEY: SCHEMA_VERSION, LEVEL_KEY: level,
        INDEX_KEY: chunk.index, START_KEY: chunk.start, END_KEY: chunk.end, TOKENS_KEY: int(chunk.token_count),
        HEADING_PATH_KEY: encode_heading_path(chunk.heading_path),
        **page_metadata(chunk_pages(chunking, chunk)),
    }
    if isinstance(chunk, Cluster):
        meta[N_SEGMENTS_KEY] = len(chunk.segments)
        meta[SEGMENT_IDS_KEY] = encode_segment_ids(chunk.segment_ids)
    else:  # neighbours in the document, for the neighbour term of chunk="auto" ("" at the edges)
        segs = chunking.segments
        meta[PREV_ID_KEY] = segs[chunk.index - 1].id if chunk.index > 0 else ""
        meta[NEXT_ID_KEY] = segs[chunk.index + 1].id if chunk.index + 1 < len(segs) else ""
        meta[CUTS_KEY] = encode_cuts(chunk.cuts)
        if chunking.source_map is not None and PAGE_START_KEY in meta:
            meta[PAGE_BREAKS_KEY] = encode_page_breaks(page_breaks(chunking, chunk))
    return meta


def chunk_pages(chunking: Chunking, chunk: Cluster | Segment) -> tuple[int, int] | None:
    """The first and last page of a segment's or cluster's text by its document's source map
    (:meth:`hseg.text.provenance.SourceMap.pages_of`: whitespace around the text is on no page); a
    cluster's are its segments' joined (:func:`joined_pages`), as a passage's. ``None`` without a map.

    Example:
        >>> chunk_pages(chunking, chunking.clusters[0])  # doctest: +SKIP
        (1, 2)
    """
    source_map = chunking.source_map
    if source_map is None:
        return None
    if isinstance(chunk, Cluster):
        return joined_pages(chunk_pages(chunking, s) for s in chunk.segments)
    pages = source_map.pages_of(chunking.text, chunk.start, chunk.end)
    return (pages[0], pages[-1]) if pages else None


def page_breaks(chunking: Chunking, segment: Segment) -> list[tuple[int, int]]:
    """Where in ``segment`` each page after its first begins: ``(offset from its start, page)`` of
    the first character of that page that is not whitespace (``[]`` on one page or without a map).

    Example:
        >>> page_breaks(chunking, chunking.segments[3])  # doctest: +SKIP
        [(212, 5)]
    """
    pages = chunk_pages(chunking, segment)
    if chunking.source_map is None or pages is None:
        return []
    out: list[tuple[int, int]] = []
    for start, end, number in chunking.source_map.within(segment.start, segment.end):
        piece = chunking.text[start:end]
        if number > pages[0] and piece.strip() and (not out or out[-1][1] != number):
            out.append((start + len(piece) - len(piece.lstrip()) - segment.start, number))
    return out


# --------------------------------------------------------------------------- whose keys


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
_OUTPUT_KEYS = tuple(k.name for k in METADATA_KEYS if k.kinds == KINDS and not k.paged)


def reserved_key(key: str) -> str:
    """The message that refuses a user's metadata key with the reserved prefix.

    Example:
        >>> reserved_key("hseg_doc_id")  # doctest: +ELLIPSIS
        "metadata key 'hseg_doc_id' uses the reserved prefix 'hseg_' ...; rename the key"
    """
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
    :func:`hseg.chunking.records.flatten_metadata`).

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
        raise ValueError(reserved_key(next(k for k in metadata if k not in user)))
    return user
