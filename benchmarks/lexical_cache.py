"""What the lexical side's word cache does to the default search: round 15's change, both sides in one process.

The lexical side scores every segment that holds a query word (``LexicalQuery``: the normaliser is
the query's best BM25). Until round 15 that was one FTS5 statement, ``-bm25()`` of the ``OR`` of the
query's words. Since then the index adds the words' BM25 terms up one word at a time
(:meth:`hseg.store.lexical.LexicalIndex.scored`, the same floats) and each connection keeps a
word's terms until the file changes, so a word that an earlier question asked costs nothing.

Four calls per question, in rotated order, on three store objects over the same directory (three
SQLite connections, three caches):

* ``plain``: ``collection.query(n_results=5)``, the yardstick;
* ``word cache``: the default search as shipped;
* ``one statement``: the same search with the index's ``scored`` replaced by the one ``OR``
  statement (same rowids and floats, ordered by FTS5, no join: a little cheaper than the code
  before round 15, which also joined every match to its segment id);
* ``no reuse``: the search as shipped with its connection's cache emptied before each search, as a
  fresh process's first question finds it.

Round 1 asks each question for the first time: the cache holds only the words of the warm-up and of
the questions before it. Later rounds ask the same questions again. The hits of the three searches
are compared on every call.

Usage:
    python benchmarks/lexical_cache.py --db /tmp/ox40k --collection openstax \
        --questions ../shared/data/textbook_qa/questions.csv --budget 4096
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import types
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from query_latency import questions, rotated, store_questions_options  # noqa: E402

from hseg.retrieval.lexical_query import fts5_match  # noqa: E402
from hseg.store import HierarchicalStore  # noqa: E402
from hseg.store.lexical import LexicalIndex  # noqa: E402

CALLS = ("plain", "word cache", "one statement", "no reuse")


def one_statement(self: LexicalIndex, terms: Any) -> tuple[np.ndarray, np.ndarray]:
    """``scored`` as one FTS5 statement: FTS5's own sum and order."""
    found = self.db.rows("SELECT rowid, -bm25(fts) FROM fts WHERE fts MATCH ? ORDER BY bm25(fts), rowid",
                         (fts5_match(terms),))
    return np.array([r for r, _ in found], dtype=np.int64), np.array([x for _, x in found], dtype=np.float64)


def answer(hits: list[Any]) -> list[tuple[Any, ...]]:
    return [(h.doc_id, h.start, h.end, h.score) for h in hits]  # the same floats: compared exactly


def p50_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    store_questions_options(ap)
    ap.add_argument("--warmup", type=int, default=10, help="questions asked first, not timed (their words are kept)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None, help="append the markdown table to this file")
    args = ap.parse_args(argv)

    stores = {label: HierarchicalStore(args.collection, path=args.db) for label in CALLS[1:]}
    index = stores["one statement"].lexical_index
    assert index is not None
    index.scored = types.MethodType(one_statement, index)  # type: ignore[method-assign]
    fresh = stores["no reuse"].lexical_index
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
    kept_by = stores["word cache"].lexical_index
    assert kept_by is not None
    kept = kept_by.db.kept_term_pairs
    lines = [f"`{Path(args.db).name}` ({stores['word cache'].collection.count():,} records), "
             f"{Path(args.questions).name}: {len(texts)} questions × {args.rounds} rounds after {len(warm)} warm-up, "
             f"budget {args.budget}; hits differ between the three searches on {differ} calls; the cache holds "
             f"{kept:,} (rowid, term) pairs at the end", "",
             "| call | round 1 p50 ms | × plain | later rounds p50 ms | × plain |", "|---|---|---|---|---|"]
    for label in CALLS:
        first, later = times[(0, label)], times[(1, label)]
        row = f"| {label} | {p50_ms(first):.2f} | {p50_ms(first) / p50_ms(times[(0, 'plain')]):.2f} |"
        row += f" {p50_ms(later):.2f} | {p50_ms(later) / p50_ms(times[(1, 'plain')]):.2f} |" if later else " | |"
        lines.append(row)
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        with Path(args.out).open("a", encoding="utf-8") as out:
            out.write(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
