"""The "same text under another id" look-up every write makes, at two store sizes: asked of Chroma
(``get`` with a ``where`` on ``content_sha256``) and of the lexical index's ``documents`` table (its
index on the hash), in one process, on the same embedded store.

    python -m benchmarks.same_text_lookup --path /tmp/stl --sizes 2000 160000 [--lookups 300] [--adds 30]
        [--out benchmarks/results/same_text_lookup.md]

The store is synthetic (:func:`benchmarks.harness.stores.synthetic_doc`: ``--dim``-dimensional random
vectors, 2 parents of 4 segments a document, so 10 records a document), written through
``HierarchicalStore.add`` and grown to each size in turn (a second run resumes where the last one
stopped). At each size:

* ``--lookups`` look-ups of :func:`hseg.store.documents.same_text_elsewhere`, each of one new id with the
  text of a stored document picked at random (a hit) and one with a text nobody stored (a miss), asked
  of Chroma and of the lexical index in alternating order; the two answers must be equal;
* ``--adds`` whole ``store.add`` calls of a new 10-record document, alternating between the write's
  look-up as it is (the lexical index) and the look-up forced to Chroma.

Reported: p50 / p95 of each side at each size, Chroma / lexical at each size, and each side's growth
(its p50 at the largest size / at the smallest).
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import hseg.store.writes as writes
from hseg.chunking.schema import content_sha256
from hseg.store import HierarchicalStore
from hseg.store.documents import same_text_elsewhere

from .harness.stores import synthetic_doc
from .harness.timing import append_report, percentiles

COLLECTION = "same_text_lookup"
CLUSTERS, SEGMENTS = 2, 4
PER_DOC = CLUSTERS * (SEGMENTS + 1)


def text_of(doc_id: str) -> str:
    """The text :func:`synthetic_doc` gives ``doc_id`` (its segments' texts joined)."""
    return "".join(f"{doc_id} segment {i}. " for i in range(CLUSTERS * SEGMENTS))


def grow(store: HierarchicalStore, size: int, dim: int, seed: int) -> int:
    """Add documents ``doc<n>`` until the store holds about ``size`` records; returns the documents."""
    lo, hi = 0, store.count() // PER_DOC + 1  # the documents doc0 .. doc<have - 1> stored before (adds beside them)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if store.count({"hseg_doc_id": f"doc{mid}"}) else (lo, mid)
    have = lo
    want = max(size // PER_DOC, have)
    rng = np.random.default_rng(seed + have)
    per_call = max(1, store.max_batch_size() // PER_DOC)
    t0 = time.perf_counter()
    for start in range(have, want, per_call):
        store.add([synthetic_doc(f"doc{d}", rng, CLUSTERS, SEGMENTS, dim)
                   for d in range(start, min(want, start + per_call))])
        logging.info("grown to %d records (%.0f s)", store.count(), time.perf_counter() - t0)
    return want


def time_lookups(store: HierarchicalStore, docs: int, n: int, rng: np.random.Generator) -> dict[str, list[float]]:
    """Per-call seconds of the look-up asked of Chroma and of the lexical index, alternating order."""
    lexical = store._parts.lexical  # the index the write asks (hseg.store.writes)
    sides: dict[str, Callable[[dict[str, str]], dict[str, list[str]]]] = {
        "chroma get(where)": lambda shas: same_text_elsewhere(store.collection, shas, None),
        "lexical index": lambda shas: same_text_elsewhere(store.collection, shas, lexical),
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    for i in range(n + 5):
        stored = f"doc{int(rng.integers(docs))}"
        shas = {f"new-{i}": content_sha256(text_of(stored)), f"miss-{i}": content_sha256(f"nobody stored {i}")}
        got = []
        for name in (list(sides) if i % 2 else list(reversed(sides))):
            t0 = time.perf_counter()
            got.append(sides[name](shas))
            if i >= 5:
                times[name].append(time.perf_counter() - t0)
        if got[0] != got[1] or got[0] != {f"new-{i}": [stored]}:
            raise SystemExit(f"same_text_lookup: the two sides differ for {shas}: {got}")
    return times


def time_adds(store: HierarchicalStore, n: int, dim: int, rng: np.random.Generator, size: int
              ) -> dict[str, list[float]]:
    """Per-call seconds of ``store.add`` of a new document, its look-up as it is or forced to Chroma."""
    as_is = writes.same_text_elsewhere

    def chroma_only(collection: Any, shas: Any, lexical: Any = None) -> dict[str, list[str]]:
        return as_is(collection, shas, None)

    times: dict[str, list[float]] = {"add, chroma get(where)": [], "add, lexical index": []}
    try:
        for i in range(n + 2):
            for name in (list(times) if i % 2 else list(reversed(times))):
                writes.same_text_elsewhere = chroma_only if "chroma" in name else as_is
                doc = synthetic_doc(f"add-{size}-{i}-{name[5]}", rng, CLUSTERS, SEGMENTS, dim)
                t0 = time.perf_counter()
                store.add(doc)
                if i >= 2:
                    times[name].append(time.perf_counter() - t0)
    finally:
        writes.same_text_elsewhere = as_is
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", required=True)
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 160000])
    ap.add_argument("--lookups", type=int, default=300)
    ap.add_argument("--adds", type=int, default=30)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    store = HierarchicalStore(COLLECTION, path=args.path)
    rng = np.random.default_rng(args.seed + 1)
    p50: dict[str, dict[int, float]] = {}
    lines = [f"`python -m benchmarks.same_text_lookup --path {args.path} --sizes {' '.join(map(str, args.sizes))} "
             f"--lookups {args.lookups} --adds {args.adds}`", "",
             f"{time.strftime('%Y-%m-%d')}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start; "
             f"embedded store, {args.dim}-dimensional synthetic vectors, {PER_DOC} records a document", "",
             "| records | side | calls | p50 ms | p95 ms |", "|---|---|---|---|---|"]
    for size in sorted(args.sizes):
        docs = grow(store, size, args.dim, args.seed)
        records = store.count()
        times = {**time_lookups(store, docs, args.lookups, rng), **time_adds(store, args.adds, args.dim, rng, size)}
        for name, ts in times.items():
            mid, high = percentiles(ts)
            p50.setdefault(name, {})[size] = mid
            lines.append(f"| {records} | {name} | {len(ts)} | {mid:.3f} | {high:.3f} |")
            print(lines[-1], flush=True)
        lookup = p50["chroma get(where)"][size] / p50["lexical index"][size]
        add = p50["add, chroma get(where)"][size] / p50["add, lexical index"][size]
        lines.append(f"| {records} | chroma / lexical, p50 | | look-up {lookup:.1f}x, add {add:.2f}x | |")
    small, large = min(args.sizes), max(args.sizes)
    lines += ["", f"growth, p50 at {large} / at {small}: " + "; ".join(
        f"{name} {by[large] / by[small]:.2f}x" for name, by in p50.items()),
        f"load average {os.getloadavg()[0]:.1f} at the end"]
    append_report("\n".join(["### same_text_lookup: the write's same-text look-up, Chroma against the lexical index",
                              "", *lines, ""]), args.out)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("hseg").setLevel(logging.WARNING)
    raise SystemExit(main())
