"""The paired statistics of the benchmarks (benchmarks/harness/stats.py): exact sign test and bootstrap interval."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.harness import stats


def test_sign_test_matches_the_binomial_tail():
    assert stats.sign_test(0, 0) == 1.0
    assert stats.sign_test(0, 4) == pytest.approx(2 / 16)  # both tails of 4 coin flips
    assert stats.sign_test(4, 0) == stats.sign_test(0, 4)
    assert stats.sign_test(5, 5) == 1.0
    assert stats.sign_test(0, 10) == pytest.approx(2 / 1024)


def test_bootstrap_interval_brackets_the_mean_and_shrinks_with_more_queries():
    rng = np.random.default_rng(1)
    small = rng.normal(0.1, 1.0, 50)
    big = rng.normal(0.1, 1.0, 5000)
    lo_s, hi_s = stats.bootstrap_interval(small)
    lo_b, hi_b = stats.bootstrap_interval(big)
    assert lo_s <= small.mean() <= hi_s and lo_b <= big.mean() <= hi_b
    assert hi_b - lo_b < (hi_s - lo_s) / 4
    assert stats.bootstrap_interval(np.zeros(10)) == (0.0, 0.0)
