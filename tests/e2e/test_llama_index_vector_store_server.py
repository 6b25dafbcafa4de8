"""LlamaIndex writes through hseg on a ``chroma run`` server's clients: every test of
``tests/store/test_llama_index_vector_store.py`` that takes ``chroma_client``, here over HTTP."""

from __future__ import annotations

from tests.store import test_llama_index_vector_store
from tests.support.clients import server_variants

globals().update(server_variants(test_llama_index_vector_store))
