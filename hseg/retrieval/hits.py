"""What a search returns: :class:`SearchHit`, a whole parent or a passage of adjacent segments."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SearchHit:
    """One search hit: a whole parent (cluster) with its eq. 2 score, or a passage of its segments.

    Attributes:
        cluster_id, doc_id: ids of the parent and its document.
        text: the parent text, ``source[start:end]`` of the original document.
        start, end: absolute character offsets of the parent in its document.
        score: max cosine similarity over the parent's vectors allowed by ``mode``.
        token_count: the parent's ``hseg_tokens``.
        matched_id, matched_level, matched_start, matched_end: the record that gave the score
            (a segment or the cluster vector) and its span.
        metadata: the cluster record's metadata (``hseg_*`` keys and the user's keys).
        segment_scores: ``{segment_id: similarity}`` for this parent's segments that Chroma
            returned in the over-fetch (not necessarily all of its segments).
        unit, segment_ids: ``"cluster"`` for a whole parent; for ``unit="segment"``/``"auto"``
            results, the hit is a passage of adjacent segments of the parent ``cluster_id``:
            ``text``/``start``/``end`` are the passage's and ``score`` is its best segment's
            (fused) cosine. An ``"auto"`` passage may go on with the segments after it in its
            document, of any cluster, where the budget left room (rule 5 of
            :mod:`hseg.retrieval.selection`), and end after the first sentences of the segment
            after those (rule 6); ``segment_ids`` then lists them too, a cut one last.
        heading_path: the markdown headings the hit's text lies under (the cluster's, or the
            common prefix of a passage's segments'; ``()`` for none or records without the key).
        pages: the first and last page (slide) of the hit's text, from 1 (``None`` for a document
            chunked without a source map); a passage ending inside a segment reports that segment's
            last page.

    Example:
        >>> hit = store.search("what causes tides?", k=1)[0]  # doctest: +SKIP
        >>> hit.text == source[hit.start:hit.end]  # doctest: +SKIP
        True
    """

    cluster_id: str
    doc_id: str
    text: str
    start: int
    end: int
    score: float
    token_count: int
    matched_id: str
    matched_level: str
    matched_start: int
    matched_end: int
    metadata: dict[str, Any] = field(default_factory=dict)
    segment_scores: dict[str, float] = field(default_factory=dict)
    #: "cluster" for a whole parent; "segment"/"auto" for a passage of adjacent segments of it
    unit: str = "cluster"
    #: the segments a passage is made of, the last possibly cut short (empty for a whole parent)
    segment_ids: list[str] = field(default_factory=list)
    heading_path: tuple[str, ...] = ()
    pages: tuple[int, int] | None = None
