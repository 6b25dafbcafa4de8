"""What the relatedness graph does on real documents: per document, the k and τ the chunker chose, the
share of segments with at least one edge (a segment more cosine-similar than τ to another of its
document) and of adjacent pairs joined by one, and how the parents came about.

    python -m benchmarks.cluster_graph --data ../shared/data/chroma_eval [--data ../shared/data/meeting_qa ...] \
        [--set clique_method=none ...] [--vector-cache .hseg_cache/bench_vectors]

``--set name=value`` passes a :class:`hseg.chunking.config.ChunkerConfig` setting (as ``hseg_methods``'
flavours do). Prints one markdown table row per document: segments, k, τ, μ and σ of the off-diagonal
cosines, the largest off-diagonal cosine, the shares with an edge, the clusters, their mean tokens,
and ``graph``: the share of clusters holding a pair of adjacent segments joined by an edge (the
graph's doing; the others are the neighbour-joining of singletons and the cap's cuts).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.harness.evaluation import load_eval
from benchmarks.harness.vector_cache import MemoSegmenter


def graph_row(chunking: Any) -> dict[str, Any]:
    """The graph's numbers for one :class:`hseg.chunking.chunks.Chunking`."""
    v = np.stack([s.embedding for s in chunking.segments]).astype(np.float64)
    n = len(v)
    tau = float(chunking.info.get("tau", float("nan")))
    sims = v @ v.T
    np.fill_diagonal(sims, -np.inf)
    off = sims[np.isfinite(sims)]
    edge = sims > tau
    adjacent = np.array([sims[i, i + 1] > tau for i in range(n - 1)], dtype=bool)
    by_graph = sum(bool(adjacent[c.segments[0].index : c.segments[-1].index].any()) for c in chunking.clusters)
    return {
        "doc": chunking.doc_id, "segments": n, "seg_tok": float(np.mean([s.token_count for s in chunking.segments])),
        "k": chunking.k, "tau": tau, "mu": float(off.mean()) if off.size else float("nan"),
        "sigma": float(off.std()) if off.size else float("nan"),
        "max_cos": float(off.max()) if off.size else float("nan"),
        "edge_share": float(edge.any(axis=1).mean()) if n else 0.0,
        "adjacent_share": float(adjacent.mean()) if adjacent.size else 0.0,
        "clusters": len(chunking.clusters), "cluster_tok": float(np.mean([c.token_count for c in chunking.clusters])),
        "graph_share": by_graph / max(len(chunking.clusters), 1),
    }


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    head = ["document", "segments", "seg tok", "k", "τ", "μ", "σ", "max cos", "segments with an edge",
            "adjacent pairs with an edge", "clusters", "cluster tok", "clusters made by the graph"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        k = "-" if r["k"] is None else f"{r['k']:.2f}"
        lines.append(f"| {r['doc']} | {r['segments']} | {r['seg_tok']:.0f} | {k} | {r['tau']:.3f} | {r['mu']:.3f} | "
                     f"{r['sigma']:.3f} | {r['max_cos']:.3f} | {r['edge_share']:.1%} | {r['adjacent_share']:.1%} | "
                     f"{r['clusters']} | {r['cluster_tok']:.0f} | {r['graph_share']:.1%} |")
    return "\n".join(lines)


def parse_setting(text: str) -> tuple[str, Any]:
    name, eq, value = text.partition("=")
    if not eq:
        raise argparse.ArgumentTypeError(f"--set takes name=value, got {text!r}")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", nargs="+", default=["../shared/data/chroma_eval"])
    p.add_argument("--set", dest="settings", type=parse_setting, action="append", default=[],
                   help="a chunker setting, name=value (repeatable)")
    p.add_argument("--vector-cache", default=None, metavar="DIR")
    args = p.parse_args(argv)

    from benchmarks.retrieval import encoder_for_run
    from hseg.chunking.chunker import HierarchicalChunker
    from hseg.encoders import as_encoder

    encoder = encoder_for_run(as_encoder(), args.vector_cache)
    settings = dict(args.settings)
    chunker = HierarchicalChunker(encoder=encoder, **settings)
    memo = MemoSegmenter(chunker.segmenter, args.vector_cache) if settings.get("segmenter") is None else None
    if memo is not None:  # the default segmenter's answers, kept as the retrieval harness keeps them
        chunker.segmenter = memo
    rows = []
    for data in args.data:
        corpora, _ = load_eval(data, None)
        for chunking in chunker.chunk_many(list(corpora.values()), list(corpora)):
            rows.append(graph_row(chunking))
        if hasattr(encoder, "save"):
            encoder.save()
        if memo is not None:
            memo.save()
    print(markdown(rows))
    with_edges = sum(r["edge_share"] > 0 for r in rows)
    print(f"\n{with_edges} of {len(rows)} documents have an edge; segments with an edge, pooled: "
          f"{sum(r['edge_share'] * r['segments'] for r in rows) / sum(r['segments'] for r in rows):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
