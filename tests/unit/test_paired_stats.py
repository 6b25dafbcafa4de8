"""The statistics of benchmarks/paired.py: exact sign test and bootstrap interval."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tests.support import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
paired = pytest.importorskip("paired")


def test_sign_test_matches_the_binomial_tail():
    assert paired.sign_test(0, 0) == 1.0
    assert paired.sign_test(0, 4) == pytest.approx(2 / 16)  # both tails of 4 coin flips
    assert paired.sign_test(4, 0) == paired.sign_test(0, 4)
    assert paired.sign_test(5, 5) == 1.0
    assert paired.sign_test(0, 10) == pytest.approx(2 / 1024)


def test_bootstrap_interval_brackets_the_mean_and_shrinks_with_more_queries():
    rng = np.random.default_rng(1)
    small = rng.normal(0.1, 1.0, 50)
    big = rng.normal(0.1, 1.0, 5000)
    lo_s, hi_s = paired.bootstrap_interval(small)
    lo_b, hi_b = paired.bootstrap_interval(big)
    assert lo_s <= small.mean() <= hi_s and lo_b <= big.mean() <= hi_b
    assert hi_b - lo_b < (hi_s - lo_s) / 4
    assert paired.bootstrap_interval(np.zeros(10)) == (0.0, 0.0)
