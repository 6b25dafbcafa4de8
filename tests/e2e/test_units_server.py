"""Retrieval units (``unit="segment"``/``"auto"``) on a ``chroma run`` server: every test of
``tests/store/test_units.py`` that takes ``chroma_client``, here over HTTP."""

from __future__ import annotations

from tests.store import test_units
from tests.support.clients import server_variants

globals().update(server_variants(test_units))
