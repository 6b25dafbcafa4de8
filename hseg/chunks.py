"""The data model: segments, clusters (parent chunks) and the per-document result.

Invariants checked at construction (they are the contract every adapter relies on):

- ``source[unit.start:unit.end] == unit.text`` for every segment and cluster;
- segments and clusters are ordered, contiguous and tile the document: the first starts at 0,
  each starts where the previous ends and the last ends at ``len(source)`` (a document that is
  empty or whitespace only has no units at all);
- a cluster is a contiguous run of whole segments.

Ids are stable: a hash of the document id, the level and the character span, so re-chunking the
same text with the same settings yields the same ids and re-ingestion is an idempotent upsert.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Segment", "Cluster", "Chunking", "unit_id", "default_doc_id"]


def unit_id(doc_id: str, level: str, start: int, end: int) -> str:
    """Deterministic id of a segment or cluster: ``"<level>-<20 hex>"`` over doc id and span.

    Example:
        >>> unit_id("doc", "cluster", 0, 10) == unit_id("doc", "cluster", 0, 10)
        True
    """
    digest = hashlib.sha1(f"{doc_id}\x00{level}\x00{start}\x00{end}".encode()).hexdigest()
    return f"{level[:3]}-{digest[:20]}"


def default_doc_id(text: str) -> str:
    """Content-derived document id used when the caller gives none."""
    return "doc-" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


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
    document end, NaN when the segmenter gives no probability).
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

    def __post_init__(self) -> None:
        _check_span(f"segment {self.index}", self.start, self.end, self.text)
        if self.sentence_end <= self.sentence_start:
            raise ValueError(f"segment {self.index}: empty sentence range")


@dataclass(frozen=True, eq=False)
class Cluster:
    """A parent chunk: a contiguous run of segments, with the mean-pooled cluster vector."""

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

    def __post_init__(self) -> None:
        _check_span(f"cluster {self.index}", self.start, self.end, self.text)
        if not self.segments:
            raise ValueError(f"cluster {self.index}: has no segments")
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

    def __post_init__(self) -> None:
        _check_tiling("segments", self.segments, self.text)
        _check_tiling("clusters", self.clusters, self.text)
        flat = [s for c in self.clusters for s in c.segments]
        if len(flat) != len(self.segments) or any(a is not b for a, b in zip(flat, self.segments)):
            raise ValueError("clusters do not partition the segments in order")

    @property
    def sentence_count(self) -> int:
        return self.segments[-1].sentence_end if self.segments else 0


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
