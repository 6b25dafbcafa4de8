"""``hseg index``: the main job, chunking files and writing them into a Chroma index.

Example::

    hseg index examples/data --db ./hseg-db

The embedded ``chromadb.PersistentClient`` at ``--db DIR`` is the default; ``--host/--port``
talk to a Chroma server (``chroma run``) instead. ``hseg query`` and ``hseg stats``
(:mod:`hseg.cli.query`) read the index.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from hseg.cli.chroma import CliError, add_location, check_location, client, id_anchor, location_label, server_errors
from hseg.cli.index_ray import add_ray_options, check_ray_args, index_with_ray
from hseg.cli.options import (
    add_chunker_options,
    add_encoder_option,
    chunker_from_args,
    positive_int,
    quiet_model_loading,
)

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "index",
        help="chunk text/markdown files and write them into a Chroma index",
        description="Read PATHs (files, folders searched recursively, or glob patterns such as 'docs/**/*.md'), "
                    "chunk them into segments and clusters and upsert both levels into Chroma. Folders and "
                    "globs take .txt, .md and .markdown files; a file named explicitly is read whatever its "
                    "suffix. The document id (and metadata 'source') is the path relative to the folder "
                    "that holds --db (absolute with --host). Documents already stored with the same text and "
                    "settings are skipped, so "
                    "re-running a command only does what is missing; --prune also removes the documents whose "
                    "files were deleted or renamed. Unreadable files are reported and skipped; the exit code "
                    "is 1 if any file failed.",
        epilog="Example: hseg index examples/data 'notes/**/*.md' --db ./hseg-db --target-tokens 384",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or glob patterns")
    add_location(p, db_help="directory of the embedded Chroma database (created if missing)")
    add_chunker_options(p)
    add_encoder_option(p, default="the one the collection was built with, else all-MiniLM-L6-v2")
    p.add_argument("--batch-docs", type=positive_int, default=32, metavar="N",
                   help="documents chunked together and written together (default 32)")
    p.add_argument("--force", action="store_true", help="re-chunk documents even when stored unchanged")
    p.add_argument("--prune", action="store_true",
                   help="after indexing, remove the stored documents whose source lies under the PATHs (inside a "
                        "folder, matching a pattern, or a named file) but whose file is gone (deleted or renamed); "
                        "documents from other paths or other writers are kept")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars or progress messages (the summary is still printed)")
    p.add_argument("--lock-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="with --db: how long to wait while another process writes to the same embedded store, "
                        "which writers must take in turns (default 600)")
    add_ray_options(p)
    p.set_defaults(func=run_index)


def run_index(args: argparse.Namespace) -> int:
    """Index the PATHs, print the summary; exit code 1 if any file failed."""
    check_location(args)
    check_ray_args(args)
    from hseg import ingest

    def report_line(message: str) -> None:
        from tqdm.auto import tqdm

        tqdm.write(message, file=sys.stderr)

    def report(message: str) -> None:
        report_line(f"hseg index: error: {message}")

    start = time.perf_counter()
    files, problems = ingest.discover(args.paths, anchor=id_anchor(args))
    for arg, message in problems:
        report(f"{arg}: {message}")
    if not files and not args.prune:
        raise CliError("nothing to index: no readable .txt/.md/.markdown files in the given paths")
    if args.quiet:
        quiet_model_loading()
    if args.host is not None:
        return _index(args, files, problems, report, report_line, start)
    if not files and not Path(args.db).is_dir():
        client(args, must_exist=True)  # the usual message: nothing to prune there
    from hseg.store.lock import WriterBusyError, writer_lock

    def waiting(holder: str) -> None:
        report_line(f"hseg index: waiting for {holder}, which is writing to {args.db} (writers take turns) ...")

    try:
        with writer_lock(args.db, timeout_s=args.lock_timeout, on_wait=waiting):
            return _index(args, files, problems, report, report_line, start)
    except WriterBusyError as exc:
        raise CliError(str(exc)) from None


def _index(args: argparse.Namespace, files: list[Any], problems: list[tuple[str, str]], report: Any,
           report_line: Any, start: float) -> int:
    from hseg import ingest
    from hseg.encoders import factory

    # with no files, only pruning is left to do: it needs an index already there
    chroma = client(args, must_exist=not files)
    from chromadb.errors import NotFoundError

    recorded = None
    with server_errors(args):
        holds_documents = False
        try:
            existing = chroma.get_collection(args.collection, embedding_function=None)
            holds_documents = existing.count() > 0
            # an empty collection (a first run that failed) binds no encoder
            recorded = (existing.metadata or {}).get("hseg_encoder") if holds_documents else None
        except (NotFoundError, ValueError):  # absent: created below
            if not files:
                raise CliError(f"nothing to index, and no collection {args.collection!r} at {location_label(args)} "
                               "to prune") from None
    if args.encoder:
        from hseg.store.connection import check_encoder

        try:  # the store's own check, by canonical name: all-MiniLM-L6-v2 is the default model
            check_encoder(args.collection, recorded, args.encoder)
        except ValueError:
            raise CliError(f"collection {args.collection!r} was built with encoder {recorded!r}, not "
                           f"{args.encoder!r}; use another --collection") from None

    def loading(name: str) -> None:
        if not args.quiet:
            report_line(f"loading encoder {name} ...")

    encoder = factory.LazyEncoder(args.encoder or recorded, on_load=loading, backend=args.backend)
    if not holds_documents:
        try:  # nothing stored to skip: load now, so a model that cannot load fails before anything is written
            encoder.loaded  # noqa: B018
        except factory.EncoderLoadError as exc:
            raise CliError(str(exc)) from None
    from hseg.store import HierarchicalStore

    chunker = chunker_from_args(args, encoder=encoder)  # progress comes from ingest's own bars
    with server_errors(args):
        store = HierarchicalStore(args.collection, client=chroma, encoder=encoder)
        try:
            if args.ray is not None:
                summary = index_with_ray(args, files, chunker, args.encoder or recorded, report)
            else:
                summary = ingest.ingest(files, chunker, store, batch_docs=args.batch_docs, force=args.force,
                                        progress=not args.quiet, report=report)
        except ingest.IngestInterrupted as exc:
            done = exc.summary
            report_line(f"hseg index: interrupted after {done.documents} documents were indexed completely in "
                        f"this run ({done.unchanged} unchanged); every stored document is whole: re-run the same "
                        "command to index the rest")
            return 130
        except factory.EncoderLoadError as exc:
            raise CliError(str(exc)) from None
        except ingest.IngestWriteError as exc:
            from hseg.store.connection import LexicalIndexStorageError, disk_trouble

            if isinstance(exc.__cause__, LexicalIndexStorageError):  # the folder beside the database, not its disk
                raise CliError(f"{exc.__cause__}; then re-run the same command ({exc.written} documents are "
                               "written whole)") from exc
            trouble = None if args.host is not None else disk_trouble(str(args.db), exc.__cause__ or exc)
            if trouble is None:
                raise ValueError(str(exc)) from exc
            fix = "make it writable first" if trouble == "read-only" else "free space first"
            raise CliError(f"{exc}. The disk of {args.db} is {trouble}: {fix}") from exc
        pruned = None
        if args.prune:
            pruned = ingest.prune(store, args.paths, [f.doc_id for f in files], anchor=id_anchor(args),
                                  report=None if args.quiet else lambda d: report_line(f"pruned {d}: its file is gone"))
        total = store.count()
    failed = len(summary.failed) + len(problems)
    sec = summary.seconds
    extra = [f"{summary.unchanged} unchanged (skipped)"] + ([f"{summary.empty} empty"] if summary.empty else []) \
        + [f"{failed} failed"]
    print(f"documents  {summary.documents} indexed, {', '.join(extra)}")
    if pruned is not None:
        print(f"pruned     {len(pruned)} documents whose files are gone")
    print(f"segments   {summary.segments}")
    print(f"clusters   {summary.clusters}")
    print(f"vectors    {summary.vectors} written; collection {args.collection!r} at {location_label(args)} "
          f"holds {total}")
    print(f"seconds    {time.perf_counter() - start:.1f} (reading {sec['reading']:.1f}, "
          f"chunking {sec['chunking']:.1f}, writing {sec['writing']:.1f})")
    return 1 if failed else 0
