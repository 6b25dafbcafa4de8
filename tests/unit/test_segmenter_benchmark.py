"""The true-count decoding of benchmarks/segmenter_vs_texttiling.py (no model: synthetic scores)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchmarks import segmenter_vs_texttiling as bench


def test_strongest_peaks_keeps_the_highest_local_maxima_in_order():
    scores = np.array([0.1, 0.9, 0.2, 0.5, 0.4, 0.8, 0.85])
    # 0.8 is not a peak (its right neighbour is higher), the last gap is
    assert bench.strongest_peaks(scores, 2) == [1, 6]
    assert bench.strongest_peaks(scores, 3) == [1, 3, 6]
    assert bench.strongest_peaks(scores, 0) == []
    assert bench.strongest_peaks(scores, 10) == [1, 3, 6]  # no more than the peaks there are


@dataclass
class Doc:
    sentences: list[str]
    masses: list[int]


class FixedScores:
    def __init__(self, scores):
        self.scores = scores

    def gap_scores(self, sentences, embeddings):
        return self.scores


def test_true_count_pk_is_zero_when_the_true_gaps_score_highest_and_counts_only_them():
    doc = Doc(sentences=["s"] * 12, masses=[4, 4, 4])  # boundaries after sentences 3 and 7
    right = np.zeros(11)
    right[[3, 7]] = 1.0
    right[9] = 0.5  # a third, weaker peak: the true count (2) leaves it out
    assert bench.true_count_pk(FixedScores(right), [doc], [None]) == 0.0
    wrong = np.zeros(11)
    wrong[[1, 9]] = 1.0
    assert bench.true_count_pk(FixedScores(wrong), [doc], [None]) > 0.2
