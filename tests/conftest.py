"""Fixtures of every lane: the offline environment, ../shared data, the example document, synthetic
chunkings and the in-process Chroma clients.

The lanes are the folders: ``tests/unit`` (pure and fast: a plain ``pytest`` runs only this lane),
``tests/store`` (in-process Chroma, embedded stores), ``tests/e2e`` (child processes, ``chroma run``
servers, Ray, the README, notebooks, a browser, the real model: its fixtures are ``tests/e2e/conftest.py``)
and ``tests/stress`` (``kill -9`` and two-writer trials). ``python -m pytest -q tests`` runs them all;
each test also carries its lane's marker (``-m "not stress"``). Helpers are ``tests/support``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# nothing in the test run may reach a model hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
# the lexical index's per-client caches (stores on a chroma run server) stay out of ~/.cache
os.environ.setdefault("HSEG_CACHE", tempfile.mkdtemp(prefix="hseg-test-cache-"))

from tests.support import REPO, shared_or_skip  # noqa: E402
from tests.support.chunkings import build_synthetic_chunking  # noqa: E402
from tests.support.clients import IN_PROCESS, client_fixture  # noqa: E402

LANES = ("unit", "store", "e2e", "stress")
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test gets the marker of its lane, the folder under ``tests/`` it lives in."""
    for item in items:
        parts = Path(item.path).resolve().relative_to(TESTS).parts
        if len(parts) > 1 and parts[0] in LANES:
            item.add_marker(parts[0])


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return shared_or_skip()


@pytest.fixture(scope="session")
def example_text() -> str:
    return (REPO / "examples" / "data" / "example.md").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- Chroma (hseg.store)
# Synthetic chunkings and one fixture per kind of Chroma client, reusable by the adapter tests.


@pytest.fixture
def make_chunking():
    """Factory: ``make_chunking(doc_id, rng, n_clusters=4, max_segments=4, dim=16)``
    (:func:`tests.support.chunkings.build_synthetic_chunking`)."""
    return build_synthetic_chunking


#: in-memory and on-disk clients here; tests/e2e/conftest.py makes it the chroma run server's there
chroma_client = client_fixture(*IN_PROCESS)


@pytest.fixture
def chroma_collection_name():
    """A unique, valid collection name (ephemeral clients share state, so never reuse one)."""
    import uuid

    return f"t-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def one_torch_thread():
    """Torch on one thread for a module's tests: a tiny LSTM gains nothing from threads, and on a loaded
    machine their spin-waits cost 10x."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _load_hashing_encoder(name=None, backend=None, threads=None):
    from hseg_testing.fakes import HashingEncoder

    assert name == HashingEncoder.name, name
    return HashingEncoder()


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """The CLI's encoder is the hashing encoder (asked for by its name), cwd = tmp_path (so document
    ids are short relative paths). A module may define its own ``fake`` over this one."""
    from hseg.encoders import factory

    monkeypatch.setattr(factory, "load_encoder", _load_hashing_encoder)
    monkeypatch.chdir(tmp_path)
    return tmp_path
