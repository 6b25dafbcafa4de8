"""How an undecided hybrid walk on the unit index deepens its two lists
(:func:`hseg.retrieval.passages.indexed._deepen`); that its answers stay exact is
``tests/store/test_hybrid.py``."""

from __future__ import annotations

from hseg.retrieval.passages.indexed import _deepen

INF = float("inf")


def test_the_lexical_page_deepens_alone_while_it_holds_the_bound_up():
    # ties at the top of a rare word: the page has hardly fallen, the kNN has
    assert _deepen(32, 32, 0.9, 0.5, 0.95, 0.2) == (32, 64)


def test_both_lists_deepen_once_the_page_has_fallen_further_than_the_knn():
    assert _deepen(32, 32, 0.9, 0.85, 0.2, 0.2) == (64, 64)


def test_a_list_that_holds_everything_stays():
    assert _deepen(32, 32, 0.9, 0.85, 0.0, 0.2) == (64, 32)  # no match past the page
    assert _deepen(32, 32, 0.9, -INF, 0.5, 0.2) == (32, 64)  # every record in the kNN
