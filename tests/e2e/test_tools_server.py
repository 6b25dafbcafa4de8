"""The retrieval tools over a ``chroma run`` server: every test of ``tests/store/test_tools.py`` that takes
``chroma_client``, here over HTTP, where the lexical index the tools read is a client-side cache."""

from __future__ import annotations

from tests.store import test_tools
from tests.support.clients import server_variants

globals().update(server_variants(test_tools))
