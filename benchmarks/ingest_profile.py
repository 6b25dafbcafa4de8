"""Time per chunking stage and peak memory on a long text, per encoder backend, side by side.

    python benchmarks/ingest_profile.py [--tokens 100000] [--data ../shared/data] [--segmenter NAME]
        [--backends onnx torch]

The text is real prose: OpenStax modules from ``--data``/segmentation/train_openstax joined until
``--tokens`` cl100k tokens (falls back to ``examples/data/example.md`` variants when the shared
data is absent). Each backend runs in its own child process (so the peak RSS is its own), after
loading and warming the model. Prints seconds per stage for each backend, tokens/s, the share of
everything that is not the encoder's forward passes, and the peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def openstax_text(data: Path, tokens: int, count) -> str:
    parts, total = [], 0
    for path in sorted((data / "segmentation" / "train_openstax").glob("*/*.txt")):
        body = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("========,"):
                title = line.split(",", 2)[2].rstrip(".")
                body.append(f"\n## {title}\n" if title != "preface" else "")
            elif line.strip():
                body.append(line)
        doc = "\n".join(body)
        parts.append(doc)
        total += count(doc)
        if total >= tokens:
            break
    return "\n\n".join(parts)


def fallback_text(tokens: int, count) -> str:
    base = (ROOT / "examples" / "data" / "example.md").read_text(encoding="utf-8")
    n = max(1, -(-tokens // count(base)))
    # numbered copies so the encoder cache cannot skip repeated sentences
    return "\n\n".join(base.replace(". ", f". ({i}) ") for i in range(n))


def profile(args: argparse.Namespace, backend: str) -> dict:
    """One chunking of the text on ``backend``: stage timings, sizes and peak RSS (in a child process)."""
    from hseg.chunking.chunker import HierarchicalChunker
    from hseg.text.tokens import TiktokenCounter

    count = TiktokenCounter()
    text = openstax_text(args.data, args.tokens, count) if args.data.is_dir() else fallback_text(args.tokens, count)
    chunker = HierarchicalChunker(segmenter=args.segmenter, target_tokens=args.target_tokens,
                                  segment_vector=args.segment_vector, backend=backend, device="cpu")
    chunker.encoder.encode(["warm up"])  # model load and first-call overhead are not ingestion
    start = time.perf_counter()
    result = chunker.chunk(text, "profile")
    total = time.perf_counter() - start
    return {
        "total": total, "timings": chunker.last_timings, "tokens": count(text), "chars": len(text),
        "sentences": result.sentence_count, "segments": len(result.segments), "clusters": len(result.clusters),
        "segmenter": result.info.get("segmenter"),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=100_000, help="size of the text in cl100k tokens")
    parser.add_argument("--data", type=Path, default=ROOT / ".." / "shared" / "data")
    parser.add_argument("--segmenter", default=None)
    parser.add_argument("--target-tokens", type=int, default=512)
    parser.add_argument("--segment-vector", choices=("mean", "encode"), default="mean")
    parser.add_argument("--backends", nargs="+", choices=("onnx", "torch"), default=["onnx", "torch"])
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.one:
        print(json.dumps(profile(args, args.backends[0])))
        return 0
    runs = {}
    for backend in args.backends:
        cmd = [sys.executable, __file__, "--one", "--backends", backend, "--tokens", str(args.tokens),
               "--data", str(args.data), "--target-tokens", str(args.target_tokens),
               "--segment-vector", args.segment_vector] + (["--segmenter", args.segmenter] if args.segmenter else [])
        runs[backend] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                                   .strip().splitlines()[-1])
    first = next(iter(runs.values()))
    print(f"text: {first['chars']:,} chars, {first['tokens']:,} tokens, {first['sentences']:,} sentences, "
          f"{first['segments']:,} segments, {first['clusters']:,} clusters; segmenter: {first['segmenter']}")
    stages = sorted({s for r in runs.values() for s in r["timings"]}, key=lambda s: -first["timings"].get(s, 0.0))
    print("| stage | " + " | ".join(f"{b} s | {b} share" for b in runs) + " |")
    print("|---|" + "---|---|" * len(runs))
    for stage in stages:
        cells = [f"{r['timings'].get(stage, 0.0):.2f} | {r['timings'].get(stage, 0.0) / r['total']:.1%}"
                 for r in runs.values()]
        print(f"| {stage} | " + " | ".join(cells) + " |")
    print("| total | " + " | ".join(f"{r['total']:.2f} | 100%" for r in runs.values()) + " |")
    print("| tokens/s | " + " | ".join(f"{r['tokens'] / r['total']:,.0f} | " for r in runs.values()) + " |")
    print("| not encoder | " + " | ".join(
        f"{r['total'] - r['timings'].get('encode', 0.0):.2f} | "
        f"{(r['total'] - r['timings'].get('encode', 0.0)) / r['total']:.1%}" for r in runs.values()) + " |")
    print("| peak RSS MB | " + " | ".join(f"{r['rss_mb']:,.0f} | " for r in runs.values()) + " |")
    if {"onnx", "torch"} <= runs.keys():
        print(f"\nonnx: {runs['torch']['total'] / runs['onnx']['total']:.2f}x the speed of torch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
