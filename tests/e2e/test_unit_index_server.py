"""The unit index on a ``chroma run`` server: every test of ``tests/store/test_unit_index.py`` that
takes ``chroma_client``, here over HTTP."""

from __future__ import annotations

from tests.store import test_unit_index
from tests.support.clients import server_variants

globals().update(server_variants(test_unit_index))
