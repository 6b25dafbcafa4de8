"""Indexing as a Ray Data job: many workers chunk, embed and write into one Chroma server.

How and why: docs/design.md, ``hseg.ingest.ray``.

Example:
    >>> import ray
    >>> ray.init(address="auto")  # doctest: +SKIP
    >>> ds = ray.data.from_items([{"id": "a.md", "text": open("a.md").read()}])  # doctest: +SKIP
    >>> summary = index_dataset(ds, host="chroma.internal", port=8000, num_workers=8)  # doctest: +SKIP
    >>> summary.documents, summary.unchanged, summary.vectors  # doctest: +SKIP
    (1, 0, 57)
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from hseg.chunking.config import ChunkerConfig
from hseg.encoders.factory import LazyEncoder
from hseg.ingest.fingerprint import chunk_settings
from hseg.ingest.run import IngestSummary, IngestWriteError, ingest_batch
from hseg.progress import Progress

logger = logging.getLogger(__name__)

RAY_INSTALL_HINT = 'pip install -e ".[ray]" in the hseg clone'

#: the columns every dataset row needs; the others are user metadata of the document's records
ID_COLUMN, TEXT_COLUMN = "id", "text"


def import_ray() -> Any:
    """The ``ray`` module with Ray Data loaded, or an ``ImportError`` that says how to install it."""
    try:
        ray = importlib.import_module("ray")
        importlib.import_module("ray.data")
    except ImportError as exc:
        raise ImportError(f"indexing with Ray needs Ray Data, which is not installed: {RAY_INSTALL_HINT}") from exc
    return ray


def _named_encoder(config: ChunkerConfig, threads: int | None = None) -> Any:
    """The encoder of ``config`` as ``hseg index`` names it: a model name (or ``None``) becomes a
    :class:`~hseg.encoders.LazyEncoder` under that name, so records and settings compare equal to the
    command's (with ``threads`` for an ONNX session); an encoder object is used as given."""
    if config.encoder is None or isinstance(config.encoder, str):
        onnx_threads = threads if config.backend == "onnx" else None  # torch's are set per process
        return LazyEncoder(config.encoder, backend=config.backend, threads=onnx_threads)
    return config.encoder


class IndexWorker:
    """What one Ray actor holds: a chunker, its encoder and a store on the Chroma server, built once.

    Each call indexes one batch of rows (``id``, ``text`` and metadata columns) with
    :func:`hseg.ingest.ingest_batch` and returns one row: its :class:`~hseg.ingest.IngestSummary`
    as JSON, which :func:`index_dataset` adds up, the message of a failed write (else ``""``), and
    the wall-clock times (``time.time()``) the batch was started and finished. A row whose text is
    missing, or whose id an earlier row of the batch has, is counted as failed.
    The write error is returned, not raised, because Ray hands the driver a worker's exception as
    a ``UserCodeException`` whose type no longer tells what failed.

    Example:
        >>> worker = IndexWorker(ChunkerConfig(), host="127.0.0.1", port=8000)  # doctest: +SKIP
        >>> worker({"id": np.array(["a"]), "text": np.array(["Some text."])})  # doctest: +SKIP
        {'summary': ['{"documents": 1, ...}'], 'error': [''], 'started': [1767225600.0], 'finished': [...]}
    """

    def __init__(self, config: ChunkerConfig, *, host: str, port: int, collection: str = "hseg",
                 force: bool = False, threads: int | None = None) -> None:
        from hseg.chunking.chunker import HierarchicalChunker
        from hseg.store import HierarchicalStore

        encoder = _named_encoder(config, threads)
        if isinstance(encoder, LazyEncoder):
            encoder.loaded  # noqa: B018 - now, while Ray starts the pool, not inside the first batch
        self.chunker = HierarchicalChunker(config.replace(encoder=encoder, show_progress=False))
        if threads is not None and "torch" in sys.modules:
            import torch

            # one pool of threads per worker, not one per core each, where torch runs: the encoder on
            # backend "torch", a segmenter loaded from a weights file (the shipped one runs in numpy)
            torch.set_num_threads(threads)
        self.store = HierarchicalStore(collection, host=host, port=port, encoder=encoder)
        self.settings = chunk_settings(self.chunker)
        self.force = force

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, list[Any]]:
        texts, metadata, refused = _documents(batch)
        started, error = time.time(), ""
        try:
            summary = ingest_batch(texts, self.chunker, self.store, settings=self.settings, metadata=metadata,
                                   force=self.force, report=logger.warning)
        except IngestWriteError as exc:
            summary, error = IngestSummary(), str(exc)
        for doc_id, message in refused:
            logger.warning("%s: %s", doc_id, message)
        summary.failed += refused
        return {"summary": [json.dumps(dataclasses.asdict(summary))], "error": [error], "started": [started],
                "finished": [time.time()]}


def _documents(batch: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, dict[str, Any]], list[tuple[str, str]]]:
    """``{id: text}``, ``{id: metadata}`` and the refused ``(id, why)`` of a batch of rows."""
    rows = {name: list(values) for name, values in batch.items()}
    ids = [str(d) for d in rows.pop(ID_COLUMN)]
    texts: dict[str, str] = {}
    metadata: dict[str, dict[str, Any]] = {}
    refused: list[tuple[str, str]] = []
    for i, (d, text) in enumerate(zip(ids, rows.pop(TEXT_COLUMN))):
        if not isinstance(text, str):
            refused.append((d, f"text must be a string, got {type(text).__name__}"))
        elif d in texts:
            refused.append((d, "the id is given twice in the dataset; indexed once"))
        else:
            texts[d], metadata[d] = text, _row_metadata(rows, i)
    return texts, metadata, refused


def _row_metadata(columns: Mapping[str, list[Any]], i: int) -> dict[str, Any]:
    """The metadata columns of row ``i`` as Python values, missing ones left out."""
    out = {}
    for name, values in columns.items():
        value = values[i]
        value = value.tolist() if hasattr(value, "tolist") else value  # numpy scalars and arrays
        # a missing value arrives as None, or as NaN in a numeric column
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        out[name] = value
    return out


def _summary_from_row(text: str) -> IngestSummary:
    fields = json.loads(text)
    fields["failed"] = [tuple(pair) for pair in fields["failed"]]
    return IngestSummary(**fields)


def _check_args(host: Any, num_workers: Any, num_cpus: Any, num_gpus: Any, batch_docs: Any,
                threads: Any) -> None:
    def positive_int(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    def number(value: Any, low: float) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
            and value >= low

    if not isinstance(host, str) or not host:
        raise ValueError(f"host must be the Chroma server's host name, got {host!r}")
    if num_workers is not None and not positive_int(num_workers):
        raise ValueError(f"num_workers must be an int >= 1 or None, got {num_workers!r}")
    if not number(num_cpus, 0) or num_cpus == 0:
        raise ValueError(f"num_cpus must be a number > 0, got {num_cpus!r}")
    if not number(num_gpus, 0):
        raise ValueError(f"num_gpus must be a number >= 0, got {num_gpus!r}")
    if not positive_int(batch_docs):
        raise ValueError(f"batch_docs must be an int >= 1, got {batch_docs!r}")
    if threads is not None and not positive_int(threads):
        raise ValueError(f"threads must be an int >= 1 or None, got {threads!r}")


def default_workers(ray: Any, num_cpus: float = 1, num_gpus: float = 0) -> int:
    """As many workers as the connected Ray cluster has room for: its GPUs when each worker takes
    ``num_gpus``, else its CPUs for ``num_cpus`` each.

    Example:
        >>> default_workers(ray, num_gpus=1)  # doctest: +SKIP
        4
    """
    resources = ray.cluster_resources()
    if num_gpus > 0:
        return max(1, int(resources.get("GPU", 0) // num_gpus))
    return max(1, int(resources.get("CPU", 1) // num_cpus))


def _warn_if_short(ray: Any, workers: int, num_cpus: float, num_gpus: float) -> None:
    """Say so when the cluster cannot hold every worker now: the missing ones wait for resources
    (forever, unless an autoscaler adds them)."""
    resources = ray.cluster_resources()
    for name, each in (("CPU", num_cpus), ("GPU", num_gpus)):
        if each > 0 and resources.get(name, 0) < workers * each:
            logger.warning("%d workers need %g %ss, the Ray cluster has %g: some wait until it has more",
                           workers, workers * each, name, resources.get(name, 0))


@contextmanager
def _progress_bars(dataset: Any, show: bool) -> Iterator[None]:
    """Ray Data's own progress bars on or off for this run; the setting is put back afterwards
    (datasets derived from one another share one context)."""
    context = dataset.context
    before = context.enable_progress_bars
    context.enable_progress_bars = show
    try:
        yield
    finally:
        context.enable_progress_bars = before


def index_dataset(
    dataset: Any,
    *,
    host: str,
    port: int = 8000,
    collection: str = "hseg",
    config: ChunkerConfig | None = None,
    num_workers: int | None = None,
    num_cpus: float = 1,
    num_gpus: float = 0,
    batch_docs: int = 32,
    threads: int | None = None,
    force: bool = False,
    show_progress: bool = True,
    report: Callable[[str], None] | None = None,
    on_batch: Callable[[IngestSummary, float, float], None] | None = None,
    **settings: Any,
) -> IngestSummary:
    """Chunk, embed and write a ``ray.data.Dataset`` of documents into a Chroma server; returns the
    summary ``hseg index`` prints.

    Args:
        dataset: rows with ``id`` (the document id, unique) and ``text``; every other column is user
            metadata of the document's records (``source`` defaults to the id).
        host, port, collection: the Chroma server (``chroma run``) and collection every worker
            writes to; the collection is created here first if absent.
        config: the chunker's settings (:class:`hseg.chunking.config.ChunkerConfig`); keyword ``settings``
            (``target_tokens=384``, ``encoder=...``) replace its fields. A model named by
            ``encoder`` is loaded in each worker; an encoder object is pickled to them.
        num_workers: Ray actors, each with its own chunker and model (``None``: as many as the
            cluster's CPUs, or GPUs with ``num_gpus``, hold).
        num_cpus, num_gpus: what each worker reserves; ``num_gpus=1`` puts one worker per GPU.
        batch_docs: documents per batch, chunked together and written together (a batch goes to
            one worker, which holds its next batch while it runs one: with fewer than
            ``2 * num_workers * batch_docs`` documents some workers get less to do).
        threads: the encoder's threads in each worker: ``torch.set_num_threads`` where torch runs
            (the encoder on backend ``"torch"``, a segmenter loaded from a weights file) and, on
            backend ``"onnx"``, the ONNX session's intra-op threads
            (``None``: the CPUs each worker reserves, ``num_cpus`` rounded down, at least 1; left to
            itself an ONNX session takes every core, and workers sharing a machine would fight).
        force: re-chunk documents already stored unchanged.
        show_progress: Ray Data's progress bars.
        report: called with ``"doc id: message"`` for each document that could not be chunked or
            was refused by the store (they are also in ``summary.failed``).
        on_batch: called with each batch's summary and the wall-clock times (``time.time()``) its
            worker started and finished it, as batches finish (say, to measure throughput).

    A worker that dies (killed, out of memory) is restarted by Ray and its batches are redone
    (Ray Data's defaults for actor pools restart and retry without limit). A write that fails for
    another reason (the server gone away) raises
    :class:`hseg.ingest.IngestWriteError`; the batches that finished are stored complete, and a
    re-run does the rest. ``seconds`` of the summary add up the workers' time.

    Example:
        >>> ds = ray.data.from_items([{"id": p, "text": open(p).read(), "lang": "en"} for p in paths])  # doctest: +SKIP
        >>> index_dataset(ds, host="127.0.0.1", num_workers=2, target_tokens=384).documents  # doctest: +SKIP
        12
    """
    _check_args(host, num_workers, num_cpus, num_gpus, batch_docs, threads)
    config = ChunkerConfig.resolve(config, **settings)  # checked before any worker starts
    ray = import_ray()
    columns = dataset.columns()  # None: an empty dataset, nothing to check
    if columns is not None and not {ID_COLUMN, TEXT_COLUMN} <= set(columns):
        raise ValueError(f"dataset: needs the columns {ID_COLUMN!r} and {TEXT_COLUMN!r}, it has {columns}")
    _open_collection(host, port, collection, config)  # once here: workers never race to create it
    workers = num_workers or default_workers(ray, num_cpus, num_gpus)
    threads = threads if threads is not None else max(1, int(num_cpus))
    _warn_if_short(ray, workers, num_cpus, num_gpus)
    logger.info("indexing with %d Ray workers into %r at %s:%d", workers, collection, host, port)
    results = dataset.map_batches(
        IndexWorker,
        fn_constructor_args=(config,),
        fn_constructor_kwargs={"host": host, "port": port, "collection": collection, "force": force,
                               "threads": threads},
        batch_size=batch_docs,
        batch_format="numpy",
        # a worker holds its next batch while it runs one, so it never waits for the driver's round trip
        # (measured, docs/decisions.md: with one batch each, workers sat idle while the driver and Ray's
        # daemons ran by preempting them); not more, so that at the end no batch waits
        # behind a busy worker while another is idle for longer than one batch
        compute=ray.data.ActorPoolStrategy(size=workers, max_tasks_in_flight_per_actor=2),
        num_cpus=num_cpus,
        num_gpus=num_gpus,
    )
    with _progress_bars(results, show_progress):
        return _add_up(results.iter_rows(), report, on_batch)


def _add_up(rows: Iterable[Mapping[str, Any]], report: Callable[[str], None] | None,
            on_batch: Callable[[IngestSummary, float, float], None] | None) -> IngestSummary:
    """The sum of the workers' batch summaries, as they arrive; the first failed write ends the job.

    The driver logs how far the job is on ``hseg.progress`` every few seconds (:class:`hseg.progress.Progress`),
    with or without a terminal: Ray Data's bars draw only on one, and the workers' own lines stay in
    their processes."""
    summary, note, batches = IngestSummary(), Progress(), 0
    for row in rows:
        if row["error"]:  # leaving the loop stops the job
            raise IngestWriteError(f"{row['error']}; {summary.documents} documents were written by batches that "
                                   "finished; re-run the same job to complete the rest")
        done = _summary_from_row(row["summary"])
        if report is not None:
            for doc_id, message in done.failed:
                report(f"{doc_id}: {message}")
        if on_batch is not None:
            on_batch(done, float(row["started"]), float(row["finished"]))
        summary.merge(done)
        batches += 1
        note.note("documents: %d written, %d unchanged, %d failed, by %d batches", summary.documents,
                  summary.unchanged, len(summary.failed), batches)
    return summary


def _open_collection(host: str, port: int, collection: str, config: ChunkerConfig) -> None:
    """Create the collection (and its unit index) if absent, and check its recorded encoder."""
    from hseg.store import HierarchicalStore

    HierarchicalStore(collection, host=host, port=port, encoder=_named_encoder(config))  # a name: no model load
