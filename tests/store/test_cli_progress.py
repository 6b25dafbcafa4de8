"""``hseg chunk`` in this process with stderr captured (not a terminal): progress lines, no bars, and
nothing with ``--quiet`` (issue 47 item 11; with a real pipe: ``tests/e2e/test_cli_progress_processes.py``)."""

from __future__ import annotations

import hseg.progress
from tests.support.fakes import fake_cli, synthetic_book


def test_cli_chunk_shows_progress_lines_unless_quiet_and_no_bar_off_a_terminal(tmp_path, monkeypatch, capsys):
    main = fake_cli(monkeypatch)
    monkeypatch.setattr(hseg.progress, "INTERVAL_S", 0.0)  # every line, for the test
    (tmp_path / "big.md").write_text(synthetic_book(20_000), encoding="utf-8")
    assert main(["chunk", str(tmp_path / "big.md"), "--segmenter", "texttiling"]) == 0
    out, err = capsys.readouterr()
    assert "\r" not in err and "it/s" not in err  # a bar only on a terminal
    assert "hseg chunk: sentences split: 1 of 1 documents" in err.splitlines()
    assert "hseg chunk: sentences encoded: " in err and " segments clustered into " in err
    assert "hseg chunk" not in out
    assert main(["chunk", str(tmp_path / "big.md"), "--segmenter", "texttiling", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
