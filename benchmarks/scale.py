"""A store grown to a million records: what it costs to build, hold and search at each size.

The store is :mod:`benchmarks.query_latency`'s ``openstax`` store (real OpenStax text, all-MiniLM-L6-v2 vectors,
four segments a cluster), grown by copies: copy 0 is the corpus as it is; copy k > 0 repeats every
document under the id ``<doc>#k`` with each segment vector moved by a small random step
(``--jitter``, renormalised; cosine ~0.99 to the original) so that the HNSW graph holds no
duplicates, and cluster vectors the token-weighted means of their segments. Encoding is done once
(``--vectors``, an ``.npy`` of the first pieces' vectors, made by ``query_latency``), so building
measures the store, not the model.

For each ``--sizes`` (records, ascending; the store grows to each in turn and the build resumes where
it stopped) a fresh reader process measures:

* opening the store and its first plain query, then its first default search (the lexical index
  checked, or a server client's cache built: a full rebuild from the collection);
* p50 / p95 of a plain Chroma top-5 query and of every unit at its default settings (hybrid
  ``unit="auto"`` at budgets 1024 and 4096, ``unit="segment"`` and ``unit="cluster"`` at 1024),
  interleaved, and their ratio to the plain query;
* the kNN's recall@10 against an exact search of the same vectors (numpy, every record) and its
  p50, at hseg's ``ef_search`` (4096) and at Chroma's default (100);
* the reader's peak RSS after its searches (before the exact search, which holds every vector), and
  the lexical index's full rebuild (``sync_lexical_index``);

and the parent adds the build time and throughput and the disk sizes (Chroma's files, the lexical
index). With ``--server`` the reader is a client of ``chroma run`` on the same directory.

Usage (from the repository root):
    python -m benchmarks.scale --path /tmp/scale --vectors /tmp/sw40k/vectors-32000.npy \\
        --sizes 100000 300000 1000000 --out benchmarks/results/scale.md [--server]
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from hseg.chunking.chunks import Chunking, Cluster, Segment
from hseg.store import HierarchicalStore

from .harness.stores import DATA, LookupEncoder, load_units, openstax_docs, questions
from .harness.timing import PLAIN, append_report, measure, percentiles

logger = logging.getLogger("scale")

COLLECTION = "scale"
#: hseg's ef_search on the collections it creates, and Chroma's own default
EF_HSEG, EF_CHROMA = 4096, 100


def corpus(vectors_path: Path) -> tuple[list[tuple[str, str]], np.ndarray]:
    vectors = np.load(vectors_path).astype(np.float32)
    pieces = load_units(DATA / "segmentation" / "train_openstax", len(vectors))
    if len(pieces) != len(vectors):
        raise SystemExit(f"--vectors: {len(vectors)} vectors for {len(pieces)} pieces of text")
    return pieces, vectors


def copy_docs(pieces: list[tuple[str, str]], vectors: np.ndarray, k: int, jitter: float) -> list[Chunking]:
    """Copy ``k`` of the corpus (see the module docstring)."""
    if k:
        rng = np.random.default_rng(k)
        vectors = vectors + jitter / np.sqrt(vectors.shape[1]) * rng.standard_normal(vectors.shape).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        pieces = [(f"{doc}#{k}", text) for doc, text in pieces]
    return openstax_docs(pieces, vectors)


def grow(store: HierarchicalStore, state: Path, pieces: list[tuple[str, str]], vectors: np.ndarray, size: int,
         jitter: float) -> None:
    """Add copies until the store holds at least ``size`` records; each copy's completion is noted
    in ``state`` (a copy cut short is written again whole: writes are upserts)."""
    done = json.loads(state.read_text()) if state.exists() else {"copies": 0, "seconds": 0.0}
    while store.count() < size:
        k = int(done["copies"])
        t0 = time.perf_counter()
        batch: list[Chunking] = []
        for doc in copy_docs(pieces, vectors, k, jitter):
            batch.append(doc)
            if sum(len(d.segments) + len(d.clusters) for d in batch) >= 2000:
                store.add(batch)
                batch = []
        if batch:
            store.add(batch)
        done = {"copies": k + 1, "seconds": done["seconds"] + time.perf_counter() - t0}
        state.write_text(json.dumps(done))
        print(f"copy {k}: {store.count():,} records, {done['seconds']:.0f} s building so far", flush=True)


def all_vectors(pieces: list[tuple[str, str]], vectors: np.ndarray, copies: int,
                jitter: float) -> tuple[list[str], np.ndarray]:
    """Every record's id and vector, as the store holds them (for the exact search)."""
    ids: list[str] = []
    parts: list[np.ndarray] = []
    for k in range(copies):
        for doc in copy_docs(pieces, vectors, k, jitter):
            units: list[Segment | Cluster] = [*doc.segments, *doc.clusters]
            ids += [u.id for u in units]
            parts.append(np.stack([np.asarray(u.embedding, dtype=np.float32) for u in units]))
    return ids, np.concatenate(parts)


def exact_top(matrix: np.ndarray, queries: np.ndarray, k: int) -> Iterator[np.ndarray]:
    for q in queries:
        scores = matrix @ q
        yield np.argpartition(-scores, k)[:k]


def knn(store: HierarchicalStore, path: str, queries: np.ndarray, ids: list[str],
        matrix: np.ndarray) -> dict[int, tuple]:
    """``{ef_search: (recall@10, p50 ms)}`` of Chroma's kNN against the exact top 10."""
    truth = [{ids[i] for i in top} for top in exact_top(matrix, queries, 10)]
    import chromadb
    from chromadb.api.client import SharedSystemClient

    out = {}
    for ef in (EF_HSEG, EF_CHROMA):
        store.collection.modify(configuration={"hnsw": {"ef_search": ef}})
        # an embedded client keeps the HNSW settings it loaded: a client opened after the change reads them
        SharedSystemClient.clear_system_cache()
        client = chromadb.PersistentClient(path=path)
        col = client.get_collection(store.collection.name)
        col.query(query_embeddings=[queries[0]], n_results=10)
        times, hits = [], 0
        for q, want in zip(queries, truth):
            t0 = time.perf_counter()
            got = col.query(query_embeddings=[q], n_results=10, include=[])["ids"][0]
            times.append(time.perf_counter() - t0)
            hits += len(want & set(got))
        out[ef] = (hits / (10 * len(queries)), percentiles(times)[0])
        client._system.stop()  # type: ignore[attr-defined]  # frees the loaded HNSW index
    store.collection.modify(configuration={"hnsw": {"ef_search": EF_HSEG}})
    return out


def reader(args: argparse.Namespace) -> dict[str, Any]:
    """One fresh reader's measurements (run in its own process: ``measure`` subcommand)."""
    pieces, vectors = corpus(Path(args.vectors))
    texts = questions(str(DATA / "textbook_qa" / "questions_term.csv"), args.queries)
    qvec = np.load(Path(args.path) / "questions.npy")[:len(texts)]
    out: dict[str, Any] = {}
    with ExitStack() as stack:
        t0 = time.perf_counter()
        if args.server:
            from hseg_testing.chroma_server import ChromaServer

            server = stack.enter_context(ChromaServer(args.path))
            store = HierarchicalStore(COLLECTION, client=server.client(), encoder=LookupEncoder(
                "sentence-transformers/all-MiniLM-L6-v2", dict(zip(texts, qvec))))
        else:
            store = HierarchicalStore(COLLECTION, path=args.path, encoder=LookupEncoder(
                "sentence-transformers/all-MiniLM-L6-v2", dict(zip(texts, qvec))))
        store.collection.query(query_embeddings=[qvec[0]], n_results=5)
        out["open + first plain query s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        store.search(texts[1], budget_tokens=1024)
        out["first default search s"] = time.perf_counter() - t0
        fns = {
            PLAIN: lambda q, _: store.collection.query(query_embeddings=[q], n_results=5),
            "auto, budget 1024 (the default search)": lambda _, t: store.search(t, budget_tokens=1024),
            "auto, budget 4096": lambda _, t: store.search(t, budget_tokens=4096),
            "segment, budget 1024": lambda _, t: store.search(t, budget_tokens=1024, unit="segment"),
            "cluster (parents), budget 1024": lambda _, t: store.search(t, budget_tokens=1024, unit="cluster"),
        }
        times = measure(fns, qvec, texts, args.rounds, warmup=5)
        out["latency"] = {name: percentiles(ts) for name, ts in times.items()}
        # a reader's own: before the exact search below holds every vector beside the index
        out["peak RSS MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if not args.server and not args.no_knn:
            copies = json.loads((Path(args.path) / "built.json").read_text())["copies"]
            ids, matrix = all_vectors(pieces, vectors, copies, args.jitter)
            out["knn"] = knn(store, args.path, qvec, ids, matrix)
            del matrix
        t0 = time.perf_counter()
        out["lexical segments"] = store.sync_lexical_index()
        out["lexical rebuild s"] = time.perf_counter() - t0
        out["records"] = store.count()
    return out


def disk_mb(path: Path) -> tuple[float, float]:
    """(Chroma's files, the lexical index's files) in MB."""
    lexical = sum(f.stat().st_size for f in (path / "hseg-lexical").glob("*") if f.is_file())
    total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return (total - lexical) / 1e6, lexical / 1e6


def report(size: int, build: dict[str, float], got: dict[str, Any], path: Path, where: str) -> str:
    chroma, lexical = disk_mb(path)
    plain = got["latency"][PLAIN]
    lines = [f"### {got['records']:,} records ({where}; target {size:,})", "",
             f"- build: {build['seconds']:.0f} s for {build['copies']} copies "
             f"({got['records'] / max(build['seconds'], 1e-9):,.0f} records/s, store.add with both indexes)",
             f"- disk: Chroma {chroma:,.0f} MB (collection and unit index), lexical index {lexical:,.0f} MB",
             f"- reader: open + first plain query {got['open + first plain query s']:.2f} s, first default "
             f"search {got['first default search s']:.2f} s, peak RSS {got['peak RSS MB']:,.0f} MB",
             f"- lexical index full rebuild: {got['lexical rebuild s']:.1f} s ({got['lexical segments']:,} segments)",
             "", "| call | p50 ms | p95 ms | × plain p50 | × plain p95 |", "|---|---|---|---|---|"]
    for name, (p50, p95) in got["latency"].items():
        lines.append(f"| {name} | {p50:.1f} | {p95:.1f} | {p50 / plain[0]:.2f} | {p95 / plain[1]:.2f} |")
    if "knn" in got:
        lines += ["", "| kNN top-10 | recall@10 vs exact | p50 ms |", "|---|---|---|"]
        for ef, (recall, p50) in got["knn"].items():
            lines.append(f"| ef_search {ef} | {recall:.4f} | {p50:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", nargs="?", default="run", choices=["run", "measure"])
    ap.add_argument("--path", required=True, help="PersistentClient directory to grow / reuse")
    ap.add_argument("--vectors", required=True, help=".npy of the first pieces' vectors (query_latency openstax)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    ap.add_argument("--jitter", type=float, default=0.15, help="norm of each copy's random step")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--server", action="store_true", help="the reader is a client of chroma run")
    ap.add_argument("--no-knn", action="store_true", help="skip the recall measurement")
    ap.add_argument("--out", default=None, help="append the markdown to this file")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("hseg").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if args.command == "measure":
        print(json.dumps(reader(args)))
        return 0
    path = Path(args.path)
    pieces, vectors = corpus(Path(args.vectors))
    if not (path / "questions.npy").exists():
        from hseg.encoders import load_encoder

        texts = questions(str(DATA / "textbook_qa" / "questions_term.csv"), args.queries)
        q = np.asarray(load_encoder().encode(texts), dtype=np.float32)
        path.mkdir(parents=True, exist_ok=True)
        np.save(path / "questions.npy", q / np.linalg.norm(q, axis=1, keepdims=True))
    for size in sorted(args.sizes):
        store = HierarchicalStore(COLLECTION, path=str(path), encoder=LookupEncoder(
            "sentence-transformers/all-MiniLM-L6-v2", {}))
        grow(store, path / "built.json", pieces, vectors, size, args.jitter)
        del store
        child = [sys.executable, "-m", "benchmarks.scale", "measure", "--path", str(path), "--vectors", args.vectors,
                 "--queries", str(args.queries), "--rounds", str(args.rounds), "--jitter", str(args.jitter),
                 *(["--server"] if args.server else []), *(["--no-knn"] if args.no_knn else [])]
        done = subprocess.run(child, check=True, stdout=subprocess.PIPE, text=True)
        got = json.loads(done.stdout.strip().splitlines()[-1])
        md = report(size, json.loads((path / "built.json").read_text()), got, path,
                    "chroma run server" if args.server else "embedded PersistentClient")
        append_report(md, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
