"""``hseg chunk`` and ``hseg query`` in this process with stderr captured (not a terminal): progress
lines, no bars, and nothing with ``--quiet`` (issue 47 item 11; with a real pipe:
``tests/e2e/test_cli_progress_processes.py``)."""

from __future__ import annotations

import hseg.progress
from hseg_testing.fakes import fake_cli, synthetic_book


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


def test_a_query_that_builds_the_lexical_index_shows_progress_lines_unless_quiet(fake, monkeypatch, capsys):
    # a server client's first search (or one after the lexical file was lost) builds the index from the
    # collection: minutes at a million records, with nothing said
    import shutil

    from hseg.cli import main
    from hseg.store.lexical.location import FOLDER
    from hseg_testing.fakes import FAKE_CLI

    (fake / "docs").mkdir()
    (fake / "docs" / "tides.md").write_text(synthetic_book(3000), encoding="utf-8")
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    monkeypatch.setattr(hseg.progress, "INTERVAL_S", 0.0)  # every line, for the test
    shutil.rmtree(fake / "db" / FOLDER)
    capsys.readouterr()
    encoder = FAKE_CLI[:2]
    assert main(["query", "moon tide", "--db", "db", *encoder, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    shutil.rmtree(fake / "db" / FOLDER)
    assert main(["query", "moon tide", "--db", "db", *encoder]) == 0
    err = capsys.readouterr().err.splitlines()
    assert any(line.startswith("hseg query: lexical index of 'hseg': ") for line in err), err
