"""Hits made of what a walk took: a passage of adjacent segments, or a cluster taken whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hseg.chunking.records import heading_path, listed_segment_ids
from hseg.retrieval.hits import SearchHit
from hseg.text.structure import common_prefix

__all__ = ["Member", "Records", "passage", "whole_cluster"]

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
    first, last = members[0].meta, members[-1].meta
    return _hit(max(members, key=lambda m: m.score), {m.id: m.score for m in members}, unit,
                text="".join(m.text for m in members),  # segments tile their document, so this is exact
                span=(int(first["hseg_start"]), int(last["hseg_end"])),
                tokens=sum(int(m.meta["hseg_tokens"]) for m in members),
                segment_ids=[m.id for m in members],
                path=common_prefix(heading_path(m.meta) for m in members))


def whole_cluster(best: Member, scores: dict[str, float], cluster: tuple[dict[str, Any], str],
                  tokens: int) -> SearchHit:
    """One ``unit="auto"`` hit from a cluster taken whole (``cluster``: its record's metadata and
    text), of which ``scores`` are the segments scored and ``best`` the best of them."""
    meta, text = cluster
    return _hit(best, scores, "auto", text=text, span=(int(meta["hseg_start"]), int(meta["hseg_end"])),
                tokens=tokens, segment_ids=listed_segment_ids(meta), path=heading_path(meta))


def _hit(best: Member, scores: dict[str, float], unit: str, *, text: str, span: tuple[int, int], tokens: int,
         segment_ids: list[str], path: tuple[str, ...]) -> SearchHit:
    """A passage's hit: its text and span, scored and matched by its ``best`` segment."""
    return SearchHit(
        cluster_id=str(best.meta["hseg_cluster_id"]),
        doc_id=str(best.meta["hseg_doc_id"]),
        text=text,
        start=span[0],
        end=span[1],
        score=best.score,
        token_count=tokens,
        matched_id=best.id,
        matched_level="segment",
        matched_start=int(best.meta["hseg_start"]),
        matched_end=int(best.meta["hseg_end"]),
        metadata=dict(best.meta),
        segment_scores=scores,
        unit=unit,
        segment_ids=segment_ids,
        heading_path=path,
    )
