"""Hits made of what a walk took: a passage of adjacent segments, or a cluster taken whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hseg.chunking.schema import ClusterMeta, SegmentMeta, joined_pages
from hseg.retrieval.hits import SearchHit
from hseg.text.structure import common_prefix

#: records read, by id: ``(metadata, text)`` (what :func:`hseg.retrieval.plans.records` gives)
Records = dict[str, tuple[dict[str, Any], str]]


@dataclass
class Member:
    """A taken segment: its record and its ranking score on the cosine scale."""

    id: str
    meta: dict[str, Any]
    text: str
    score: float


def passage(members: list[Member], unit: str) -> SearchHit:
    """One hit from segments adjacent in one cluster, in document order."""
    views = [SegmentMeta.of(m.meta) for m in members]
    best = max(range(len(members)), key=lambda i: members[i].score)
    return _hit(members[best], views[best], {m.id: m.score for m in members}, unit,
                text="".join(m.text for m in members),  # segments tile their document, so this is exact
                span=(views[0].start, views[-1].end),
                tokens=sum(v.tokens for v in views),
                segment_ids=[m.id for m in members],
                path=common_prefix(v.heading_path for v in views), pages=joined_pages(v.pages for v in views))


def whole_cluster(best: Member, scores: dict[str, float], cluster: ClusterMeta, text: str, tokens: int) -> SearchHit:
    """One ``unit="auto"`` hit from a cluster taken whole (``cluster``: its record's view, ``text``
    its text, ``tokens`` the sum of its segments'), of which ``scores`` are the segments scored and
    ``best`` the best of them."""
    return _hit(best, SegmentMeta.of(best.meta), scores, "auto", text=text, span=(cluster.start, cluster.end),
                tokens=tokens, segment_ids=list(cluster.segment_ids), path=cluster.heading_path, pages=cluster.pages)


def _hit(best: Member, view: SegmentMeta, scores: dict[str, float], unit: str, *, text: str,
         span: tuple[int, int], tokens: int, segment_ids: list[str], path: tuple[str, ...],
         pages: tuple[int, int] | None) -> SearchHit:
    """A passage's hit: its text and span, scored and matched by its ``best`` segment (``view``: its
    record's view)."""
    return SearchHit(
        cluster_id=view.cluster_id,
        doc_id=view.doc_id,
        text=text,
        start=span[0],
        end=span[1],
        score=best.score,
        token_count=tokens,
        matched_id=best.id,
        matched_level="segment",
        matched_start=view.start,
        matched_end=view.end,
        metadata=dict(best.meta),
        segment_scores=scores,
        unit=unit,
        segment_ids=segment_ids,
        heading_path=path,
        pages=pages,
    )
