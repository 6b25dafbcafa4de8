"""The stores the latency runs build and search, and the questions they ask.

* synthetic: clusters of random unit segment vectors plus their mean (:func:`synthetic_doc`,
  :func:`build_synthetic`), no model;
* openstax: ~400-character pieces of the 22 OpenStax training books (:func:`load_units`), four
  consecutive pieces of a module per cluster, segment vectors from all-MiniLM-L6-v2
  (:func:`openstax_docs`, :func:`build_openstax`), cluster vectors their token-weighted mean.

Both are written with ``store.add`` from ready chunkings, so that building measures the store,
not the chunker. :class:`LookupEncoder` answers a store's query embeddings from vectors computed
before timing.
"""

from __future__ import annotations

import csv
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from hseg.chunking.chunks import Chunking, Cluster, Segment, chunk_id
from hseg.store import HierarchicalStore
from hseg.text.sentences import split_sentences

logger = logging.getLogger(__name__)

SYNTHETIC_COLLECTION = "latency"
OPENSTAX_COLLECTION = "openstax"
#: the shared data sets (OpenStax books, textbook_qa questions)
DATA = Path("/work/shared/data")


def load_units(books: Path, n: int, size: int = 400) -> list[tuple[str, str]]:
    """``(document id, text)`` pieces: each book module's sentences (one a line, Wiki-727K format,
    section headers left out) packed into ~``size`` characters."""
    out: list[tuple[str, str]] = []
    for path in sorted(books.glob("*/*.txt")):
        doc = f"{path.parent.name}/{path.stem}"
        piece = ""
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("========") or not line.strip():
                continue
            piece = f"{piece} {line}" if piece else line
            if len(piece) >= size:
                out.append((doc, piece))
                piece = ""
        if piece:
            out.append((doc, piece))
    # interleave the books so that any prefix holds all of them (and the textbook_qa books)
    by_book: dict[str, list[tuple[str, str]]] = {}
    for unit in out:
        by_book.setdefault(unit[0].split("/")[0], []).append(unit)
    mixed: list[tuple[str, str]] = []
    queues = [list(reversed(v)) for v in by_book.values()]
    while len(mixed) < n and any(queues):
        mixed += [q.pop() for q in queues if q]
    return mixed[:n]


def synthetic_doc(doc_id: str, rng: np.random.Generator, n_clusters: int, n_segments: int, dim: int) -> Chunking:
    """A document of ``n_clusters`` parents, each of ``n_segments`` random unit segment vectors."""
    segments: list[Segment] = []
    clusters: list[Cluster] = []
    pos = 0
    vecs = rng.standard_normal((n_clusters * n_segments, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    tokens = rng.integers(32, 224, size=n_clusters * n_segments)
    for c in range(n_clusters):
        members = []
        for j in range(n_segments):
            i = c * n_segments + j
            text = f"{doc_id} segment {i}. "
            seg = Segment(chunk_id(doc_id, "segment", pos, pos + len(text)), doc_id, i, pos, pos + len(text), text,
                          int(tokens[i]), i, i + 1, vecs[i])
            pos += len(text)
            members.append(seg)
        mean = vecs[c * n_segments:(c + 1) * n_segments].mean(axis=0)  # the members' vectors
        mean /= np.linalg.norm(mean)
        start, end = members[0].start, members[-1].end
        clusters.append(Cluster(chunk_id(doc_id, "cluster", start, end), doc_id, c, start, end,
                                "".join(s.text for s in members), sum(s.token_count for s in members),
                                tuple(members), mean))
        segments.extend(members)
    return Chunking(doc_id, "".join(s.text for s in segments), tuple(segments), tuple(clusters))


def build_synthetic(store: HierarchicalStore, parents: int, segments: int, dim: int, per_doc: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    n_docs = (parents + per_doc - 1) // per_doc
    batch: list[Chunking] = []
    for d in range(n_docs):
        batch.append(synthetic_doc(f"doc{d}", rng, min(per_doc, parents - d * per_doc), segments, dim))
        if len(batch) * per_doc * (segments + 1) >= store.max_batch_size() or d == n_docs - 1:
            store.add(batch)
            batch = []
            logger.info("built %d/%d documents (%d records, %.0f s)", d + 1, n_docs, store.count(),
                        time.perf_counter() - t0)
    return time.perf_counter() - t0


class LookupEncoder:
    """The store's encoder, except that queries are looked up (embedded once, before timing)."""

    def __init__(self, name: str, vectors: dict[str, np.ndarray]) -> None:
        self._name, self._vectors = name, vectors

    @property
    def name(self) -> str:
        return self._name

    def encode(self, texts: Any) -> np.ndarray:  # pragma: no cover - never called while timing
        raise RuntimeError("LookupEncoder only answers queries")

    def encode_query(self, text: str) -> np.ndarray:
        return self._vectors[text]


def openstax_docs(pieces: list[tuple[str, str]], vectors: np.ndarray, per_cluster: int = 4) -> list[Chunking]:
    """Documents of real text: each module's pieces are its segments, ``per_cluster`` a cluster."""
    by_doc: dict[str, list[int]] = {}
    for i, (doc, _) in enumerate(pieces):
        by_doc.setdefault(doc, []).append(i)
    out = []
    for doc_id, idx in by_doc.items():
        segments: list[Segment] = []
        clusters: list[Cluster] = []
        pos = 0
        for c, start in enumerate(range(0, len(idx), per_cluster)):
            members: list[Segment] = []
            for i in idx[start:start + per_cluster]:
                text = pieces[i][1] + "\n"
                n = len(segments) + len(members)
                # cuts at its sentence ends, sized as the segment is (rule 6 of the auto unit reads them)
                ends = [span.end for span in split_sentences(text) if span.end < len(text)]
                cuts = tuple((end, max(1, end // 4)) for end in ends)
                members.append(Segment(chunk_id(doc_id, "segment", pos, pos + len(text)), doc_id, n, pos,
                                       pos + len(text), text, max(1, len(text) // 4), n, n + 1, vectors[i], cuts=cuts))
                pos += len(text)
            weights = np.array([s.token_count for s in members], dtype=np.float32)
            mean = (vectors[idx[start:start + per_cluster]] * weights[:, None]).sum(axis=0)
            mean /= np.linalg.norm(mean)
            clusters.append(Cluster(chunk_id(doc_id, "cluster", members[0].start, members[-1].end), doc_id, c,
                                    members[0].start, members[-1].end, "".join(s.text for s in members),
                                    sum(s.token_count for s in members), tuple(members), mean))
            segments.extend(members)
        out.append(Chunking(doc_id, "".join(s.text for s in segments), tuple(segments), tuple(clusters)))
    return out


def build_openstax(store: HierarchicalStore, folder: Path, records: int, encoder: Any) -> float:
    """The ``openstax`` store (see the module docstring); returns the seconds ``store.add`` took."""
    pieces = load_units(DATA / "segmentation" / "train_openstax", records * 4 // 5)
    cache = folder / f"vectors-{len(pieces)}.npy"
    if cache.exists():
        vectors = np.load(cache)
    else:
        t0 = time.perf_counter()
        vectors = np.asarray(encoder.encode([t for _, t in pieces]), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        np.save(cache, vectors)
        logger.info("encoded %d pieces in %.0f s", len(pieces), time.perf_counter() - t0)
    docs = openstax_docs(pieces, vectors)
    t0 = time.perf_counter()
    batch: list[Chunking] = []
    for i, doc in enumerate(docs):
        batch.append(doc)
        if sum(len(d.segments) + len(d.clusters) for d in batch) >= 2000 or i == len(docs) - 1:
            store.add(batch)
            batch = []
    return time.perf_counter() - t0


def questions(path: str, limit: int) -> list[str]:
    """The first ``limit`` questions of a CSV with a ``question`` column."""
    with open(path, newline="", encoding="utf-8") as fh:
        qs = [row["question"] for row in csv.DictReader(fh)]
    return qs[:limit]
