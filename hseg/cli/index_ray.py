"""``hseg index --ray``: the same job as a Ray Data job (:func:`hseg.ingest.ray.index_dataset`).

The files are read here, become a dataset of ``{id, text, source}`` rows, and a pool of Ray workers
chunks, embeds and writes them into the Chroma server of ``--host``/``--port``; the summary and the
skipping of documents stored unchanged are those of ``hseg index``. Nothing here imports Ray until
``--ray`` is used.

Example::

    hseg index docs --ray --host 127.0.0.1 --port 8000 --workers 2       # a local Ray
    hseg index docs --ray auto --host chroma.internal                      # the Ray cluster of `ray start`
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from hseg.cli.chroma import CliError
from hseg.cli.options import finite_float, positive_int

#: ``--ray`` without an address: start a Ray on this machine
LOCAL = "local"


def add_ray_options(p: argparse.ArgumentParser) -> None:
    """``--ray [ADDRESS]``, ``--workers N`` and ``--num-gpus G``."""
    p.add_argument("--ray", nargs="?", const=LOCAL, default=None, type=ray_address, metavar="ADDRESS",
                   help="index as a Ray Data job, every worker writing into the Chroma server of --host (needed). "
                        "ADDRESS: a running cluster ('auto', HOST:PORT or ray://HOST:PORT); without it, a Ray on "
                        "this machine's cores. Put the PATHs before --ray, or write --ray=ADDRESS. Needs "
                        'pip install -e ".[ray]" in the hseg clone')
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="with --ray: workers, each with its own model (default: as many as the CPUs, or the GPUs "
                        "with --num-gpus)")
    p.add_argument("--num-gpus", type=finite_float, default=0.0, metavar="G",
                   help="with --ray: GPUs each worker takes (1: one worker per GPU; default 0)")


def ray_address(text: str) -> str:
    """A Ray address: ``auto``, ``HOST:PORT``, ``ray://HOST:PORT`` or ``local`` (what ``--ray`` alone
    means, as in ``ray.init``). Checked as ``--ray`` is read, so a PATH taken for the address is
    named, not reported later as a missing PATH."""
    if text not in ("auto", LOCAL) and ":" not in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a Ray address ('auto', HOST:PORT or ray://HOST:PORT); "
                                         "put the PATHs before --ray, or write --ray=ADDRESS")
    return text


def check_ray_args(args: argparse.Namespace) -> None:
    """Exit 2 for what argparse cannot check: ``--ray`` without a server, its options without it."""
    parser: argparse.ArgumentParser = args._parser
    if args.ray is None:
        if args.workers is not None or args.num_gpus:
            parser.error("--workers and --num-gpus go with --ray")
        return
    if args.host is None:
        parser.error("--ray needs --host: the workers write into one Chroma server (chroma run); an embedded --db "
                     "cannot be shared by many writers")
    if not args.num_gpus >= 0:
        parser.error(f"--num-gpus must be >= 0, got {args.num_gpus!r}")


def index_with_ray(args: argparse.Namespace, files: Sequence[Any], chunker: Any, encoder_name: str | None,
                   report: Callable[[str], None]) -> Any:
    """Index ``files`` on Ray with ``chunker``'s settings; returns the :class:`~hseg.ingest.IngestSummary`.

    The files are read here, so the workers need not see this machine's disk; unreadable ones are
    reported and counted as failed, as ``hseg index`` does.
    """
    from hseg import ingest
    from hseg.ingest.ray import default_workers, import_ray, index_dataset

    try:
        ray = import_ray()
    except ImportError as exc:
        raise CliError(str(exc)) from None
    summary = ingest.IngestSummary()

    def problem(doc_id: str, message: str) -> None:
        summary.failed.append((doc_id, message))
        report(f"{doc_id}: {message}")

    start = time.perf_counter()
    texts = ingest.read_files(files, problem)
    summary.seconds["reading"] += time.perf_counter() - start
    if not texts:
        return summary
    with _ray_quiet(args.quiet):
        started = _connect(ray, args)
        try:
            dataset = ray.data.from_items([{"id": d, "text": t, "source": d} for d, t in texts.items()])
            config = _worker_config(chunker, encoder_name)
            workers = args.workers or default_workers(ray, num_gpus=args.num_gpus)
            # a batch goes to one worker: smaller batches when there are too few documents for all
            batch_docs = max(1, min(args.batch_docs, -(-len(texts) // workers)))
            done = index_dataset(dataset, host=args.host, port=args.port or 8000, collection=args.collection,
                                 config=config, num_workers=workers, num_gpus=args.num_gpus, batch_docs=batch_docs,
                                 force=args.force, show_progress=not args.quiet, report=report)
        finally:
            if started:
                ray.shutdown()
    return summary.merge(done)


@contextmanager
def _ray_quiet(quiet: bool) -> Iterator[None]:
    """With ``--quiet``, nothing of Ray's own logging reaches the terminal while the job runs; hseg's
    lines (files that failed, the summary) still do. Ray keeps all of it in its session's log files
    (``/tmp/ray/session_latest/logs``), where a failed job is looked into.

    Three sources, each silenced where it is written:

    - the ``ray`` loggers: ``ray.init(logging_level=...)`` (:func:`_connect`);
    - Ray Data's ``ray.data`` logger, which does not propagate and has a console handler of its
      own (configured when ``ray.data`` is imported): that handler's level is raised for the job,
      its file handler is left alone;
    - Ray's C++ core in this process, which writes to file descriptor 2 directly: an error-level
      line for every pool of actors Ray Data starts (``core_worker.cc``: constructor arguments "in
      the object store and max_restarts > 0"), which reads like a failure. No setting silences only
      that: ``RAY_BACKEND_LOG_LEVEL=fatal`` makes Ray log, at INFO, that the level was set, and
      lowers what its daemons write to their log files too. So descriptor 2 points to the null
      device for the job and ``sys.stderr``, when it wrote there, to a copy of the old one.
    """
    if not quiet:
        yield
        return
    consoles = [h for h in logging.getLogger("ray.data").handlers
                if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
    levels = [h.level for h in consoles]
    python_stderr = sys.stderr
    try:
        on_fd2 = python_stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):  # replaced by a StringIO, or closed: not the terminal's
        on_fd2 = False
    python_stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for handler in consoles:
            handler.setLevel(logging.CRITICAL)
        if on_fd2:
            sys.stderr = open(saved, "w", encoding=python_stderr.encoding, errors=python_stderr.errors,  # noqa: SIM115
                              buffering=1, closefd=False)
        os.dup2(null, 2)
        yield
    finally:
        if on_fd2:
            sys.stderr.flush()
            sys.stderr.close()  # closefd=False: the descriptor stays open
            sys.stderr = python_stderr
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
        for handler, level in zip(consoles, levels):
            handler.setLevel(level)


def _worker_config(chunker: Any, encoder_name: str | None) -> Any:
    """The chunker's settings for the workers: the model by name (each worker loads it; this process
    never does), and a segmenter given as a weights file sent loaded (the file may be on this
    machine only)."""
    from hseg.segmentation.segmenters import segmenter_spec

    config = chunker.config.replace(encoder=encoder_name)
    spec = config.segmenter
    if isinstance(spec, (str, os.PathLike)) and not isinstance(segmenter_spec(spec), str):
        config = config.replace(segmenter=chunker.segmenter)
    return config


def _connect(ray: Any, args: argparse.Namespace) -> bool:
    """Join the cluster of ``--ray ADDRESS``, or start a local Ray; ``False`` when this process is
    already connected (it was not this command's to start, nor to stop)."""
    if ray.is_initialized():
        return False
    # --quiet: neither the ray loggers' warnings (a token-auth notice at every start) nor the workers'
    # output forwarded to this terminal; the rest of Ray's output is held back by _ray_quiet
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False} if args.quiet else {}
    if args.ray == LOCAL:
        cpus = max(os.cpu_count() or 1, args.workers or 1)  # --workers beyond the cores is the user's call
        ray.init(num_cpus=cpus, include_dashboard=False, **quiet)
    else:
        ray.init(address=args.ray, **quiet)
    return True
