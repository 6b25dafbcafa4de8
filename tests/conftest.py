"""Shared fixtures: offline model, the real encoder loaded once, paths to ../shared data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# nothing in the test run may reach a model hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO / ".." / "shared").resolve()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared is absent")
    return SHARED


@pytest.fixture(scope="session")
def encoder():
    """The real all-MiniLM-L6-v2, offline, shared by every end-to-end test."""
    from hseg.encoders import CachingEncoder, SentenceTransformerEncoder

    return CachingEncoder(SentenceTransformerEncoder(device="cpu"))


@pytest.fixture(scope="session")
def example_text() -> str:
    return (REPO / "examples" / "data" / "example.md").read_text(encoding="utf-8")
