"""Which questions does an hseg method lose to another method, and why? (issue 27, round 4)

    HF_HUB_OFFLINE=1 python benchmarks/losses.py hseg_default lc_recursive_200_0 \
        [--data ../shared/data/chroma_eval] [--questions FILE] [--corpora NAME ...] [--budgets 1024 4096] \
        [--target 256]

Lists every question whose recall differs between A and B at each budget (both methods run as in
``benchmarks/paired.py``), then, for each question A loses, the detail of hseg's default search
(target ``--target``, default search settings) on it: each reference with the segments that hold
it (their cosine, their cluster's, the mean of their neighbours', their normalised BM25 score, the
fused score of the auto unit and its rank among all segments of the pooled index, with the
default lexical weight and without), B's chunks that hold it, and what ``store.search(q,
budget_tokens=B)`` returned with the default lexical weight and with 0 (spans, tokens, scores;
``*REF<n>``: n characters of a reference).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import hseg_methods  # noqa: E402
import paired  # noqa: E402
from baselines import counter  # noqa: E402
from evaluation import Chunk, Query, budget, chunk_sizes, load_eval, score  # noqa: E402


def overlap(q: Query, doc: str, start: int, end: int) -> int:
    return sum(max(0, min(end, b) - max(start, a)) for a, b in q.refs) if doc == q.corpus_id else 0


def detail(qi: int, q: Query, corpora: dict[str, str], store, chunkings, encoder, b_chunks, budgets) -> list[str]:
    from hseg.retrieval.lexical_query import lexical_query
    from hseg.retrieval.settings import DEFAULT_CLUSTER_WEIGHT, DEFAULT_LEXICAL_WEIGHT, DEFAULT_NEIGHBOUR_WEIGHT

    size = counter()
    segs = [(c, s) for ch in chunkings for c in ch.clusters for s in c.segments]
    unit = lambda v: np.asarray(v, dtype=np.float64) / np.linalg.norm(v)  # noqa: E731
    v = unit(encoder.encode_query(q.question))
    cs = np.array([unit(s.embedding) @ v for _, s in segs])
    cc = np.array([unit(c.embedding) @ v for c, _ in segs])
    at = {(s.doc_id, s.index): i for i, (_, s) in enumerate(segs)}
    nb = np.array([np.mean([cs[j] for j in js]) if js else cs[i] for i, js in enumerate(
        [[j for j in (at.get((s.doc_id, s.index - 1)), at.get((s.doc_id, s.index + 1))) if j is not None]
         for _, s in segs])])
    lq = lexical_query(store.lexical_index, q.question, DEFAULT_LEXICAL_WEIGHT)
    lex = np.array([lq.score(s.id) if lq else 0.0 for _, s in segs])
    dense = cs + DEFAULT_CLUSTER_WEIGHT * cc + DEFAULT_NEIGHBOUR_WEIGHT * nb
    fused = dense + DEFAULT_LEXICAL_WEIGHT * lex
    rank = np.argsort(np.argsort(-fused, kind="stable"), kind="stable")
    rank_dense = np.argsort(np.argsort(-dense, kind="stable"), kind="stable")
    out = [f"\n### q{qi} [{q.corpus_id}] {q.question}\n"]
    for a, b in q.refs:
        out.append(f"- reference {a}-{b} ({size(corpora[q.corpus_id][a:b])} tokens): "
                   f"{corpora[q.corpus_id][a:b][:240]!r}")
        for i, (c, s) in enumerate(segs):
            if s.doc_id == q.corpus_id and s.start < b and s.end > a:
                out.append(f"  - in segment #{s.index} {s.start}-{s.end} ({s.token_count} t; cluster #{c.index}, "
                           f"{c.token_count} t): cos {cs[i]:.3f}, cluster {cc[i]:.3f}, neighbours {nb[i]:.3f}, "
                           f"lex {lex[i]:.2f}; fused {fused[i]:.3f}, rank {rank[i] + 1} of {len(segs)} "
                           f"(without lex: {rank_dense[i] + 1})")
        for r, ch in enumerate(b_chunks):
            if overlap(Query(q.question, q.corpus_id, [(a, b)]), ch.corpus_id, ch.start, ch.end):
                out.append(f"  - B's chunk at rank {r + 1}: {ch.start}-{ch.end} ({size(ch.text)} t)")
    for n in budgets:
        for weight in (DEFAULT_LEXICAL_WEIGHT, 0.0):
            hits = store.search(q.question, budget_tokens=n, lexical_weight=weight)
            rec = score(q, [Chunk(h.doc_id, h.start, h.end, h.text) for h in hits])[0]
            cells = [f"{h.doc_id[:8]}:{h.start}-{h.end}/{h.token_count}t {h.score:.3f}"
                     + (f" *REF{overlap(q, h.doc_id, h.start, h.end)}" if overlap(q, h.doc_id, h.start, h.end) else "")
                     for h in hits]
            out.append(f"- B={n}, lexical_weight {weight}: recall {rec * 100:.1f}, "
                       f"{sum(h.token_count for h in hits)} tokens in {len(hits)} hits: " + " | ".join(cells[:12])
                       + (" | ..." if len(cells) > 12 else ""))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from hseg.encoders import CachingEncoder, as_encoder

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--data", default="../shared/data/chroma_eval")
    p.add_argument("--questions", default=None)
    p.add_argument("--corpora", nargs="+", default=None, help="only list questions of these corpora (one index)")
    p.add_argument("--budgets", nargs="+", type=int, default=[1024, 4096])
    p.add_argument("--target", type=int, default=256)
    args = p.parse_args(argv)
    corpora, queries = load_eval(args.data, args.questions)
    encoder = CachingEncoder(as_encoder())
    lists = {m: paired.ranked_lists(m, corpora, queries, encoder, [5], args.budgets) for m in (args.a, args.b)}
    size = chunk_sizes(counter())
    lost: dict[int, list[Chunk]] = {}
    print(f"| budget | q | corpus | {args.a} | {args.b} | question |\n|---|---|---|---|---|---|")
    for n in args.budgets:
        for i, q in enumerate(queries):
            if args.corpora and q.corpus_id not in args.corpora:
                continue
            ra, rb = (budget(r, n, [size(c) for c in r])
                      for r in (lists[m].get(f"B={n}", lists[m]["ranked"])[i] for m in (args.a, args.b)))
            xa, xb = score(q, ra)[0], score(q, rb)[0]
            if abs(xa - xb) > 1e-9:
                print(f"| {n} | q{i} | {q.corpus_id} | {xa * 100:.1f} | {xb * 100:.1f} | {q.question} |")
                if xa < xb:
                    lost.setdefault(i, rb)
    store, chunkings = hseg_methods._setup(corpora, args.target, encoder)
    for i, b_chunks in lost.items():
        print("\n".join(detail(i, queries[i], corpora, store, chunkings, encoder, b_chunks, args.budgets)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
