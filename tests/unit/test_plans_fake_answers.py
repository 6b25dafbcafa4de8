"""The retrieval plans need no Chroma and no lexical index to be tested: a plan yields its reads as
values (hseg.retrieval.plans), so a few lines answering them from a list of records drive it. Here a
brute-force answer of every Knn and Get read gives the same hits as Chroma's exact search of the
same records (a store of fewer than 4,096 records is searched exhaustively): whole parents densely,
and every unit (cluster, segment, auto on the unit index and gathered) with a lexical side, whose
reads a table of the same records answers, refusing any read that does not come as a value."""

from __future__ import annotations

import re
import uuid
from collections import namedtuple
from typing import Any

import chromadb
import numpy as np
import pytest

from hseg.chunking.records import records_for
from hseg.chunking.schema import CLUSTER_ID_KEY, CUTS_KEY, DOC_ID_KEY, INDEX_KEY, SEGMENT, TOKENS_KEY, level_of
from hseg.retrieval.lexical_query import LexicalQuery, LexicalRow, query_terms
from hseg.retrieval.parents import parents_plan
from hseg.retrieval.passages import units_plan
from hseg.retrieval.plans import Get, Knn, Lexical, Plan, run_many, run_one
from hseg.retrieval.settings import SearchSettings
from hseg.store import HierarchicalStore
from hseg_testing.fakes import HashingEncoder
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


def driven(plan: Plan[Any], fake: Records | None = None) -> Any:
    """Run a plan, every read answered by ``fake``, or by the fake it names: its collection, or for a
    lexical read its index (no Chroma, no SQLite)."""
    try:
        read = next(plan)
        while True:
            source = fake or (read.index if isinstance(read, Lexical) else read.collection)
            read = plan.send(source.answer(read))
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


# --------------------------------------------------------------------------- the lexical side as values

Stored = namedtuple("Stored", "id embedding metadata document")
VOCAB = "tide moon river delta glacier comet orbit valve piston court verdict yeast dough market price ridge".split()
QUESTIONS = ["tide moon river", "glacier ridge court", "comet orbit moon tide delta", "yeast", "market price valve"]


class Table:
    """A lexical index as a dict of segment records: every read a search makes of it (a
    :class:`~hseg.retrieval.lexical_query.LexicalSource`), a segment scored by how often it holds the
    query's words (a stand-in for BM25, which the plans never look inside). With ``strict``, a read
    that does not come as a value (through :meth:`answer`) fails."""

    def __init__(self, records: list[Any], strict: bool) -> None:
        segments = sorted((r for r in records if level_of(r.metadata) == SEGMENT), key=lambda r: r.id)
        self.by_id = {r.id: r for r in segments}
        self.rowid = {r.id: i + 1 for i, r in enumerate(segments)}
        self.strict, self.answering, self.reads = strict, False, 0

    def answer(self, read: Lexical) -> Any:
        self.answering, self.reads = True, self.reads + 1
        try:
            if read.kind == "scored":
                return self.scored(read.keys)
            if read.kind == "count":
                return self.count()
            if read.kind == "following":
                return self.following(read.keys, read.limit)
            return getattr(self, read.kind)(read.keys)
        finally:
            self.answering = False

    def _read(self) -> None:
        assert self.answering or not self.strict, "a lexical read made outside a plan's values"

    def scored(self, terms):
        self._read()
        scores = {}
        for sid, r in self.by_id.items():
            words = re.findall(r"\w+", r.document.lower())
            x = sum(words.count(t) for t in terms) / (1.0 + 0.01 * len(words))
            if x > 0:
                scores[self.rowid[sid]] = x
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
        return np.array([r for r, _ in ranked], dtype=np.int64), np.array([x for _, x in ranked])

    def scored_many(self, queries):
        return [self.scored(terms) for terms in queries]

    def count(self):
        self._read()
        return len(self.by_id)

    def ids_at(self, rowids):
        self._read()
        named = {r: sid for sid, r in self.rowid.items()}
        return {r: named[r] for r in rowids if r in named}

    def rowids_of(self, segment_ids):
        self._read()
        return {sid: self.rowid[sid] for sid in segment_ids if sid in self.rowid}

    def _row(self, sid, cuts=False):
        m = self.by_id[sid].metadata
        return LexicalRow(sid, m[DOC_ID_KEY], m[CLUSTER_ID_KEY], int(m[INDEX_KEY]), int(m[TOKENS_KEY]),
                          m.get(CUTS_KEY) if cuts else None)

    def rows(self, segment_ids):
        self._read()
        return {sid: self._row(sid) for sid in segment_ids if sid in self.by_id}

    def records(self, segment_ids):
        self._read()
        return {sid: (dict(self.by_id[sid].metadata), self.by_id[sid].document) for sid in segment_ids
                if sid in self.by_id}

    def _members(self, cluster_id):
        return sorted((s for s, r in self.by_id.items() if r.metadata[CLUSTER_ID_KEY] == cluster_id),
                      key=lambda s: int(self.by_id[s].metadata[INDEX_KEY]))

    def cluster_sizes(self, cluster_ids):
        self._read()
        out = {}
        for c in cluster_ids:
            if members := self._members(c):
                out[c] = (len(members), sum(int(self.by_id[s].metadata[TOKENS_KEY]) for s in members))
        return out

    def cluster_segments(self, cluster_ids):
        self._read()
        return {c: self._members(c) for c in cluster_ids}

    def following(self, segment_ids, max_tokens):
        self._read()
        at = {(r.metadata[DOC_ID_KEY], int(r.metadata[INDEX_KEY])): sid for sid, r in self.by_id.items()}
        out = {}
        for sid in segment_ids:
            if sid not in self.by_id:
                continue
            row, chain, total = self._row(sid), [], 0
            while max_tokens > 0 and (row.doc_id, row.position + 1) in at:
                row = self._row(at[(row.doc_id, row.position + 1)], cuts=True)
                chain.append(row)
                if total + row.tokens > max_tokens:
                    break
                total += row.tokens
            out[sid] = chain
        return out


def dumped(collection: Any) -> list[Stored]:
    got = collection.get(include=["embeddings", "metadatas", "documents"])
    return [Stored(i, e, m, d) for i, e, m, d in zip(got["ids"], got["embeddings"], got["metadatas"], got["documents"])]


def hybrid_plan(collection: Any, units: Any, table: Any, q: np.ndarray, text: str, settings: SearchSettings) -> Plan:
    lexical = LexicalQuery(table, tuple(query_terms(text)), settings.lexical_weight)
    if settings.resolved_unit == "cluster":
        return parents_plan(collection, q, settings, lexical=lexical)
    return units_plan(collection, q, settings, unit_index=units if settings.cluster_weight == 0.5 else None,
                      lexical=lexical, table=table)


@pytest.mark.parametrize("settings", [
    SearchSettings(k=3, lexical_weight=0.4),
    SearchSettings(budget_tokens=150, mode="segment", lexical_weight=0.4),
    SearchSettings(k=4, unit="segment", lexical_weight=0.4),
    SearchSettings(budget_tokens=150, unit="segment", lexical_weight=0.4),
    SearchSettings(budget_tokens=150, unit="auto", lexical_weight=0.4),
    SearchSettings(k=3, unit="auto", lexical_weight=0.4),
    SearchSettings(budget_tokens=150, unit="auto", cluster_weight=0.3, lexical_weight=0.4),
], ids=lambda s: f"{s.resolved_unit}-{s.k or s.budget_tokens}-w{s.cluster_weight}")
def test_a_hybrid_plan_answered_by_fakes_gives_chromas_hits(settings):
    """Every unit's hybrid path, its Chroma reads answered by brute force and its lexical reads by the
    table, gives the hits the same plan gives on Chroma itself (the table the same in both); the
    fakes see every read, and many plans run together answer as each alone."""
    rng = np.random.default_rng(11)
    store = HierarchicalStore(f"plans-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(),
                              encoder=HashingEncoder(16))
    store.add([build_synthetic_chunking(f"doc{i}", rng, n_clusters=6, max_segments=5, vocabulary=VOCAB)
               for i in range(4)])
    collection, units = store.collection, store._parts.units.existing
    records = dumped(collection)
    fake, fake_units = Records(records), Records(dumped(units))
    strict, table = Table(records, strict=True), Table(records, strict=False)
    queries = [q / np.linalg.norm(q) for q in rng.standard_normal((len(QUESTIONS), 16))]
    real = []
    for q, text in zip(queries, QUESTIONS):
        before = strict.reads
        faked = driven(hybrid_plan(fake, fake_units, strict, q, text, settings))
        assert strict.reads > before  # the lexical side was read, and only as values
        real.append(run_one(hybrid_plan(collection, units, table, q, text, settings)))
        assert [(h.segment_ids, h.cluster_id, h.start, h.end) for h in faked] == \
            [(h.segment_ids, h.cluster_id, h.start, h.end) for h in real[-1]]
        assert np.allclose([h.score for h in faked], [h.score for h in real[-1]], atol=1e-5)
    together = run_many([hybrid_plan(collection, units, table, q, t, settings) for q, t in zip(queries, QUESTIONS)])
    assert [[(h.segment_ids, h.score) for h in hits] for hits in together] == \
        [[(h.segment_ids, h.score) for h in hits] for hits in real]
