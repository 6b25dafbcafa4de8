"""The default search's latency with and without the lexical side's word cache, in one process.

The lexical side scores every segment that holds a query word (``LexicalQuery``: the normaliser is
the query's best BM25): the index adds the words' BM25 terms up one word at a time
(:meth:`hseg.store.lexical.LexicalIndex.scored`) and each connection keeps a word's terms until the
file changes, so a word that an earlier question asked costs nothing (round 15; its comparison with
one FTS5 statement is in docs/decisions.md).

Three calls per question, in rotated order, on two store objects over the same directory (two
SQLite connections, two caches):

* ``plain``: ``collection.query(n_results=5)``, the yardstick;
* ``word cache``: the default search as shipped;
* ``no reuse``: the search as shipped with its connection's cache emptied before each search
  (``forget_terms``), as a fresh process's first question finds it.

Round 1 asks each question for the first time: the cache holds only the words of the warm-up and of
the questions before it. Later rounds ask the same questions again. The hits of the two searches
are compared on every call.

Usage (from the repository root):
    python -m benchmarks.lexical_cache --db /tmp/ox40k --collection openstax \
        --questions ../shared/data/textbook_qa/questions.csv --budget 4096
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from hseg.store import HierarchicalStore

from .harness.stores import questions
from .harness.timing import append_report, rotated

CALLS = ("plain", "word cache", "no reuse")


def answer(hits: list[Any]) -> list[tuple[Any, ...]]:
    return [(h.doc_id, h.start, h.end, h.score) for h in hits]  # the same floats: compared exactly


def p50_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True, help="a store built with hseg index")
    ap.add_argument("--collection", default="hseg")
    ap.add_argument("--questions", required=True, help="CSV with a 'question' column")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--budget", type=int, default=4096)
    ap.add_argument("--warmup", type=int, default=10, help="questions asked first, not timed (their words are kept)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None, help="append the markdown table to this file")
    args = ap.parse_args(argv)

    stores = {label: HierarchicalStore(args.collection, path=args.db) for label in CALLS[1:]}
    fresh = stores["no reuse"]._parts.lexical
    assert fresh is not None
    texts = questions(args.questions, args.warmup + args.queries)
    warm, texts = texts[:args.warmup], texts[args.warmup:]
    encoder = stores["word cache"].encoder
    vectors = np.asarray(encoder.encode(warm + texts), dtype=np.float32)
    warm_vectors, vectors = vectors[:args.warmup], vectors[args.warmup:]
    for text, q in zip(warm, warm_vectors):
        for store in stores.values():
            store.search(q, query_text=text, budget_tokens=args.budget)
    times: dict[tuple[int, str], list[float]] = defaultdict(list)
    differ = 0
    for r in range(args.rounds):
        for i, (text, q) in enumerate(zip(texts, vectors)):
            got = {}
            for label in rotated(list(CALLS), i + r):
                if label == "no reuse":
                    fresh.db.forget_terms()  # as in a new process
                t0 = time.perf_counter()
                if label == "plain":
                    stores["word cache"].collection.query(query_embeddings=[q], n_results=5)
                else:
                    got[label] = answer(stores[label].search(q, query_text=text, budget_tokens=args.budget))
                times[(min(r, 1), label)].append(time.perf_counter() - t0)
            differ += len({tuple(v) for v in got.values()}) > 1
    kept_by = stores["word cache"]._parts.lexical
    assert kept_by is not None
    kept = kept_by.db.kept_term_pairs
    lines = [f"`{Path(args.db).name}` ({stores['word cache'].collection.count():,} records), "
             f"{Path(args.questions).name}: {len(texts)} questions × {args.rounds} rounds after {len(warm)} warm-up, "
             f"budget {args.budget}; hits differ between the two searches on {differ} calls; the cache holds "
             f"{kept:,} (rowid, term) pairs at the end", "",
             "| call | round 1 p50 ms | × plain | later rounds p50 ms | × plain |", "|---|---|---|---|---|"]
    for label in CALLS:
        first, later = times[(0, label)], times[(1, label)]
        row = f"| {label} | {p50_ms(first):.2f} | {p50_ms(first) / p50_ms(times[(0, 'plain')]):.2f} |"
        row += f" {p50_ms(later):.2f} | {p50_ms(later) / p50_ms(times[(1, 'plain')]):.2f} |" if later else " | |"
        lines.append(row)
    append_report("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
