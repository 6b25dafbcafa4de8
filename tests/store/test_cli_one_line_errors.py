"""Bad input to `hseg query` / `hseg index` ends in one line naming the argument and the fix
(issue 47 item 7), not a traceback from Chroma or an integer overflow."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hseg.cli import main
from hseg.retrieval.settings import MAX_BUDGET_TOKENS, MAX_K, SearchSettings
from hseg_testing.fakes import FAKE_CLI
from tests.store.test_cli_index import TIDES, one_line_error, write_file
from tests.support import REPO


@pytest.fixture
def indexed(fake, capsys):  # noqa: F811
    write_file(fake / "docs" / "tides.md", TIDES * 3)
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    capsys.readouterr()
    return fake


@pytest.mark.parametrize("args, needle", [
    (["--where", '{"$bogus": 1}'], "where={'$bogus': 1}: Chroma refused the filter"),
    (["--where-document", '{"$regex": "("}'], "where_document={'$regex': '('}: Chroma refused the filter"),
    (["-k", "4294967296"], f"up to {MAX_K:,}"),
    (["--budget-tokens", "1000000000000"], f"up to {MAX_BUDGET_TOKENS:,}"),
])
def test_a_query_refused_is_one_line(indexed, capsys, args, needle):
    try:
        code = main(["query", "moon", "--db", "db", *args])
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    assert code not in (0, None)
    one_line_error(capsys.readouterr().err, needle)


def test_index_into_a_regular_file_names_the_argument(fake, capsys):  # noqa: F811
    write_file(fake / "docs" / "tides.md", TIDES)
    (fake / "regular").write_text("not a folder")
    with pytest.raises(SystemExit) as exit_info:
        main(["index", "docs", "--db", "regular", *FAKE_CLI])
    assert exit_info.value.code == 2
    one_line_error(capsys.readouterr().err, "--db", "'regular' is a file")


def test_the_bounds_are_the_settings_own():
    with pytest.raises(ValueError, match="k must be a positive int up to"):
        SearchSettings(k=MAX_K + 1)
    with pytest.raises(ValueError, match="budget_tokens must be a positive int up to"):
        SearchSettings(budget_tokens=MAX_BUDGET_TOKENS + 1)
    assert SearchSettings(k=MAX_K).k == MAX_K


def test_a_query_encoder_not_on_the_machine_is_one_line(indexed):
    """Issue 47 item 7: ``hseg query --encoder <a model not on the machine>`` (offline) ended in a traceback
    of ``EncoderLoadError``; the real CLI in a process of its own, its real encoder factory."""
    done = subprocess.run([sys.executable, "-m", "hseg.cli", "query", "moon", "--db", "db", "--encoder",
                           "sentence-transformers/does-not-exist"], cwd=indexed, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)})
    assert done.returncode == 1, done.stderr[-3000:]
    one_line_error(done.stderr, "hseg query: error: encoder 'sentence-transformers/does-not-exist' is not on this "
                                "machine and HF_HUB_OFFLINE is set")
