"""Time per chunking stage and peak memory on a long text.

    python benchmarks/ingest_profile.py [--tokens 100000] [--data ../shared/data] [--segmenter NAME]

The text is real prose: OpenStax modules from ``--data``/segmentation/train_openstax joined until
``--tokens`` cl100k tokens (falls back to ``examples/data/example.md`` variants when the shared
data is absent). Prints seconds per stage, the share of everything that is not the encoder's
forward passes, and the peak RSS of the process.
"""

from __future__ import annotations

import argparse
import os
import resource
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=100_000, help="size of the text in cl100k tokens")
    parser.add_argument("--data", type=Path, default=ROOT / ".." / "shared" / "data")
    parser.add_argument("--segmenter", default=None)
    parser.add_argument("--target-tokens", type=int, default=512)
    parser.add_argument("--segment-vector", choices=("mean", "encode"), default="mean")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from hseg.chunker import HierarchicalChunker
    from hseg.tokens import TiktokenCounter

    count = TiktokenCounter()
    text = openstax_text(args.data, args.tokens, count) if args.data.is_dir() else fallback_text(args.tokens, count)
    chunker = HierarchicalChunker(
        segmenter=args.segmenter, target_tokens=args.target_tokens, segment_vector=args.segment_vector
    )
    chunker.encoder.encode(["warm up"])  # model load and first-call overhead are not ingestion
    start = time.perf_counter()
    result = chunker.chunk(text, "profile")
    total = time.perf_counter() - start
    timings = chunker.last_timings
    encode = timings.get("encode", 0.0)
    print(f"text: {len(text):,} chars, {count(text):,} tokens, {result.sentence_count:,} sentences, "
          f"{len(result.segments):,} segments, {len(result.clusters):,} clusters "
          f"(mean {sum(c.token_count for c in result.clusters) / max(len(result.clusters), 1):.0f} tokens)")
    print(f"segmenter: {result.info.get('segmenter')}")
    print("| stage | seconds | share |")
    print("|---|---|---|")
    for name, sec in sorted(timings.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {sec:.2f} | {sec / total:.1%} |")
    other = total - encode
    print(f"| total | {total:.2f} | 100% |")
    print(f"\nnot encoder forward passes: {other:.2f} s = {other / total:.1%} of the total")
    if "segmenter" in timings and encode:
        print(f"segmenter / encoding time: {timings['segmenter'] / encode:.1%}")
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {rss_mb:,.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
