"""Reliability (issue 7), fuzzing (short): arbitrary unicode and markdown/CJK/Arabic/emoji word salad
through chunk, ``store.add`` and the records read back (hashing encoder, in-memory Chroma).

The long run is ``python -m benchmarks.fuzz --seconds 120``; it reuses the strategies and checks of
``hseg_testing/checks.py``. See ``docs/reliability.md``.
"""

from __future__ import annotations

import uuid

import chromadb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hseg.errors import UnreadableDocumentError
from hseg.store import HierarchicalStore
from hseg.text.binary import binary_reason
from hseg_testing.checks import TEXTS, check_chunking, check_store_round_trip
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder


@pytest.mark.filterwarnings("ignore:document .* is blank")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(text=TEXTS)
def test_fuzz_chunk_and_store_round_trip(text):
    """Arbitrary unicode through the whole path: chunk, write, read back; spans exact, nothing lost."""
    result = FUZZ_CHUNKER.chunk(text, f"doc-{uuid.uuid4().hex[:8]}")
    check_chunking(result, text)
    check_store_round_trip(FUZZ_STORE, result, text)


@settings(max_examples=40, deadline=None)
@given(text=st.tuples(st.text(max_size=300), st.text(max_size=200)).map("\x00".join))
def test_fuzz_binary_looking_text_is_refused(text):
    """Arbitrary unicode that looks like bytes (here a NUL near its start) is refused before chunking,
    with the error that names the document and the fix; never chunked into records."""
    assert binary_reason(text) is not None
    with pytest.raises(UnreadableDocumentError, match="not text"):
        FUZZ_CHUNKER.chunk(text, "doc-binary")


FUZZ_CHUNKER = small_chunker()
FUZZ_STORE = HierarchicalStore(f"rel-fuzz-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(),
                               encoder=HashingEncoder())
