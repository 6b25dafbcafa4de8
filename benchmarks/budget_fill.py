"""Would the auto unit gain from spending the budget the walk leaves over? A paired simulation (issue 27).

    HF_HUB_OFFLINE=1 python benchmarks/budget_fill.py --data ../shared/data/chroma_eval \
        [--questions FILE ...] [--budgets 1024 4096] [--target 256] [--lexical-weight 0.2]

The walk of the auto unit (:func:`hseg.retrieval.selection.walk`) takes segments in fused-score
order while they fit and stops at the first that does not: up to one segment's worth of the
budget stays unspent. Round 4 diagnosed two of hseg_default's losses as references that run from a
taken segment into the *next* one, which alone is unlike the question. The rules compared here
spend the rest of the budget after the walk, without changing what the walk took:

* ``next``: for each taken segment, best first, its next segment in the document if it fits;
* ``adjacent``: the same with the next, then the previous segment;
* ``nearest``: of a taken segment's two untaken neighbours, the one with the higher fused score first;
* ``ranked``: the walk goes on down the ranking, skipping what does not fit (a greedy knapsack);
* ``next+tail`` / ``next+tailw`` (round 7): ``next``, then what is still left goes to a *part* of a
  segment: each passage in rank order takes the longest run of whole sentences (``tailw``: whole
  words) from the start of the segment after it that fits, so the budget is spent to within a
  sentence and a passage may end inside a segment.

Every rule repeats its pass until nothing more fits (a passage can grow by several segments). All
run on exact fused scores computed here for every segment of the pooled index (the store's formula:
cos(q, s) + w·cos(q, C) + v·mean cos(q, neighbours) + λ·lex(s), with the store's lexical index), with
the product's walk, so a rule and the baseline differ only by the fill. The baseline is
``hseg_default`` up to HNSW's approximation. Prints a paired table (as ``benchmarks/paired.py``) per
question file, budget and rule, pooled and per corpus.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import hseg_methods  # noqa: E402
from baselines import counter  # noqa: E402
from evaluation import Chunk, budget, chunk_sizes, load_eval, score  # noqa: E402
from paired import bootstrap_interval, sign_test  # noqa: E402

RULES = ("next", "adjacent", "nearest", "ranked", "next+ranked", "next+tail", "next+tailw")


def parse_rule(rule: str) -> tuple[str, float]:
    """``"next@0.1"`` -> ("next", 0.1): the fill, and the share of the budget kept back from the walk for it."""
    name, _, reserve = rule.partition("@")
    if name not in RULES:
        raise argparse.ArgumentTypeError(f"unknown rule {rule!r}; one of {RULES}, optionally @<share>")
    return name, float(reserve or 0)


def fill(rule: str, order: list[int], fused: np.ndarray, tokens: Sequence[int], at: dict, doc: Sequence[str],
         position: Sequence[int], left: int) -> list[int]:
    """Segments added after the walk by ``rule`` (module docstring), in the order added."""
    taken = set(order)
    added: list[int] = []
    if rule == "next+ranked":
        first = fill("next", order, fused, tokens, at, doc, position, left)
        left -= sum(int(tokens[j]) for j in first)
        return first + fill("ranked", order + first, fused, tokens, at, doc, position, left)
    if rule == "ranked":
        for i in np.argsort(-fused, kind="stable"):
            if i not in taken and tokens[i] <= left:
                added.append(int(i))
                taken.add(int(i))
                left -= int(tokens[i])
        return added
    grew = True
    while grew:
        grew = False
        for i in list(order) + list(added):
            steps = {"next": (1,), "adjacent": (1, -1), "nearest": (1, -1)}[rule]
            found = [at.get((doc[i], position[i] + s)) for s in steps]
            near: list[int] = [j for j in found if j is not None and j not in taken]
            if rule == "nearest":
                near.sort(key=lambda j: -fused[j])
            for j in near:
                if tokens[j] <= left:
                    added.append(j)
                    taken.add(j)
                    left -= int(tokens[j])
                    grew = True
    return added


def prefix_ends(text: str, words: bool) -> list[int]:
    """Where a prefix of a segment's ``text`` may end: after each sentence, or (``words``) each word."""
    if words:
        return [m.end() for m in re.finditer(r"\S+", text)]
    from hseg.text.sentences import split_sentences

    return [span.end for span in split_sentences(text)]


def tails(runs: list[list[int]], prefixes, at: dict, doc: Sequence[str], position: Sequence[int],
          taken: set[int], left: int, words: bool) -> dict[int, tuple[int, int]]:
    """``{last segment of a run: (segment after it, characters of it taken)}``: each run in rank order takes
    the longest prefix of its next untaken segment whose tokens fit ``left``; ``prefixes(j, words)`` lists
    segment ``j``'s ``(end, tokens)`` cuts (:func:`prefix_ends`) in order."""
    out: dict[int, tuple[int, int]] = {}
    for run in runs:
        j = at.get((doc[run[-1]], position[run[-1]] + 1))
        if j is None or j in taken or left <= 0:
            continue
        best = None
        for end, n in prefixes(j, words):
            if n > left:
                break
            best = end, n
        if best:
            out[run[-1]] = (j, best[0])
            left -= best[1]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from hseg.encoders import CachingEncoder, as_encoder
    from hseg.retrieval.lexical_query import lexical_query
    from hseg.retrieval.selection import ClusterSize, merge_runs, walk
    from hseg.retrieval.settings import DEFAULT_CLUSTER_WEIGHT, DEFAULT_LEXICAL_WEIGHT, DEFAULT_NEIGHBOUR_WEIGHT

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data/chroma_eval")
    p.add_argument("--questions", nargs="*", default=[None])
    p.add_argument("--budgets", nargs="+", type=int, default=[1024, 4096])
    p.add_argument("--target", type=int, default=256)
    p.add_argument("--lexical-weight", type=float, default=DEFAULT_LEXICAL_WEIGHT)
    p.add_argument("--rules", nargs="+", default=list(RULES), help="a rule, optionally with @<share of the budget "
                   "kept back from the walk for the fill>, e.g. next@0.1")
    args = p.parse_args(argv)
    corpora, _ = load_eval(args.data, args.questions[0])
    encoder = CachingEncoder(as_encoder())
    store, chunkings = hseg_methods._setup(corpora, args.target, encoder)
    segs = [(c, s) for ch in chunkings for c in ch.clusters for s in c.segments]
    unit = lambda v: np.asarray(v, dtype=np.float64) / np.linalg.norm(v)  # noqa: E731
    S = np.stack([unit(s.embedding) for _, s in segs])
    C = np.stack([unit(c.embedding) for c, _ in segs])
    doc = [s.doc_id for _, s in segs]
    position = [s.index for _, s in segs]
    cluster = [c.id for c, _ in segs]
    tokens = [s.token_count for _, s in segs]
    at = {(d, p): i for i, (d, p) in enumerate(zip(doc, position))}
    nbrs = [[j for j in (at.get((d, p - 1)), at.get((d, p + 1))) if j is not None] for d, p in zip(doc, position)]
    N = np.stack([S[js].mean(axis=0) if js else S[i] for i, js in enumerate(nbrs)])
    fused_vectors = S + DEFAULT_CLUSTER_WEIGHT * C + DEFAULT_NEIGHBOUR_WEIGHT * N
    sizes = {c.id: ClusterSize(len(c.segments), sum(s.token_count for s in c.segments))
             for ch in chunkings for c in ch.clusters}
    members: dict[str, list[int]] = {}
    for j, c in enumerate(cluster):
        members.setdefault(c, []).append(j)
    keys = list(zip(cluster, position))
    count = counter()
    size = chunk_sizes(count)
    cuts: dict[tuple[int, bool], list[tuple[int, int]]] = {}

    def prefixes(j: int, words: bool) -> list[tuple[int, int]]:
        """Segment ``j``'s prefix cuts with their token counts, computed once per run (every question reuses them)."""
        if (j, words) not in cuts:
            text = segs[j][1].text
            cuts[j, words] = [(end, count(text[:end])) for end in prefix_ends(text, words)]
        return cuts[j, words]

    def answer(order: list[int], fused: np.ndarray, n: int, q, tail: str | None = None, left: int = 0) -> float:
        runs = merge_runs(keys, order, fused)
        cut = tails(runs, prefixes, at, doc, position, set(order), left, tail == "w") if tail is not None else {}
        chunks = []
        for r in runs:
            start = segs[r[0]][1].start
            end = segs[cut[r[-1]][0]][1].start + cut[r[-1]][1] if r[-1] in cut else segs[r[-1]][1].end
            chunks.append(Chunk(doc[r[0]], start, end, corpora[doc[r[0]]][start:end]))
        return score(q, budget(chunks, n, [size(c) for c in chunks]))[0]  # the harness recounts: no overrun

    for questions in args.questions:
        _, queries = load_eval(args.data, questions)
        qv = np.stack([unit(v) for v in encoder.encode([q.question for q in queries])])
        print(f"\n## {questions or 'questions.csv'} ({len(queries)} questions)\n", flush=True)
        print("| budget | rule | set | rule | walk alone | diff | wins/losses | sign p | 95% interval |")
        print("|---|---|---|---|---|---|---|---|---|")
        for n in args.budgets:
            recalls: dict[str, list[float]] = {r: [] for r in ("walk", *args.rules)}
            walks: dict[int, tuple[list[int], int]] = {}
            for q, v in zip(queries, qv):
                fused = fused_vectors @ v
                lq = lexical_query(store.lexical_index, q.question, args.lexical_weight)
                if lq is not None:
                    fused = fused + args.lexical_weight * np.array([lq.score(s.id) for _, s in segs])
                walks.clear()
                for rule in ("walk", *args.rules):
                    name, reserve = parse_rule(rule) if rule != "walk" else ("walk", 0.0)
                    b = max(1, int(round(n * (1 - reserve))))
                    if b not in walks:
                        sel = walk(fused, cluster, tokens, sizes, b)
                        assert sel is not None
                        order, done = [], 0
                        for k, c in sel.expanded:  # a cluster taken whole brings its other segments (select_auto)
                            order += sel.taken[done:k]
                            done = k
                            seen = set(order)
                            order += [j for j in members[c] if j not in seen]
                        order += sel.taken[done:]
                        walks[b] = (order, n - sum(int(tokens[j]) for j in order))
                    order, left = walks[b]
                    base, plus_tail, tail = name.partition("+tail")
                    extra = fill(base, order, fused, tokens, at, doc, position, left) if name != "walk" and left > 0 \
                        else []
                    rest = left - sum(int(tokens[j]) for j in extra)
                    recalls[rule].append(answer(order + extra, fused, n, q, tail if plus_tail else None, rest))
            groups = {"pooled": np.ones(len(queries), dtype=bool)}
            if len(corpora) > 1:
                groups |= {c: np.array([q.corpus_id == c for q in queries]) for c in sorted(corpora)}
            for rule in args.rules:
                for name, mask in groups.items():
                    xa, xb = np.array(recalls[rule])[mask], np.array(recalls["walk"])[mask]
                    d = xa - xb
                    wins, losses = int((d > 1e-9).sum()), int((d < -1e-9).sum())
                    lo, hi = bootstrap_interval(d)
                    print(f"| {n} | {rule} | {name} | {xa.mean() * 100:.1f} | {xb.mean() * 100:.1f} | "
                          f"{d.mean() * 100:+.2f} | {wins}/{losses} | {sign_test(wins, losses):.2f} | "
                          f"[{lo * 100:+.2f}, {hi * 100:+.2f}] |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
