"""The batch loop of ingestion into a :class:`hseg.store.HierarchicalStore` (the ``hseg index`` job).

How and why: docs/design.md, ``hseg.ingest.run``.

Example:
    >>> files, problems = discover(["docs/", "notes/*.md"])  # doctest: +SKIP
    >>> summary = ingest(files, HierarchicalChunker(), HierarchicalStore(path="db"))  # doctest: +SKIP
    >>> summary.documents, summary.vectors  # doctest: +SKIP
    (12, 431)
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hseg.chunking.schema import CONTENT_HASH_KEY, SETTINGS_KEY, content_sha256
from hseg.errors import EncoderLoadError, FormatSupportMissing, IngestWriteError
from hseg.ingest.files import SourceFile, read_sources
from hseg.ingest.fingerprint import chunk_settings
from hseg.progress import Progress
from hseg.store.maintenance import Expected, Incomplete

if TYPE_CHECKING:  # annotations only
    from hseg.chunking.chunker import HierarchicalChunker
    from hseg.chunking.chunks import Chunking
    from hseg.ingest.lazy import LazyChunker
    from hseg.store.store import HierarchicalStore
    from hseg.text.provenance import SourceMap


logger = logging.getLogger(__name__)


@dataclass
class IngestSummary:
    """What :func:`ingest` did. ``failed`` and ``skipped`` hold ``(doc id, message)`` pairs."""

    documents: int = 0  #: documents chunked and written
    unchanged: int = 0  #: skipped: already stored with the same content and settings
    empty: int = 0  #: blank texts: nothing stored (counted in documents only when older records were removed)
    failed: list[tuple[str, str]] = field(default_factory=list)
    #: files of a format whose converter library is not installed (the message names the install command)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    segments: int = 0
    clusters: int = 0
    vectors: int = 0  #: records written (one per segment and one per cluster)
    #: ``{doc id: other ids}``: documents written whose text the store also holds under other ids
    same_text: dict[str, list[str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=lambda: {"reading": 0.0, "chunking": 0.0, "writing": 0.0})

    def merge(self, other: IngestSummary) -> IngestSummary:
        """Add ``other``'s counts, failures and seconds to this summary; returns this summary.

        Example:
            >>> IngestSummary(documents=2).merge(IngestSummary(documents=1, unchanged=3)).documents
            3
        """
        for name in ("documents", "unchanged", "empty", "segments", "clusters", "vectors"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failed.extend(other.failed)
        self.skipped.extend(other.skipped)
        self.same_text.update(other.same_text)
        for stage, seconds in other.seconds.items():
            self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds
        return self


class IngestInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGINT) during :func:`ingest`; ``summary`` is what the run had completed by then.

    Every document counted there is stored whole; the batch in progress is whole or absent (see
    :meth:`hseg.store.HierarchicalStore.add`), so running the same ingestion again finishes the rest.
    """

    def __init__(self, summary: IngestSummary) -> None:
        super().__init__("interrupted")
        self.summary = summary


def _batches(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


#: the progress stages of documents that are not written, and the bars they pass: ``"skipped"`` before
#: chunking (unchanged, empty, unreadable, or their chunking failed), ``"refused"`` by the store's write
_PASSES = {"skipped": ("chunking", "writing"), "refused": ("writing",)}


def ingest(
    files: Sequence[SourceFile],
    chunker: HierarchicalChunker | LazyChunker,
    store: HierarchicalStore,
    *,
    batch_docs: int = 32,
    force: bool = False,
    progress: bool = False,
    report: Callable[[str], None] | None = None,
) -> IngestSummary:
    """Read, chunk and write ``files`` in batches of ``batch_docs`` documents.

    A PDF, DOCX, PPTX or HTML file is converted (:func:`hseg.ingest.files.read_source`), its page map
    stored with its chunks. A file that cannot be read (binary, undecodable, unreadable) or chunked is
    passed to ``report`` with its name and counted in ``summary.failed``; one whose format's library is
    not installed is counted in ``summary.skipped``, and ``report`` is told once per missing library
    with the install command. The rest go on. A batch is written only after
    all of its chunking succeeded. Each batch goes through :func:`ingest_batch`.

    Args:
        files: the files to index (:func:`hseg.ingest.files.discover`).
        chunker: the chunker (a :class:`~hseg.ingest.lazy.LazyChunker` is built only if a document
            needs chunking).
        store: the store written to.
        batch_docs: documents read, chunked and written together.
        force: re-chunk documents already stored unchanged.
        progress: tqdm bars per stage (only when stderr is a terminal).
        report: called with one line per file that failed or was skipped, naming it.

    Returns:
        What was done: documents indexed, unchanged, empty, failed and skipped, and seconds per stage.

    Raises:
        ValueError: ``batch_docs`` below 1.
        IngestWriteError: a write failed (what was written before stays complete; a re-run completes
            the rest).
        IngestInterrupted: Ctrl-C; it carries the summary of what was done until then.
    """
    from tqdm.auto import tqdm

    if batch_docs < 1:
        raise ValueError(f"batch_docs must be >= 1, got {batch_docs!r}")
    summary = IngestSummary()
    # disable=None: bars only when stderr is a terminal (no carriage-return noise in logs)
    bars = {name: tqdm(total=len(files), desc=f"{name:<8}", unit="doc", position=i,
                       disable=None if progress else True, dynamic_ncols=True, leave=True)
            for i, name in enumerate(("reading", "chunking", "writing"))}
    # and, with or without a terminal, a line on hseg.progress every few seconds of a long run
    note, counts = Progress(), dict.fromkeys([*bars, "skipped"], 0)
    line = "documents: %d read, %d chunked, %d written, %d skipped (unchanged, empty or failed) of %d"

    def tick(stage: str, n: int) -> None:
        # a skipped document passes the stages still ahead of it: the bars reach their totals, while the
        # counts say what was done, as the summary will
        for name in _PASSES.get(stage, (stage,)):
            bars[name].update(n)
            if bars[name].n >= bars[name].total:
                bar_done(name)
        counts["skipped" if stage in _PASSES else stage] += n
        note.note(line, *counts.values(), len(files))

    def bar_done(name: str) -> None:
        # closed when its stage is done, so its time stops there and not when the run ends
        bars[name].close()

    def problem(doc_id: str, message: str) -> None:
        summary.failed.append((doc_id, message))
        if report is not None:
            report(f"{doc_id}: {message}")

    def missing(doc_id: str, exc: FormatSupportMissing) -> None:
        if report is not None and not any(m == str(exc) for _, m in summary.skipped):
            report(f"{doc_id}: skipped, and every other such file: {exc}")
        summary.skipped.append((doc_id, str(exc)))

    settings = chunk_settings(chunker)
    try:
        for batch in _batches(files, batch_docs):
            t0 = time.perf_counter()
            docs = read_sources(batch, problem, on_read=lambda: tick("reading", 1), missing=missing)
            texts = {d: doc.text for d, doc in docs.items()}
            maps = {d: doc.pages for d, doc in docs.items() if doc.pages is not None}
            summary.seconds["reading"] += time.perf_counter() - t0
            tick("skipped", len(batch) - len(texts))  # unreadable: nothing left to do for them
            try:
                done = ingest_batch(texts, chunker, store, settings=settings, force=force, report=report,
                                    progress=tick, source_maps=maps)
            except IngestWriteError as exc:
                total = summary.documents + exc.written
                raise IngestWriteError(f"{exc}; with the {summary.documents} of earlier batches, at least {total} "
                                       "documents are written; re-run the same command to complete the rest",
                                       written=total, unsure=exc.unsure) from exc.__cause__
            summary.merge(done)
        note.finish(line, *counts.values(), len(files))
    except KeyboardInterrupt as exc:
        if isinstance(exc, IngestInterrupted):
            raise
        raise IngestInterrupted(summary) from None
    finally:
        for bar in bars.values():
            bar.close()
    return summary


def ingest_batch(
    texts: Mapping[str, str],
    chunker: HierarchicalChunker | LazyChunker,
    store: HierarchicalStore,
    *,
    settings: str | None = None,
    metadata: Mapping[str, Mapping[str, Any]] | None = None,
    force: bool = False,
    report: Callable[[str], None] | None = None,
    progress: Callable[[str, int], None] | None = None,
    source_maps: Mapping[str, SourceMap] | None = None,
) -> IngestSummary:
    """Skip, chunk and write one batch of documents (``{doc id: text}``); returns what it did.

    The one step behind :func:`ingest` and the workers of :func:`hseg.ingest.ray.index_dataset`.
    A document whose stored records are complete and came from the same text and ``settings``
    (:meth:`store.maintenance.incomplete <hseg.store.maintenance.Maintenance.incomplete>`; default
    :func:`chunk_settings` of ``chunker``) is counted ``unchanged``
    unless ``force``. The rest are chunked together and written together, only after the whole
    batch's chunking succeeded, so a document is never half-chunked in the store. Every record
    carries ``source`` (default: the document id), ``content_sha256`` and ``chunk_settings``, next
    to the document's entry of ``metadata``. A document that cannot be chunked, or that the store
    refuses, is passed to ``report`` and counted in ``failed``. Another write failure (a server
    gone away) raises :class:`IngestWriteError`: documents of the batch may be partly written, and
    a re-run redoes them. ``source_maps`` gives the page map of the documents that have one (a
    converted PDF or PPTX); their chunks carry their pages.
    ``progress(stage, n)`` is told as ``n`` documents pass the stage
    ``"chunking"`` or ``"writing"``, or are ``"skipped"`` (unchanged, empty, or their chunking failed) or
    ``"refused"`` (by the store's write). ``seconds["reading"]`` is the look-up of what is stored.

    Args:
        texts: the batch, ``{doc id: text}``.
        chunker: the chunker.
        store: the store written to.
        settings: the settings fingerprint the records carry and unchanged documents are compared by
            (default: :func:`chunk_settings` of ``chunker``).
        metadata: ``{doc id: metadata}`` stored with each document's records.
        force: re-chunk documents already stored unchanged.
        report: called with one line per document that could not be chunked or was refused.
        progress: called as ``progress(stage, n)`` as documents pass a stage.
        source_maps: ``{doc id: page map}`` of the documents that have one.

    Returns:
        What was done with the batch.

    Raises:
        IngestWriteError: a write failed other than by the store refusing a document (a server gone
            away); documents of the batch may be partly written, and a re-run redoes them.

    Example:
        >>> done = ingest_batch({"a.md": "Some text. More text."}, chunker, store)  # doctest: +SKIP
        >>> done.documents, done.unchanged  # doctest: +SKIP
        (1, 0)
    """
    summary = IngestSummary()
    tick = progress if progress is not None else (lambda stage, n: None)

    def problem(doc_id: str, message: str) -> None:
        summary.failed.append((doc_id, message))
        if report is not None:
            report(f"{doc_id}: {message}")

    settings = chunk_settings(chunker) if settings is None else settings
    t0 = time.perf_counter()
    shas = {d: content_sha256(t) for d, t in texts.items()}
    # the one question to the store; its answer also holds what the write below replaces
    stored = store.maintenance.incomplete({d: Expected(shas[d], settings, len(t)) for d, t in texts.items()},
                                          force=force)
    redo = set(stored.doc_ids)
    todo = {d: t for d, t in texts.items() if d in redo}
    summary.unchanged = len(texts) - len(todo)
    # a blank file has nothing to store: counted as empty, never as indexed, unless the store still
    # holds records of its earlier text, which the write below removes
    for d in [d for d, t in todo.items() if not t.strip() and not stored.holds(d)]:
        del todo[d]
        summary.empty += 1
    t1 = time.perf_counter()
    summary.seconds["reading"] += t1 - t0
    tick("skipped", len(texts) - len(todo))
    chunkings = _chunk_batch(chunker, todo, problem, source_maps or {})
    tick("chunking", len(chunkings))
    tick("skipped", len(todo) - len(chunkings))  # chunking failed: reported, not written
    t2 = time.perf_counter()
    summary.seconds["chunking"] += t2 - t1
    extra = metadata or {}
    metas = [{"source": c.doc_id, **extra.get(c.doc_id, {}), CONTENT_HASH_KEY: shas[c.doc_id],
              SETTINGS_KEY: settings} for c in chunkings]
    written: set[str] = set()  # documents whose records are stored, told by the store as it writes
    chunked = len(chunkings)
    try:
        summary.vectors, chunkings = _write_batch(store, chunkings, metas, problem, written.update, stored,
                                                  summary.same_text.update)
    except Exception as exc:
        n, k = len(chunkings), len(written)
        raise IngestWriteError(f"writing a batch of {n} documents failed ({type(exc).__name__}: {exc}); {k} of them "
                               f"were written before the failure, and the other {n - k} may be written too, wholly or "
                               "in part (Chroma can fail after taking a write)", written=k, unsure=n - k) from exc
    tick("writing", len(chunkings))
    tick("refused", chunked - len(chunkings))  # reported by _write_batch
    summary.seconds["writing"] += time.perf_counter() - t2
    for c in chunkings:
        summary.documents += 1
        summary.empty += not c.clusters
        summary.segments += len(c.segments)
        summary.clusters += len(c.clusters)
    return summary


def _write_batch(
    store: HierarchicalStore, chunkings: list[Chunking], metas: list[dict[str, Any]],
    problem: Callable[[str, str], None], on_written: Callable[[list[str]], None] | None = None,
    stored: Incomplete | None = None, on_same_text: Callable[[dict[str, list[str]]], None] | None = None,
) -> tuple[int, list[Chunking]]:
    """Write a batch; if the store refuses it (a bad vector or metadata: ``ValueError``, raised
    before anything is written), write the documents one by one and skip only those refused.
    Other errors (a server gone away) propagate: the run cannot go on. ``on_written`` and ``stored``
    (what the store answered when asked what is incomplete) and ``on_same_text`` are passed on to the
    store's ``add``."""
    if not chunkings:
        return 0, []
    try:
        return _add(store, chunkings, metas, on_written, stored, on_same_text), chunkings
    except ValueError:
        if len(chunkings) == 1:
            raise
    vectors, written = 0, []
    for chunking, meta in zip(chunkings, metas):
        try:
            vectors += _add(store, [chunking], [meta], on_written, stored, on_same_text)
        except ValueError as exc:
            problem(chunking.doc_id, f"not written: {exc}")
            continue
        written.append(chunking)
    return vectors, written


#: seconds to wait before each further try of a write Chroma failed internally
WRITE_RETRY_DELAYS = (0.5, 2.0)


def _add(store: HierarchicalStore, chunkings: list[Chunking], metas: list[dict[str, Any]],
         on_written: Callable[[list[str]], None] | None = None, stored: Incomplete | None = None,
         on_same_text: Callable[[dict[str, list[str]]], None] | None = None) -> int:
    """``store.add``, tried again after Chroma's ``InternalError``: a server sometimes fails a read
    of a collection another writer is flushing for the first time ("Error creating hnsw segment
    reader: Nothing found on disk", seen with two Ray workers writing to one new collection). An
    add replaces its documents' records, so a second try of a partial write completes it."""
    from chromadb.errors import InternalError

    # passed only when asked for, so that any object with add(chunkings, metadatas) still serves
    kwargs: dict[str, Any] = {} if on_written is None else {"on_written": on_written}
    if stored is not None:
        kwargs["stored"] = stored
    if on_same_text is not None:
        kwargs["on_same_text"] = on_same_text
    for delay in WRITE_RETRY_DELAYS:
        try:
            return int(store.add(chunkings, metas, **kwargs))
        except InternalError as exc:
            logger.warning("writing %d documents failed inside Chroma (%s); trying again in %g s",
                           len(chunkings), exc, delay)
            time.sleep(delay)
    return int(store.add(chunkings, metas, **kwargs))


def _chunk_batch(chunker: HierarchicalChunker | LazyChunker, texts: Mapping[str, str],
                 problem: Callable[[str, str], None], source_maps: Mapping[str, SourceMap]) -> list[Chunking]:
    """Chunk a batch together; if that fails, one by one to find (and skip) the documents at fault."""
    ids = list(texts)
    if not ids:
        return []

    def chunk(doc_ids: list[str]) -> list[Chunking]:
        if not any(d in source_maps for d in doc_ids):  # any chunker with chunk_many(texts, ids) serves
            return list(chunker.chunk_many([texts[d] for d in doc_ids], doc_ids))
        return list(chunker.chunk_many([texts[d] for d in doc_ids], doc_ids,
                                       source_maps=[source_maps.get(d) for d in doc_ids]))

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"document .* is blank")  # counted as empty instead
        try:
            return chunk(ids)
        except EncoderLoadError:
            raise  # not a fault of these documents: no document can be chunked
        except Exception as exc:
            if len(ids) == 1:
                problem(ids[0], f"chunking failed ({type(exc).__name__}: {exc})")
                return []
        out: list[Chunking] = []
        for d in ids:
            try:
                out += chunk([d])
            except Exception as exc:
                problem(d, f"chunking failed ({type(exc).__name__}: {exc})")
        return out


# --------------------------------------------------------------------------- pruning


