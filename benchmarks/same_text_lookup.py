"""The "same text under another id" look-up every write makes, at several store sizes: asked of Chroma
(``get`` with a ``where`` on ``content_sha256``) and of the lexical index's ``documents`` table (its
index on the hash), in one process, call by call in a rotating order over every store and side.

    python -m benchmarks.same_text_lookup --path /tmp/stl --sizes 2000 160000 [--lookups 300] [--adds 30]
        [--out benchmarks/results/same_text_lookup.md]

One embedded store per size (``<path>/<size>``), synthetic (:func:`benchmarks.harness.stores.synthetic_doc`:
``--dim``-dimensional random vectors, 2 parents of 4 segments a document, so 10 records a document),
written through ``HierarchicalStore.add`` (a second run resumes where the last one stopped). Then:

* ``--lookups`` rounds of :func:`hseg.store.documents.same_text_elsewhere` on every store, each asking for
  one new id with the text of a stored document picked at random (a hit) and one with a text nobody
  stored (a miss), of Chroma and of the lexical index; the two answers must be equal;
* ``--adds`` rounds of ``store.add`` of a new 10-record document to every store, the write's look-up as it
  is (the lexical index) or forced to Chroma.

Reported: p50 / p95 of each side at each size, Chroma / lexical at each size, and each side's growth
(its p50 at the largest size / at the smallest, measured in the same rounds).
"""

from __future__ import annotations

import argparse
import logging
import os
import time
import uuid
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


Side = Callable[[HierarchicalStore, dict[str, str]], dict[str, list[str]]]

#: the look-up asked of Chroma, and as the write asks it (of the lexical index the backend opened)
LOOKUPS: dict[str, Side] = {
    "chroma get(where)": lambda store, shas: same_text_elsewhere(store.collection, shas, None),
    "lexical index": lambda store, shas: same_text_elsewhere(store.collection, shas, store._parts.lexical),
}


def rotated(items: list[Any], step: int) -> list[Any]:
    return items[step % len(items):] + items[:step % len(items)]


def time_lookups(stores: dict[int, tuple[HierarchicalStore, int]], n: int, rng: np.random.Generator
                 ) -> dict[tuple[int, str], list[float]]:
    """Per-call seconds of each side of the look-up on each store, ``{(size, side): seconds}``."""
    calls = [(size, name) for size in stores for name in LOOKUPS]
    times: dict[tuple[int, str], list[float]] = {c: [] for c in calls}
    for i in range(n + 5):
        answers: dict[tuple[int, str], Any] = {}
        asked: dict[int, tuple[str, dict[str, str]]] = {}
        for size, (_, docs) in stores.items():
            stored = f"doc{int(rng.integers(docs))}"
            asked[size] = (stored, {f"new-{i}": content_sha256(text_of(stored)),
                                    f"miss-{i}": content_sha256(f"nobody stored {i}")})
        for size, name in rotated(calls, i):
            t0 = time.perf_counter()
            answers[size, name] = LOOKUPS[name](stores[size][0], asked[size][1])
            if i >= 5:
                times[size, name].append(time.perf_counter() - t0)
        for (size, name), got in answers.items():
            if got != {f"new-{i}": [asked[size][0]]}:
                raise SystemExit(f"same_text_lookup: {name} at {size} answered {got} for {asked[size]}")
    return times


def time_adds(stores: dict[int, tuple[HierarchicalStore, int]], n: int, dim: int, rng: np.random.Generator
              ) -> dict[tuple[int, str], list[float]]:
    """Per-call seconds of ``store.add`` of a new document on each store, its look-up as it is or forced
    to Chroma, ``{(size, side): seconds}``."""
    as_is = writes.same_text_elsewhere

    def chroma_only(collection: Any, shas: Any, lexical: Any = None) -> dict[str, list[str]]:
        return as_is(collection, shas, None)

    calls = [(size, name) for size in stores for name in ("add, chroma get(where)", "add, lexical index")]
    times: dict[tuple[int, str], list[float]] = {c: [] for c in calls}
    tag = uuid.uuid4().hex[:8]  # a new document on every run
    try:
        for i in range(n + 2):
            for size, name in rotated(calls, i):
                writes.same_text_elsewhere = chroma_only if "chroma" in name else as_is
                doc = synthetic_doc(f"add-{tag}-{i}-{name[5]}", rng, CLUSTERS, SEGMENTS, dim)
                t0 = time.perf_counter()
                stores[size][0].add(doc)
                if i >= 2:
                    times[size, name].append(time.perf_counter() - t0)
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
    sizes = sorted(set(args.sizes))
    stores: dict[int, tuple[HierarchicalStore, int]] = {}
    for size in sizes:
        store = HierarchicalStore(COLLECTION, path=os.path.join(args.path, str(size)))
        stores[size] = (store, grow(store, size, args.dim, args.seed))
    rng = np.random.default_rng(args.seed + 1)
    load = os.getloadavg()[0]
    times = {**time_lookups(stores, args.lookups, rng), **time_adds(stores, args.adds, args.dim, rng)}
    p50 = {key: percentiles(ts)[0] for key, ts in times.items()}
    lines = [f"`python -m benchmarks.same_text_lookup --path {args.path} --sizes {' '.join(map(str, sizes))} "
             f"--lookups {args.lookups} --adds {args.adds}`", "",
             f"{time.strftime('%Y-%m-%d')}; {os.cpu_count()} CPUs, load average {load:.1f} at the start and "
             f"{os.getloadavg()[0]:.1f} at the end; embedded stores, {args.dim}-dimensional synthetic vectors, "
             f"{PER_DOC} records a document; every store and side in one rotating order, call by call", "",
             "| records | side | calls | p50 ms | p95 ms |", "|---|---|---|---|---|"]
    for size in sizes:
        records = stores[size][0].count()
        for (at, name), ts in times.items():
            if at == size:
                mid, high = percentiles(ts)
                lines.append(f"| {records} | {name} | {len(ts)} | {mid:.3f} | {high:.3f} |")
        lookup = p50[size, "chroma get(where)"] / p50[size, "lexical index"]
        add = p50[size, "add, chroma get(where)"] / p50[size, "add, lexical index"]
        lines.append(f"| {records} | chroma / lexical, p50 | | look-up {lookup:.1f}x, add {add:.2f}x | |")
    small, large = sizes[0], sizes[-1]
    names = [name for (at, name) in times if at == small]
    lines += ["", f"growth, p50 at {large} / at {small}: " + "; ".join(
        f"{name} {p50[large, name] / p50[small, name]:.2f}x" for name in names)]
    append_report("\n".join(["### same_text_lookup: the write's same-text look-up, Chroma against the lexical index",
                              "", *lines, ""]), args.out)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("hseg").setLevel(logging.WARNING)
    raise SystemExit(main())
