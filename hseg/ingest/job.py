"""The whole ``hseg index`` job as one library call: :func:`index_paths` indexes files and folders into a store.

How and why: docs/design.md, ``hseg.ingest.job``.

Example:
    >>> from hseg.ingest import index_paths
    >>> from hseg.store import HierarchicalStore
    >>> store = HierarchicalStore("docs", path="./hseg-db")  # doctest: +SKIP
    >>> summary = index_paths(["reports/", "notes/*.md"], store)  # doctest: +SKIP
    >>> summary.documents, summary.unsupported, summary.failed  # doctest: +SKIP
    (12, {'.xlsx': 3}, [])
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hseg.ingest.files import SourceFile, discover
from hseg.ingest.prune import prune as prune_gone
from hseg.ingest.prune import stale_documents
from hseg.ingest.run import IngestSummary, ingest

if TYPE_CHECKING:  # annotations only
    from hseg.chunking.chunker import HierarchicalChunker
    from hseg.ingest.lazy import LazyChunker
    from hseg.store.store import HierarchicalStore


@dataclass(frozen=True)
class Found:
    """What :func:`find` found under ``paths``: the ``files`` to index, ``problems`` (``(argument,
    message)`` for an argument that names nothing usable) and ``unsupported`` (``{suffix: count}`` of
    the files folders and patterns hold in formats hseg does not read)."""

    paths: tuple[str, ...]
    files: tuple[SourceFile, ...]
    problems: tuple[tuple[str, str], ...] = ()
    unsupported: dict[str, int] = field(default_factory=dict)


def find(paths: Sequence[str | os.PathLike[str]], *, anchor: str | os.PathLike[str] | None = ".") -> Found:
    """The files ``paths`` name (files, folders searched recursively, glob patterns), ids relative to
    ``anchor`` (:func:`hseg.ingest.files.doc_id_for`).

    Example:
        >>> found = find(["docs/"])  # doctest: +SKIP
        >>> [f.doc_id for f in found.files], found.unsupported  # doctest: +SKIP
        (['docs/guide.md', 'docs/manual.pdf'], {'.png': 2})
    """
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise ValueError(f"paths must be a list of paths, got the single {type(paths).__name__} {paths!r:.80}; "
                         "wrap it in a list")
    args = tuple(os.fspath(p) for p in paths)
    skipped: Counter[str] = Counter()
    files, problems = discover(args, anchor=anchor, skipped=skipped)
    return Found(args, tuple(files), tuple(problems), dict(sorted(skipped.items())))


@dataclass
class IndexSummary(IngestSummary):
    """What :func:`index_paths` did: the counts of :class:`~hseg.ingest.run.IngestSummary` and the rest.

    ``problems``: arguments that named nothing usable; ``unsupported``: ``{suffix: count}`` of files left
    out because hseg does not read their format; ``pruned``: the document ids removed (``None`` without
    ``prune``); ``gone``: without ``prune``, the stored documents under the paths whose files are gone;
    ``total``: the records the collection holds afterwards; ``elapsed``: the job's seconds.
    """

    problems: list[tuple[str, str]] = field(default_factory=list)
    unsupported: dict[str, int] = field(default_factory=dict)
    pruned: list[str] | None = None
    gone: list[str] = field(default_factory=list)
    total: int = 0
    elapsed: float = 0.0

    @property
    def failures(self) -> int:
        """Files that failed and arguments that named nothing: ``hseg index`` exits 1 when there are any."""
        return len(self.failed) + len(self.problems)

    def unsupported_line(self) -> str | None:
        """``"3 .xlsx files, 1 .png file"``, or ``None`` when every file found was read.

        Example:
            >>> IndexSummary(unsupported={".xlsx": 3, ".png": 1}).unsupported_line()
            '3 .xlsx files, 1 .png file'
        """
        if not self.unsupported:
            return None
        return ", ".join(f"{n} {suffix} file{'s' if n != 1 else ''}" for suffix, n in self.unsupported.items())


def index_paths(
    paths: Sequence[str | os.PathLike[str]] | Found,
    store: HierarchicalStore,
    chunker: HierarchicalChunker | LazyChunker | None = None,
    *,
    anchor: str | os.PathLike[str] | None = ".",
    batch_docs: int = 32,
    force: bool = False,
    prune: bool = False,
    progress: bool = True,
    report: Callable[[str], None] | None = None,
    note: Callable[[str], None] | None = None,
    before_writing: Callable[[], None] | None = None,
    run: Callable[[list[SourceFile]], IngestSummary] | None = None,
    db: str | None = None,
) -> IndexSummary:
    """Index the files ``paths`` name into ``store``; returns what it did.

    ``paths`` are files (read whatever their suffix), folders (searched recursively) and glob patterns
    (``**`` allowed), or what :func:`find` found; folders and patterns take ``.txt``, ``.md``,
    ``.markdown``, ``.pdf``, ``.docx``, ``.pptx`` and ``.html``/``.htm``. A document's id and ``source``
    are its path relative to ``anchor`` (absolute with ``anchor=None``). Documents stored with the same
    text and chunk settings are skipped (``force=True`` chunks them again). With ``prune=True``, the
    stored documents under ``paths`` whose files are gone are removed; without, they are counted in
    ``gone``. ``chunker`` defaults to a :class:`~hseg.chunking.chunker.HierarchicalChunker` on the
    store's encoder, built only when a document needs chunking.

    Nothing is raised for a file that cannot be read or chunked: it is passed to ``report`` (one line)
    and counted in ``failed``; a file whose format needs the ``formats`` extra while it is missing is
    counted in ``skipped``, and ``report`` is told the install command once. ``note`` is told what is
    not an error (each document pruned). ``progress`` shows bars on a terminal and lines on the
    ``hseg.progress`` logger. The job holds the store's writer lock
    (:meth:`~hseg.store.HierarchicalStore.writing`) throughout. A store whose stored ids are relative
    to another folder than ``anchor`` (copied to another depth) is refused before any write
    (:class:`~hseg.errors.StoreMovedError`); ``before_writing()`` is called after that check, under the
    lock, before the first write (``hseg index`` has the store remember its chunk options there, so that
    a run cut short is finished by a plain re-run). ``run(files)`` replaces the in-process ingestion (the
    ``hseg index --ray`` job passes a Ray Data one). ``db`` names the store in messages (default: its
    collection's name).

    Raises ``ValueError`` when ``paths`` name no file to index and ``prune`` is not set.

    Example:
        >>> summary = index_paths(["manuals/"], store, prune=True)  # doctest: +SKIP
        >>> summary.documents, summary.unchanged, summary.pruned  # doctest: +SKIP
        (3, 9, ['manuals/old.pdf'])
    """
    start = time.perf_counter()
    found = paths if isinstance(paths, Found) else find(paths, anchor=anchor)
    if report is not None and not isinstance(paths, Found):  # a Found's caller has reported its problems
        for arg, message in found.problems:
            report(f"{arg}: {message}")
    if not found.files and not prune:
        raise ValueError(f"paths {list(found.paths)!r:.200} name no file to index (text, markdown, PDF, DOCX, PPTX "
                         "or HTML); give files or folders that hold some")
    files = list(found.files)
    if chunker is None:
        from hseg.chunking.chunker import HierarchicalChunker
        from hseg.ingest.lazy import LazyChunker

        chunker = LazyChunker(lambda: HierarchicalChunker(encoder=store.encoder))
    with store.writing():
        if anchor is not None and files and store.count():
            from hseg.ingest.relocation import check_not_moved

            check_not_moved(store, files, anchor, db or f"collection {store.collection.name!r}")
        if before_writing is not None:
            before_writing()
        if run is not None:
            done = run(files)
        else:
            done = ingest(files, chunker, store, batch_docs=batch_docs, force=force, progress=progress,
                          report=report)
        _remember_fingerprint(store, chunker)
        ids = [f.doc_id for f in files]
        pruned: list[str] | None = None
        gone: list[str] = []
        if prune:
            pruned = prune_gone(store, found.paths, ids, anchor=anchor,
                                report=None if note is None else lambda d: note(f"pruned {d}: its file is gone"))
        else:
            gone = stale_documents(store, found.paths, ids, anchor)
        total = store.count()
    summary = IndexSummary(problems=list(found.problems), unsupported=dict(found.unsupported), pruned=pruned,
                           gone=gone, total=total)
    summary.merge(done)
    summary.elapsed = time.perf_counter() - start
    return summary


def _remember_fingerprint(store: HierarchicalStore, chunker: Any) -> None:
    """A chunker built under a settings key: the store remembers its fingerprint, so a later run with the
    same settings that finds nothing to chunk builds none (:mod:`hseg.ingest.lazy`)."""
    key = getattr(chunker, "key", None)
    if key is not None and getattr(chunker, "built", False):
        from hseg.ingest.fingerprint import chunk_settings

        store.maintenance.remember(fingerprint=(key, chunk_settings(chunker.chunker)))
