"""Would the auto unit gain from bridging one-segment holes? A paired simulation (issue 27, round 4).

    HF_HUB_OFFLINE=1 python benchmarks/gap_bridge.py --data ../shared/data/chroma_eval \
        [--questions FILE] [--budgets 1024 4096] [--target 256] [--lexical-weight 0.2]

Some references span three segments of which the middle one, alone, is only loosely similar to
the question (chatlogs: "negative effects of social media on personal relationships", round 4's
diagnosis): the walk takes the first and the third and spends the rest of the budget elsewhere.
The rule tried here: whenever a segment is taken and the segment two places away in the same
document is already taken, the one between them is taken too (if it fits the budget), since a
reference is one contiguous excerpt and a hole of one segment between two chosen ones is likely
part of it.

Both walks run on exact fused scores computed here for every segment of the pooled index (the
store's own formula: cos(q, s) + w·cos(q, C) + v·mean cos(q, neighbours) + λ·lex(s), with the
store's lexical index for lex), with the product's whole-cluster rule (:func:`hseg.retrieval.selection.walk`
for the baseline), so the two differ only by the rule; the baseline reproduces ``hseg_auto_<T>``
up to HNSW's approximation. Prints a paired table (as ``benchmarks/paired.py``) per budget.
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
from baselines import counter  # noqa: E402
from evaluation import Chunk, budget, chunk_sizes, load_eval, score  # noqa: E402
from paired import bootstrap_interval, sign_test  # noqa: E402


def bridged_walk(score_: np.ndarray, cluster: Sequence[str], tokens: Sequence[int], doc: Sequence[str],
                 position: Sequence[int], sizes: dict, budget_tokens: int, *, bridge: bool,
                 whole_cluster_min: int = 3,
                 whole_cluster_share: float = 0.25) -> tuple[list[int], list[tuple[int, str]]]:
    """The product's walk (:func:`hseg.retrieval.selection.walk`, budget only), with the one-segment
    bridge when ``bridge``."""
    at = {(d, p): i for i, (d, p) in enumerate(zip(doc, position))}
    taken: list[int] = []
    taken_set: set[int] = set()
    expanded: list[tuple[int, str]] = []
    whole: set[str] = set()
    per_cluster: dict[str, tuple[int, int]] = {}
    left = budget_tokens

    def take(i: int) -> None:
        nonlocal left
        taken.append(i)
        taken_set.add(i)
        left -= int(tokens[i])
        c = cluster[i]
        n, t = per_cluster.get(c, (0, 0))
        n, t = n + 1, t + int(tokens[i])
        per_cluster[c] = (n, t)
        size = sizes.get(c)
        if n == whole_cluster_min and size is not None and n < size.segments:
            cost = size.tokens - t
            if cost <= whole_cluster_share * left:
                whole.add(c)
                expanded.append((len(taken), c))
                left -= cost

    for i in np.argsort(-score_, kind="stable"):
        if cluster[i] in whole or i in taken_set:
            continue
        if tokens[i] > left and taken:
            break
        take(int(i))
        if bridge:
            for step in (-1, 1):
                far, gap = at.get((doc[i], position[i] + 2 * step)), at.get((doc[i], position[i] + step))
                if far in taken_set and gap is not None and gap not in taken_set and cluster[gap] not in whole \
                        and tokens[gap] <= left:
                    take(gap)
        if left <= 0:
            break
    return taken, expanded


def main(argv: Sequence[str] | None = None) -> int:
    from hseg.encoders import CachingEncoder, as_encoder
    from hseg.retrieval.lexical_query import lexical_query
    from hseg.retrieval.selection import ClusterSize, merge_runs
    from hseg.retrieval.settings import DEFAULT_CLUSTER_WEIGHT, DEFAULT_LEXICAL_WEIGHT, DEFAULT_NEIGHBOUR_WEIGHT

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data/chroma_eval")
    p.add_argument("--questions", default=None)
    p.add_argument("--budgets", nargs="+", type=int, default=[1024, 4096])
    p.add_argument("--target", type=int, default=256)
    p.add_argument("--lexical-weight", type=float, default=DEFAULT_LEXICAL_WEIGHT)
    args = p.parse_args(argv)
    corpora, queries = load_eval(args.data, args.questions)
    encoder = CachingEncoder(as_encoder())
    store, chunkings = hseg_methods._setup(corpora, args.target, encoder)
    segs = [(ch, c, s) for ch in chunkings for c in ch.clusters for s in c.segments]
    unit = lambda v: np.asarray(v, dtype=np.float64) / np.linalg.norm(v)  # noqa: E731
    S = np.stack([unit(s.embedding) for _, _, s in segs])
    C = np.stack([unit(c.embedding) for _, c, _ in segs])
    doc = [s.doc_id for _, _, s in segs]
    position = [s.index for _, _, s in segs]
    cluster = [c.id for _, c, _ in segs]
    tokens = [s.token_count for _, _, s in segs]
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
    qv = np.stack([unit(v) for v in encoder.encode([q.question for q in queries])])
    size = chunk_sizes(counter())
    for n in args.budgets:
        recalls: dict[bool, list[float]] = {False: [], True: []}
        for q, v in zip(queries, qv):
            fused = fused_vectors @ v
            lq = lexical_query(store.lexical_index, q.question, args.lexical_weight)
            if lq is not None:
                fused = fused + args.lexical_weight * np.array([lq.score(s.id) for _, _, s in segs])
            for bridge in (False, True):
                taken, expanded = bridged_walk(fused, cluster, tokens, doc, position, sizes, n, bridge=bridge)
                order, done = [], 0
                for k, c in expanded:  # a cluster taken whole brings its other segments (select_auto)
                    order += taken[done:k]
                    done = k
                    seen = set(order)
                    order += [j for j in members[c] if j not in seen]
                order += taken[done:]
                runs = merge_runs(keys, order, fused)
                chunks = [Chunk(doc[r[0]], segs[r[0]][2].start, segs[r[-1]][2].end,
                                corpora[doc[r[0]]][segs[r[0]][2].start:segs[r[-1]][2].end]) for r in runs]
                recalls[bridge].append(score(q, budget(chunks, n, [size(c) for c in chunks]))[0])
        xa, xb = np.array(recalls[True]), np.array(recalls[False])
        d = xa - xb
        wins, losses = int((d > 1e-9).sum()), int((d < -1e-9).sum())
        lo, hi = bootstrap_interval(d)
        print(f"| B={n} | {xa.mean() * 100:.1f} | {xb.mean() * 100:.1f} | {d.mean() * 100:+.2f} | {wins}/{losses} | "
              f"{sign_test(wins, losses):.2f} | [{lo * 100:+.2f}, {hi * 100:+.2f}] |", flush=True)
        for cid in sorted(corpora):
            m = np.array([q.corpus_id == cid for q in queries])
            if m.any():
                print(f"|   {cid} | {xa[m].mean() * 100:.1f} | {xb[m].mean() * 100:.1f} | {d[m].mean() * 100:+.2f} | "
                      f"{int((d[m] > 1e-9).sum())}/{int((d[m] < -1e-9).sum())} | | |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
