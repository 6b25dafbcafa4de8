"""Timing shared by the latency runs: calls interleaved in a rotating order, percentiles, and the
markdown a run prints and appends to its raw file."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

#: the yardstick row of every latency table: Chroma's own top-5 query
PLAIN = "plain query(n_results=5)"


def rotated(names: list[str], step: int) -> list[str]:
    """``names`` starting at position ``step`` (wrapping): the calls' order for one query or round."""
    return names[step % len(names):] + names[: step % len(names)]


def percentiles(xs: list[float]) -> tuple[float, float]:
    arr = np.asarray(xs) * 1000.0
    return float(np.percentile(arr, 50)), float(np.percentile(arr, 95))


def measure(fns: dict[str, Callable[[np.ndarray, str], Any]], queries: np.ndarray, texts: list[str],
            rounds: int, warmup: int) -> dict[str, list[float]]:
    """Per-call latencies (seconds), the calls' order rotating from one query to the next."""
    names = list(fns)
    times: dict[str, list[float]] = {n: [] for n in names}
    step = 0
    for _ in range(rounds):
        for q, text in zip(queries, texts):
            for name in rotated(names, step):
                t0 = time.perf_counter()
                fns[name](q, text)
                dt = time.perf_counter() - t0
                if step >= warmup:
                    times[name].append(dt)
            step += 1
    return times


def append_report(md: str, out: str | None) -> None:
    """Print a run's markdown and append it to ``out`` when given (one raw file per store and run kind)."""
    print(md, flush=True)
    if out:
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(md + "\n")
