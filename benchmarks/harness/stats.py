"""The paired statistics of :mod:`benchmarks.paired`: per-query differences between two methods on
the same questions, judged by an exact sign test on wins and losses and a bootstrap interval of the
mean difference."""

from __future__ import annotations

import math

import numpy as np


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial p-value of ``wins`` against ``losses`` at p = 1/2 (ties dropped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def bootstrap_interval(diffs: np.ndarray, draws: int = 5000, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of the mean of ``diffs`` over resampled queries."""
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, len(diffs), size=(draws, len(diffs)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))
