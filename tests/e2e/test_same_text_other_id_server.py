"""A text already stored under another id, named on a ``chroma run`` server: every test of
``tests/store/test_same_text_other_id.py`` that takes ``chroma_client``, here over HTTP."""

from __future__ import annotations

from tests.store import test_same_text_other_id
from tests.support.clients import server_variants

globals().update(server_variants(test_same_text_other_id))
