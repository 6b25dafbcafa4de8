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
    CHUNK_OPTIONS,
    add_chunker_options,
    add_encoder_option,
    chunk_options,
    chunker_config_from_args,
    chunker_from_args,
    given_chunk_options,
    positive_int,
    quiet_model_loading,
)
from hseg.errors import EncoderMismatchError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "index",
        help="chunk text, markdown, PDF, DOCX, PPTX and HTML files and write them into a Chroma index",
        description="Read PATHs (files, folders searched recursively, or glob patterns such as 'docs/**/*.md'), "
                    "chunk them into segments and clusters and upsert both levels into Chroma. Folders and "
                    "globs take .txt, .md, .markdown, .pdf, .docx, .pptx, .html and .htm files (PDF, DOCX, PPTX and "
                    "HTML are converted to markdown with their headings, and PDF pages and PPTX slides kept: "
                    'pip install "hseg[formats]"; without it they are skipped and counted; files of other formats '
                    "in folders are counted in the summary); a file named explicitly is read whatever its "
                    "suffix. The document id (and metadata 'source') is the path relative to the folder "
                    "that holds --db (absolute with --host). Documents already stored with the same text and "
                    "settings are skipped, so "
                    "re-running a command only does what is missing; --prune also removes the documents whose "
                    "files were deleted or renamed (without it, a run says how many there are). The store "
                    "remembers the chunk options (--target-tokens, --k, --max-cluster-tokens, --structure, "
                    "--segmenter): a later run without them uses them; one with other values re-chunks. "
                    "Unreadable files are reported and skipped; the exit code is 1 if any file failed.",
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
    """Index the PATHs (:func:`hseg.ingest.index_paths`), print the summary; exit code 1 if any file failed."""
    check_location(args)
    check_ray_args(args)
    from hseg import ingest

    def report_line(message: str) -> None:
        from tqdm.auto import tqdm

        tqdm.write(message, file=sys.stderr)

    def report(message: str) -> None:
        report_line(f"hseg index: error: {message}")

    found = ingest.find(args.paths, anchor=id_anchor(args))
    for arg, message in found.problems:
        report(f"{arg}: {message}")
    if not found.files and not args.prune:
        raise CliError("nothing to index: no readable text, markdown, PDF, DOCX, PPTX or HTML files in the given "
                       "paths")
    if args.quiet:
        quiet_model_loading()
    if args.host is not None:
        return _index(args, found, report, report_line)
    if not found.files and not Path(args.db).is_dir():
        client(args, must_exist=True)  # the usual message: nothing to prune there
    from hseg.store.lock import writer_lock

    def waiting(holder: str) -> None:
        report_line(f"hseg index: waiting for {holder}, which is writing to {args.db} (writers take turns) ...")

    with writer_lock(args.db, timeout_s=args.lock_timeout, on_wait=waiting):  # busy: a WriterBusyError for main
        return _index(args, found, report, report_line)


def _index(args: argparse.Namespace, found: Any, report: Any, report_line: Any) -> int:
    from hseg import ingest
    from hseg.encoders import factory

    started = time.perf_counter()  # the summary's seconds: the model's load before the job included
    files = list(found.files)
    # with no files, only pruning is left to do: it needs an index already there
    chroma = client(args, must_exist=not files)
    from hseg.errors import CollectionNotFoundError
    from hseg.ingest.fingerprint import settings_key
    from hseg.ingest.lazy import LazyChunker
    from hseg.store import HierarchicalStore
    from hseg.store.maintenance import Remembered

    with server_errors(args):
        try:  # opened to read: a new collection is created below, once the encoder is known to load
            store: HierarchicalStore | None = HierarchicalStore(args.collection, client=chroma, create=False)
        except CollectionNotFoundError:
            if not files:
                raise CliError(f"nothing to index, and no collection {args.collection!r} at {location_label(args)} "
                               "to prune") from None
            store = None
        # an empty collection (a first run that failed) binds no encoder and remembers no chunk options
        known = store.maintenance.remembered() if store is not None else Remembered(0, None, None)
    recorded = known.encoder
    if args.encoder:
        from hseg.store.connection import check_encoder

        try:  # the store's own check, by canonical name: all-MiniLM-L6-v2 is the default model
            check_encoder(args.collection, recorded, args.encoder)
        except EncoderMismatchError:
            raise CliError(f"collection {args.collection!r} was built with encoder {recorded!r}, not "
                           f"{args.encoder!r}; use another --collection") from None

    def loading(name: str) -> None:
        if not args.quiet:
            report_line(f"loading encoder {name} ...")

    encoder = factory.LazyEncoder(args.encoder or recorded, on_load=loading, backend=args.backend)
    if not known.records:  # nothing stored to skip: load now, so a model that cannot load fails before any write
        encoder.loaded  # noqa: B018

    given = given_chunk_options(args)
    options = chunk_options(args, known.chunk_options)  # those not given: as the store remembers them
    # built when a document needs chunking, not before: a run that finds every document unchanged loads no
    # model (the fingerprint that tells is the one the store remembers for these settings)
    key = settings_key(chunker_config_from_args(args, encoder=encoder), encoder.name)
    chunker = LazyChunker(lambda: chunker_from_args(args, encoder=encoder),  # progress: ingest's own bars
                          key, store.maintenance.fingerprint(key) if store is not None and known.records else None)
    with server_errors(args):
        if store is None:
            store = HierarchicalStore(args.collection, client=chroma, encoder=encoder)
        else:
            store.use_encoder(encoder)
        ray = None
        if args.ray is not None:
            def ray(batch: list[Any]) -> Any:
                return index_with_ray(args, batch, chunker.chunker, args.encoder or recorded, report)
        ingest_started = time.perf_counter()
        try:
            summary = ingest.index_paths(
                found, store, chunker, anchor=id_anchor(args), batch_docs=args.batch_docs, force=args.force,
                prune=args.prune, progress=not args.quiet, report=report, note=None if args.quiet else report_line,
                # before the first write, after the check that the store was not moved away from its
                # documents: a run cut short is finished by a plain re-run with these options
                before_writing=lambda: store.maintenance.remember(chunk_options=options),
                run=ray, db=str(args.db))
        except ingest.IngestInterrupted as exc:
            done = exc.summary
            report_line(f"hseg index: interrupted after {done.documents} documents were indexed completely in "
                        f"this run ({done.unchanged} unchanged); every stored document is whole: re-run the same "
                        "command to index the rest")
            return 130
        except ingest.IngestWriteError as exc:
            from hseg.store.connection import LexicalIndexStorageError, disk_trouble

            if isinstance(exc.__cause__, LexicalIndexStorageError):  # the folder beside the database, not its disk
                raise CliError(f"{exc.__cause__}; then re-run the same command ({exc.written} documents are "
                               "written whole)") from exc
            trouble = None if args.host is not None else disk_trouble(str(args.db), exc.__cause__ or exc)
            if trouble is None:
                raise
            fix = "make it writable first" if trouble == "read-only" else "free space first"
            raise CliError(f"{exc}. The disk of {args.db} is {trouble}: {fix}") from exc
    timing = seconds_breakdown(time.perf_counter() - started, summary.seconds, encoder, ingest_started)
    _print_summary(args, summary, chunking_note(known.chunk_options, given, options), timing)
    return 1 if summary.failures else 0


def seconds_breakdown(total: float, seconds: dict[str, float], encoder: Any, ingest_started: float) -> str:
    """The summary's seconds: the run's, the model's load apart (with its one-time ONNX export, when this run
    made it), then reading, chunking (less a load that happened inside it) and writing.

    Example:
        >>> seconds_breakdown(30.0, {"reading": 0.5, "chunking": 9.0, "writing": 0.4}, None, 0.0)
        '30.0 (reading 0.5, chunking 9.0, writing 0.4)'
    """
    chunking, parts = seconds["chunking"], []
    load = getattr(encoder, "load_seconds", None)
    if load is not None:
        export = getattr(encoder.loaded, "export_seconds", None)
        parts.append(f"model {load:.1f}" + (f", of which a one-time ONNX export {export:.1f};" if export else ","))
        if encoder.loaded_at >= ingest_started:  # loaded by the first chunking: counted there too
            chunking = max(0.0, chunking - load)
    parts.append(f"reading {seconds['reading']:.1f}, chunking {chunking:.1f}, writing {seconds['writing']:.1f}")
    return f"{total:.1f} ({' '.join(parts)})"


def _print_summary(args: argparse.Namespace, summary: Any, note: str | None, timing: str) -> None:
    """The lines ``hseg index`` prints of an :class:`hseg.ingest.IndexSummary`."""
    extra = [f"{summary.unchanged} unchanged (skipped)"] + ([f"{summary.empty} empty"] if summary.empty else []) \
        + [f"{summary.failures} failed"]
    print(f"documents  {summary.documents} indexed, {', '.join(extra)}")
    if summary.skipped:
        from hseg.convert import INSTALL_HINT

        kinds = sorted({Path(d).suffix.lower() or d for d, _ in summary.skipped})
        print(f"skipped    {len(summary.skipped)} {'/'.join(kinds)} file{'s' if len(summary.skipped) != 1 else ''}: "
              f"their format needs the formats extra ({INSTALL_HINT})")
    unsupported = summary.unsupported_line()
    if unsupported:
        print(f"left out   {unsupported} in the folders (formats hseg does not read)")
    if summary.same_text:
        doc_id, others = next(iter(summary.same_text.items()))
        n = len(summary.same_text)
        print(f"same text  {n} document{'s' if n != 1 else ''} written whose text is also stored under another id "
              f"({doc_id!r} and {others[0]!r}); both are searched")
    if summary.pruned is not None:
        print("pruned     1 document whose file is gone" if len(summary.pruned) == 1 else
              f"pruned     {len(summary.pruned)} documents whose files are gone")
    gone = summary.gone
    if gone:
        held = "1 stored document has" if len(gone) == 1 else f"{len(gone)} stored documents have"
        print(f"gone       {held} no file any more under the PATHs ({_some(gone)}) and still answer queries: "
              "re-run with --prune to remove them")
    if note:
        print(f"chunking   {note}")
    print(f"segments   {summary.segments}")
    print(f"clusters   {summary.clusters}")
    print(f"vectors    {summary.vectors} written; collection {args.collection!r} at {location_label(args)} "
          f"holds {summary.total}")
    if summary.documents and args.host is None:  # ids like '../book/ch1.md' puzzle without it
        print(f"sources    paths relative to {id_anchor(args)}, the folder that holds --db (so a file keeps its id "
              "from any working directory)")
    print(f"seconds    {timing}")


def _some(ids: list[str], shown: int = 3) -> str:
    return ", ".join(ids[:shown]) + (f", ... {len(ids) - shown} more" if len(ids) > shown else "")


def _flags(options: dict[str, Any]) -> str:
    return " ".join(f"--{name.replace('_', '-')} {value}" for name, value in options.items())


def chunking_note(remembered: dict[str, Any] | None, given: dict[str, Any], options: dict[str, Any]) -> str | None:
    """What the summary says of the chunk options: those given that differ from what the store remembered
    (its documents are chunked again), else those taken from it; ``None`` when there is nothing to say.

    Example:
        >>> chunking_note({"target_tokens": 128}, {"target_tokens": 512}, {"target_tokens": 512})[:44]
        '--target-tokens 512, was --target-tokens 128'
    """
    if remembered is None:  # a new store, or one written before hseg remembered options
        return None
    changed = [n for n in CHUNK_OPTIONS if options.get(n) != remembered.get(n)]
    if changed:
        now = _flags({n: options[n] for n in changed if options.get(n) is not None}) or "the defaults"
        before = _flags({n: remembered[n] for n in changed if remembered.get(n) is not None}) or "the defaults"
        return (f"{now}, was {before} (remembered by the store): documents chunked the old way are chunked again, "
                "and later runs use the new options")
    taken = {n: v for n, v in options.items() if n not in given}
    if taken:
        return f"{_flags(taken)}, remembered by the store from an earlier run (give an option to change it)"
    return None
