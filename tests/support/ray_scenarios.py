"""The Ray side of ``tests/e2e/test_distributed.py``, run as a process of its own:

    python -m tests.support.ray_scenarios HOST PORT WORKDIR SCENARIO...

A local Ray (2 CPUs) runs each named scenario against the Chroma server at HOST:PORT and writes what
it returned, or the exception it raised, to ``WORKDIR/results.json``; the tests check those results,
and what the scenarios wrote into Chroma, from the pytest process. Ray stays out of that process:
its runtime (ray, pyarrow, pandas: ~150 MB resident) and its threads would stay there for every
later test.

Importing this module imports no Ray: the tests take their corpora and encoders from it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import signal
import sys
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hseg_testing.fakes import HashingEncoder, synthetic_book
from tests.support import REPO

TIDES = ("The tide is the rise and fall of the sea. Tides are caused by the gravity of the moon and the sun. "
         "High tide and low tide alternate twice a day on most coasts.\n\n")
CATS = ("Cats are small carnivorous mammals. A cat sleeps for most of the day. Cats hunt mice and birds, "
        "and people keep cats as companions in their homes.\n\n")
#: the document whose record the "killed" scenario deletes, as a writer killed inside a write would leave it
PARTIAL_DOC = "book-03.md"


def books(n: int) -> dict[str, str]:
    """``n`` small synthetic documents of different sizes."""
    return {f"book-{i:02d}.md": synthetic_book(1500 + 300 * i, seed=i) for i in range(n)}


def model_texts() -> dict[str, str]:
    """A slice of the example document and two short ones, for the real-model scenario."""
    example = (REPO / "examples" / "data" / "example.md").read_text(encoding="utf-8")
    return {"example.md": example[: example.index("\n\n", 12000)], "tides.txt": TIDES * 3 + CATS * 2,
            "cats.txt": CATS * 4}


def fake_settings() -> dict[str, Any]:
    return {"encoder": HashingEncoder(), "segmenter": "texttiling"}


class CrashOnceEncoder(HashingEncoder):
    """The fake encoder, but the first worker process to encode exits at once, as a worker killed
    mid-batch would (the marker file makes it happen once across restarts)."""

    def __init__(self, marker: Path) -> None:
        super().__init__()
        self.marker = str(marker)

    def encode(self, texts):
        if not os.path.exists(self.marker):
            Path(self.marker).touch()
            os._exit(1)
        return super().encode(texts)


class ServerKillingEncoder(HashingEncoder):
    """The fake encoder, but it kills the Chroma server (by PID) on its first use: the server goes
    away between a batch's look-up and its write."""

    def __init__(self, server_pid: int) -> None:
        super().__init__()
        self.server_pid = server_pid

    def encode(self, texts):
        try:
            os.kill(self.server_pid, signal.SIGKILL)
        except ProcessLookupError:  # gone already
            pass
        return super().encode(texts)


@dataclasses.dataclass
class Context:
    ray: Any
    host: str
    port: int
    workdir: Path

    def collection(self) -> str:
        return f"ray-{uuid.uuid4().hex[:12]}"

    def dataset(self, texts: dict[str, str], **columns: Any) -> Any:
        return self.ray.data.from_items([{"id": d, "text": t, **columns} for d, t in texts.items()])

    def index(self, dataset: Any, **kwargs: Any) -> dict[str, Any]:
        from hseg.ingest.ray import index_dataset

        where = {"host": self.host, "port": self.port}
        summary = index_dataset(dataset, **{**where, **kwargs}, show_progress=False)
        return dataclasses.asdict(summary)


def two_workers(ctx: Context) -> dict[str, Any]:
    collection = ctx.collection()
    summary = ctx.index(ctx.dataset(books(10), lang="en"), collection=collection, num_workers=2, batch_docs=2,
                        **fake_settings())
    return {"collection": collection, "summary": summary}


def killed(ctx: Context) -> dict[str, Any]:
    from hseg.store import HierarchicalStore

    collection, marker = ctx.collection(), ctx.workdir / "crashed"
    dataset = ctx.dataset(books(8))
    first = ctx.index(dataset, collection=collection, num_workers=2, batch_docs=2,
                      encoder=CrashOnceEncoder(marker), segmenter="texttiling")
    store = HierarchicalStore(collection, host=ctx.host, port=ctx.port, encoder=HashingEncoder())
    count = store.count()
    lost = store.collection.get(where={"$and": [{"hseg_doc_id": PARTIAL_DOC}, {"hseg_level": "segment"}]},
                                limit=1)["ids"]
    store.collection.delete(ids=lost)
    again = ctx.index(dataset, collection=collection, num_workers=2, batch_docs=2, **fake_settings())
    return {"collection": collection, "first": first, "crashed": marker.exists(), "count_after_crash": count,
            "lost": lost, "again": again}


def missing_text(ctx: Context) -> dict[str, Any]:
    try:
        ctx.index(ctx.ray.data.from_items([{"id": "a", "body": "no text column"}]), **fake_settings())
    except ValueError as exc:
        return {"error": str(exc)}
    return {"error": None}


def server_gone(ctx: Context) -> dict[str, Any]:
    from hseg.ingest import IngestWriteError
    from hseg_testing.chroma_server import ChromaServer

    with ChromaServer(ctx.workdir / "doomed") as server:
        assert server.proc is not None
        try:
            ctx.index(ctx.dataset(books(2)), host=server.host, port=server.port, num_workers=1, batch_docs=2,
                      encoder=ServerKillingEncoder(server.proc.pid), segmenter="texttiling")
        except IngestWriteError as exc:
            return {"error": str(exc)}
    return {"error": None}


def real_model(ctx: Context) -> dict[str, Any]:
    collection = ctx.collection()
    # torch in the worker, as the tests' single-process run; batches of 2 here, one batch of 3 there
    summary = ctx.index(ctx.dataset(model_texts()), collection=collection, num_workers=1, batch_docs=2,
                        backend="torch")
    return {"collection": collection, "summary": summary}


def cli(ctx: Context) -> dict[str, Any]:
    from hseg.cli import main

    folder = ctx.workdir / "cli"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "tides.txt").write_text(TIDES * 3, encoding="utf-8")
    (folder / "docs" / "cats.md").write_text(CATS * 3, encoding="utf-8")
    (folder / "docs" / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    argv = ["index", "docs", "--host", ctx.host, "--port", str(ctx.port), "--collection", "cli-ray", "--ray",
            "--workers", "1", "--quiet"]

    def run() -> dict[str, Any]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        return {"code": code, "out": out.getvalue(), "err": err.getvalue()}

    before = os.getcwd()
    os.chdir(folder)  # document ids are paths relative to the current directory
    try:
        first = run()
        (folder / "docs" / "binary.md").unlink()
        again = run()
    finally:
        os.chdir(before)
    return {"first": first, "again": again, "ray_still_up": ctx.ray.is_initialized()}


SCENARIOS: dict[str, Callable[[Context], dict[str, Any]]] = {
    f.__name__: f for f in (two_workers, killed, missing_text, server_gone, real_model, cli)}


def main(argv: list[str]) -> int:
    host, port, workdir, names = argv[0], int(argv[1]), Path(argv[2]), argv[3:]
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        raise SystemExit(f"unknown scenarios {unknown}; they are {sorted(SCENARIOS)}")
    import ray

    # the workers unpickle this module's encoders: they import it from the repository
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": path}},
             logging_level="WARNING")
    results: dict[str, Any] = {}
    try:
        ctx = Context(ray, host, port, workdir)
        for name in names:
            try:
                results[name] = SCENARIOS[name](ctx)
            except Exception:  # the test of this scenario shows it; the others still run
                results[name] = {"exception": traceback.format_exc()}
    finally:
        ray.shutdown()
    (workdir / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
