"""The data model: segments, clusters (parent chunks) and the per-document result.

How and why: docs/design.md, ``hseg.chunking.chunks``.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hseg.text.provenance import SourceMap
from hseg.text.structure import Heading, common_prefix


def chunk_id(doc_id: str, level: str, start: int, end: int) -> str:
    """Deterministic id of a chunk (a segment or cluster) or of a passage of adjacent segments:
    ``"<level>-<20 hex>"`` over doc id, level and span.

    Example:
        >>> chunk_id("doc", "cluster", 0, 10) == chunk_id("doc", "cluster", 0, 10)
        True
    """
    digest = hashlib.sha1(f"{doc_id}\x00{level}\x00{start}\x00{end}".encode()).hexdigest()
    return f"{level[:3]}-{digest[:20]}"


def is_cluster_id(record_id: str) -> bool:
    """True for an id :func:`chunk_id` made for a cluster (a segment's never is).

    Example:
        >>> is_cluster_id(chunk_id("doc", "cluster", 0, 10)), is_cluster_id(chunk_id("doc", "segment", 0, 10))
        (True, False)
    """
    return record_id.startswith("clu-")


def default_doc_id(text: str) -> str:
    """Content-derived document id used when the caller gives none."""
    return "doc-" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _check_heading_path(kind: str, path: Any) -> None:
    if not isinstance(path, tuple) or not all(isinstance(t, str) for t in path):
        raise ValueError(f"{kind}: heading_path must be a tuple of str, got {path!r:.80}")


def _check_span(kind: str, start: int, end: int, text: str) -> None:
    if not (0 <= start <= end):
        raise ValueError(f"{kind}: invalid span start={start}, end={end}")
    if len(text) != end - start:
        raise ValueError(f"{kind}: text length {len(text)} does not match span [{start}, {end})")


@dataclass(frozen=True, eq=False)
class Segment:
    """A short coherent run of sentences, the unit the segmenter produces.

    ``sentence_start``/``sentence_end`` index the document's sentences (end exclusive);
    ``boundary_prob`` is the segmenter's confidence that the segment ends here (1.0 for the
    document end, NaN when the segmenter gives no probability); ``heading_path`` the titles of the
    markdown headings its text lies under, outermost first (``()`` when none were read; a
    segment never holds a heading after its text, so one path fits all of its text).
    ``cuts`` are where a prefix of the segment may end: ``(offset, tokens)`` for the end of each of
    its sentences that ends before the segment does (the chunker's: none after a heading line),
    ``offset`` into ``text`` (strictly increasing, inside the text) and ``tokens`` the size of
    ``text[:offset]`` in the chunker's tokenizer, so a reader budget can take the segment's first
    sentences (rule 6 of :mod:`hseg.retrieval.selection`).

    Example:
        >>> seg = Segment("s0", "doc", 0, 0, 10, "## Orbits\\n", 3, 0, 1, heading_path=("Ch 2", "Orbits"))
        >>> seg.heading_path[-1]
        'Orbits'
        >>> Segment("s0", "doc", 0, 0, 10, "## Orbits\\n", 3, 0, 1, heading_path=["Orbits"])
        Traceback (most recent call last):
        ...
        ValueError: segment 0: heading_path must be a tuple of str, got ['Orbits']
    """

    id: str
    doc_id: str
    index: int
    start: int
    end: int
    text: str
    token_count: int
    sentence_start: int
    sentence_end: int
    embedding: np.ndarray | None = field(default=None, repr=False)
    boundary_prob: float = float("nan")
    heading_path: tuple[str, ...] = ()
    cuts: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        _check_span(f"segment {self.index}", self.start, self.end, self.text)
        if self.sentence_end <= self.sentence_start:
            raise ValueError(f"segment {self.index}: empty sentence range")
        _check_heading_path(f"segment {self.index}", self.heading_path)
        check_cuts(f"segment {self.index}", self.cuts, len(self.text))


def check_cuts(kind: str, cuts: Any, length: int) -> None:
    """``ValueError`` naming ``kind`` unless ``cuts`` is a tuple of ``(offset, tokens)`` int pairs with
    offsets strictly increasing inside ``(0, length)`` and tokens not negative."""
    last = 0
    if not isinstance(cuts, tuple):
        raise ValueError(f"{kind}: cuts must be a tuple of (offset, tokens) pairs, got {cuts!r:.80}")
    for cut in cuts:
        ok = isinstance(cut, tuple) and len(cut) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                for x in cut)
        if not ok or not last < cut[0] < length or cut[1] < 0:
            raise ValueError(f"{kind}: cuts must be (offset, tokens) int pairs with offsets increasing inside "
                             f"(0, {length}) and tokens >= 0, got {cut!r:.80} in {cuts!r:.80}")
        last = cut[0]


@dataclass(frozen=True, eq=False)
class Cluster:
    """A parent chunk: a contiguous run of segments, with the mean-pooled cluster vector.

    ``heading_path`` is the longest common prefix of its segments' heading paths (what all of its
    text lies under), checked at construction.
    """

    id: str
    doc_id: str
    index: int
    start: int
    end: int
    text: str
    token_count: int
    segments: tuple[Segment, ...]
    embedding: np.ndarray | None = field(default=None, repr=False)
    #: True when the cluster was cut by ``max_cluster_tokens`` rather than by the graph rule.
    split_by_cap: bool = False
    heading_path: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_span(f"cluster {self.index}", self.start, self.end, self.text)
        if not self.segments:
            raise ValueError(f"cluster {self.index}: has no segments")
        _check_heading_path(f"cluster {self.index}", self.heading_path)
        expected = common_prefix(s.heading_path for s in self.segments)
        if self.heading_path != expected:
            raise ValueError(f"cluster {self.index}: heading_path {self.heading_path!r} is not the common prefix "
                             f"{expected!r} of its segments' paths")
        if self.segments[0].start != self.start or self.segments[-1].end != self.end:
            raise ValueError(f"cluster {self.index}: segments do not span the cluster")
        for a, b in zip(self.segments, self.segments[1:]):
            if a.end != b.start or b.index != a.index + 1:
                raise ValueError(f"cluster {self.index}: segments are not contiguous")

    @property
    def segment_ids(self) -> list[str]:
        return [s.id for s in self.segments]


@dataclass(frozen=True, eq=False)
class Chunking:
    """The result of chunking one document.

    Example:
        >>> from hseg import HierarchicalChunker  # doctest: +SKIP
        >>> result = HierarchicalChunker().chunk(text, doc_id="report")  # doctest: +SKIP
        >>> all(text[c.start:c.end] == c.text for c in result.clusters)  # doctest: +SKIP
        True
    """

    doc_id: str
    text: str
    segments: tuple[Segment, ...]
    clusters: tuple[Cluster, ...]
    #: the clustering threshold parameter actually used (searched when a target size was given)
    k: float | None = None
    #: free-form diagnostics (warnings raised, sentence count, ...) with scalar values
    info: dict[str, Any] = field(default_factory=dict)
    #: the markdown headings the chunker honoured, in document order (``()`` for text read as plain)
    headings: tuple[Heading, ...] = ()
    #: the pages (or slides) of the text, when it came from pages (``None``: no pages known); every
    #: chunk then says which it is on (``hseg_page_start``/``hseg_page_end``)
    source_map: SourceMap | None = None

    def __post_init__(self) -> None:
        _check_tiling("segments", self.segments, self.text)
        _check_tiling("clusters", self.clusters, self.text)
        flat = [s for c in self.clusters for s in c.segments]
        if len(flat) != len(self.segments) or any(a is not b for a, b in zip(flat, self.segments)):
            raise ValueError("clusters do not partition the segments in order")
        _check_headings(self.headings, self.segments, self.text)
        if self.source_map is not None:
            if not isinstance(self.source_map, SourceMap):
                raise ValueError(f"source_map must be an hseg.text.provenance.SourceMap or None, got "
                                 f"{type(self.source_map).__name__}")
            if self.source_map.length != len(self.text):
                raise ValueError(f"source_map maps {self.source_map.length} characters but document "
                                 f"{self.doc_id!r} has {len(self.text)}; build the map from this text")

    @property
    def sentence_count(self) -> int:
        return self.segments[-1].sentence_end if self.segments else 0


def _check_headings(headings: Any, segments: tuple[Segment, ...], source: str) -> None:
    if not isinstance(headings, tuple) or not all(isinstance(h, Heading) for h in headings):
        raise ValueError(f"headings must be a tuple of hseg.text.structure.Heading, got {headings!r:.80}")
    if not headings:
        return
    firsts = {s.start + len(s.text) - len(s.text.lstrip()) for s in segments}
    starts = [s.start for s in segments]
    for before, h in zip((None, *headings), headings):
        if not 0 <= h.start < h.end <= len(source) or (before is not None and before.start >= h.start):
            raise ValueError(f"headings: heading at [{h.start}, {h.end}) is out of order or outside the document")
        # a heading with no text under it shares the segment of the heading after it
        if h.start not in firsts and not (before is not None and before.end <= h.start
                                          and not source[before.end:h.start].strip()
                                          and bisect.bisect_right(starts, before.start)
                                          == bisect.bisect_right(starts, h.start)):
            raise ValueError(f"headings: the heading {h.title!r} at offset {h.start} does not start a segment "
                             "nor follow a heading of its segment with no text between them")


def _check_tiling(kind: str, units: tuple[Any, ...], source: str) -> None:
    if not units:
        if source.strip():
            raise ValueError(f"{kind}: a non-blank document must have at least one unit")
        return
    if units[0].start != 0 or units[-1].end != len(source):
        raise ValueError(f"{kind}: units must cover the document [0, {len(source)})")
    for i, u in enumerate(units):
        if u.index != i:
            raise ValueError(f"{kind}: unit at position {i} has index {u.index}")
        if i and units[i - 1].end != u.start:
            raise ValueError(f"{kind}: gap or overlap before unit {i}")
        if source[u.start : u.end] != u.text:
            raise ValueError(f"{kind}: unit {i} text is not source[{u.start}:{u.end}]")
