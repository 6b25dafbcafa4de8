"""The writer lock on a ``chroma run`` server's clients: every test of ``tests/store/test_library_writers.py``
that takes ``chroma_client``, here over HTTP (a server's clients take no lock)."""

from __future__ import annotations

from tests.store import test_library_writers
from tests.support.clients import server_variants

globals().update(server_variants(test_library_writers))
