"""Latency of a search through ``hseg mcp`` against the same search in process and a cold ``hseg query``.

Indexes the README's example (``examples/data/example.md``) once into ``--db`` with ``hseg index``
(reused when present). Then, in this one process:

* **mcp**: ``hseg mcp --db`` started as a child process and driven over stdio by the ``mcp`` SDK's
  client; the start (spawn, store, model, warm-up, initialize) is timed apart, then ``--searches``
  ``search`` tool calls, one question each;
* **in-process**: :class:`hseg.tools.StoreTools` over the store opened here, the same questions,
  each call back to back with the MCP one of the same question, the two taking turns to go first;
* **cold**: ``hseg query QUESTION --db --budget-tokens B --json`` in a fresh process, ``--cold-runs``
  times (each a user's wait for one answer from the command line).

All of it ``--rounds`` times, each round with a fresh server. Reported: the tenth search's latency
of each (median over the rounds), the median of every search from the tenth on, and the ratios
(MCP / in-process: what the protocol and the child process add; cold / MCP: what the warm server
saves a question).

Usage (from the repository root):
    python -m benchmarks.mcp_latency --db /tmp/mcp-db [--searches 24] [--rounds 3] [--cold-runs 3] [--budget 1024]
        [--out benchmarks/results/mcp_latency.md]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "data" / "example.md"
#: one distinct question per search (a repeated one could be answered from a cache)
QUESTIONS = (
    "What did Galileo see through his telescope?", "What is the ecliptic?", "Why do the planets seem to wander?",
    "How did Eratosthenes measure the size of the Earth?", "What is precession?", "Who was Ptolemy?",
    "What are the phases of Venus?", "Why do we have seasons?", "What did Copernicus propose?",
    "How far away is the Moon?", "What is the celestial sphere?", "What did Tycho Brahe observe?",
    "Why is astrology not a science?", "What is retrograde motion?", "How long is a sidereal day?",
    "What did Aristotle think about the Earth's shape?", "What are the Milky Way's stars?",
    "How do eclipses happen?", "What is the zodiac?", "What was the Almagest?", "What is parallax?",
    "How did ancient people use the sky as a calendar?", "What are constellations?", "Who invented the telescope?",
)


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", ANONYMIZED_TELEMETRY="False")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def hseg(*args: str) -> list[str]:
    return [sys.executable, "-m", "hseg.cli", *args]


def _cold(db: str, question: str, budget: int) -> float:
    t0 = time.perf_counter()
    subprocess.run(hseg("query", question, "--db", db, "--budget-tokens", str(budget), "--json", "--quiet"),
                   check=True, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


async def _warm_pair(db: str, questions: list[str], budget: int) -> tuple[float, list[float], list[float]]:
    """The MCP server's start, then each question through MCP and in process, interleaved."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from hseg.encoders import factory
    from hseg.store import HierarchicalStore
    from hseg.tools import StoreTools

    store = HierarchicalStore("hseg", path=db, create=False)
    store.use_encoder(factory.load_encoder(store.encoder_name))
    tools = StoreTools(store)
    tools.search("warm up", budget_tokens=16)  # as hseg mcp warms itself before its first request
    params = StdioServerParameters(command=sys.executable, args=["-m", "hseg.cli", "mcp", "--db", db], env=_env())
    mcp_times: list[float] = []
    local_times: list[float] = []
    t0 = time.perf_counter()
    async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
        start = time.perf_counter() - t0
        for i, question in enumerate(questions):
            # each question's two searches run back to back, in turn first (a shared machine's load
            # then falls on both alike)
            for kind in ("mcp", "local") if i % 2 == 0 else ("local", "mcp"):
                t = time.perf_counter()
                if kind == "mcp":
                    got: Any = await client.call_tool("search", {"question": question, "budget_tokens": budget})
                    mcp_times.append(time.perf_counter() - t)
                    if got.is_error:
                        raise RuntimeError(f"search through MCP failed: {got.content}")
                else:
                    tools.search(question, budget_tokens=budget)
                    local_times.append(time.perf_counter() - t)
    return start, mcp_times, local_times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True, help="directory of the example store (built when missing)")
    ap.add_argument("--searches", type=int, default=24, help=f"searches of each warm kind (10 to {len(QUESTIONS)})")
    ap.add_argument("--rounds", type=int, default=3, help="fresh MCP servers, each asked every question")
    ap.add_argument("--cold-runs", type=int, default=3, help="cold hseg query processes per round")
    ap.add_argument("--budget", type=int, default=1024, help="budget_tokens of every search")
    ap.add_argument("--out", default=None, help="also write the markdown report here")
    args = ap.parse_args(argv)
    if not 10 <= args.searches <= len(QUESTIONS) or args.cold_runs < 1 or args.rounds < 1:
        ap.error(f"--searches must be from 10 to {len(QUESTIONS)}, --rounds and --cold-runs >= 1, got "
                 f"{args.searches}, {args.rounds} and {args.cold_runs}")
    if not Path(args.db).exists():
        subprocess.run(hseg("index", str(EXAMPLE), "--db", args.db, "--quiet"), check=True, env=_env())
    questions = list(QUESTIONS[:args.searches])
    starts: list[float] = []
    tenth_mcp: list[float] = []
    tenth_local: list[float] = []
    later_mcp: list[float] = []
    later_local: list[float] = []
    cold: list[float] = []
    for _ in range(args.rounds):  # a round: a fresh server and its searches, then cold queries
        start, via_mcp, local = asyncio.run(_warm_pair(args.db, questions, args.budget))
        starts.append(start)
        tenth_mcp.append(via_mcp[9])
        tenth_local.append(local[9])
        later_mcp += via_mcp[9:]
        later_local += local[9:]
        cold += [_cold(args.db, questions[9], args.budget) for _ in range(args.cold_runs)]
    med = statistics.median
    ms = lambda s: f"{s * 1000:.1f} ms"  # noqa: E731
    lines = [
        f"Search latency, budget_tokens={args.budget}, {os.cpu_count()} CPUs, example.md: {args.rounds} rounds of "
        f"a fresh `hseg mcp` and {args.searches} distinct questions, then {args.cold_runs} cold queries of the "
        "tenth question. Medians over the rounds (tenth search) and over every search from the tenth on.",
        "",
        f"| | tenth search (each round) | searches 10..{args.searches}, all rounds |",
        "|---|---|---|",
        f"| in-process `StoreTools.search` | {ms(med(tenth_local))} ({', '.join(ms(t) for t in tenth_local)}) | "
        f"{ms(med(later_local))} |",
        f"| through `hseg mcp` (stdio, SDK client) | {ms(med(tenth_mcp))} ({', '.join(ms(t) for t in tenth_mcp)}) | "
        f"{ms(med(later_mcp))} |",
        f"| cold `hseg query` (fresh process) | {ms(med(cold))} | runs: {', '.join(f'{t:.2f} s' for t in cold)} |",
        "",
        f"Ratios: MCP / in-process **{med(tenth_mcp) / med(tenth_local):.2f}x** on the tenth search "
        f"({med(later_mcp) / med(later_local):.2f}x from the tenth on); cold query / MCP tenth search "
        f"**{med(cold) / med(tenth_mcp):.0f}x** ({med(cold) / med(later_mcp):.0f}x). The MCP server's start "
        f"(spawn, store, model, warm-up, initialize), paid once: {', '.join(f'{s:.2f} s' for s in starts)}.",
        "",
    ]
    report = "\n".join(lines)
    print(report)
    if args.out:
        Path(args.out).write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
