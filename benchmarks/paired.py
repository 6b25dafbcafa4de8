"""Paired, per-query comparison of two retrieval methods: is a difference in the table real?

    python -m benchmarks.paired hseg_sc_256 hseg_c_256 [--pairs A B ...] \
        [--data ../shared/data/chroma_eval] [--questions FILE] [--budgets 1024 2048 4096] [--ks 5 8 10]
    python -m benchmarks.paired hseg_auto_512 hseg_auto_512@previous.pt   # two segmenters, one method

A pooled recall difference of one point is three queries of 276. For every setting (k chunks, or
a token budget with the benchmark's first-misfit rule) this prints the mean recall of each
method, the mean difference A − B, how many queries each method answers better (wins: any
difference counts, so a method that adds a few characters of a reference wins that query), the
two-sided exact sign test on those wins, and a 95% bootstrap interval of the difference
(queries resampled, 5,000 draws, fixed seed; :mod:`benchmarks.harness.stats`). Methods come from
:mod:`benchmarks.retrieval`'s registry and run exactly as there (same encoder, same pooled index).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from . import retrieval  # its registry holds every method
from .harness.baselines import counter
from .harness.evaluation import Chunk, Query, budget, chunk_sizes, load_eval, score
from .harness.stats import bootstrap_interval, sign_test


def per_query_recall(lists: Sequence[Sequence[Chunk]], queries: Sequence[Query], select) -> np.ndarray:
    return np.array([score(q, select(r))[0] for q, r in zip(queries, lists)])


def ranked_lists(name: str, corpora: dict[str, str], queries: list[Query], encoder, ks, budgets) -> dict[str, list]:
    """``{setting: ranked lists}``; ``"ranked"`` is the method's long list, cut to each setting.

    A budget-aware method answers every setting itself (asked once per k: its answer for k=5 is
    not the first five of its answer for a budget)."""
    fn = retrieval.resolve_method(name)
    if fn is None:
        raise ValueError(f"unknown method {name!r}")
    if not retrieval.takes_budgets(fn):
        out = fn(corpora, queries, encoder)
        return {"ranked": out.ranked if hasattr(out, "ranked") else out}
    lists: dict[str, list] = {}
    for k in ks:
        out = fn(corpora, queries, encoder, budgets=budgets, k=k)
        assert not isinstance(out, list), f"{name} takes budgets but returned bare ranked lists"
        assert out.per_setting is not None, f"{name} takes budgets but answered no setting"
        lists.update({"ranked": out.ranked, **out.per_setting})
    return lists


def compare(a: str, b: str, corpora, queries, encoder, ks: Sequence[int], budgets: Sequence[int],
            cache: dict[str, dict[str, list]] | None = None, per_corpus: bool = False) -> list[str]:
    """The table of one pair; ``cache`` keeps each method's lists for the run's other pairs;
    ``per_corpus`` adds a row per corpus under each setting (means and wins; the index stays pooled)."""
    size = chunk_sizes(counter())
    cache = {} if cache is None else cache
    for m in (a, b):
        if m not in cache:
            cache[m] = ranked_lists(m, corpora, queries, encoder, ks, budgets)
    lists = {m: cache[m] for m in (a, b)}
    settings = [(f"k={k}", lambda r, k=k: list(r[:k])) for k in ks]
    settings += [(f"B={n}", lambda r, n=n: budget(r, n, [size(c) for c in r])) for n in budgets]
    lines = [f"| setting | {a} | {b} | A − B | wins A/B | sign p | 95% CI |", "|---|---|---|---|---|---|---|"]
    for setting, select in settings:
        # a method that filled the setting itself already fits it; others are cut from the long list
        ra, rb = (lists[m].get(setting, lists[m]["ranked"]) for m in (a, b))
        xa, xb = per_query_recall(ra, queries, select), per_query_recall(rb, queries, select)
        d = xa - xb
        wins, losses = int((d > 1e-9).sum()), int((d < -1e-9).sum())
        lo, hi = bootstrap_interval(d)
        lines.append(f"| {setting} | {xa.mean() * 100:.1f} | {xb.mean() * 100:.1f} | {d.mean() * 100:+.2f} | "
                     f"{wins}/{losses} | {sign_test(wins, losses):.2f} | [{lo * 100:+.2f}, {hi * 100:+.2f}] |")
        for cid in sorted({q.corpus_id for q in queries}) if per_corpus else ():
            sel = np.array([q.corpus_id == cid for q in queries])
            lines.append(f"| {setting} {cid} | {xa[sel].mean() * 100:.1f} | {xb[sel].mean() * 100:.1f} | "
                         f"{d[sel].mean() * 100:+.2f} | {int((d[sel] > 1e-9).sum())}/{int((d[sel] < -1e-9).sum())} "
                         "| | |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a", help="method A (a name from benchmarks.retrieval)")
    p.add_argument("b", help="method B")
    p.add_argument("--pairs", nargs="*", default=[], help="more pairs: A2 B2 A3 B3 ...")
    p.add_argument("--data", default="../shared/data/chroma_eval")
    p.add_argument("--questions", default=None, help="questions file (default: questions.csv inside --data)")
    p.add_argument("--corpora", nargs="+", default=None)
    p.add_argument("--budgets", nargs="+", type=int, default=[1024, 2048, 4096])
    p.add_argument("--ks", nargs="+", type=int, default=[5])
    p.add_argument("--per-corpus", action="store_true", help="a row per corpus under each setting")
    p.add_argument("--vector-cache", default=None, metavar="DIR",
                   help="vectors of earlier runs kept in DIR (as benchmarks.retrieval's --vector-cache)")
    args = p.parse_args(argv)
    if len(args.pairs) % 2:
        p.error("--pairs takes method names two by two")
    pairs = [(args.a, args.b), *zip(args.pairs[::2], args.pairs[1::2])]
    unknown = sorted(m for m in {m for pair in pairs for m in pair} if retrieval.resolve_method(m) is None)
    if unknown:
        p.error(f"unknown methods {unknown}; known: {list(retrieval.METHODS)}")
    corpora, queries = load_eval(args.data, args.questions)
    if args.corpora:
        corpora = {c: corpora[c] for c in args.corpora}
        queries = [q for q in queries if q.corpus_id in corpora]

    from hseg.encoders import as_encoder

    encoder = retrieval.encoder_for_run(as_encoder(), args.vector_cache)
    cache: dict[str, dict[str, list]] = {}  # a method in several pairs runs once
    for a, b in pairs:
        print(f"\n### {a} (A) vs {b} (B), {len(queries)} queries\n")
        print("\n".join(compare(a, b, corpora, queries, encoder, args.ks, args.budgets, cache,
                                       args.per_corpus)), flush=True)
        if hasattr(encoder, "save"):
            encoder.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
