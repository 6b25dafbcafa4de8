"""Large input: time and peak memory of chunking one long document, and how they scale.

    python -m benchmarks.large_input                      # 1, 2, 4, 5 MB with the hashing encoder
    python -m benchmarks.large_input --sizes 1 --encoder model   # the real all-MiniLM-L6-v2 at 1 MB
    python -m benchmarks.large_input --check              # exit 1 if per-MB time grows > 1.3x or RSS > 2 GB

Each size runs in a fresh child process (so ``ru_maxrss`` is that size's own peak) on a synthetic
"book" (``hseg_testing/fakes.synthetic_book``: chapters whose sentences come from shifting topic
vocabularies, numbered so sentences rarely repeat). ``--encoder hashing`` (default) uses the
deterministic bag-of-words test encoder, so the time is the chunking path itself (sentence
splitting, token counts, segmenter, clustering with the k search); ``--encoder model`` adds the
real encoder's forward passes, which are linear in the text and dominate on CPU.

The segmenter is TextTiling by default (the BiLSTM needs the model's 384-d vectors: pass
``--segmenter bilstm`` with ``--encoder model``, or with ``--dim 384`` to time the default
pipeline's BiLSTM on hashing vectors).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

MB = 1_000_000


def _child(size_mb: float, encoder: str, segmenter: str, target_tokens: int, dim: int) -> dict:
    from hseg.chunking.chunker import HierarchicalChunker
    from hseg_testing.fakes import HashingEncoder, synthetic_book

    text = synthetic_book(int(size_mb * MB), seed=1)
    enc = HashingEncoder(dim=dim) if encoder == "hashing" else None
    if enc is not None and segmenter == "bilstm":
        from hseg.encoders import DEFAULT_MODEL

        enc.name = DEFAULT_MODEL  # the BiLSTM refuses other encoders by name: time its network on hashing vectors
    chunker = HierarchicalChunker(encoder=enc, segmenter=segmenter, target_tokens=target_tokens)
    start, cpu_start = time.perf_counter(), time.process_time()
    result = chunker.chunk(text, doc_id=f"book-{size_mb}MB")
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    assert "".join(c.text for c in result.clusters) == text
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    return {
        "mb": size_mb,
        "chars": len(text),
        "seconds": round(seconds, 2),
        "seconds_per_mb": round(seconds / size_mb, 2),
        "cpu_seconds": round(cpu, 2),
        "cpu_seconds_per_mb": round(cpu / size_mb, 2),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "sentences": result.sentence_count,
        "segments": len(result.segments),
        "clusters": len(result.clusters),
        "k": result.k,
        "stages": {k: round(v, 2) for k, v in chunker.last_timings.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=float, nargs="+", default=[1, 2, 4, 5], help="document sizes in MB")
    parser.add_argument("--encoder", choices=("hashing", "model"), default="hashing")
    parser.add_argument("--segmenter", default="texttiling")
    parser.add_argument("--dim", type=int, default=64,
                        help="hashing encoder dimension; 384 (the model's) lets --segmenter bilstm run its network")
    parser.add_argument("--target-tokens", type=int, default=512)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the per-MB CPU time of the largest size exceeds 1.3x the smallest's, "
                             "or a peak RSS exceeds 2 GB")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    parser.add_argument("--one", type=float, default=None, help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args()

    if args.one is not None:
        print(json.dumps(_child(args.one, args.encoder, args.segmenter, args.target_tokens, args.dim)))
        return 0

    rows = []
    for size in args.sizes:
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.large_input", "--one", str(size), "--encoder", args.encoder,
             "--segmenter", args.segmenter, "--target-tokens", str(args.target_tokens), "--dim", str(args.dim)],
            capture_output=True, text=True, check=False,
        )
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
            return 1
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{row['mb']:>5g} MB  {row['seconds']:>7.1f} s  {row['seconds_per_mb']:>6.2f} s/MB  "
              f"cpu {row['cpu_seconds']:>7.1f} s  {row['cpu_seconds_per_mb']:>6.2f} cpu-s/MB  "
              f"peak RSS {row['peak_rss_mb']:>7.0f} MB  {row['sentences']} sentences, {row['segments']} segments, "
              f"{row['clusters']} clusters  stages {row['stages']}", flush=True)
    # CPU time: on a shared machine the wall clock also measures the neighbours
    ratio = rows[-1]["cpu_seconds_per_mb"] / max(rows[0]["cpu_seconds_per_mb"], 1e-9)
    wall_ratio = rows[-1]["seconds_per_mb"] / max(rows[0]["seconds_per_mb"], 1e-9)
    peak = max(r["peak_rss_mb"] for r in rows)
    print(f"per-MB time, largest / smallest: {ratio:.2f}x CPU ({wall_ratio:.2f}x wall); "
          f"highest peak RSS {peak:.0f} MB")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.check and (ratio > 1.3 or peak > 2048):
        print("FAIL: per-MB time grew more than 1.3x or peak RSS exceeded 2 GB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
