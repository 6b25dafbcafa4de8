"""The command line's help speaks the user's language (issue 57 item 8): options, not the Python names
of the settings they set, and "default:" where the settings' descriptions say "None:"."""

from __future__ import annotations

import re

import pytest

from hseg.cli import build_parser


def _subcommands():
    parser = build_parser()
    return parser._subparsers._group_actions[0].choices


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_help_names_no_python_setting_and_no_none(command):
    from hseg.chunking.config import ChunkerConfig
    from hseg.retrieval.settings import SearchSettings

    shown = " ".join(_subcommands()[command].format_help().split())
    settings = [*SearchSettings.field_names(), *ChunkerConfig.defaults()]
    named = [name for name in settings if "_" in name and re.search(rf"(?<![\w.-]){name}\b", shown)]
    assert named == [], named
    assert not re.search(r"\bNone\b", shown), shown


def test_query_help_names_the_options():
    shown = " ".join(_subcommands()["query"].format_help().split())
    assert "excludes --budget- tokens" in shown or "excludes --budget-tokens" in shown
    assert "default: 'auto' with a budget" in shown and "instead of -k" in shown
