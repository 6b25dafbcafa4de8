"""A reader's search latency while another process writes: a shared ``chroma run`` server, or one
embedded store opened by two processes (issue 46's measurement, made repeatable).

Three processes besides this one, each a ``spawn``: a **reader**, which opens the store, warms up
and then asks questions phase after phase; a **writer**, started for the phases that write; and,
with ``--mode server``, ``chroma run --path DIR --host 127.0.0.1 --port P`` on the store directory
(started here, stopped by its PID at the end). With ``--mode embedded`` the reader and the writer
both open ``HierarchicalStore(path=DIR)``.

The reader times, on the same questions and interleaved (the order of the two calls rotates from
question to question):

* ``plain``: ``collection.query(query_embeddings=[q], n_results=5)``;
* ``default``: ``store.search(question, budget_tokens=1024)``, the default search (hybrid), with the
  question's text; the store's query encoder looks the question's vector up (embedded once, before
  timing), so no encoding is timed.

Phases (``--seconds`` each, or ``--queries`` questions if that comes first; ``--rounds`` repeats the
three and pools them):

1. reader alone;
2. while the writer adds one small new document every ``--interval`` seconds (default 2);
3. while the writer adds documents back to back.

A write is a real hseg write, ``HierarchicalStore.add`` of one chunking of 8 segments in 2 clusters
(10 records; openstax text and vectors, or synthetic ones), tagged ``{"benchmark": "server_writes"}``
in its metadata; the documents written are deleted again when the run ends (and any a killed run
left behind when the next one starts), so that the store stays the size it was built to.

Per phase: p50 / p95 / max of both calls (of those that answered), the calls that raised (counted
and listed by message with hseg's warnings, not in the percentiles), the writes completed while the
reader was asking, the ratios of the phase's p50 / p95 to the reader-alone p50 / p95 (the target:
default search p50 ≤ 1.5× and p95 ≤ 2× alone), and what a write costs each reader: (sum of the
reader's default-search time in the phase, failed searches included − alone p50 × its searches) /
writes. (A reader that spends the whole phase catching up makes this the phase's length over its
writes, i.e. about the interval, or a write's duration when writing back to back: a floor on the
real cost; read the p50 then.) A markdown table, printed and appended to ``--out`` with the command,
the hseg commit it measured and the load average. Server mode gives the reader and the writer fresh
``$HSEG_CACHE`` folders of their own (two clients), so the reader's lexical cache is built by its
first search (timed and reported), never reused from an earlier run.

Stores (built once into ``--path`` by a child process, then reused):

* ``openstax`` (default): the ``openstax`` store of :mod:`benchmarks.harness.stores` (OpenStax
  training text in ~400-character segments, four to a cluster, all-MiniLM-L6-v2 vectors encoded once
  and kept in ``--path``). The 22 books hold 40,603 pieces, about 50k records; a larger
  ``--records`` adds copies of those documents (ids ``<doc>~1``, ``<doc>~2``, ...), same text and
  the same cached vectors, until the store holds ``--records``: nothing is encoded again.
  Questions: the first ``--n-questions`` of ``--questions`` (textbook_qa's "What is T?" set).
* ``synthetic``: :mod:`benchmarks.harness.stores`' random-vector documents (``--segments`` segments a cluster,
  ``--dim`` dimensions); random question vectors. No model is loaded (the smoke test's store).

Usage (from the repository root):
    python -m benchmarks.server_writes --path /tmp/sw40k --records 40000 --mode server \
        --out benchmarks/results/server_writes_40000_server.md
    python -m benchmarks.server_writes --path /tmp/sw40k --records 40000 --mode embedded \
        --out benchmarks/results/server_writes_40000_embedded.md
    python -m benchmarks.server_writes --path /tmp/sw200k --records 200000 --mode server --seconds 90
    python -m benchmarks.server_writes --store synthetic --path /tmp/swtiny --records 300 --seconds 3
    python -m benchmarks.server_writes --path /tmp/addcost --add-cost 15 --rounds 16 --before /tmp/before \
        [--now /tmp/turn /tmp/head]

``--add-cost N`` measures a write instead of a reader: N adds of a new small document (as the writer's,
random vectors) by one client of a fresh ``chroma run`` server in ``--path``, in a child process that
imports hseg from ``--before`` (a ``git worktree`` of the commit to compare with) and in one that
imports it from this checkout (or from each of ``--now``), taking turns ``--rounds`` times; each
checkout's p50 / p95 a write and the rounds' ratios of its p50 to ``--before``'s.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import multiprocessing as mp
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from hseg.chunking.chunks import Chunking
from hseg.store import HierarchicalStore

from .harness.stores import (
    DATA,
    OPENSTAX_COLLECTION,
    SYNTHETIC_COLLECTION,
    LookupEncoder,
    build_openstax,
    build_synthetic,
    load_units,
    openstax_docs,
    questions,
    synthetic_doc,
)
from .harness.timing import append_report, rotated

logger = logging.getLogger("server_writes")

PLAIN = "plain"
DEFAULT = "default"
#: the metadata every document the writer adds carries (and the clean-up deletes by)
LIVE = {"benchmark": "server_writes"}
#: a written document: its segments (openstax pieces, or synthetic) and clusters
LIVE_SEGMENTS, LIVE_CLUSTERS = 8, 2
#: seconds to wait for a child process to open its store and warm up
READY_TIMEOUT = 1800.0


@dataclass(frozen=True)
class Spec:
    """What a child process needs to open the store and make its queries and documents."""

    mode: str  # "server" or "embedded"
    store: str  # "openstax" or "synthetic"
    path: str
    records: int
    cache: str  # the children's $HSEG_CACHE
    questions: str  # the .npz of the questions' texts and vectors
    dim: int
    segments: int
    seed: int
    host: str | None = None
    port: int | None = None

    @property
    def collection(self) -> str:
        return OPENSTAX_COLLECTION if self.store == "openstax" else SYNTHETIC_COLLECTION


def connect(spec: Spec, *, embedded: bool = False) -> HierarchicalStore:
    """The store, as ``spec``'s processes open it (``embedded``: on the directory, whatever the mode)."""
    os.environ["HSEG_CACHE"] = spec.cache
    logging.getLogger("hseg").setLevel(logging.WARNING)
    if spec.mode == "server" and not embedded:
        return HierarchicalStore(spec.collection, host=spec.host, port=spec.port or 8000)
    return HierarchicalStore(spec.collection, path=spec.path)


# --------------------------------------------------------------------------- the store


def openstax_pieces(folder: Path, records: int) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The pieces :func:`build_openstax` built ``folder``'s store from, and their cached vectors."""
    pieces = load_units(DATA / "segmentation" / "train_openstax", records * 4 // 5)
    return pieces, np.load(folder / f"vectors-{len(pieces)}.npy")


def add_until(store: HierarchicalStore, docs: list[Chunking], records: int, per_call: int = 2000) -> None:
    """Add ``docs`` in calls of about ``per_call`` records until the store holds ``records``."""
    pending: list[Chunking] = []
    size, have = 0, store.count()
    for doc in docs:
        if have >= records:
            break
        pending.append(doc)
        n = len(doc.segments) + len(doc.clusters)
        size, have = size + n, have + n
        if size >= per_call:
            store.add(pending)
            pending, size = [], 0
    if pending:
        store.add(pending)


def build(spec: Spec, store: HierarchicalStore) -> float:
    """Build ``spec``'s store (opened on its directory); returns the seconds it took in all."""
    t0 = time.perf_counter()
    if spec.store == "synthetic":
        build_synthetic(store, spec.records // (spec.segments + 1), spec.segments, spec.dim, 10, spec.seed)
        return time.perf_counter() - t0
    folder = Path(spec.path)
    add_s = build_openstax(store, folder, spec.records, store.encoder)
    logger.info("openstax: %d records, store.add %.0f s", store.count(), add_s)
    pieces, vectors = openstax_pieces(folder, spec.records)
    copy = 0
    while store.count() < spec.records * 9 // 10:  # beyond the books' text: copies of their documents
        copy += 1
        add_until(store, openstax_docs([(f"{doc}~{copy}", text) for doc, text in pieces], vectors), spec.records)
        logger.info("copy %d: %d records (%.0f s)", copy, store.count(), time.perf_counter() - t0)
    return time.perf_counter() - t0


def embed_questions(spec: Spec, store: HierarchicalStore, question_file: str, n: int) -> None:
    """Write ``spec.questions``: the question texts and their unit vectors (the store's encoder)."""
    if spec.store == "synthetic":
        rng = np.random.default_rng(spec.seed + 1)
        texts = [f"doc{i} segment {i}" for i in range(n)]
        vectors = rng.standard_normal((n, spec.dim)).astype(np.float32)
    else:
        texts = questions(question_file, n)
        vectors = np.asarray(store.encoder.encode(texts), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    np.savez(spec.questions, texts=np.asarray(texts), vectors=vectors)


def prepare(spec: Spec, question_file: str, n_questions: int) -> tuple[int, float | None]:
    """Child process: the store built if it is not, a killed run's documents deleted, the questions
    embedded if they are not; returns (records, seconds the build took or ``None``)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    store = connect(spec, embedded=True)
    if store.count():
        removed = store.delete_where(LIVE)
        if removed:
            logger.info("deleted %d records an earlier run wrote", removed)
    built = build(spec, store) if store.count() < spec.records * 9 // 10 else None
    if not Path(spec.questions).exists():
        embed_questions(spec, store, question_file, n_questions)
    return store.count(), built


def clean_up(spec: Spec) -> int:
    """Child process: delete the documents the writer added (through the server, in server mode)."""
    return connect(spec).delete_where(LIVE)


def returning(conn: Connection, fn: Callable[..., Any], *args: Any) -> None:
    """Child process: send ``fn(*args)`` (or the exception it raised) on ``conn``."""
    try:
        result: Any = (True, fn(*args))
    except Exception as exc:  # noqa: BLE001 - raised again in the parent
        result = (False, exc)
    conn.send(result)


def in_child(ctx: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a spawned process (this one never opens the store); its result. Not a
    ``Pool``: a pool whose worker crashes (a segfault in Chroma's bindings) waits for ever."""
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=returning, args=(theirs, fn, *args))
    proc.start()
    theirs.close()
    try:
        ok, result = await_message(mine, proc, fn.__name__)
    finally:
        if proc.is_alive():
            proc.join(60)
        if proc.is_alive():
            proc.terminate()  # our own child, by its handle
    if not ok:
        raise result
    return result


# --------------------------------------------------------------------------- reader and writer


class Incidents(logging.Handler):
    """Counts what went wrong in a child process: hseg's warnings and the calls that raised, by
    message (numbers left out, so that one kind of message is one line)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        self.note(f"hseg {record.levelname.lower()}: {record.getMessage()}")

    def note(self, what: str) -> None:
        key = re.sub(r"\d+", "N", what)[:200]
        self.counts[key] = self.counts.get(key, 0) + 1

    def take(self) -> dict[str, int]:
        counts, self.counts = self.counts, {}
        return counts

    def attach(self) -> Incidents:
        hseg_logger = logging.getLogger("hseg")
        hseg_logger.addHandler(self)
        hseg_logger.propagate = False  # counted, not printed a thousand times
        return self


def reader(spec: Spec, conn: Connection, warmup: int) -> None:
    """Child process: warm up, say ``ready``, then answer each ``(seconds, queries)`` phase with the
    phase's latencies; ``None`` ends it. A call that raises is counted, not timed."""
    store = connect(spec)
    data = np.load(spec.questions)
    texts, vectors = [str(t) for t in data["texts"]], data["vectors"]
    store.encoder = LookupEncoder(store.encoder_name or "synthetic", dict(zip(texts, vectors)))
    col = store.collection
    calls: dict[str, Callable[[int], Any]] = {
        PLAIN: lambda i: col.query(query_embeddings=[vectors[i]], n_results=5),
        DEFAULT: lambda i: store.search(texts[i], budget_tokens=1024),
    }
    t0 = time.perf_counter()
    calls[DEFAULT](0)  # the unit index's check, the lexical index's first look (a cache is built)
    first = time.perf_counter() - t0
    for i in range(warmup):
        for name in calls:
            calls[name](i % len(texts))
    conn.send({"records": store.count(), "first_search_s": first})
    incidents = Incidents().attach()
    step = 0
    while (phase := conn.recv()) is not None:
        seconds, limit = phase
        times: dict[str, list[float]] = {name: [] for name in calls}
        failed: dict[str, list[float]] = {name: [] for name in calls}
        incidents.take()
        start, deadline, asked = time.time(), time.perf_counter() + seconds, 0
        while not asked or (time.perf_counter() < deadline and asked != limit):
            for name in rotated(list(calls), step):
                t0 = time.perf_counter()
                try:
                    calls[name](step % len(texts))
                except Exception as exc:  # noqa: BLE001 - a failed read is a result of the benchmark
                    failed[name].append(time.perf_counter() - t0)
                    incidents.note(f"{name} raised {type(exc).__name__}: {exc}")
                    continue
                times[name].append(time.perf_counter() - t0)
            step, asked = step + 1, asked + 1
        conn.send({"times": times, "failed": failed, "start": start, "end": time.time(),
                   "incidents": incidents.take()})


def live_documents(spec: Spec) -> Callable[[int], Chunking]:
    """The writer's ``n``-th document: ``LIVE_SEGMENTS`` segments in ``LIVE_CLUSTERS`` clusters."""
    doc_id = f"server-writes-{os.getpid()}-{{}}"
    if spec.store == "synthetic":
        rng = np.random.default_rng(os.getpid())
        per_cluster = LIVE_SEGMENTS // LIVE_CLUSTERS
        return lambda n: synthetic_doc(doc_id.format(n), rng, LIVE_CLUSTERS, per_cluster, spec.dim)
    pieces, vectors = openstax_pieces(Path(spec.path), spec.records)

    def make(n: int) -> Chunking:
        rows = [(n * LIVE_SEGMENTS + j) % len(pieces) for j in range(LIVE_SEGMENTS)]
        return openstax_docs([(doc_id.format(n), pieces[i][1]) for i in rows], vectors[rows])[0]

    return make


def writer(spec: Spec, conn: Connection, stop: Any, interval: float) -> None:
    """Child process: say ``ready``, wait for ``go``, then add a document every ``interval`` seconds
    (0: back to back) until ``stop`` is set; answer with each write's (start, end) wall times."""
    store = connect(replace(spec, cache=os.path.join(spec.cache, "writer")))  # another client's cache
    make = live_documents(spec)
    incidents = Incidents().attach()
    conn.send("ready")
    conn.recv()
    writes: list[tuple[float, float]] = []
    begin, tries = time.perf_counter(), 0
    while not stop.is_set():
        doc = make(tries)
        tries += 1
        t0 = time.time()
        try:
            store.add(doc, LIVE)
            writes.append((t0, time.time()))
        except Exception as exc:  # noqa: BLE001 - a failed write is a result of the benchmark
            incidents.note(f"write raised {type(exc).__name__}: {exc}")
        if interval:
            stop.wait(max(0.0, begin + tries * interval - time.perf_counter()))
    conn.send({"writes": writes, "incidents": incidents.take()})


class ChildDied(RuntimeError):
    """A child process ended without answering (its exit code says how: a crash is a result)."""


def await_message(conn: Connection, proc: Any, what: str) -> Any:
    """The next message of ``proc`` on ``conn``; :class:`ChildDied` if it ends first, ``TimeoutError``
    if it stays silent too long."""
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        if conn.poll(1.0):
            try:
                return conn.recv()
            except EOFError:  # the pipe closed: the process ended, or is ending
                break
        if not proc.is_alive() and not conn.poll(0):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"the {what} process did not answer in {READY_TIMEOUT:.0f} s")
    proc.join(10)
    code = proc.exitcode
    how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
    raise ChildDied(f"the {what} process died ({how}) without answering")


@dataclass
class Phase:
    name: str
    interval: float | None  # None: no writer; 0: back to back
    times: dict[str, list[float]] = field(default_factory=lambda: {PLAIN: [], DEFAULT: []})  # answered
    failed: dict[str, list[float]] = field(default_factory=lambda: {PLAIN: [], DEFAULT: []})  # raised
    writes: list[tuple[float, float]] = field(default_factory=list)  # those completed while the reader asked
    incidents: dict[str, int] = field(default_factory=dict)  # "reader: ..." / "writer: ...": see Incidents
    died: str | None = None  # the reader process died in this phase (the last phase run)


def tally(into: dict[str, int], who: str, counts: dict[str, int]) -> None:
    for what, n in counts.items():
        into[f"{who}: {what}"] = into.get(f"{who}: {what}", 0) + n


def run_phases(ctx: Any, spec: Spec, stack: ExitStack, seconds: float, limit: int, interval: float,
               rounds: int, warmup: int) -> tuple[dict[str, Any], list[Phase]]:
    """Start the reader, run every phase ``rounds`` times; (the reader's warm-up facts, the phases)."""
    def started(target: Callable[..., None], *args: Any) -> tuple[Any, Connection]:
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=target, args=(spec, theirs, *args), daemon=True)
        proc.start()
        theirs.close()  # the child's end: closed here, so that its death closes the pipe
        stack.callback(lambda: proc.is_alive() and proc.terminate())  # by its own handle: our child only
        return proc, mine

    proc, conn = started(reader, warmup)
    info = await_message(conn, proc, "reader")
    logger.info("reader pid %d ready (%d records)", proc.pid, info["records"])
    plan = [("reader alone", None), (f"writer every {interval:g} s", interval), ("writer continuously", 0.0)]
    phases = {name: Phase(name, every) for name, every in plan}
    for r in range(rounds):
        for name, every in plan:
            wproc = wconn = stop = None
            if every is not None:
                stop = ctx.Event()
                wproc, wconn = started(writer, stop, every)
                await_message(wconn, wproc, "writer")
                wconn.send("go")
            conn.send((seconds, limit))
            phase, began = phases[name], time.time()
            try:
                got = await_message(conn, proc, "reader")
            except ChildDied as exc:  # a crash under writes is a result: the phases so far are reported
                logger.error("%s: %s", name, exc)
                phase.died = str(exc)
                got = {"times": {PLAIN: [], DEFAULT: []}, "failed": {PLAIN: [], DEFAULT: []}, "start": began,
                       "end": time.time(), "incidents": {f"{exc}": 1}}
            for call in (PLAIN, DEFAULT):
                phase.times[call] += got["times"][call]
                phase.failed[call] += got["failed"][call]
            tally(phase.incidents, "reader", got["incidents"])
            if wproc is not None and wconn is not None and stop is not None:
                stop.set()
                wrote = await_message(wconn, wproc, "writer")
                wproc.join(60)
                phase.writes += [w for w in wrote["writes"] if got["start"] <= w[1] <= got["end"]]
                tally(phase.incidents, "writer", wrote["incidents"])
            logger.info("round %d, %s: %d questions, %d writes", r + 1, name,
                        len(got["times"][DEFAULT]) + len(got["failed"][DEFAULT]), len(phase.writes))
            if phase.died:
                return info, [p for p in phases.values() if p.times[DEFAULT] or p.failed[DEFAULT] or p.died]
    conn.send(None)
    proc.join(60)
    return info, list(phases.values())


# --------------------------------------------------------------------------- report


def stats(ts: list[float]) -> tuple[float, float, float]:
    """p50, p95, max in ms (NaN when no call answered)."""
    if not ts:
        return float("nan"), float("nan"), float("nan")
    ms = np.asarray(ts) * 1000.0
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95)), float(ms.max())


def hseg_version() -> str:
    """The commit of the hseg package measured (``+dirty`` when its checkout has changes)."""
    import hseg

    root = Path(hseg.__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "hseg"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"{root} (not a git checkout)"
    return f"{head}{'+dirty' if dirty else ''} ({root})"


def report(spec: Spec, info: dict[str, Any], phases: list[Phase], built: float | None, command: str) -> str:
    where = "`chroma run` server" if spec.mode == "server" else "embedded store, reader and writer processes"
    alone = phases[0]
    a_plain, a_default = stats(alone.times[PLAIN]), stats(alone.times[DEFAULT])
    lines = [f"### server_writes: {spec.store}, {info['records']:,} records, {where}",
             "",
             f"`{command}`", "",
             f"hseg {hseg_version()}; {datetime.date.today()}; {os.cpu_count()} CPUs, load average "
             f"{info['load'][0]:.1f} at the start and {os.getloadavg()[0]:.1f} at the end; first default search of "
             f"the reader (its caches built): {info['first_search_s']:.2f} s"
             + (f"; store built in {built:.0f} s (encoding included)" if built is not None else ""),
             "",
             "| phase | questions | failed plain / default | writes | write ms (mean) | plain p50 | p95 | max "
             "| default p50 | p95 | max | plain × alone p50 / p95 | default × alone p50 / p95 "
             "| ms a write costs each reader |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for phase in phases:
        plain, default = stats(phase.times[PLAIN]), stats(phase.times[DEFAULT])
        n = len(phase.times[DEFAULT]) + len(phase.failed[DEFAULT])  # questions asked
        if phase is alone:
            writes = mean_write = cost = "—"
        else:
            writes = str(len(phase.writes))
            mean_write = f"{np.mean([e - s for s, e in phase.writes]) * 1000:.0f}" if phase.writes else "—"
            extra = (sum(phase.times[DEFAULT]) + sum(phase.failed[DEFAULT])) * 1000.0 - a_default[0] * n
            cost = f"{extra / len(phase.writes):,.0f}" if phase.writes and n else "—"
            r50, r95 = default[0] / a_default[0], default[1] / a_default[1]
            ok = "met" if r50 <= 1.5 and r95 <= 2.0 else "missed"
            if phase.failed[DEFAULT]:
                ok = f"missed: {len(phase.failed[DEFAULT])} searches failed"
            if phase.died:
                ok = f"missed: {phase.died}"
            verdicts.append(f"{phase.name}: p50 {r50:.2f}×, p95 {r95:.2f}× ({ok})")
        lines.append(
            f"| {phase.name} | {n} | {len(phase.failed[PLAIN])} / {len(phase.failed[DEFAULT])} | {writes} "
            f"| {mean_write} | {plain[0]:,.1f} | {plain[1]:,.1f} | {plain[2]:,.1f} "
            f"| {default[0]:,.1f} | {default[1]:,.1f} | {default[2]:,.1f} "
            f"| {plain[0] / a_plain[0]:.2f} / {plain[1] / a_plain[1]:.2f} "
            f"| {default[0] / a_default[0]:.2f} / {default[1] / a_default[1]:.2f} | {cost} |")
    lines += ["", "Target, default search under writes ≤ 1.5× alone at p50 and ≤ 2× at p95: "
              + "; ".join(verdicts) + "."]
    incidents = [f"- {phase.name}: {n}× {what}" for phase in phases for what, n in sorted(phase.incidents.items())]
    lines += ["", "Incidents (calls that raised, not timed; hseg's warnings; numbers as N):", "", *incidents] \
        if incidents else ["", "No incidents (no call raised, hseg warned of nothing)."]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- a write's own cost

#: the collection ``--add-cost`` writes into (on a server of its own, in ``--path``)
ADD_COST_COLLECTION = "server_writes_add_cost"
#: a child of ``--add-cost``, run in a folder that links hseg from one checkout and the benchmarks from
#: the repository this runs in (:func:`child_folder`), so that its own folder is all it imports from
_ADD_COST_CHILD = (
    "import json, os, hseg; from benchmarks.server_writes import time_adds; "
    "print('ADD_COST', json.dumps([os.path.realpath(hseg.__file__), "
    "time_adds({host!r}, {port}, {n}, {warmup}, {seed})]))"
)


def child_folder(tree: Path, here: Path, into: Path) -> Path:
    """A folder of links: ``hseg`` from ``tree``, ``benchmarks`` and ``hseg_testing`` from ``here``."""
    into.mkdir(parents=True, exist_ok=True)
    for name, source in (("hseg", tree), ("benchmarks", here), ("hseg_testing", here)):
        (into / name).symlink_to(source.resolve() / name, target_is_directory=True)
    return into


def time_adds(host: str, port: int, n: int, warmup: int, seed: int) -> list[float]:
    """Seconds of each of ``n`` ``HierarchicalStore.add`` calls (after ``warmup`` untimed ones) of a new
    small document (``LIVE_SEGMENTS`` random-vector segments in ``LIVE_CLUSTERS`` clusters) on a
    ``chroma run`` server, one client, nothing else writing; the documents are deleted afterwards."""
    os.environ["HSEG_CACHE"] = tempfile.mkdtemp(prefix="server-writes-add-cost-")
    logging.getLogger("hseg").setLevel(logging.WARNING)
    store = HierarchicalStore(ADD_COST_COLLECTION, host=host, port=port)
    rng = np.random.default_rng(seed)
    times: list[float] = []
    for i in range(warmup + n):
        doc = synthetic_doc(f"add-cost-{os.getpid()}-{i}", rng, LIVE_CLUSTERS, LIVE_SEGMENTS // LIVE_CLUSTERS, 384)
        t0 = time.perf_counter()
        store.add(doc, LIVE)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    store.delete_where(LIVE)
    shutil.rmtree(os.environ["HSEG_CACHE"], ignore_errors=True)
    return times


def commit_of(tree: Path) -> str:
    """The short commit a checkout is at (``+dirty`` when its ``hseg/`` has changes)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True,
                              timeout=30).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + ("+dirty" if git("status", "--porcelain", "--", "hseg") else "")


def add_cost(path: Path, trees: list[Path], n: int, rounds: int, command: str) -> str:
    """Time ``n`` adds a child on one ``chroma run`` server, hseg from each of ``trees`` taking turns
    (the order rotates each round), and report each checkout's per-add p50 / p95 and the per-round
    ratios of its p50 to the first checkout's."""
    here = Path(__file__).resolve().parents[1]
    names = [f"{commit_of(t)} ({t.resolve()})" for t in trees]
    times: list[list[float]] = [[] for _ in trees]
    ratios: list[list[float]] = [[] for _ in trees]
    load = os.getloadavg()
    links = Path(tempfile.mkdtemp(prefix="server-writes-add-cost-trees-"))
    folders = [child_folder(t, here, links / str(i)) for i, t in enumerate(trees)]
    with chroma_server()(path) as server:
        for r in range(rounds):
            p50 = [0.0] * len(trees)
            for i in [(r + j) % len(trees) for j in range(len(trees))]:  # the order rotates
                code = _ADD_COST_CHILD.format(tree=str(trees[i].resolve()), host=server.host, port=server.port,
                                              n=n, warmup=3, seed=r)
                done = subprocess.run([sys.executable, "-c", code], cwd=folders[i], capture_output=True, text=True,
                                      timeout=1800)
                if done.returncode:
                    raise ChildDied(f"the child of {names[i]} exited {done.returncode}: {done.stderr[-2000:]}")
                line = next(row for row in done.stdout.splitlines() if row.startswith("ADD_COST "))
                imported, ts = json.loads(line[len("ADD_COST "):])
                if not imported.startswith(str(trees[i].resolve())):
                    raise ChildDied(f"the child of {names[i]} imported hseg from {imported}")
                times[i] += ts
                p50[i] = float(np.median(ts))
            for i in range(len(trees)):
                ratios[i].append(p50[i] / p50[0])
            logger.info("round %d: %s ms a write", r + 1, " / ".join(f"{x * 1000:.1f}" for x in p50))
    shutil.rmtree(links, ignore_errors=True)
    first = stats(times[0])
    rows = []
    for i, name in enumerate(names):
        st = stats(times[i])
        rs = ratios[i]
        ratio = "1" if i == 0 else (
            f"{np.median(rs):.2f} ({min(rs):.2f}–{max(rs):.2f}; above 1 in {sum(x > 1 for x in rs)} of {len(rs)}) "
            f"| {st[0] / first[0]:.2f} / {st[1] / first[1]:.2f}")
        rows.append(f"| {name} | {len(times[i])} | {st[0]:.1f} | {st[1]:.1f} | {st[2]:.1f} | "
                    + (ratio if i else "1 | 1 / 1") + " |")
    return "\n".join([
        "### server_writes --add-cost: one client's HierarchicalStore.add on a `chroma run` server", "",
        f"`{command}`", "",
        f"{datetime.date.today()}; {os.cpu_count()} CPUs, load average {load[0]:.1f} at the start and "
        f"{os.getloadavg()[0]:.1f} at the end; {rounds} rounds of {n} adds a checkout (after 3 untimed), "
        f"each a new document of {LIVE_SEGMENTS} segments in {LIVE_CLUSTERS} clusters, the order rotated each "
        "round; ratios to the first checkout", "",
        "| hseg from | adds | p50 ms | p95 ms | max ms | × first, per-round p50s: median (range) "
        "| × first, pooled p50 / p95 |",
        "|---|---|---|---|---|---|---|", *rows,
    ]) + "\n"


# --------------------------------------------------------------------------- main


@contextmanager
def one_run_at_a_time(path: Path) -> Iterator[None]:
    """Hold ``path/server_writes.lock`` for the run: a second run on the same store waits for the
    first (two runs would delete each other's written documents and write under each other's reader)."""
    from hseg.store.lock import lock_descriptor  # here: --add-cost children import hseg from older checkouts

    with open(path / "server_writes.lock", "a+", encoding="utf-8") as fh:
        if not lock_descriptor(fh.fileno(), blocking=False):
            fh.seek(0)
            logger.warning("waiting for the run that holds %s (%s)", fh.name, fh.read().strip() or "?")
            lock_descriptor(fh.fileno())
        fh.truncate(0)
        fh.write(f"pid {os.getpid()}, since {datetime.datetime.now():%H:%M:%S}\n")
        fh.flush()
        yield  # closing the file lets go


def chroma_server() -> Any:
    """The tests' ``ChromaServer`` (``chroma run`` on a free port, stopped by its PID)."""
    from hseg_testing.chroma_server import ChromaServer

    return ChromaServer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", required=True, help="the store's directory: built once, then reused")
    ap.add_argument("--records", type=int, default=40_000)
    ap.add_argument("--mode", choices=("server", "embedded"), default="server")
    ap.add_argument("--store", choices=("openstax", "synthetic"), default="openstax")
    ap.add_argument("--seconds", type=float, default=60.0, help="length of each phase")
    ap.add_argument("--queries", type=int, default=0, help="at most this many questions a phase (0: no limit)")
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between the periodic writer's writes")
    ap.add_argument("--rounds", type=int, default=1, help="run the three phases this many times, pooled")
    ap.add_argument("--warmup", type=int, default=5, help="questions the reader asks before the first phase")
    ap.add_argument("--questions", default=str(DATA / "textbook_qa" / "questions_term.csv"))
    ap.add_argument("--n-questions", type=int, default=100, help="distinct questions, asked in turn")
    ap.add_argument("--segments", type=int, default=5, help="synthetic: segments a cluster")
    ap.add_argument("--dim", type=int, default=384, help="synthetic: vector dimension")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="append the markdown table to this file")
    ap.add_argument("--add-cost", type=int, default=0, metavar="N",
                    help="instead of the reader: time N adds a child on a fresh chroma run server in --path, "
                         "hseg from --before and from this checkout taking turns, --rounds times")
    ap.add_argument("--before", default=None, help="with --add-cost: the checkout the others are compared with")
    ap.add_argument("--now", nargs="+", default=None, metavar="DIR",
                    help="with --add-cost: the checkouts to compare (default: this one)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("hseg").setLevel(logging.WARNING)
    command = " ".join(["python -m benchmarks.server_writes", *(sys.argv[1:] if argv is None else argv)])
    if args.add_cost:
        if not args.before:
            ap.error("--add-cost needs --before DIR (a checkout of the commit to compare with)")
        trees = [Path(args.before), *(Path(t) for t in (args.now or [Path(__file__).resolve().parents[1]]))]
        append_report(add_cost(Path(args.path), trees, args.add_cost, args.rounds, command), args.out)
        return 0
    ctx = mp.get_context("spawn")
    path = Path(args.path).resolve()
    path.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        stack.enter_context(one_run_at_a_time(path))
        cache = tempfile.mkdtemp(prefix="server-writes-cache-")
        stack.callback(shutil.rmtree, cache, True)
        stem = Path(args.questions).stem if args.store == "openstax" else "synthetic"
        spec = Spec(args.mode, args.store, str(path), args.records, cache,
                    str(path / f"questions-{stem}-{args.n_questions}.npz"), args.dim, args.segments, args.seed)
        t0 = time.perf_counter()
        records, built = in_child(ctx, prepare, spec, args.questions, args.n_questions)
        logger.info("store ready: %d records (%s, %.0f s)", records,
                    "built" if built is not None else "reused", time.perf_counter() - t0)
        load = os.getloadavg()
        if args.mode == "server":
            server = stack.enter_context(chroma_server()(path))
            spec = replace(spec, host=server.host, port=server.port)
            logger.info("chroma run: pid %d, port %s", server.proc.pid if server.proc else -1, server.port)
        try:
            info, phases = run_phases(ctx, spec, stack, args.seconds, args.queries, args.interval, args.rounds,
                                      args.warmup)
        finally:
            try:
                logger.info("deleted the %d records the writer added", in_child(ctx, clean_up, spec))
            except Exception as exc:  # the run's own error, if any, is the one to see
                logger.warning("could not delete the documents the writer added (%s): the next run will", exc)
    info["load"] = load
    append_report(report(spec, info, phases, built, command), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
