"""Lexical-cohesion signals over sentence embeddings: how alike the text on either side of a gap is.

TextTiling (Hearst 1997) decides boundaries from these; the BiLSTM segmenter reads them as input
features next to each embedding; the chunker falls back on adjacent similarity when a segmenter
gives no gap scores. They live here, apart from both segmenters, because both need them and
:mod:`hseg.segmentation.segmenters` must stay importable without torch (which :mod:`hseg.segmentation.bilstm` needs).

Example:
    >>> import numpy as np
    >>> emb = np.repeat(np.eye(2, dtype=np.float32), 3, axis=0)  # two topics, 3 sentences each
    >>> depth_scores(window_similarity(emb, 2)).round(2).tolist()
    [0.0, 0.29, 2.0, 0.29, 0.0]
"""

from __future__ import annotations

import numpy as np


def adjacent_similarity(embeddings: np.ndarray) -> np.ndarray:
    """Cosine similarity of each sentence to the next, shape ``(n - 1,)``."""
    e = np.asarray(embeddings, dtype=np.float32)
    if len(e) < 2:
        return np.zeros(0, dtype=np.float32)
    return np.einsum("ij,ij->i", e[:-1], e[1:])


def window_similarity(embeddings: np.ndarray, window: int) -> np.ndarray:
    """Cosine of the mean of the ``window`` sentences before each gap with the ``window`` after.

    Windows are clipped at the document edges. Cumulative sums keep it O(n·d); gaps are taken
    ``_GAP_BLOCK`` at a time so the float64 temporaries stay small on books (60k sentences).
    """
    e = np.asarray(embeddings, dtype=np.float32)
    n = len(e)
    if n < 2:
        return np.zeros(0, dtype=np.float32)
    csum = np.vstack([np.zeros((1, e.shape[1]), dtype=np.float64), np.cumsum(e, axis=0, dtype=np.float64)])
    out = np.empty(n - 1, dtype=np.float32)
    for first in range(1, n, _GAP_BLOCK):
        gaps = np.arange(first, min(first + _GAP_BLOCK, n))  # gap g sits between sentence g-1 and g
        lo = np.maximum(gaps - window, 0)
        hi = np.minimum(gaps + window, n)
        left = csum[gaps] - csum[lo]
        right = csum[hi] - csum[gaps]
        num = np.einsum("ij,ij->i", left, right)
        den = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
        out[first - 1 : gaps[-1]] = num / np.where(den == 0, 1.0, den)
    return out


#: gaps per block in :func:`window_similarity`
_GAP_BLOCK = 8192


def depth_scores(similarity: np.ndarray) -> np.ndarray:
    """Hearst's depth: how far the similarity at a gap lies below the peaks reached climbing
    uphill to its left and to its right."""
    s = np.asarray(similarity, dtype=np.float64)
    n = len(s)
    left = s.copy()
    for i in range(1, n):
        if s[i - 1] > s[i]:
            left[i] = left[i - 1]
    right = s.copy()
    for i in range(n - 2, -1, -1):
        if s[i + 1] > s[i]:
            right[i] = right[i + 1]
    return (left - s) + (right - s)
