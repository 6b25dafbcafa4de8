"""A test skipped for want of the development data says so to someone with a fresh clone (issue 57
item 2): what is skipped, that the data is not in the repository, and where it would be read from."""

from __future__ import annotations

import pytest

import tests.support as support


def test_the_skip_without_the_development_data_says_what_and_where(monkeypatch, tmp_path):
    monkeypatch.setattr(support, "SHARED", tmp_path / "shared")
    with pytest.raises(pytest.skip.Exception) as skipped:
        support.shared_or_skip("data/chroma_eval")
    message = str(skipped.value)
    assert "not in the repository" in message and str(tmp_path / "shared" / "data/chroma_eval") in message
    assert "chunking_evaluation" in message and "no other test needs it" in message


def test_the_data_when_it_is_there(monkeypatch, tmp_path):
    (tmp_path / "data").mkdir()
    monkeypatch.setattr(support, "SHARED", tmp_path)
    assert support.shared_or_skip("data") == tmp_path / "data" and support.shared_or_skip() == tmp_path
