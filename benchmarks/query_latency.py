"""Query latency of every retrieval unit against a plain Chroma ``query(n_results=5)``, in one run.

Times, on the same queries and interleaved (the order of the calls rotates from query to query, so
none profits systematically from a warm cache or suffers from a burst of load):

* ``plain``: ``collection.query(query_embeddings=[q], n_results=5)`` (Chroma's default include);
* ``store.search`` with ``unit`` = cluster (the paper's parents), segment and auto, each at
  ``k=5`` and at ``budget_tokens`` 1024 and 4096, and auto at 1024 with ``cluster_weight=0.3``
  (not the unit index's weights: the gathered path);
* with ``--adapters``: one LangChain ``invoke`` and one LlamaIndex ``retrieve`` with
  ``unit="auto"``, ``budget_tokens=1024`` (query embeddings are looked up, not computed, so the
  time is the adapter's and the search's);
* hybrid: ``unit="auto"`` at k=5 and budgets 1024 / 4096 (each budget also with ``read_on_share=0``,
  reading on's cost), ``unit="segment"`` and ``"cluster"`` at 1024, each with
  ``lexical_weight=--lexical-weight`` (the lexical index read with every query, its freshness check
  included).

Reports p50/p95 per call and their ratio to the plain query's p50/p95 (markdown, printed and
written with ``--out``). A second table gives the per-query cost of answering all queries in one
call: Chroma's ``query`` with every vector, and ``store.search_many`` at each setting (with
``--adapters`` also LangChain ``batch``, against LangChain's default ``batch``).

Stores:

* ``synthetic``: ``parents`` clusters of ``segments`` random unit segment vectors plus their mean
  (default 17,000 × 6 = 102,000 records, d=384), segments of 32–223 tokens (mean 128, like the
  chroma_eval corpora at the default target), built once into ``--path`` and reused;
  queries are random unit vectors and noisy copies of stored segment vectors.
* ``db``: a store built with ``hseg index`` (``--db DIR``); queries are the questions of
  ``--questions`` (Chroma's evaluation CSV), embedded once with the store's encoder.
* ``openstax``: ``--records`` records of real text built once into ``--path``: the 22 OpenStax
  training books cut into ~400-character segments (:func:`benchmarks.harness.stores.load_units`), four
  consecutive segments of a module per cluster, segment vectors from all-MiniLM-L6-v2 (encoded once,
  kept in ``--path``), cluster vectors their token-weighted mean; queries are textbook_qa's "What
  is T?" questions. It also reports the lexical index's size on disk and its full rebuild time.

``--server`` serves the same directory with ``chroma run`` on 127.0.0.1 and measures through an
``HttpClient`` (stopped by its PID at the end).

Usage (from the repository root):
    python -m benchmarks.query_latency synthetic --path /tmp/qb
    python -m benchmarks.query_latency db --db /tmp/real --questions ../shared/data/chroma_eval/questions.csv
    python -m benchmarks.query_latency db --db /tmp/real --questions ... --server --adapters --out results/q.md
    python -m benchmarks.query_latency openstax --path /tmp/ox40k --records 40000 [--server]
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from hseg.store import HierarchicalStore

from .harness import stores
from .harness.timing import PLAIN, append_report, measure, percentiles, rotated

logger = logging.getLogger("query_latency")

BUDGETS = (1024, 4096)
#: weights other than the unit index's: unit="auto" takes its gathered path
GATHERED: dict[str, Any] = {"budget_tokens": 1024, "unit": "auto", "cluster_weight": 0.3}
GATHERED_NAME = "unit=auto, budget=1024, cluster_weight=0.3: gathered"


def lexical_costs(store: HierarchicalStore) -> str:
    """The lexical index's size on disk and the time of a full rebuild from the collection."""
    index = store._parts.lexical
    assert index is not None
    t0 = time.perf_counter()
    n = store.sync_lexical_index()
    seconds = time.perf_counter() - t0
    path = index.location.path
    size = sum(os.path.getsize(f"{path}{suffix}") for suffix in ("", "-wal") if os.path.exists(f"{path}{suffix}"))
    return (f"lexical index ({index.location.kind}): {n:,} segments, {size / 1e6:.1f} MB on disk, full rebuild "
            f"from the collection {seconds:.2f} s\n")


def calls(store: HierarchicalStore, adapters: bool,
          lexical_weight: float = 0.0) -> dict[str, Callable[[np.ndarray, str], Any]]:
    """Every timed call, by its row name; each takes (query vector, query text)."""
    col = store.collection
    out: dict[str, Callable[[np.ndarray, str], Any]] = {
        PLAIN: lambda q, _: col.query(query_embeddings=[q], n_results=5),
    }

    def searching(**settings: Any) -> Callable[[np.ndarray, str], Any]:
        return lambda q, _: store.search(q, **settings)

    for unit in ("cluster", "segment", "auto"):
        out[f"search(unit={unit}, k=5)"] = searching(k=5, unit=unit)
        for b in BUDGETS:
            out[f"search(unit={unit}, budget={b})"] = searching(budget_tokens=b, unit=unit)
    out[f"search({GATHERED_NAME})"] = searching(**GATHERED)
    if lexical_weight:
        def hybrid(**settings: Any) -> Callable[[np.ndarray, str], Any]:
            return lambda q, text: store.search(q, query_text=text, lexical_weight=lexical_weight, **settings)

        out[f"hybrid search(unit=auto, k=5, lexical_weight={lexical_weight})"] = hybrid(k=5, unit="auto")
        for b in BUDGETS:
            out[f"hybrid search(unit=auto, budget={b}, lexical_weight={lexical_weight})"] = hybrid(
                budget_tokens=b, unit="auto")
            # what reading on (rule 5a, on by default) costs: the same search without it
            out[f"hybrid search(unit=auto, budget={b}, lexical_weight={lexical_weight}, read_on_share=0)"] = hybrid(
                budget_tokens=b, unit="auto", read_on_share=0.0)
        for unit in ("segment", "cluster"):
            out[f"hybrid search(unit={unit}, budget=1024, lexical_weight={lexical_weight})"] = hybrid(
                budget_tokens=1024, unit=unit)
    if adapters:
        from langchain_hseg import HierarchicalSegmentRetriever as LCRetriever
        from llama_index_hseg import HierarchicalSegmentRetriever as LIRetriever

        lc = LCRetriever(store=store, unit="auto", budget_tokens=1024)
        li = LIRetriever(store, unit="auto", budget_tokens=1024)
        out["LangChain invoke(unit=auto, budget=1024)"] = lambda _, text: lc.invoke(text)
        out["LlamaIndex retrieve(unit=auto, budget=1024)"] = lambda _, text: li.retrieve(text)
    return out


def batched(store: HierarchicalStore, queries: np.ndarray, texts: list[str], rounds: int,
            adapters: bool, encoder: Any = None) -> dict[str, list[float]]:
    """Per-query cost (seconds) of answering all ``queries`` in one call: Chroma's ``query`` with
    every vector against ``store.search_many`` at each setting, once per round, interleaved; with
    ``adapters`` also LangChain's ``batch`` of the hseg retriever (one ``search_many``) against
    LangChain's default ``batch`` (``invoke`` per query in a thread pool), and with a real
    ``encoder`` both again with the questions encoded as a user's are."""
    col, vectors = store.collection, list(queries)
    fns: dict[str, Callable[[], Any]] = {"plain query(all vectors, n_results=5)": lambda: col.query(
        query_embeddings=vectors, n_results=5)}

    def searching(**settings: Any) -> Callable[[], Any]:
        return lambda: store.search_many(vectors, **settings)

    for unit in ("cluster", "segment", "auto"):
        fns[f"search_many(unit={unit}, k=5)"] = searching(k=5, unit=unit)
        for b in BUDGETS:
            fns[f"search_many(unit={unit}, budget={b})"] = searching(budget_tokens=b, unit=unit)
    fns[f"search_many({GATHERED_NAME})"] = searching(**GATHERED)
    if adapters:
        from langchain_core.retrievers import BaseRetriever

        from langchain_hseg import HierarchicalSegmentRetriever as LCRetriever

        lc = LCRetriever(store=store, unit="auto", budget_tokens=1024)
        fns["LangChain batch(unit=auto, budget=1024)"] = lambda: lc.batch(texts)
        fns["LangChain's default batch (invoke per query, thread pool)"] = lambda: BaseRetriever.batch(lc, texts)
        if encoder is not None:
            encoding = LCRetriever(store=HierarchicalStore.from_collection(store.collection, encoder=encoder),
                                   unit="auto", budget_tokens=1024)
            fns["LangChain batch, questions encoded"] = lambda: encoding.batch(texts)
            fns["LangChain's default batch, questions encoded"] = lambda: BaseRetriever.batch(encoding, texts)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(rounds):
        for name in rotated(list(fns), r):
            t0 = time.perf_counter()
            fns[name]()
            times[name].append((time.perf_counter() - t0) / len(vectors))
    return times


def batched_table(times: dict[str, list[float]], single_plain_p50: float, n: int, title: str) -> str:
    lines = [f"### {title}: {n} queries per call", "",
             "| call | ms per query (median of rounds) | × one plain query p50 |", "|---|---|---|"]
    for name, ts in times.items():
        ms = float(np.median(ts)) * 1000.0
        lines.append(f"| `{name}` | {ms:.3f} | {ms / single_plain_p50:.2f} |")
    return "\n".join(lines) + "\n"


def table(times: dict[str, list[float]], title: str) -> str:
    pp50, pp95 = percentiles(times[PLAIN])
    lines = [f"### {title}", "", "| call | p50 ms | p95 ms | × plain p50 | × plain p95 |", "|---|---|---|---|---|"]
    for name, ts in times.items():
        p50, p95 = percentiles(ts)
        lines.append(f"| `{name}` | {p50:.2f} | {p95:.2f} | {p50 / pp50:.2f} | {p95 / pp95:.2f} |")
    return "\n".join(lines) + "\n"


def open_store(stack: ExitStack, args: argparse.Namespace, collection: str) -> HierarchicalStore:
    if not args.server:
        return HierarchicalStore(collection, path=args.path)
    from hseg_testing.chroma_server import ChromaServer

    server = stack.enter_context(ChromaServer(args.path))
    return HierarchicalStore(collection, client=server.client())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="store", required=True)
    syn = sub.add_parser("synthetic", help="random vectors (built once into --path)")
    syn.add_argument("--path", required=True, help="PersistentClient directory to build into / reuse")
    syn.add_argument("--parents", type=int, default=17_000)
    syn.add_argument("--segments", type=int, default=5, help="segment vectors per parent")
    syn.add_argument("--dim", type=int, default=384)
    syn.add_argument("--per-doc", type=int, default=100, help="parents per synthetic document")
    syn.add_argument("--queries", type=int, default=100, help="queries per set")
    db = sub.add_parser("db", help="a store built with hseg index")
    db.add_argument("--db", dest="path", required=True)
    db.add_argument("--collection", default="hseg")
    db.add_argument("--questions", required=True, help="CSV with a 'question' column")
    db.add_argument("--queries", type=int, default=100)
    ox = sub.add_parser("openstax", help="real text and vectors (built once into --path)")
    ox.add_argument("--path", required=True, help="PersistentClient directory to build into / reuse")
    ox.add_argument("--records", type=int, default=40_000)
    ox.add_argument("--queries", type=int, default=100)
    for p in (syn, db, ox):
        p.add_argument("--lexical-weight", type=float, default=0.3, help="the hybrid rows' weight (0: none)")
        p.add_argument("--server", action="store_true", help="measure through a chroma run server on the directory")
        p.add_argument("--adapters", action="store_true", help="also time the LangChain and LlamaIndex retrievers")
        p.add_argument("--rounds", type=int, default=3)
        p.add_argument("--warmup", type=int, default=10)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--out", default=None, help="append the markdown tables to this file")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("hseg").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    rng = np.random.default_rng(args.seed + 1)
    where = "chroma run server" if args.server else "embedded PersistentClient"
    with ExitStack() as stack:
        real_encoder = None  # a db store's own encoder, for the batch rows that encode the questions
        if args.store == "synthetic":
            store = open_store(stack, args, stores.SYNTHETIC_COLLECTION)
            expected = args.parents * (args.segments + 1)
            if store.count() < expected:
                secs = stores.build_synthetic(store, args.parents, args.segments, args.dim, args.per_doc, args.seed)
                print(f"built {store.count()} records ({args.parents} parents) in {secs:.0f} s")
            rand = rng.standard_normal((args.queries, args.dim)).astype(np.float32)
            sample = store.collection.get(where={"hseg_level": "segment"}, limit=args.queries,
                                          offset=int(rng.integers(0, max(1, args.parents))), include=["embeddings"])
            base = np.asarray(sample["embeddings"], dtype=np.float32)
            near = base + 0.5 * rng.standard_normal(base.shape).astype(np.float32) / np.sqrt(args.dim)
            qs = np.concatenate([rand, near])
            qs /= np.linalg.norm(qs, axis=1, keepdims=True)
            texts = [f"q{i}" for i in range(len(qs))]
            store.encoder = stores.LookupEncoder(store.encoder_name or "synthetic", dict(zip(texts, qs)))
            label = f"synthetic store, {store.count():,} records, {where}"
        elif args.store == "openstax":
            store = open_store(stack, args, stores.OPENSTAX_COLLECTION)
            real_encoder = store.encoder
            if store.count() < args.records * 9 // 10:
                secs = stores.build_openstax(store, Path(args.path), args.records, real_encoder)
                print(f"built {store.count():,} records in {secs:.0f} s (store.add, lexical index included)")
            texts = stores.questions(str(stores.DATA / "textbook_qa" / "questions_term.csv"), args.queries)
            qs = np.asarray(real_encoder.encode(texts), dtype=np.float32)
            qs /= np.linalg.norm(qs, axis=1, keepdims=True)
            store.encoder = stores.LookupEncoder(real_encoder.name, dict(zip(texts, qs)))
            label = f"openstax: {store.count():,} records of real text, {where}"
            print(lexical_costs(store))
        else:
            store = open_store(stack, args, args.collection)
            real_encoder = store.encoder
            texts = stores.questions(args.questions, args.queries)
            qs = np.asarray(store.encoder.encode(texts), dtype=np.float32)
            qs /= np.linalg.norm(qs, axis=1, keepdims=True)
            store.encoder = stores.LookupEncoder(store.encoder.name, dict(zip(texts, qs)))
            label = f"{Path(args.path).name}: {store.count():,} records (hseg index), {where}"
        store.search(qs[0], budget_tokens=1024, unit="auto")  # the unit index's one-time completeness check
        if args.lexical_weight:  # the lexical index's first check (a server's client builds its cache)
            t0 = time.perf_counter()
            store.search(qs[0], budget_tokens=1024, unit="auto", lexical_weight=args.lexical_weight,
                         query_text=texts[0])
            print(f"first hybrid search (lexical index checked or built): {time.perf_counter() - t0:.2f} s")
        fns = calls(store, args.adapters, args.lexical_weight)
        print(f"{label}; {len(qs)} queries × {args.rounds} rounds, {len(fns)} calls interleaved")
        times = measure(fns, qs, texts, args.rounds, args.warmup)
        many = batched(store, qs, texts, max(3, args.rounds), args.adapters, real_encoder)
    append_report(table(times, label) + "\n" + batched_table(many, percentiles(times[PLAIN])[0], len(qs), label),
                  args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
