"""The retrieval plans need no Chroma to be tested: a plan yields its reads as values
(hseg.retrieval.plans), so a few lines answering them from a list of records drive it. Here a
brute-force answer of every Knn and Get read gives the same whole-parent hits as Chroma's exact
search of the same records (a store of fewer than 4,096 records is searched exhaustively)."""

from __future__ import annotations

import uuid
from typing import Any

import chromadb
import numpy as np
import pytest

from hseg.chunking.records import records_for
from hseg.retrieval.parents import parents_plan
from hseg.retrieval.plans import Get, Knn, Plan, run_one
from hseg.retrieval.settings import SearchSettings
from tests.support.chunkings import build_synthetic_chunking


class Records:
    """A collection as a list of records: what a fake answer reads."""

    def __init__(self, records: list[Any]) -> None:
        self.by_id = {r.id: r for r in records}
        self.ids = [r.id for r in records]
        self.vectors = np.array([r.embedding for r in records], dtype=np.float64)
        self.vectors /= np.linalg.norm(self.vectors, axis=1, keepdims=True)

    def answer(self, read: Any) -> dict[str, list[Any]]:
        if isinstance(read, Knn):
            q = np.asarray(read.vector, dtype=np.float64)
            distance = 1.0 - self.vectors @ (q / np.linalg.norm(q))  # Chroma's cosine space
            order = [i for i in np.argsort(distance, kind="stable") if self._matches(self.ids[i], read.where)]
            ids = [self.ids[i] for i in order[:read.n]]
            return self._fields(ids, read.include, {self.ids[i]: float(distance[i]) for i in order[:read.n]})
        assert isinstance(read, Get)
        ids = [i for i in read.ids if i in self.by_id and self._matches(i, read.where)]
        return self._fields(ids, read.include, {})

    def _matches(self, rid: str, where: Any) -> bool:
        meta = self.by_id[rid].metadata
        return all(meta.get(k) == v for k, v in (where or {}).items() if not k.startswith("$"))

    def _fields(self, ids: list[str], include: tuple[str, ...], distances: dict[str, float]) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {"ids": ids}
        if "distances" in include:
            out["distances"] = [distances[i] for i in ids]
        if "metadatas" in include:
            out["metadatas"] = [dict(self.by_id[i].metadata) for i in ids]
        if "documents" in include:
            out["documents"] = [self.by_id[i].document for i in ids]
        if "embeddings" in include:
            out["embeddings"] = [list(self.by_id[i].embedding) for i in ids]
        return out


def driven(plan: Plan[Any], fake: Records) -> Any:
    """Run a plan, every read answered by ``fake`` (no Chroma)."""
    try:
        read = next(plan)
        while True:
            read = plan.send(fake.answer(read))
    except StopIteration as done:
        return done.value


@pytest.mark.parametrize("settings", [SearchSettings(k=3), SearchSettings(k=2, mode="cluster"),
                                      SearchSettings(k=4, mode="segment")])
def test_a_parents_plan_answered_by_a_fake_gives_chromas_hits(settings):
    rng = np.random.default_rng(7)
    records = [r for i in range(5) for r in records_for(build_synthetic_chunking(f"d{i}", rng))]
    collection = chromadb.EphemeralClient().create_collection(
        f"plans-{uuid.uuid4().hex}", configuration={"hnsw": {"space": "cosine", "ef_search": 4096}})
    collection.add(ids=[r.id for r in records], embeddings=[r.embedding for r in records],
                   documents=[r.document for r in records], metadatas=[r.metadata for r in records])
    fake = Records(records)
    for q in rng.standard_normal((5, 16)):
        q = q / np.linalg.norm(q)
        faked = driven(parents_plan(fake, q, settings), fake)
        real = run_one(parents_plan(collection, q, settings))
        assert [(h.cluster_id, h.matched_id) for h in faked] == [(h.cluster_id, h.matched_id) for h in real]
        assert np.allclose([h.score for h in faked], [h.score for h in real], atol=1e-5)
