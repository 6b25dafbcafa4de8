"""The cost of one ``list_documents`` call (:meth:`hseg.tools.StoreTools.list_documents`) as the store
grows: the page read from the lexical index against the read of every cluster record the tool made
before (``store.iter_metadatas`` of the cluster level, sorted and sliced), in one process, on one store
measured at two sizes.

The store: ``--small`` documents, measured, then grown to ``--large`` (synthetic books of 1,200
characters, about 16 records each, chunked by TextTiling on the hashing encoder) and measured again;
embedded Chroma in ``--path`` (a fresh folder), or with ``--server`` a ``chroma run`` server on that
folder (127.0.0.1, stopped by its PID at the end), where the page is read from the client's lexical
cache after its one read of the write log. Each measurement times ``--calls`` calls of each
side, interleaved, for the first page and for the last (``limit=100``), and reports the median per call
and the ratio of the two sides; the growth of each side from the small store to the large one is
the question (a cost that grows with the store is a bug).

Usage (from the repository root):
    python -m benchmarks.list_documents --path /tmp/ld --small 250 --large 2500 [--server]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from hseg.chunking.schema import CLUSTER, DOC_ID_KEY, level_is
from hseg.store import HierarchicalStore
from hseg.tools import StoreTools

LIMIT = 100


def scan_every_cluster(store: Any, offset: int, limit: int) -> list[str]:
    """What ``list_documents`` read before: every cluster record's metadata, then a page of the sorted ids."""
    seen: dict[str, int] = {}
    for _, meta in store.iter_metadatas(level_is(CLUSTER)):
        doc = meta.get(DOC_ID_KEY)
        if doc is not None:
            seen[str(doc)] = seen.get(str(doc), 0) + 1
    return sorted(seen)[offset:offset + limit]


def grow(store: HierarchicalStore, start: int, stop: int) -> None:
    from hseg_testing.chunkers import small_chunker
    from hseg_testing.fakes import synthetic_book

    chunker = small_chunker()
    for at in range(start, stop, 100):
        ids = [f"docs/d{i:06d}.md" for i in range(at, min(at + 100, stop))]
        texts = [synthetic_book(1_200, seed=i) for i in range(at, at + len(ids))]
        store.add(chunker.chunk_many(texts, ids), [{"source": d} for d in ids])


def measure(store: HierarchicalStore, calls: int) -> dict[str, float]:
    tools = StoreTools(store)
    total = tools.list_documents(limit=1).total
    last = max(total - LIMIT, 0)
    times: dict[str, list[float]] = {k: [] for k in ("page first", "page last", "scan first", "scan last")}
    for i in range(calls):
        order = [("page first", 0), ("page last", last), ("scan first", 0), ("scan last", last)]
        for name, offset in order[i % 4:] + order[:i % 4]:  # rotated: none profits from a warm cache
            t = time.perf_counter()
            if name.startswith("page"):
                got = [d.source for d in tools.list_documents(limit=LIMIT, offset=offset).documents]
            else:
                got = scan_every_cluster(store, offset, LIMIT)
            times[name].append(time.perf_counter() - t)
            assert len(got) == min(LIMIT, total - offset)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", type=Path, required=True, help="a folder for the store (emptied first)")
    ap.add_argument("--small", type=int, default=250, help="documents of the first measurement")
    ap.add_argument("--large", type=int, default=2500, help="documents of the second")
    ap.add_argument("--calls", type=int, default=20, help="calls of each side per measurement")
    ap.add_argument("--server", action="store_true", help="through a chroma run server on --path")
    args = ap.parse_args(argv)
    shutil.rmtree(args.path, ignore_errors=True)
    from hseg_testing.chroma_server import ChromaServer
    from hseg_testing.fakes import HashingEncoder

    with ExitStack() as stack:
        where: dict[str, Any] = {"path": str(args.path)}
        if args.server:
            where = {"client": stack.enter_context(ChromaServer(args.path)).client()}
        store = HierarchicalStore("bench", encoder=HashingEncoder(), **where)
        rows = []
        for start, size in ((0, args.small), (args.small, args.large)):
            grow(store, start, size)
            rows.append((size, store.count(), measure(store, args.calls)))
    kind = "a chroma run server" if args.server else "embedded Chroma"
    lines = [f"list_documents(limit={LIMIT}), median ms per call of {args.calls}, {kind}:", "",
             "| documents | records | page, first | page, last | every cluster, first | every cluster, last |"
             " scan / page (first) |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for size, records, m in rows:
        lines.append(f"| {size:,} | {records:,} | {m['page first']:.2f} | {m['page last']:.2f} | "
                     f"{m['scan first']:.1f} | {m['scan last']:.1f} | {m['scan first'] / m['page first']:.0f}x |")
    (s, _, a), (b, _, z) = rows
    lines += ["", f"Growth from {s:,} to {b:,} documents ({b / s:.0f}x): page {z['page first'] / a['page first']:.2f}x "
              f"(first) / {z['page last'] / a['page last']:.2f}x (last), every cluster "
              f"{z['scan first'] / a['scan first']:.1f}x"]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
