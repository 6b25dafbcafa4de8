"""The hashing chunker most tests build: :class:`~hseg.chunking.chunker.HierarchicalChunker` on the
bag-of-words :class:`~hseg_testing.fakes.HashingEncoder`, so no model is loaded."""

from __future__ import annotations

from typing import Any

from hseg.chunking.chunker import HierarchicalChunker
from hseg_testing.fakes import HashingEncoder

#: small sizes: a few paragraphs give many segments and several clusters
SMALL: dict[str, Any] = {"target_tokens": 64, "min_segment_tokens": 8, "max_segment_tokens": 48}


def hashing_chunker(*, dim: int = 64, **settings: Any) -> HierarchicalChunker:
    """A chunker on ``HashingEncoder(dim)`` with the chunker ``settings`` given (the defaults otherwise)."""
    return HierarchicalChunker(encoder=HashingEncoder(dim), **settings)


def small_chunker(**settings: Any) -> HierarchicalChunker:
    """The :data:`SMALL` sizes and TextTiling on the hashing encoder; ``settings`` replace any of them."""
    return hashing_chunker(**{**SMALL, "segmenter": "texttiling", **settings})
