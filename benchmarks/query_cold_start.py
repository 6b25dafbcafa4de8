"""Cold start of ``hseg query``: the wall time a user waits for one answer, end to end.

Indexes the README's example (``examples/data/example.md``) once into ``--db`` with ``hseg index``
(reused when present), then runs ``hseg query --backend B`` ``--runs`` times for each backend,
interleaved, each in a fresh Python process, and reports the median and every run. It also times,
each in a fresh process, the imports a query may pay for (``torch``, ``sentence_transformers``,
``onnxruntime``, ``tokenizers``, ``chromadb``, ``hseg.cli``), so a change can be judged by where the
time goes. Issue 13's acceptance: median ≤ 2.0 s on 2 CPU cores with the default backend.

Usage (from the repository root):
    python -m benchmarks.query_cold_start --db /tmp/cold-db --runs 5 [--backends onnx torch]
        [--out results/query_cold_start.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "data" / "example.md"
QUESTION = "What did Galileo see through his telescope?"
IMPORTS = ("torch", "sentence_transformers", "onnxruntime", "tokenizers", "chromadb", "hseg.cli")


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", ANONYMIZED_TELEMETRY="False")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def hseg(*args: str) -> list[str]:
    return [sys.executable, "-m", "hseg.cli", *args]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True, help="directory of the example store (built when missing)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--import-runs", type=int, default=3, help="fresh processes per import timed (median)")
    ap.add_argument("--backends", nargs="+", choices=("onnx", "torch"), default=["onnx", "torch"])
    ap.add_argument("--out", default=None, help="also write the markdown report here")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.import_runs < 1:
        ap.error(f"--runs and --import-runs must be >= 1, got {args.runs} and {args.import_runs}")
    if not Path(args.db).exists():
        secs = _timed(hseg("index", str(EXAMPLE), "--db", args.db, "--quiet"))
        print(f"indexed {EXAMPLE.name} into {args.db} in {secs:.1f} s", file=sys.stderr)
    # one query per backend first: the onnx export of a new model happens once, not in a timed run
    for backend in args.backends:
        _timed(hseg("query", QUESTION, "--db", args.db, "-k", "3", "--backend", backend))
    query: dict[str, list[float]] = {b: [] for b in args.backends}
    for _ in range(args.runs):
        for backend in args.backends:
            query[backend].append(_timed(hseg("query", QUESTION, "--db", args.db, "-k", "3", "--backend", backend)))
    n = args.import_runs
    bare = statistics.median(_timed([sys.executable, "-c", "pass"]) for _ in range(n))
    imports = {name: statistics.median(_timed([sys.executable, "-c", f"import {name}"]) for _ in range(n)) - bare
               for name in IMPORTS}
    lines = [
        *(f"`hseg query --backend {b}` cold start, {args.runs} runs, {os.cpu_count()} CPUs: "
          f"median **{statistics.median(ts):.2f} s** (runs: {', '.join(f'{t:.2f}' for t in ts)})  "
          for b, ts in query.items()),
        "",
        "| import in a fresh process (interpreter start subtracted) | seconds |",
        "|---|---|",
        *(f"| `{name}` | {secs:.2f} |" for name, secs in imports.items()),
        "",
    ]
    report = "\n".join(lines)
    print(report)
    if args.out:
        Path(args.out).write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
