"""Fixtures of the end-to-end lane only: the real model and a ``chroma run`` server. They live here so
that no test of ``tests/unit``, ``tests/store`` or ``tests/stress`` can load the model or start a server.

``chroma_client`` is the server's client here: the tests of ``tests/store`` that take it are imported by
the ``*_server.py`` modules of this folder and so run once more over HTTP (the collection stops with an
error if a store module with such tests has no ``<module>_server.py`` here).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clients import client_fixture, client_tests

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def encoder():
    """The real all-MiniLM-L6-v2, offline, shared by every end-to-end test."""
    from hseg.encoders import CachingEncoder, SentenceTransformerEncoder

    return CachingEncoder(SentenceTransformerEncoder(device="cpu"))


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """One ``chroma run`` server for the session (skipped when the ``chroma`` command is absent)."""
    from hseg_testing.chroma_server import ChromaServer, chroma_binary

    if chroma_binary() is None:
        pytest.skip("the 'chroma' command is not installed")
    server = ChromaServer(tmp_path_factory.mktemp("chroma-server") / "data")
    server.start()
    yield server
    server.stop()


#: HTTP to the session's chroma run server
chroma_client = client_fixture("http")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every module of tests/store with tests that take ``chroma_client`` has its ``*_server.py`` here,
    which runs them over HTTP (as one fixture of every client kind did before the lanes)."""
    missing = [f"tests/e2e/{path.stem}_server.py" for path in sorted((HERE.parent / "store").glob("test_*.py"))
               if client_tests(path) and not (HERE / f"{path.stem}_server.py").is_file()]
    if missing:
        raise pytest.UsageError(f"{', '.join(missing)} missing: the chroma_client tests of their tests/store modules "
                                "would never run on a chroma run server (see tests/e2e/test_store_server.py)")
