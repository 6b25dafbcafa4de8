"""Ingestion throughput of ``hseg.ingest.ray.index_dataset`` (a Ray Data job) by number of workers.

    python -m benchmarks.ingest_scale [PATH ...] [--workers 1 2] [--threads 1] [--backend onnx|torch]
        [--num-gpus G] [--batch-size B] [--batch-docs N] [--doc-chars C] [--repeat R] [--rounds K]
        [--ray ADDRESS] [--host HOST --port PORT]

PATHs are corpus files or folders (default ``../shared/data/chroma_eval/corpora``). Each file is cut
into documents of ``--doc-chars`` to twice that many characters (at paragraph breaks where it has
them), so the workers share the work evenly, and the corpus is taken ``--repeat`` times (the
encoder's text cache is off, so a repeat costs what new text costs). Every worker count indexes
the whole corpus into a fresh collection of one Chroma server (``chroma run`` on loopback, started
here unless ``--host`` names one) and must leave the same number of records.

Reported per worker count: tokens (cl100k) per second of *work*, from the first batch started to
the last finished, and end to end (Ray starting the workers and each worker loading the model
included), and the ratio of each to the first worker count's. ``--rounds K`` repeats every count
K times, interleaved, and keeps the fastest (load from other processes hits every count alike).

On CPU every worker reserves ``--threads`` CPUs and runs its encoder with that many threads
(``torch.set_num_threads``, and the ONNX session's intra-op threads); the acceptance target on 2
cores is 2 workers of 1 thread >= 1.6x the work tokens/s of 1 worker of 1 thread. On a GPU machine
give each worker a GPU and a larger encoder batch: ``--workers 1 2 --num-gpus 1 --batch-size 128``
(one worker per GPU; ``--threads`` then sizes the CPU side of each worker).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from hseg import ingest
from hseg.chunking.config import ChunkerConfig
from hseg.encoders import BACKENDS, DEFAULT_BACKEND
from hseg.ingest.ray import import_ray, index_dataset
from hseg.text.tokens import as_token_counter, count_many

REPO = Path(__file__).resolve().parents[1]

DEFAULT_CORPORA = REPO / ".." / "shared" / "data" / "chroma_eval" / "corpora"


def split_text(text: str, size: int) -> list[str]:
    """``text`` cut into pieces of ``size`` to ``2 * size`` characters (the last may be shorter),
    at a paragraph break where there is one, else at a line break, a sentence end or a space; the
    pieces join back to ``text``."""
    pieces, start = [], 0
    while start < len(text):
        end = len(text)
        if len(text) - start > 2 * size:
            end = start + 2 * size
            for sep in ("\n\n", "\n", ". ", " "):
                cut = text.find(sep, start + size, start + 2 * size)
                if cut >= 0:
                    end = cut + len(sep)
                    break
        pieces.append(text[start:end])
        start = end
    return pieces


def load_corpus(paths: list[str], doc_chars: int, repeat: int) -> dict[str, str]:
    """``{doc id: text}``: every readable file of ``paths`` cut into documents, ``repeat`` times."""
    files, problems = ingest.discover(paths)
    for arg, message in problems:
        print(f"ingest_scale: {arg}: {message}", file=sys.stderr)
    docs: dict[str, str] = {}
    for f in files:
        for i, piece in enumerate(split_text(ingest.read_text_file(f.path), doc_chars)):
            for r in range(repeat):
                docs[f"{f.doc_id}#{i}@{r}"] = piece
    if not docs:
        raise SystemExit("ingest_scale: no documents in the given paths")
    return docs


def measure(ray: Any, docs: dict[str, str], workers: int, args: argparse.Namespace, host: str,
            port: int) -> dict[str, Any]:
    """One indexing run of ``docs`` with ``workers`` workers into a new collection."""
    batches: list[tuple[float, float]] = []
    config = ChunkerConfig(backend=args.backend, cache=False, batch_size=args.batch_size,
                           device=None if args.num_gpus else "cpu")
    dataset = ray.data.from_items([{"id": d, "text": t} for d, t in docs.items()])
    start = time.time()
    summary = index_dataset(dataset, host=host, port=port, collection=f"scale-{uuid.uuid4().hex[:12]}",
                            config=config, num_workers=workers, num_cpus=args.threads, num_gpus=args.num_gpus,
                            batch_docs=args.batch_docs, threads=args.threads, show_progress=False,
                            on_batch=lambda _, t0, t1: batches.append((t0, t1)))
    end = time.time()
    if summary.documents != len(docs) or summary.failed:
        raise SystemExit(f"ingest_scale: {workers} workers indexed {summary.documents} of {len(docs)} documents, "
                         f"failures: {summary.failed[:3]}")
    return {"workers": workers, "end_to_end_s": end - start,
            "work_s": max(t1 for _, t1 in batches) - min(t0 for t0, _ in batches), "vectors": summary.vectors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", default=[str(DEFAULT_CORPORA)], metavar="PATH")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], metavar="N")
    parser.add_argument("--threads", type=int, default=1, help="encoder threads (and CPUs) per worker (default 1)")
    parser.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND,
                        help=f"encoder backend (default {DEFAULT_BACKEND})")
    parser.add_argument("--num-gpus", type=float, default=0.0, help="GPUs per worker (1: one worker per GPU)")
    parser.add_argument("--batch-size", type=int, default=None, help="encoder batch size (default: the backend's)")
    parser.add_argument("--batch-docs", type=int, default=2, help="documents per batch (default 2)")
    parser.add_argument("--doc-chars", type=int, default=3000, help="least characters per document (default 3000)")
    parser.add_argument("--repeat", type=int, default=1, help="times the corpus is taken (default 1)")
    parser.add_argument("--rounds", type=int, default=1, help="runs per worker count, fastest kept (default 1)")
    parser.add_argument("--ray", default=None, metavar="ADDRESS", help="a Ray cluster (default: a local Ray)")
    parser.add_argument("--host", default=None, help="a Chroma server (default: chroma run started here)")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)

    docs = load_corpus(args.paths, args.doc_chars, args.repeat)
    tokens = sum(count_many(as_token_counter(None), list(docs.values())))
    ray = import_ray()
    with ExitStack() as stack:
        if args.ray:
            ray.init(address=args.ray)
        else:
            ray.init(num_cpus=max(args.workers) * args.threads, include_dashboard=False, logging_level="WARNING")
        stack.callback(ray.shutdown)
        host, port = args.host, args.port
        if host is None:
            from hseg_testing.chroma_server import ChromaServer

            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="ingest-scale-"))
            server = stack.enter_context(ChromaServer(Path(folder) / "chroma"))
            host, port = server.host, int(server.port or 0)
        print(f"corpus: {len(docs)} documents, {tokens} tokens; backend {args.backend}, {args.threads} thread(s) "
              f"and {args.num_gpus:g} GPU(s) per worker, {args.batch_docs} documents per batch", flush=True)
        measure(ray, dict(list(docs.items())[: max(args.workers)]), max(args.workers), args, host, port)  # warm-up
        best: dict[int, dict[str, Any]] = {}
        for _ in range(args.rounds):
            for n in args.workers:
                run = measure(ray, docs, n, args, host, port)
                print(f"  {n} workers: work {run['work_s']:.1f} s, end to end {run['end_to_end_s']:.1f} s", flush=True)
                if n not in best or run["work_s"] < best[n]["work_s"]:
                    best[n] = run
    if len({run["vectors"] for run in best.values()}) != 1:
        raise SystemExit(f"ingest_scale: the worker counts wrote different record counts: {best}")
    base = best[args.workers[0]]
    print("\n| workers | work s | tokens/s (work) | ratio | end-to-end s | tokens/s (end to end) | ratio |")
    print("|---|---|---|---|---|---|---|")
    for n in args.workers:
        run = best[n]
        print(f"| {n} | {run['work_s']:.1f} | {tokens / run['work_s']:.0f} | {base['work_s'] / run['work_s']:.2f}x "
              f"| {run['end_to_end_s']:.1f} | {tokens / run['end_to_end_s']:.0f} | "
              f"{base['end_to_end_s'] / run['end_to_end_s']:.2f}x |")
    print(f"\nrecords: {base['vectors']} with every worker count")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
