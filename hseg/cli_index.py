"""``hseg index``, ``hseg query`` and ``hseg stats``: the main job, indexing files into Chroma and asking them.

Example::

    hseg index examples/data --db ./hseg-db
    hseg query "How are clusters formed?" --db ./hseg-db -k 3
    hseg stats --db ./hseg-db

The embedded ``chromadb.PersistentClient`` at ``--db DIR`` is the default; ``--host/--port``
talk to a Chroma server (``chroma run``) instead.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator

from hseg.cli_args import finite_float, positive_int
from hseg.search import MODES
from hseg.units import UNITS

__all__ = ["register"]

CONNECT_TIMEOUT_S = 5.0
_BOLD_UNDERLINE, _RESET = "\x1b[1;4m", "\x1b[0m"


class CliError(ValueError):
    """A complete one-line message for the user (printed as is, exit code 1)."""


def _port(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port in 1..65535, got {text!r}")
    return value


def _add_location(p: argparse.ArgumentParser, *, db_help: str) -> None:
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", metavar="DIR", help=db_help)
    where.add_argument("--host", metavar="HOST", help="a Chroma server (chroma run) instead of --db")
    p.add_argument("--port", type=_port, default=None, metavar="PORT", help="the server's port (default 8000)")
    p.add_argument("--collection", default="hseg", metavar="NAME", help="Chroma collection (default 'hseg')")
    p.set_defaults(_parser=p)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "index",
        help="chunk text/markdown files and write them into a Chroma index",
        description="Read PATHs (files, folders searched recursively, or glob patterns such as 'docs/**/*.md'), "
                    "chunk them into segments and clusters and upsert both levels into Chroma. Folders and "
                    "globs take .txt, .md and .markdown files; a file named explicitly is read whatever its "
                    "suffix. The document id (and metadata 'source') is the path relative to the current "
                    "directory. Documents already stored with the same text and settings are skipped, so "
                    "re-running a command only does what is missing. Unreadable files are reported and "
                    "skipped; the exit code is 1 if any file failed.",
        epilog="Example: hseg index examples/data 'notes/**/*.md' --db ./hseg-db --target-tokens 384",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or glob patterns")
    _add_location(p, db_help="directory of the embedded Chroma database (created if missing)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--target-tokens", type=positive_int, default=None, metavar="N",
                      help="mean cluster size to aim for (default 512)")
    size.add_argument("--k", type=finite_float, default=None, metavar="K",
                      help="explicit clustering threshold k (tau = mu + k*sigma) instead of --target-tokens")
    p.add_argument("--max-cluster-tokens", type=positive_int, default=None, metavar="N",
                   help="hard cap per cluster (default 1.5x the target)")
    p.add_argument("--segmenter", default=None, metavar="NAME", help="segmenter: bilstm (default) or texttiling")
    p.add_argument("--encoder", default=None, metavar="MODEL",
                   help="sentence-transformers model name (default: the one the collection was built with, "
                        "else all-MiniLM-L6-v2)")
    p.add_argument("--batch-docs", type=positive_int, default=32, metavar="N",
                   help="documents chunked together and written together (default 32)")
    p.add_argument("--force", action="store_true", help="re-chunk documents even when stored unchanged")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run_index)

    q = sub.add_parser(
        "query",
        help="retrieve the parents (or passages) that best answer a question",
        description="Embed QUESTION and print the best parents with rank, score, document, character span and "
                    "text, the matched segment highlighted (bold/underlined on a terminal, >>> <<< otherwise).",
        epilog="Example: hseg query 'What is precession?' --db ./hseg-db -k 3 --unit auto",
    )
    q.add_argument("question", metavar="QUESTION", help="the query text")
    _add_location(q, db_help="directory of the embedded Chroma database written by 'hseg index'")
    amount = q.add_mutually_exclusive_group()
    amount.add_argument("-k", type=positive_int, default=None, metavar="K", help="number of results (default 4)")
    amount.add_argument("--budget-tokens", type=positive_int, default=None, metavar="B",
                        help="return results in rank order while their total tokens fit B (instead of -k)")
    q.add_argument("--mode", choices=MODES, default="segment+cluster",
                   help="vectors that score a parent (unit cluster only; default segment+cluster)")
    q.add_argument("--unit", choices=UNITS, default="cluster",
                   help="a result is a whole cluster (default), a passage of segments, or chosen by budget (auto)")
    q.add_argument("--source", default=None, metavar="PATH", help="only search the document with this source/id")
    q.add_argument("--encoder", default=None, metavar="MODEL",
                   help="query encoder (default: the model recorded in the collection)")
    q.add_argument("--json", action="store_true", help="print a JSON list of hits (all fields)")
    q.set_defaults(func=run_query)

    s = sub.add_parser(
        "stats",
        help="count documents, segments, clusters and vectors of an index",
        description="Print the documents, segments, clusters and vectors of a collection, its encoder and the "
                    "mean cluster and segment sizes in tokens.",
        epilog="Example: hseg stats --db ./hseg-db --json",
    )
    _add_location(s, db_help="directory of the embedded Chroma database written by 'hseg index'")
    s.add_argument("--json", action="store_true", help="print a JSON object")
    s.set_defaults(func=run_stats)


# --------------------------------------------------------------------------- Chroma access


def _check_location(args: argparse.Namespace) -> None:
    if args.port is not None and args.host is None:
        args._parser.error("--port needs --host")


def _where(args: argparse.Namespace) -> str:
    return f"{args.host}:{args.port or 8000}" if args.host else str(args.db)


@contextmanager
def _server_errors(args: argparse.Namespace) -> Iterator[None]:
    """Name the server in every failure to talk to it (connection refused, gone mid-run, ...)."""
    if args.host is None:
        yield
        return
    try:
        yield
    except (OSError, ValueError, RuntimeError) as exc:
        if isinstance(exc, (CliError, FileNotFoundError)):
            raise
        raise CliError(f"Chroma server at {_where(args)}: {exc}") from exc


def _client(args: argparse.Namespace, *, must_exist: bool) -> Any:
    if args.host is not None:
        port = args.port or 8000
        try:  # fail in bounded time, and clearly, before chromadb's own attempts
            socket.create_connection((args.host, port), timeout=CONNECT_TIMEOUT_S).close()
        except OSError as exc:
            reason = "connection refused" if isinstance(exc, ConnectionRefusedError) else str(exc) or type(exc).__name__
            raise CliError(f"cannot reach the Chroma server at {args.host}:{port} ({reason}); is 'chroma run' "
                             "running there?") from None
        import chromadb

        with _server_errors(args):
            return chromadb.HttpClient(host=args.host, port=port)
    db = Path(args.db)
    if db.exists() and not db.is_dir():
        raise CliError(f"--db {args.db}: not a directory")
    if must_exist and not db.is_dir():
        raise CliError(f"no index at {args.db} (run 'hseg index PATH --db {args.db}' first)")
    import chromadb

    # an absolute path: chromadb shares one system per path string within a process
    return chromadb.PersistentClient(path=str(db.resolve()))


def _existing_collection(args: argparse.Namespace) -> Any:
    from chromadb.errors import NotFoundError

    client = _client(args, must_exist=True)
    with _server_errors(args):
        try:
            collection = client.get_collection(args.collection, embedding_function=None)
        except (NotFoundError, ValueError):
            names = sorted(c if isinstance(c, str) else c.name for c in client.list_collections())
            have = f"collections there: {', '.join(names)}" if names else "it holds no collections"
            raise CliError(f"no collection {args.collection!r} at {_where(args)} ({have}); "
                             "run 'hseg index' first") from None
    from hseg.store import check_schema

    check_schema(collection.name, (collection.metadata or {}).get("hseg_schema"))  # refuse a newer schema
    return collection


def _quiet_models() -> None:
    from hseg.cli_args import quiet_model_loading

    quiet_model_loading()


# --------------------------------------------------------------------------- index


def run_index(args: argparse.Namespace) -> int:
    _check_location(args)
    from hseg import ingest

    def report_line(message: str) -> None:
        from tqdm.auto import tqdm

        tqdm.write(message, file=sys.stderr)

    def report(message: str) -> None:
        report_line(f"hseg index: error: {message}")

    start = time.perf_counter()
    files, problems = ingest.discover(args.paths)
    for arg, message in problems:
        report(f"{arg}: {message}")
    if not files:
        raise CliError("nothing to index: no readable .txt/.md/.markdown files in the given paths")
    if args.quiet:
        _quiet_models()
    client = _client(args, must_exist=False)
    from chromadb.errors import NotFoundError

    recorded = None
    with _server_errors(args):
        try:
            existing = client.get_collection(args.collection, embedding_function=None)
            recorded = (existing.metadata or {}).get("hseg_encoder")
        except (NotFoundError, ValueError):  # absent: created below
            pass
    if args.encoder and recorded and args.encoder != recorded:
        raise CliError(f"collection {args.collection!r} was built with encoder {recorded!r}, not {args.encoder!r}; "
                         "use another --collection")
    def loading(name: str) -> None:
        if not args.quiet:
            report_line(f"loading encoder {name} ...")

    encoder = ingest.LazyEncoder(args.encoder or recorded, on_load=loading)
    from hseg.chunker import HierarchicalChunker
    from hseg.store import HierarchicalStore

    try:
        chunker = HierarchicalChunker(encoder=encoder, segmenter=args.segmenter, k=args.k,
                                      target_tokens=args.target_tokens, max_cluster_tokens=args.max_cluster_tokens)
    except ValueError as exc:  # an option out of range (e.g. --target-tokens below the segment minimum)
        args._parser.error(str(exc))
    with _server_errors(args):
        store = HierarchicalStore(args.collection, client=client, encoder=encoder)
        try:
            summary = ingest.ingest(files, chunker, store, batch_docs=args.batch_docs, force=args.force,
                                    progress=not args.quiet, report=report)
        except ingest.IngestWriteError as exc:
            raise ValueError(str(exc)) from exc
        total = store.count()
    failed = len(summary.failed) + len(problems)
    sec = summary.seconds
    extra = [f"{summary.unchanged} unchanged (skipped)"] + ([f"{summary.empty} empty"] if summary.empty else []) \
        + [f"{failed} failed"]
    print(f"documents  {summary.documents} indexed, {', '.join(extra)}")
    print(f"segments   {summary.segments}")
    print(f"clusters   {summary.clusters}")
    print(f"vectors    {summary.vectors} written; collection {args.collection!r} at {_where(args)} holds {total}")
    print(f"seconds    {time.perf_counter() - start:.1f} (reading {sec['reading']:.1f}, "
          f"chunking {sec['chunking']:.1f}, writing {sec['writing']:.1f})")
    return 1 if failed else 0


# --------------------------------------------------------------------------- query


def run_query(args: argparse.Namespace) -> int:
    _check_location(args)
    if not args.question.strip():
        args._parser.error("QUESTION is empty")
    if args.unit != "cluster" and args.mode != "segment+cluster":
        args._parser.error(f"--mode {args.mode} applies to --unit cluster only")
    collection = _existing_collection(args)
    with _server_errors(args):
        if collection.count() == 0:
            raise CliError(f"collection {args.collection!r} at {_where(args)} is empty; run 'hseg index' first")
        recorded = (collection.metadata or {}).get("hseg_encoder")
    _quiet_models()  # the answer is the output: no weight-loading bar
    from hseg import ingest
    from hseg.store import HierarchicalStore

    encoder = ingest.load_encoder(args.encoder or recorded)
    with _server_errors(args):
        store = HierarchicalStore.from_collection(collection, encoder=encoder,
                                                  allow_encoder_mismatch=bool(args.encoder))
        where = None if args.source is None else {"source": args.source}
        hits = store.search(args.question, k=args.k, budget_tokens=args.budget_tokens, mode=args.mode,
                            unit=args.unit, where=where)
    if args.json:
        json.dump([asdict(h) for h in hits], sys.stdout, ensure_ascii=False, indent=1, default=float)
        sys.stdout.write("\n")
        return 0
    if not hits:
        print("no results" + (f" in source {args.source!r}" if args.source else ""))
        return 0
    tty = sys.stdout.isatty()
    for rank, hit in enumerate(hits, 1):
        print(format_hit(rank, hit, tty=tty))
    return 0


def format_hit(rank: int, hit: Any, *, tty: bool = False) -> str:
    """A hit as a header line and its text, indented, with the matched segment marked."""
    source = hit.metadata.get("source", hit.doc_id)
    what = "cluster" if hit.unit == "cluster" else f"passage of {len(hit.segment_ids)} segment(s)"
    if hit.matched_level == "segment":
        matched = f"matched segment {hit.matched_start}-{hit.matched_end}"
    else:
        matched = "matched the cluster vector"
    header = (f"#{rank}  score {hit.score:.4f}  {source}  chars {hit.start}-{hit.end}  "
              f"({what}, {hit.token_count} tokens; {matched})")
    text = hit.text
    if hit.matched_level == "segment" and hit.start <= hit.matched_start < hit.matched_end <= hit.end:
        a, b = hit.matched_start - hit.start, hit.matched_end - hit.start
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b:
            on, off = (_BOLD_UNDERLINE, _RESET) if tty else (">>> ", " <<<")
            text = text[:a] + on + text[a:b] + off + text[b:]
    body = "\n".join("    " + line if line.strip() else "" for line in text.strip("\n").splitlines())
    return f"{header}\n{body}\n"


# --------------------------------------------------------------------------- stats


def collection_stats(collection: Any, page: int = 5000) -> dict[str, Any]:
    """Counts and mean token sizes of the hseg records in a collection, read page by page."""
    docs: set[str] = set()
    tokens: dict[str, list[int]] = {"cluster": [], "segment": []}
    other, offset = 0, 0
    while True:
        got = collection.get(include=["metadatas"], limit=page, offset=offset)
        for meta in got["metadatas"]:
            level = (meta or {}).get("hseg_level")
            if level not in tokens:
                other += 1
                continue
            docs.add(str(meta["hseg_doc_id"]))
            tokens[level].append(int(meta.get("hseg_tokens", 0)))
        if len(got["ids"]) < page:
            break
        offset += page
    meta = collection.metadata or {}

    def mean(xs: list[int]) -> float | None:
        return round(sum(xs) / len(xs), 1) if xs else None

    return {
        "collection": collection.name,
        "encoder": meta.get("hseg_encoder"),
        "schema": meta.get("hseg_schema"),
        "documents": len(docs),
        "clusters": len(tokens["cluster"]),
        "segments": len(tokens["segment"]),
        "vectors": len(tokens["cluster"]) + len(tokens["segment"]),
        "other_records": other,
        "mean_cluster_tokens": mean(tokens["cluster"]),
        "mean_segment_tokens": mean(tokens["segment"]),
    }


def run_stats(args: argparse.Namespace) -> int:
    _check_location(args)
    collection = _existing_collection(args)
    with _server_errors(args):
        stats = collection_stats(collection)
    stats["location"] = _where(args)
    if args.json:
        print(json.dumps(stats, indent=1))
        return 0
    fmt = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
    print(f"collection {stats['collection']!r} at {stats['location']}")
    print(f"encoder    {stats['encoder'] or '(not recorded)'}")
    print(f"documents  {stats['documents']}")
    print(f"clusters   {stats['clusters']}  (mean {fmt(stats['mean_cluster_tokens'])} tokens)")
    print(f"segments   {stats['segments']}  (mean {fmt(stats['mean_segment_tokens'])} tokens)")
    print(f"vectors    {stats['vectors']}" + (f"  (+{stats['other_records']} records of other writers)"
                                              if stats["other_records"] else ""))
    return 0
