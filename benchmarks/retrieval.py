"""Token-level retrieval benchmark (Chroma's protocol) for registered chunking methods.

Usage (from the repository root, offline)::

    python -m benchmarks.retrieval --data ../shared/data/chroma_eval \
        [--questions FILE] [--methods NAME ...] [--corpora NAME ...] [--budgets 1024 2048 4096] \
        [--out benchmarks/out]

``--questions`` reads another questions file over the same corpora (default
``<data>/questions.csv``), e.g. ``--data ../shared/data/textbook_qa --questions
../shared/data/textbook_qa/questions_term.csv``.

Prints markdown tables (pooled first, then per corpus) and writes ``<out>/retrieval.csv`` (one
row per method × corpus-or-pooled × setting) and ``<out>/retrieval.png`` (pooled recall and IoU
against the token budget). All selected corpora share one index, as in the report; ``--corpora``
restricts both the index and the queries.

Each method's rows reach disk as soon as it finishes, so a long run that dies keeps what it
finished: they are appended to ``<out>/retrieval.csv`` and its tables go to
``<out>/methods/<method>.md``. A method that raises is logged with its traceback and skipped; the
run goes on with the others and exits non-zero at the end, naming the failed methods.

Adding a method — the registry contract
---------------------------------------
A method is ``fn(corpora: dict[str, str], queries: list[Query], encoder) -> ranked`` where
``ranked[i]`` is the ranked list of :class:`Chunk` for ``queries[i]``, best first, without
duplicates, over the pooled index of all ``corpora`` (ranking is the method's own business, e.g.
parents ordered by the max over several child vectors). Each ``Chunk(corpus_id, start, end, text)``
must be an exact span: ``corpora[corpus_id][start:end] == text``; the metric uses the span, the
token counts (budgets) use the text. Lists should be at least :data:`DEPTH` long (or the whole
index) so that the 4096-token budget is never starved. ``fn`` may instead return
``Retrieval(ranked, units)`` where ``units`` is the method's whole index (for the index size and
mean-token columns). The encoder is an :class:`hseg.encoders.CachingEncoder` shared by all methods
of the run; :func:`benchmarks.harness.evaluation.query_vectors` gives the cached query vectors and
:func:`benchmarks.harness.evaluation.rank_by_similarity` does flat cosine retrieval.
Register with ``register("name", fn)`` (or ``@register("name")``), then either add the call below
or run from your own script: ``from benchmarks import retrieval; retrieval.register(...); retrieval.main()``.
"""

from __future__ import annotations

import argparse
import csv
import inspect
import re
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, cast

from .harness import hseg_methods, peers
from .harness.baselines import BASELINES, Chunker, counter
from .harness.evaluation import (
    DEFAULT_BUDGETS,
    DEFAULT_DEPTH,
    DEFAULT_K,
    POOLED,
    Chunk,
    Query,
    evaluate,
    load_eval,
    rank_by_similarity,
)
from .harness.vector_cache import DiskCachingEncoder

DEPTH = DEFAULT_DEPTH


class Retrieval(NamedTuple):
    ranked: list[list[Chunk]]
    units: list[Chunk] | None = None
    #: setting name ("k=5", "B=1024", ...) -> ranked lists a budget-aware method made for it
    per_setting: dict[str, list[list[Chunk]]] | None = None


# (corpora, queries, encoder) -> ranked lists; a budget-aware method also takes budgets= and k=
Method = Callable[..., "list[list[Chunk]] | Retrieval"]
METHODS: dict[str, Method] = {}


def register(name: str, fn: Method | None = None) -> Any:
    """Add a method to the registry; usable directly or as a decorator."""
    def add(f: Method) -> Method:
        METHODS[name] = f
        return f

    return add(fn) if fn is not None else add


def flat_method(chunker: Chunker) -> Method:
    """A method from a chunker: chunk every corpus, pool the chunks, rank by cosine."""
    def method(corpora: dict[str, str], queries: list[Query], encoder: Any) -> Retrieval:
        units = [c for cid, text in corpora.items() for c in chunker(cid, text, encoder)]
        return Retrieval(rank_by_similarity(units, queries, encoder, DEPTH), units)

    return method


for _name, _chunker in BASELINES.items():
    register(_name, flat_method(_chunker))
# The hseg methods (benchmarks/harness/hseg_methods.py) register themselves through the same registry.
hseg_methods.register_all(register, Retrieval)
# BM25 and hybrid (dense + BM25) peers over the Recursive-200 chunks (benchmarks/harness/peers.py).
peers.register_all(register, Retrieval)


def encoder_for_run(encoder: Any, vector_cache: str | None) -> Any:
    """The run's shared caching encoder; with ``vector_cache`` (a folder) it also keeps its vectors
    on disk between runs (:class:`DiskCachingEncoder`)."""
    from hseg.encoders import CachingEncoder

    return DiskCachingEncoder(encoder, vector_cache) if vector_cache else CachingEncoder(encoder)


def resolve_method(name: str) -> Method | None:
    """A registered method, or an hseg method with other segmenter weights (``hseg_c_512@w.pt``);
    ``None`` when the name is neither."""
    return METHODS.get(name) or hseg_methods.variant(name, Retrieval)


# --------------------------------------------------------------------------- run


def check_ranked(name: str, corpora: dict[str, str], queries: Sequence[Query],
                 ranked: Sequence[Sequence[Chunk]]) -> None:
    if len(ranked) != len(queries):
        raise ValueError(f"{name}: {len(ranked)} ranked lists for {len(queries)} queries")
    for lst in ranked:
        if len(set(lst)) != len(lst):
            raise ValueError(f"{name}: duplicate chunks in a ranked list")
        for c in lst:
            if corpora[c.corpus_id][c.start:c.end] != c.text:
                raise ValueError(f"{name}: chunk {c.corpus_id}:{c.start}:{c.end} is not an exact span")


def takes_budgets(fn: Method) -> bool:
    """A budget-aware method takes the run's budgets (and k) and answers each setting itself."""
    return "budgets" in inspect.signature(fn).parameters


def run_method(name: str, corpora: dict[str, str], queries: list[Query], encoder: Any,
               k: int, budgets: Sequence[int]) -> list[dict[str, Any]]:
    t0 = time.perf_counter()
    fn = resolve_method(name)
    assert fn is not None, name  # main() refuses unknown names
    out = fn(corpora, queries, encoder, budgets=budgets, k=k) if takes_budgets(fn) else fn(corpora, queries, encoder)
    # duck-typed: a plugin may hold a Retrieval class from a second import of this module (__main__)
    ranked = cast("list[list[Chunk]]", getattr(out, "ranked", out))
    units = getattr(out, "units", None)
    per_setting = getattr(out, "per_setting", None)
    seconds = time.perf_counter() - t0
    check_ranked(name, corpora, queries, ranked)
    for lists in (per_setting or {}).values():
        check_ranked(name, corpora, queries, lists)
    rows = evaluate(name, queries, ranked, counter(), k=k, budgets=budgets, units=units, per_setting=per_setting)
    for row in rows:
        row["seconds"] = seconds
    print(f"[{name}] {seconds:.1f}s", file=sys.stderr, flush=True)
    return rows


def markdown(rows: list[dict[str, Any]], corpus: str, k: int, budgets: Sequence[int]) -> str:
    settings = [f"k={k}", *(f"B={b}" for b in budgets)]
    head = ["method", "chunks", "mean tok", "PΩ", f"R@k{k}", f"IoU@k{k}", f"P@k{k}"]
    for b in budgets:
        head += [f"R@{b}", f"IoU@{b}", f"P@{b}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by_key = {(r["method"], r["setting"]): r for r in rows if r["corpus"] == corpus}
    for method in dict.fromkeys(r["method"] for r in rows):
        first = by_key[(method, settings[0])]
        cells = [method, str(first["index_chunks"] or "-"), f"{first['index_tokens']:.0f}", f"{first['p_omega']:.1f}"]
        for s in settings:
            r = by_key[(method, s)]
            cells += [f"{r['recall']:.1f}", f"{r['iou']:.1f}", f"{r['precision']:.1f}" + ("*" if r["starved"] else "")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\nPΩ: the report's Precision_Ω. *: some ranked lists ran out before k/the budget."


def report(rows: list[dict[str, Any]], queries: Sequence[Query], n_corpora: int, k: int,
           budgets: Sequence[int]) -> str:
    """The markdown tables: pooled, then one per corpus of the queries."""
    parts = [f"## pooled ({len(queries)} queries, {n_corpora} corpora in one index)\n\n",
             markdown(rows, POOLED, k, budgets), "\n"]
    for cid in sorted({q.corpus_id for q in queries}):
        n = sum(q.corpus_id == cid for q in queries)
        parts += [f"\n## {cid} ({n} queries)\n\n", markdown(rows, cid, k, budgets), "\n"]
    return "".join(parts)


def save_method(out: Path, rows: list[dict[str, Any]], queries: Sequence[Query], n_corpora: int, k: int,
                budgets: Sequence[int]) -> None:
    """One finished method: its rows appended to ``retrieval.csv`` (header when the file is new)
    and its tables in ``methods/<method>.md``."""
    csv_path = out / "retrieval.csv"
    new = not csv_path.exists() or csv_path.stat().st_size == 0
    with open(csv_path, "a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        if new:
            writer.writeheader()
        writer.writerows(rows)
    name = rows[0]["method"]
    stem = re.sub(r"[^\w.+-]", "_", name)  # a plugin's method name need not be a file name
    text = f"# {name}\n\n" + report(rows, queries, n_corpora, k, budgets)
    (out / "methods" / f"{stem}.md").write_text(text, encoding="utf-8")


def plot(rows: list[dict[str, Any]], budgets: Sequence[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for method in dict.fromkeys(r["method"] for r in rows):
        pts = {r["setting"]: r for r in rows if r["method"] == method and r["corpus"] == POOLED}
        for ax, key in zip(axes, ("recall", "iou")):
            ax.plot(budgets, [pts[f"B={b}"][key] for b in budgets], marker="o", label=method)
    for ax, key in zip(axes, ("recall", "IoU")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(budgets), [str(b) for b in budgets])
        ax.set_xlabel("token budget (cl100k)")
        ax.set_ylabel(f"{key} (pooled, ×100)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data/chroma_eval")
    p.add_argument("--questions", default=None, help="questions file (default: questions.csv inside --data)")
    p.add_argument("--methods", nargs="+", default=None,
                   help=f"default: all of {', '.join(METHODS)}; named only: the variants "
                   "<hseg method>[~<flavour>][+lex<W>][+nb<V>][@<segmenter>]")
    p.add_argument("--corpora", nargs="+", default=None, help="restrict index and queries (default: all)")
    p.add_argument("--budgets", nargs="+", type=int, default=list(DEFAULT_BUDGETS))
    p.add_argument("--k", type=int, default=DEFAULT_K)
    p.add_argument("--out", default="benchmarks/out")
    p.add_argument("--backend", choices=("onnx", "torch"), default=None,
                   help="encoder backend for every method (default: hseg's default)")
    p.add_argument("--vector-cache", default=None, metavar="DIR",
                   help="read vectors encoded by earlier runs from DIR and write this run's there "
                   "(benchmarks/harness/vector_cache.py), e.g. .hseg_cache/bench_vectors")
    args = p.parse_args(argv)

    methods = args.methods or list(METHODS)
    unknown = [m for m in methods if resolve_method(m) is None]
    if unknown:
        p.error(f"unknown methods {unknown}; known: {list(METHODS)}")
    corpora, queries = load_eval(args.data, args.questions)
    if args.corpora:
        missing = set(args.corpora) - set(corpora)
        if missing:
            p.error(f"unknown corpora {sorted(missing)}; known: {sorted(corpora)}")
        corpora = {c: corpora[c] for c in args.corpora}
        queries = [q for q in queries if q.corpus_id in corpora]

    from hseg.encoders import DEFAULT_BACKEND, as_encoder

    out = Path(args.out)
    (out / "methods").mkdir(parents=True, exist_ok=True)
    (out / "retrieval.csv").unlink(missing_ok=True)  # this run's methods are appended to it
    t0 = time.perf_counter()
    encoder = encoder_for_run(as_encoder(None, backend=args.backend or DEFAULT_BACKEND), args.vector_cache)
    rows: list[dict[str, Any]] = []
    failed: list[str] = []
    for name in methods:
        try:
            method_rows = run_method(name, corpora, queries, encoder, args.k, args.budgets)
        except Exception:  # one broken method must not cost the others' results
            print(f"[{name}] FAILED\n{traceback.format_exc()}", file=sys.stderr, flush=True)
            failed.append(name)
            continue
        save_method(out, method_rows, queries, len(corpora), args.k, args.budgets)
        if isinstance(encoder, DiskCachingEncoder):
            encoder.save()
        rows += method_rows
    total = time.perf_counter() - t0

    if rows:
        print(report(rows, queries, len(corpora), args.k, args.budgets), end="")
        plot(rows, args.budgets, out / "retrieval.png")
        print(f"\nwrote {out / 'retrieval.csv'}, {out / 'retrieval.png'} and {out / 'methods'}/; total {total:.0f}s "
              f"(encoder load included), {encoder.misses} texts encoded", file=sys.stderr)
    if failed:
        raise SystemExit(f"{len(failed)} of {len(methods)} methods failed (tracebacks above): {', '.join(failed)}")
    return rows


if __name__ == "__main__":
    main()
