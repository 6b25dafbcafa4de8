"""Shared fixtures: offline model, the real encoder loaded once, paths to ../shared data."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest

# nothing in the test run may reach a model hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
# the lexical index's per-client caches (stores on a chroma run server) stay out of ~/.cache
os.environ.setdefault("HSEG_CACHE", tempfile.mkdtemp(prefix="hseg-test-cache-"))

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


# --------------------------------------------------------------------------- Chroma (hseg.store)
# Synthetic chunkings and one fixture per kind of Chroma client, reusable by the adapter tests.


def build_synthetic_chunking(doc_id, rng, *, n_clusters=4, max_segments=4, dim=16, segment_vectors=None,
                             vocabulary=None):
    """A valid ``Chunking`` with random unit vectors (cluster vector = normalised segment mean).

    ``segment_vectors`` (n, dim) fixes the segment vectors; then every cluster gets
    ``max_segments`` segments and ``n`` must equal ``n_clusters * max_segments``. With
    ``vocabulary`` (a list of words) each segment's text is a few words drawn from it (for the
    lexical side), instead of a run of ``w``.
    """
    import numpy as np

    from hseg.chunking.chunks import Chunking, Cluster, Segment, chunk_id

    sizes = ([max_segments] * n_clusters if segment_vectors is not None
             else [int(x) for x in rng.integers(1, max_segments + 1, n_clusters)])
    segments, clusters, pos, idx = [], [], 0, 0
    for ci, size in enumerate(sizes):
        members = []
        for _ in range(size):
            if vocabulary is None:
                text = f"{doc_id} segment {idx} " + "w" * int(rng.integers(1, 30)) + ".\n"
            else:
                words = rng.choice(vocabulary, size=int(rng.integers(3, 12)))
                text = f"{doc_id} segment {idx} " + " ".join(words) + ".\n"
                # a cut after each word, sized as the segment is (rule 6 of the auto unit can end there)
                cuts = tuple((m.end(), 1 + m.end() // 4) for m in re.finditer(r"[a-z]+(?= )", text))
            if segment_vectors is not None:
                vec = np.asarray(segment_vectors[idx], dtype=np.float32)
            else:
                vec = rng.standard_normal(dim).astype(np.float32)
            vec = vec / np.linalg.norm(vec)
            members.append(Segment(chunk_id(doc_id, "segment", pos, pos + len(text)), doc_id, idx, pos,
                                   pos + len(text), text, 1 + len(text) // 4, idx, idx + 1, vec,
                                   cuts=cuts if vocabulary is not None else ()))
            pos += len(text)
            idx += 1
        mean = np.mean([s.embedding for s in members], axis=0)
        start, end = members[0].start, members[-1].end
        clusters.append(Cluster(chunk_id(doc_id, "cluster", start, end), doc_id, ci, start, end,
                                "".join(s.text for s in members), sum(s.token_count for s in members),
                                tuple(members), (mean / np.linalg.norm(mean)).astype(np.float32)))
        segments.extend(members)
    return Chunking(doc_id, "".join(s.text for s in segments), tuple(segments), tuple(clusters))


@pytest.fixture
def make_chunking():
    """Factory: ``make_chunking(doc_id, rng, n_clusters=4, max_segments=4, dim=16)``."""
    return build_synthetic_chunking


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """One ``chroma run`` server for the session (skipped when the ``chroma`` command is absent)."""
    try:
        from tests.chroma_server import ChromaServer, chroma_binary
    except ImportError:  # tests/ run as a plain directory (no tests/__init__.py)
        from chroma_server import ChromaServer, chroma_binary

    if chroma_binary() is None:
        pytest.skip("the 'chroma' command is not installed")
    server = ChromaServer(tmp_path_factory.mktemp("chroma-server") / "data")
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["ephemeral", "persistent", pytest.param("http", marks=pytest.mark.integration)])
def chroma_client(request, tmp_path):
    """A chromadb client of each kind: in-memory, on-disk in ``tmp_path``, and HTTP to ``chroma run``.

    Ephemeral clients share state inside a process: use a fresh collection name per test
    (``chroma_collection_name``).
    """
    import chromadb

    if request.param == "ephemeral":
        return chromadb.EphemeralClient()
    if request.param == "persistent":
        return chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    return request.getfixturevalue("chroma_server").client()


@pytest.fixture
def chroma_collection_name():
    """A unique, valid collection name (ephemeral clients share state, so never reuse one)."""
    import uuid

    return f"t-{uuid.uuid4().hex}"
