"""``search_many`` against a loop of ``search`` on hybrid settings, in one process: the time ratio
and the calls each makes (Chroma ``query``/``get``, lexical index statements).

The store is embedded, written by the hashing chunker from synthetic books (no model), so that it
can be built in a minute anywhere; the questions are a few words each drawn from the books' words.
Both sides run on the same store and questions, interleaved round by round; the ratio per round is
``search_many`` time / loop time, and its median is reported with the per-question times, for the
wall clock and for the process's CPU time (all its threads: on a loaded machine the wall clock
measures the neighbours as much as the search).

Run:

    python -m benchmarks.search_batch --path /tmp/search_batch_store --queries 64 --rounds 5
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from hseg.store import HierarchicalStore
from hseg.store.lexical.database import Database
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder, synthetic_book

#: the settings measured: every unit on its hybrid path, and the gathered path
SETTINGS: dict[str, dict[str, Any]] = {
    "cluster k=5": {"k": 5, "unit": "cluster"},
    "segment 1024": {"budget_tokens": 1024, "unit": "segment"},
    "auto 1024": {"budget_tokens": 1024, "unit": "auto"},
    "auto 1024 gathered": {"budget_tokens": 1024, "unit": "auto", "cluster_weight": 0.3},
}


def open_store(path: Path, books: int, chars: int) -> HierarchicalStore:
    """The store at ``path``, written first when it holds nothing."""
    store = HierarchicalStore("hseg", path=str(path), encoder=HashingEncoder(64))
    if not store.count():
        chunker = small_chunker(dim=64)
        store.add([chunker.chunk(synthetic_book(chars, seed=i), doc_id=f"book{i}") for i in range(books)])
    return store


def questions(store: HierarchicalStore, n: int, seed: int) -> list[str]:
    """``n`` questions of 2 to 6 words drawn from the stored text."""
    rng = np.random.default_rng(seed)
    words = sorted({w.lower() for rec in store.get_records("book0", include_embeddings=False)
                    for w in rec.document.split() if w.isalpha() and len(w) > 3})
    return [" ".join(rng.choice(words, size=int(rng.integers(2, 7)), replace=False)) for _ in range(n)]


@contextlib.contextmanager
def counted() -> Iterator[Counter[str]]:
    """Count Chroma's ``query``/``get`` calls and the lexical index's statements while inside."""
    from chromadb.api.models.Collection import Collection

    calls: Counter[str] = Counter()
    patched: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, label: str) -> None:
        real = getattr(owner, name)

        def counting(*args: Any, **kwargs: Any) -> Any:
            calls[label] += 1
            return real(*args, **kwargs)

        patched.append((owner, name, real))
        setattr(owner, name, counting)

    wrap(Collection, "query", "chroma query")
    wrap(Collection, "get", "chroma get")
    wrap(Database, "rows", "sqlite statements")
    wrap(Database, "term_scores", "sqlite term reads")
    try:
        yield calls
    finally:
        for owner, name, real in reversed(patched):
            setattr(owner, name, real)


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """Seconds ``fn()`` took: wall clock and process CPU time."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", required=True, help="PersistentClient directory to build into / reuse")
    ap.add_argument("--books", type=int, default=12)
    ap.add_argument("--chars", type=int, default=60_000, help="characters per synthetic book")
    ap.add_argument("--queries", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lexical-weight", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    store = open_store(Path(args.path), args.books, args.chars)
    texts = questions(store, args.queries, args.seed)
    print(f"{store.count()} records, {len(texts)} questions, lexical_weight={args.lexical_weight}")
    print("| setting | calls: loop of search | calls: search_many | wall ms/q loop / many | ratio | "
          "CPU ms/q loop / many | CPU ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, setting in SETTINGS.items():
        setting = {**setting, "lexical_weight": args.lexical_weight}
        loop = lambda s=setting: [store.search(t, **s) for t in texts]  # noqa: E731
        many = lambda s=setting: store.search_many(texts, **s)  # noqa: E731
        one, batch = loop(), many()  # warm, and the answers must agree
        if [[(h.segment_ids, h.cluster_id, h.score) for h in hits] for hits in one] != \
                [[(h.segment_ids, h.cluster_id, h.score) for h in hits] for hits in batch]:
            raise SystemExit(f"{name}: search_many answered otherwise than search")
        with counted() as loop_calls:
            loop()
        with counted() as many_calls:
            many()
        t_loop, t_many = [], []
        for _ in range(args.rounds):
            t_loop.append(timed(loop))
            t_many.append(timed(many))
        show = lambda c: ", ".join(f"{k} {v}" for k, v in sorted(c.items()))  # noqa: E731
        cells = []
        for clock in (0, 1):
            per_q = [1000 * statistics.median(t[clock] for t in ts) / len(texts) for ts in (t_loop, t_many)]
            ratio = statistics.median(m[clock] / x[clock] for m, x in zip(t_many, t_loop))
            cells += [f"{per_q[0]:.2f} / {per_q[1]:.2f}", f"{ratio:.2f}"]
        print(f"| {name} | {show(loop_calls)} | {show(many_calls)} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
