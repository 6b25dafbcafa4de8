"""hseg.store on a ``chroma run`` server: every test of ``tests/store/test_store.py`` that takes
``chroma_client``, here over HTTP, and the ``host``/``port`` constructor.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from hseg.store import HierarchicalStore
from tests.store import test_store
from tests.support.clients import server_variants

globals().update(server_variants(test_store))


@pytest.mark.integration
def test_host_port_constructor(chroma_server, make_chunking):
    name = f"t-{uuid.uuid4().hex}"
    store = HierarchicalStore(name, host=chroma_server.host, port=chroma_server.port)
    try:
        ch = make_chunking("d", np.random.default_rng(23))
        assert store.add(ch) == store.count() > 0
        assert store.search(ch.segments[0].embedding, k=1, mode="segment")[0].matched_id == ch.segments[0].id
    finally:
        store.client.delete_collection(name)


@pytest.mark.integration
def test_a_servers_store_runs_on_the_server_backend(chroma_server, tmp_path, monkeypatch):
    """The backend chosen for a client of ``chroma run`` names the server and keeps a lexical cache (issue 55)."""
    monkeypatch.setenv("HSEG_CACHE", str(tmp_path / "cache"))
    name = f"t-{uuid.uuid4().hex}"
    store = HierarchicalStore(name, host=chroma_server.host, port=chroma_server.port)
    try:
        backend = store._parts.backend
        assert (backend.kind, backend.address, backend.path) == ("server", f"{chroma_server.host}:{chroma_server.port}",
                                                                 None)
        location = store._parts.lexical.location
        assert location.kind == "cache" and tmp_path / "cache" in location.path.parents
        assert store.writer_turn() is None and not hasattr(backend, "fresh") and store._parts.units is not None
    finally:
        store.client.delete_collection(name)
