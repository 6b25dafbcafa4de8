"""The command line asks the store (issue 45 item 7): it opens a client for ``--db``/``--host`` and hands
it to :class:`hseg.store.HierarchicalStore`; no collection is opened, created or read around it."""

from __future__ import annotations

import re

import pytest

from tests.support import REPO

#: what only the store does: open, create or list collections, and read or write one directly
AROUND_THE_STORE = re.compile(r"get_collection\(|get_or_create_collection\(|create_collection\(|list_collections\("
                              r"|from_collection\(|(?<!args)\.collection\b|store\.remembered|remember(ed)?_\w+\(")


@pytest.mark.parametrize("module", sorted((REPO / "hseg" / "cli").glob("*.py")), ids=lambda p: p.name)
def test_the_command_line_opens_no_collection(module):
    code = module.read_text(encoding="utf-8")
    assert not AROUND_THE_STORE.findall(code), f"{module.name}: ask the store (store.maintenance) instead"
