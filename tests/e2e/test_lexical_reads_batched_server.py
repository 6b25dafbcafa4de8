"""The lexical reads of many searches answered together on a ``chroma run`` server's store (its
client's cache of the lexical index): the test of ``tests/store/test_lexical_reads_batched.py``, here
over HTTP."""

from __future__ import annotations

from tests.store import test_lexical_reads_batched
from tests.support.clients import server_variants

globals().update(server_variants(test_lexical_reads_batched))
