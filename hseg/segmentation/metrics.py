"""Segmentation metrics: Pk (Beeferman et al. 1999) and WindowDiff (Pevzner & Hearst 2002).

How and why: docs/design.md, ``hseg.segmentation.metrics``.

Example:
    >>> pk([3, 3], [3, 3])
    0.0
    >>> pk([2, 4], [6])  # k = 2: windows (0,2) and (1,3) straddle the missed boundary
    0.5
    >>> windowdiff([1, 1, 1, 1], [2, 2], k=2)  # every window has 2 reference boundaries, 1 hypothesised
    1.0
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def ends_to_masses(ends: Sequence[int], n: int | None = None) -> list[int]:
    """Segment-end indices to masses. ``n`` (sentences) defaults to the last end + 1.

    Example:
        >>> ends_to_masses([2, 4])
        [3, 2]
    """
    ends = sorted({int(e) for e in ends})
    if n is None:
        n = ends[-1] + 1 if ends else 0
    if any(e < 0 or e >= n for e in ends):
        raise ValueError(f"ends: indices must lie in [0, {n - 1}], got {ends}")
    if n and (not ends or ends[-1] != n - 1):
        ends.append(n - 1)
    out, start = [], 0
    for e in ends:
        out.append(e + 1 - start)
        start = e + 1
    return out


def masses_to_ends(masses: Sequence[int]) -> list[int]:
    """Masses to segment-end indices. Example: ``masses_to_ends([3, 2]) == [2, 4]``."""
    return [int(x) - 1 for x in np.cumsum(masses)]


def masses_to_labels(masses: Sequence[int]) -> np.ndarray:
    """Per-sentence 0/1 segment-end labels."""
    labels = np.zeros(int(sum(masses)), dtype=np.int64)
    labels[masses_to_ends(masses)] = 1
    return labels


def _as_masses(seg: Sequence[int], fmt: str, name: str, n: int | None = None) -> list[int]:
    if fmt == "mass":
        masses = [int(m) for m in seg]
        if any(m <= 0 for m in masses):
            raise ValueError(f"{name}: masses must be positive, got {masses}")
        return masses
    if fmt == "ends":
        return ends_to_masses(seg, n)
    raise ValueError(f"boundary_format: expected 'mass' or 'ends', got {fmt!r}")


def window_size(reference: Sequence[int]) -> int:
    """segeval's default k for a reference given as masses: ``max(2, round(mean / 2))``."""
    if not reference:
        raise ValueError("reference: empty segmentation")
    k = int(round(float(np.mean(reference)) / 2.0))
    return k if k > 1 else 2


def _prepare(reference, hypothesis, k, boundary_format):
    ref = _as_masses(reference, boundary_format, "reference")
    hyp = _as_masses(hypothesis, boundary_format, "hypothesis", n=sum(ref))
    if sum(ref) != sum(hyp):
        raise ValueError(f"hypothesis: covers {sum(hyp)} sentences, reference covers {sum(ref)}")
    k = window_size(ref) if k is None else int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return masses_to_labels(ref), masses_to_labels(hyp), k


def pk(reference: Sequence[int], hypothesis: Sequence[int], k: int | None = None, *,
       boundary_format: str = "mass") -> float:
    """Pk: the share of sentence pairs ``k`` apart that reference and hypothesis disagree on
    being in the same segment. A document no longer than ``k`` has no window and scores 0.

    Example:
        >>> pk([2, 4, 4], [2, 8], k=2)
        0.25
        >>> round(pk([2, 7], [3, 7], k=2, boundary_format="ends"), 4)  # masses [3, 5] vs [4, 4]
        0.3333
    """
    counts = _window_counts(reference, hypothesis, k, boundary_format)
    if counts is None:
        return 0.0
    # sentences i and i+k lie in different segments iff some end label among i..i+k-1 is set
    ref, hyp = counts
    return float(np.mean((ref > 0) != (hyp > 0)))


def windowdiff(reference: Sequence[int], hypothesis: Sequence[int], k: int | None = None, *,
               boundary_format: str = "mass") -> float:
    """WindowDiff: the share of windows of ``k`` gaps whose boundary *counts* differ.

    Example:
        >>> windowdiff([2, 4, 4], [2, 8], k=2)
        0.25
    """
    counts = _window_counts(reference, hypothesis, k, boundary_format)
    if counts is None:
        return 0.0
    ref, hyp = counts
    return float(np.mean(ref != hyp))


def _window_counts(reference: Sequence[int], hypothesis: Sequence[int], k: int | None,
                   boundary_format: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Boundary counts of reference and hypothesis in every window of ``k`` gaps; ``None`` when
    the document is no longer than ``k`` (no window fits)."""
    ref, hyp, k = _prepare(reference, hypothesis, k, boundary_format)
    n = len(ref)
    if n <= k:
        return None
    rc = np.concatenate([[0], np.cumsum(ref)])
    hc = np.concatenate([[0], np.cumsum(hyp)])
    i = np.arange(n - k)
    return rc[i + k] - rc[i], hc[i + k] - hc[i]
