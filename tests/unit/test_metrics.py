"""Pk and WindowDiff on hand-computed cases (values cross-checked against segeval 2.0.11)."""

import pytest

from hseg.segmentation.metrics import ends_to_masses, masses_to_ends, pk, window_size, windowdiff


def test_identical_segmentations_score_zero():
    assert pk([3, 4, 2], [3, 4, 2]) == 0.0
    assert windowdiff([3, 4, 2], [3, 4, 2]) == 0.0


def test_missed_boundary_hand_case():
    # ref [2, 4, 4]: ends after sentences 1 and 5; hyp [2, 8] misses the second. k=2, 8 windows (i, i+2):
    # ref straddles a boundary at i = 0, 1, 4, 5; hyp at i = 0, 1 -> disagreement at i = 4, 5 -> 2/8
    assert pk([2, 4, 4], [2, 8], k=2) == pytest.approx(0.25)
    assert windowdiff([2, 4, 4], [2, 8], k=2) == pytest.approx(0.25)


def test_near_miss_hand_case():
    # ref [5, 5] vs hyp [6, 4], k=2, windows i = 0..7: ref straddles at i = 3, 4; hyp at i = 4, 5
    # -> disagreement at i = 3 and 5
    assert pk([5, 5], [6, 4], k=2) == pytest.approx(2 / 8)
    assert windowdiff([5, 5], [6, 4], k=2) == pytest.approx(2 / 8)


def test_windowdiff_counts_boundaries_pk_does_not():
    # two boundaries inside a window where the hypothesis has one: Pk sees no error, WindowDiff does
    ref, hyp = [1, 1, 1, 1], [2, 2]
    assert pk(ref, hyp, k=2) == 0.0
    assert windowdiff(ref, hyp, k=2) == 1.0


def test_default_window_is_half_mean_segment_rounded_min_two():
    assert window_size([7, 7, 7]) == 4  # 3.5 rounds half to even -> 4
    assert window_size([5, 5]) == 2  # 2.5 -> 2
    assert window_size([2, 2]) == 2  # 1 -> raised to 2
    assert window_size([20, 10]) == 8  # 7.5 -> 8
    # hypothesis [21] vs reference [7, 7, 7], k = 4: 8 of 17 windows straddle a reference boundary
    assert pk([7, 7, 7], [21]) == pytest.approx(8 / 17)


def test_ends_format_equals_mass_format():
    assert ends_to_masses([2, 4]) == [3, 2]
    assert ends_to_masses([2], n=5) == [3, 2]
    assert masses_to_ends([3, 2]) == [2, 4]
    assert pk([2, 7], [3, 7], k=2, boundary_format="ends") == pytest.approx(pk([3, 5], [4, 4], k=2))


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="hypothesis"):
        pk([3, 3], [3, 4])
    with pytest.raises(ValueError, match="reference"):
        pk([3, 0], [3])
    with pytest.raises(ValueError, match="boundary_format"):
        pk([3], [3], boundary_format="nltk")
    with pytest.raises(ValueError, match="k must"):
        windowdiff([3], [3], k=0)


def test_document_shorter_than_window_scores_zero():
    assert pk([1, 1], [2], k=2) == 0.0
