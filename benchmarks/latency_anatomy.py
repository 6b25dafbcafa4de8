"""Where a default search's time goes on a small store, and what a record's metadata costs a ``get``.

Three measurements on a store built with ``hseg index`` (``--db``), each interleaved with a plain
``collection.query(n_results=5)`` on the same query vectors:

1. **Searches by the reads they make.** The default search (hybrid ``unit="auto"``,
   ``budget_tokens=--budget``) of every question, timed, with the Chroma reads it made (the unit
   index's kNN, the unit vectors of lexical-only candidates, the passages' ``get``): the share of
   searches per read pattern, their p50, and the p50 of all, each × the plain query's p50.
2. **A ``get``'s cost against the keys of its records' metadata.** Chroma keeps one row per
   metadata key, so a ``get`` of segment records costs per key. The store is copied four times (its
   collection written anew each time, :func:`slim_copy`): as stored; with ``chunk_settings``,
   ``content_sha256`` and ``hseg_schema`` left on the cluster records only; the same and
   ``hseg_encoder``; and also without ``hseg_prev_id``, ``hseg_next_id`` and ``hseg_cluster_index``
   on segments. Each round gets the same ``--records`` random segment ids from each copy (metadatas
   and documents, the passages' read), and runs a plain query on each. The slimmer copies are
   hypothetical schemas, measured to size the option: hseg reads these keys (``is_complete`` needs
   the hash and settings on every record, a search checks each hit's encoder).
3. **The default search on whole copies of the store** with those schemas: the store's directory
   copied, its collection written anew with the slimmer segment records (the unit index and the
   lexical index as they are), then table 1's search on every copy, interleaved, each against a
   plain query on its own collection and on the copy as stored, and the hits compared.

Usage:
    python benchmarks/latency_anatomy.py --db /tmp/bench/tbdb \
        --questions ../shared/data/textbook_qa/questions_term.csv --budget 4096
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import chromadb  # noqa: E402
from query_latency import questions, rotated  # noqa: E402

import hseg.retrieval.plans as plans  # noqa: E402
from hseg.store import HierarchicalStore  # noqa: E402
from hseg.store.connection import DEFAULT_HNSW  # noqa: E402

#: bookkeeping of a whole document that a cluster record could carry for its segments
BOOKKEEPING = ("chunk_settings", "content_sha256", "hseg_schema")
DOCUMENT_KEYS = BOOKKEEPING + ("hseg_encoder",)
DERIVABLE_KEYS = ("hseg_prev_id", "hseg_next_id", "hseg_cluster_index")
#: the copies measured: the keys each leaves on cluster records only
VARIANTS: dict[str, tuple[str, ...]] = {
    "as stored": (),
    f"without {len(BOOKKEEPING)} bookkeeping keys on segments": BOOKKEEPING,
    f"without {len(DOCUMENT_KEYS)} document-level keys on segments": DOCUMENT_KEYS,
    f"and without {len(DERIVABLE_KEYS)} derivable keys": DOCUMENT_KEYS + DERIVABLE_KEYS,
}


def p50_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1e3


def read_patterns(store: HierarchicalStore, texts: list[str], vectors: np.ndarray, budget: int,
                  weight: float, rounds: int) -> str:
    """Table 1: the default search's p50 per pattern of Chroma reads, against a plain query."""
    made: list[str] = []
    answer = plans._answer

    def logged(reads: list[plans.Read]) -> list[dict[str, list[Any]]]:
        first = reads[0]
        side = "unit index" if first.collection.name.endswith("_hseg_units") else "collection"
        what = "kNN" if isinstance(first, plans.Knn) else ("vectors" if "embeddings" in first.include else "records")
        made.append(f"{what} ({side})")
        return answer(reads)

    plans._answer = logged
    try:
        for text, q in zip(texts[:10], vectors[:10]):  # warm-up
            store.search(q, query_text=text, budget_tokens=budget, lexical_weight=weight)
        plain: list[float] = []
        by_pattern: dict[str, list[float]] = defaultdict(list)
        every: list[float] = []
        for _ in range(rounds):
            for text, q in zip(texts, vectors):
                t0 = time.perf_counter()
                store.collection.query(query_embeddings=[q], n_results=5)
                plain.append(time.perf_counter() - t0)
                made.clear()
                t0 = time.perf_counter()
                store.search(q, query_text=text, budget_tokens=budget, lexical_weight=weight)
                dt = time.perf_counter() - t0
                by_pattern[" → ".join(made)].append(dt)
                every.append(dt)
    finally:
        plans._answer = answer
    base = p50_ms(plain)
    lines = [f"plain query p50 {base:.2f} ms; default search (λ {weight}), budget {budget}, "
             f"{len(texts)} questions × {rounds} rounds", "",
             "| Chroma reads | share | p50 ms | × plain |", "|---|---|---|---|"]
    for pattern, ts in sorted(by_pattern.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"| {pattern} | {len(ts) / len(every):.0%} | {p50_ms(ts):.2f} | {p50_ms(ts) / base:.2f} |")
    lines.append(f"| all | 100% | {p50_ms(every):.2f} | **{p50_ms(every) / base:.2f}** |")
    return "\n".join(lines) + "\n"


def slimmed(metas: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """``metas`` with ``keys`` left on cluster records only."""
    return [m if m.get("hseg_level") == "cluster" else {k: v for k, v in m.items() if k not in keys}
            for m in metas]


def metadata_rows(stores: dict[str, HierarchicalStore], n_records: int, rounds: int, seed: int) -> str:
    """Table 2: a ``get`` of ``n_records`` segment records and a plain query on each copy of the store
    (:func:`slim_copy`, one per :data:`VARIANTS`), the same records from each, in rotated order."""
    labels = list(stores)
    stored = stores[labels[0]].collection.get(where={"hseg_level": "segment"}, include=["metadatas"])
    segments = list(stored["ids"])
    keys = Counter(len(m or {}) for m in stored["metadatas"])
    rng, pick = np.random.default_rng(seed), random.Random(seed)
    dim = len(stores[labels[0]].collection.get(ids=segments[:1], include=["embeddings"])["embeddings"][0])
    gets: dict[str, list[float]] = defaultdict(list)
    queries: dict[str, list[float]] = defaultdict(list)
    for r in range(rounds):
        wanted = pick.sample(segments, n_records)
        q = np.asarray(rng.standard_normal(dim), dtype=np.float32)
        for label in rotated(labels, r):
            collection = stores[label].collection
            t0 = time.perf_counter()
            collection.get(ids=wanted, include=["metadatas", "documents"])
            gets[label].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            collection.query(query_embeddings=[q], n_results=5)
            queries[label].append(time.perf_counter() - t0)
    first = labels[0]
    lines = [f"{len(segments):,} segment records, {keys.most_common(1)[0][0]} metadata keys each as stored "
             f"(and the document); {rounds} rounds", "",
             f"| copy | get of {n_records} segment records, p50 ms | × as stored | plain query p50 ms |",
             "|---|---|---|---|"]
    for label in labels:
        lines.append(f"| {label} | {p50_ms(gets[label]):.2f} | {p50_ms(gets[label]) / p50_ms(gets[first]):.2f} | "
                     f"{p50_ms(queries[label]):.2f} |")
    return "\n".join(lines) + "\n"


def slim_copy(db: str, name: str, keys: tuple[str, ...], to: Path) -> Path:
    """A copy of the store directory ``db`` whose collection ``name`` is written anew with ``keys`` on
    cluster records only; its unit index and lexical index are copied as they are (the same ids,
    vectors and texts, so a search reads the same records)."""
    shutil.copytree(db, to)
    client: Any = chromadb.PersistentClient(str(to))
    old = client.get_collection(name)
    got = old.get(include=["documents", "metadatas", "embeddings"])
    metas = slimmed([dict(m or {}) for m in got["metadatas"]], keys)
    meta = old.metadata
    client.delete_collection(name)
    new = client.create_collection(name, configuration={"hnsw": dict(DEFAULT_HNSW)}, metadata=meta)
    for s in range(0, len(got["ids"]), 1000):
        new.add(ids=got["ids"][s:s + 1000], embeddings=got["embeddings"][s:s + 1000],
                documents=got["documents"][s:s + 1000], metadatas=metas[s:s + 1000])
    return to


def slim_searches(stores: dict[str, HierarchicalStore], texts: list[str], vectors: np.ndarray, budget: int,
                  weight: float, rounds: int) -> str:
    """Table 3: the default search on whole copies of the store (:func:`slim_copy`), interleaved, each
    against a plain query on its own collection and on the copy as stored; answers compared."""
    for store in stores.values():
        for text, q in zip(texts[:10], vectors[:10]):  # warm-up, and each index's first check
            store.search(q, query_text=text, budget_tokens=budget, lexical_weight=weight)
    plain: dict[str, list[float]] = defaultdict(list)
    searches: dict[str, list[float]] = defaultdict(list)
    differ = 0
    labels = list(stores)
    for r in range(rounds):
        for i, (text, q) in enumerate(zip(texts, vectors)):
            answers = set()
            for label in rotated(labels, i + r):
                store = stores[label]
                t0 = time.perf_counter()
                store.collection.query(query_embeddings=[q], n_results=5)
                plain[label].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                hits = store.search(q, query_text=text, budget_tokens=budget, lexical_weight=weight)
                searches[label].append(time.perf_counter() - t0)
                answers.add(tuple((h.doc_id, h.start, h.end, h.text, h.score, tuple(h.segment_ids)) for h in hits))
            differ += len(answers) > 1
    base = p50_ms(plain[labels[0]])
    lines = [f"default search (λ {weight}), budget {budget}, on whole copies of the store; {len(texts)} questions × "
             f"{rounds} rounds, interleaved; questions whose hits differ between copies: {differ}", "",
             "| copy | search p50 ms | plain query p50 ms | × its plain query | × the plain query as stored |",
             "|---|---|---|---|---|"]
    for label in labels:
        p = p50_ms(searches[label])
        lines.append(f"| {label} | {p:.2f} | {p50_ms(plain[label]):.2f} | {p / p50_ms(plain[label]):.2f} | "
                     f"{p / base:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True, help="a store built with hseg index")
    ap.add_argument("--collection", default="hseg")
    ap.add_argument("--questions", required=True, help="CSV with a 'question' column")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--budget", type=int, default=4096)
    ap.add_argument("--lexical-weight", type=float, default=0.2)
    ap.add_argument("--records", type=int, default=44, help="segment records per get in table 2")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over the questions in table 1")
    ap.add_argument("--get-rounds", type=int, default=800)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="append the markdown tables to this file")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        # copied before anything opens the store in this process
        copies = {label: HierarchicalStore(args.collection, path=str(slim_copy(args.db, args.collection, keys,
                                                                                   Path(tmp) / str(i))))
                  for i, (label, keys) in enumerate(VARIANTS.items())}
        store = HierarchicalStore(args.collection, path=args.db)
        texts = questions(args.questions, args.queries)
        vectors = np.asarray(store.encoder.encode(texts), dtype=np.float32)
        tables = [read_patterns(store, texts, vectors, args.budget, args.lexical_weight, args.rounds),
                  metadata_rows(copies, args.records, args.get_rounds, args.seed),
                  slim_searches(copies, texts, vectors, args.budget, args.lexical_weight, args.rounds)]
    print("\n".join(tables))
    if args.out:
        with Path(args.out).open("a", encoding="utf-8") as out:
            out.write("\n".join(tables) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
