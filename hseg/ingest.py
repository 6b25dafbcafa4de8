"""Batch ingestion of text files into a :class:`hseg.store.HierarchicalStore` (the ``hseg index`` job).

- :func:`discover` turns files, folders (recursive) and glob patterns into :class:`SourceFile` s
  whose document id is the path relative to the current directory (stable across runs).
- :func:`ingest` reads, chunks and writes them in batches of documents. A file that cannot be read
  or chunked is reported and skipped; a batch's records are written only after the chunking of the
  whole batch succeeded, so a document is never half-chunked in the store. :func:`ingest_batch` is
  that step for one batch of texts; the Ray workers of :mod:`hseg.distributed` run it too.
- :func:`prune` removes stored documents whose files under the indexed paths are gone (deleted or
  renamed), so their text stops being found; other documents are never touched.
- Every record carries ``source``, ``content_sha256`` (of the text) and ``chunk_settings`` (hseg
  version, encoder, tokenizer, segmenter and its configuration, sizes) as user metadata; a document
  whose stored records are complete and carry the same hash and settings is skipped, so re-running
  after a crash only does the rest, and an upgrade or another setting re-chunks.

Example:
    >>> files, problems = discover(["docs/", "notes/*.md"])  # doctest: +SKIP
    >>> summary = ingest(files, HierarchicalChunker(), HierarchicalStore(path="db"))  # doctest: +SKIP
    >>> summary.documents, summary.vectors  # doctest: +SKIP
    (12, 431)
"""

from __future__ import annotations

import dataclasses
import fnmatch
import glob
import hashlib
import json
import logging
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SUPPORTED_SUFFIXES", "SourceFile", "IngestSummary", "IngestWriteError", "discover", "read_text_file",
           "read_files", "load_encoder", "LazyEncoder", "chunk_settings", "token_counter_name", "segmenter_config",
           "is_complete", "ingest", "ingest_batch", "prune_scope", "stored_sources", "stale_documents", "prune"]

SUPPORTED_SUFFIXES = (".txt", ".md", ".markdown")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceFile:
    """A file to index; ``doc_id`` is its path relative to the current directory (POSIX form)."""

    path: Path
    doc_id: str


@dataclass
class IngestSummary:
    """What :func:`ingest` did. ``failed`` holds ``(doc id, message)`` pairs."""

    documents: int = 0  #: documents chunked and written
    unchanged: int = 0  #: skipped: already stored with the same content and settings
    empty: int = 0  #: written with no records (blank text)
    failed: list[tuple[str, str]] = field(default_factory=list)
    segments: int = 0
    clusters: int = 0
    vectors: int = 0  #: records written (one per segment and one per cluster)
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
        for stage, seconds in other.seconds.items():
            self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds
        return self


class IngestWriteError(RuntimeError):
    """Writing a batch to the store failed; earlier batches are complete, this one may be partial."""


def _doc_id(path: Path) -> str:
    return Path(os.path.relpath(os.path.abspath(path))).as_posix()


def discover(
    paths: Iterable[str], suffixes: Sequence[str] = SUPPORTED_SUFFIXES
) -> tuple[list[SourceFile], list[tuple[str, str]]]:
    """Files to index and ``(argument, problem)`` pairs for arguments that name nothing usable.

    A file named explicitly is taken whatever its suffix; folders (recursively, skipping hidden
    entries) and glob patterns (``**`` allowed) contribute files with one of ``suffixes``. The
    result is sorted by document id, without duplicates.
    """
    found: dict[str, SourceFile] = {}
    problems: list[tuple[str, str]] = []

    def add(path: Path) -> None:
        doc_id = _doc_id(path)
        found.setdefault(doc_id, SourceFile(path, doc_id))

    def walk(folder: Path) -> int:
        n = 0
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if not name.startswith(".") and name.lower().endswith(tuple(suffixes)):
                    add(Path(root) / name)
                    n += 1
        return n

    for arg in paths:
        path = Path(arg)
        if path.is_file():
            add(path)
        elif path.is_dir():
            if walk(path) == 0:
                problems.append((arg, f"no {'/'.join(suffixes)} files in this folder"))
        elif any(ch in arg for ch in "*?["):
            n = 0
            for match in sorted(glob.glob(arg, recursive=True)):
                m = Path(match)
                if m.is_dir():
                    n += walk(m)
                elif m.is_file() and m.name.lower().endswith(tuple(suffixes)):
                    add(m)
                    n += 1
            if n == 0:
                problems.append((arg, f"the pattern matches no {'/'.join(suffixes)} files"))
        elif path.exists():
            problems.append((arg, "not a regular file or folder"))
        else:
            problems.append((arg, "no such file or folder"))
    return [found[k] for k in sorted(found)], problems


def read_text_file(path: Path) -> str:
    """The file as UTF-8 text; ``ValueError`` for binary or undecodable content, ``OSError`` if unreadable."""
    data = Path(path).read_bytes()
    if b"\x00" in data[:8192]:
        raise ValueError("looks like a binary file (NUL bytes), expected UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 text (byte {exc.start})") from None


def read_files(files: Iterable[SourceFile], problem: Callable[[str, str], None],
               on_read: Callable[[], None] | None = None) -> dict[str, str]:
    """``{doc id: text}`` of the files that read as UTF-8 text; each of the others is passed to
    ``problem(doc id, message)``. ``on_read()`` is called after each file, read or not."""
    texts: dict[str, str] = {}
    for f in files:
        try:
            texts[f.doc_id] = read_text_file(f.path)
        except OSError as exc:
            problem(f.doc_id, f"cannot read: {exc.strerror or exc}")
        except ValueError as exc:
            problem(f.doc_id, str(exc))
        if on_read is not None:
            on_read()
    return texts


def load_encoder(name: str | None = None, backend: str | None = None, threads: int | None = None) -> Any:
    """The sentence encoder for a model name (``None``: the default model) on ``backend``
    (``None``: the default backend), with ``threads`` for an ONNX session. The one factory the CLI uses."""
    from hseg.encoders import DEFAULT_BACKEND, as_encoder

    return as_encoder(name, backend=backend or DEFAULT_BACKEND, threads=threads)


class LazyEncoder:
    """An encoder that loads its model (through :func:`load_encoder`) on the first ``encode``.

    Its ``name`` is known without loading, so settings can be compared and unchanged documents
    skipped before paying for the model. ``on_load(name)`` is called just before loading;
    ``backend`` and ``threads`` go to :func:`load_encoder`.
    """

    def __init__(self, name: str | None = None, on_load: Callable[[str], None] | None = None,
                 backend: str | None = None, threads: int | None = None) -> None:
        from hseg.encoders import DEFAULT_MODEL, check_backend

        self._name = name or DEFAULT_MODEL
        self._backend = check_backend(backend) if backend is not None else None
        self._on_load = on_load
        self._threads = threads
        self._encoder: Any = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def loaded(self) -> Any:
        """The real encoder, loaded now if needed."""
        if self._encoder is None:
            if self._on_load is not None:
                self._on_load(self._name)
            self._encoder = load_encoder(self._name, self._backend, self._threads)
        return self._encoder

    def encode(self, texts: Sequence[str]) -> Any:
        return self.loaded.encode(texts)

    def encode_query(self, text: str) -> Any:
        return self.loaded.encode_query(text)

    @property
    def max_seq_length(self) -> int:
        return self.loaded.max_seq_length  # AttributeError when the model has none, like the model itself

    @property
    def dimension(self) -> int:
        return self.loaded.dimension

    def count_tokens(self, text: str) -> int:
        return self.loaded.count_tokens(text)


def chunk_settings(chunker: Any) -> str:
    """A fingerprint of what decides the chunks: changing any of it re-chunks stored documents.

    Deterministic JSON of the hseg version (an upgraded algorithm re-chunks), the encoder, the
    token counter, the segmenter's configuration (see :func:`segmenter_config`) and the sizes.
    """
    import hseg

    parts = {
        **chunker.config.to_dict(runtime=False),
        "hseg": hseg.__version__,
        # what the settings resolved to: the encoder's canonical name, the counter, the weights
        "encoder": getattr(chunker.encoder, "name", "?"),
        "tokenizer": token_counter_name(getattr(chunker, "count_tokens", None)),
        "segmenter": segmenter_config(chunker.segmenter),
    }
    return json.dumps(parts, sort_keys=True, separators=(",", ":"))


def token_counter_name(counter: Any) -> str | None:
    """What a chunker measures sizes in: ``tiktoken:<encoding>``, a counter's ``name``, or the
    callable's qualified name (the best a plain function offers)."""
    if counter is None:
        return None
    encoding = getattr(counter, "encoding", None)
    if isinstance(encoding, str):
        return f"tiktoken:{encoding}"
    name = getattr(counter, "name", None)
    if isinstance(name, str):
        return name
    target = counter if hasattr(counter, "__qualname__") else type(counter)
    return f"{getattr(target, '__module__', '?')}.{target.__qualname__}"


#: segmenter attributes read when present (TextTiling's and the BiLSTM's). Device, threads and the
#: like are left out on purpose: they change speed, not boundaries.
_SEGMENTER_PARAMS = ("threshold", "threshold_std", "window", "overlap", "min_sentences")


def segmenter_config(segmenter: Any) -> dict[str, Any]:
    """A segmenter's name and the settings that change its boundaries, as JSON-ready values.

    Read from public attributes (a segmenter need not describe itself): the init fields of a
    dataclass segmenter, the known parameters in ``_SEGMENTER_PARAMS``, ``weights_sha256`` of a
    trained ``model`` (its state dict, so the same weights from another path compare equal), and the
    ``fallback`` segmenter's own configuration.
    """
    config: dict[str, Any] = {"name": getattr(segmenter, "name", type(segmenter).__name__)}
    fields = [f.name for f in dataclasses.fields(segmenter) if f.init and not f.name.startswith("_")] \
        if dataclasses.is_dataclass(segmenter) else []
    for attr in (*fields, *_SEGMENTER_PARAMS):
        value = _json_scalar(getattr(segmenter, attr, None))
        if value is not None:
            config[attr] = value
    weights = _weights_sha256(getattr(segmenter, "model", None))
    if weights is not None:
        config["weights_sha256"] = weights
    fallback = getattr(segmenter, "fallback", None)
    if fallback is not None:
        config["fallback"] = segmenter_config(fallback)
    return config


def _json_scalar(value: Any) -> bool | int | float | str | None:
    """``value`` as a JSON scalar, or ``None`` for anything else (objects, tensors, callables)."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # a numpy/torch scalar
        return _json_scalar(value.item())
    return None


def _weights_sha256(model: Any) -> str | None:
    """SHA-256 over a torch module's state dict (names, dtypes, shapes and values), or ``None``."""
    state_dict = getattr(model, "state_dict", None)
    if not callable(state_dict):
        return None
    digest = hashlib.sha256()
    for key, tensor in sorted(state_dict().items()):
        tensor = tensor.detach().cpu().contiguous()
        try:
            array = tensor.numpy()
        except TypeError:  # a dtype numpy lacks (bfloat16): hash its float32 values
            array = tensor.float().numpy()
        digest.update(f"{key}|{array.dtype}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def is_complete(records: Mapping[str, dict[str, Any]], sha: str, settings: str, length: int,
                units: set[str] | None = None) -> bool:
    """True if a document's stored records (``{id: metadata}``) are all there and came from this text and settings.

    The cluster records must tile ``[0, length)`` and the segments they list must be exactly the
    segment records present, so a document left half-written by a killed process is not mistaken
    for a complete one. Nor is one still holding records of its previous version (a process killed
    between ``add``'s upserts and its deletes of the old records): they carry another hash or
    settings, or, from another chunking of the same text, a cluster that breaks the tiling or a
    segment no cluster lists. With ``units`` (the segment ids the store's unit index holds for the
    document), the index must hold exactly the document's segments: a process killed after the
    records but before their unit-index records leaves the document incomplete.
    """
    if not records or any(m.get("content_sha256") != sha or m.get("chunk_settings") != settings
                          for m in records.values()):
        return False
    clusters = sorted((m for m in records.values() if m.get("hseg_level") == "cluster"),
                      key=lambda m: m.get("hseg_cluster_index", -1))
    segments = {rid for rid, m in records.items() if m.get("hseg_level") == "segment"}
    pos, listed = 0, []
    for i, c in enumerate(clusters):
        if c.get("hseg_cluster_index") != i or c.get("hseg_start") != pos:
            return False
        end = c.get("hseg_end")
        if not isinstance(end, int):
            return False
        pos = end
        listed += json.loads(c.get("hseg_segment_ids") or "[]")
    return pos == length and len(listed) == len(segments) and set(listed) == segments and \
        (units is None or units == segments)


def _batches(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def ingest(
    files: Sequence[SourceFile],
    chunker: Any,
    store: Any,
    *,
    batch_docs: int = 32,
    force: bool = False,
    progress: bool = False,
    report: Callable[[str], None] | None = None,
) -> IngestSummary:
    """Read, chunk and write ``files`` in batches of ``batch_docs`` documents.

    A file that cannot be read (binary, undecodable, unreadable) or chunked is passed to ``report``
    with its name and counted in ``summary.failed``; the rest go on. A batch is written only after
    all of its chunking succeeded. ``force`` re-chunks documents already stored unchanged.
    A failing write raises :class:`IngestWriteError` (what was written before stays complete).
    Each batch goes through :func:`ingest_batch`.
    """
    from tqdm.auto import tqdm

    if batch_docs < 1:
        raise ValueError(f"batch_docs must be >= 1, got {batch_docs!r}")
    summary = IngestSummary()
    # disable=None: bars only when stderr is a terminal (no carriage-return noise in logs)
    bars = {name: tqdm(total=len(files), desc=f"{name:<8}", unit="doc", position=i,
                       disable=None if progress else True, dynamic_ncols=True, leave=True)
            for i, name in enumerate(("reading", "chunking", "writing"))}

    def problem(doc_id: str, message: str) -> None:
        summary.failed.append((doc_id, message))
        if report is not None:
            report(f"{doc_id}: {message}")

    settings = chunk_settings(chunker)
    try:
        for batch in _batches(files, batch_docs):
            t0 = time.perf_counter()
            texts = read_files(batch, problem, on_read=lambda: bars["reading"].update(1))
            summary.seconds["reading"] += time.perf_counter() - t0
            bars["chunking"].update(len(batch) - len(texts))  # unreadable: nothing left to do for them
            bars["writing"].update(len(batch) - len(texts))
            try:
                done = ingest_batch(texts, chunker, store, settings=settings, force=force, report=report,
                                    progress=lambda stage, n: bars[stage].update(n))
            except IngestWriteError as exc:
                raise IngestWriteError(f"{exc}; {summary.documents} documents were written before it; re-run the "
                                       "same command to complete the rest") from exc.__cause__
            summary.merge(done)
    finally:
        for bar in bars.values():
            bar.close()
    return summary


def ingest_batch(
    texts: Mapping[str, str],
    chunker: Any,
    store: Any,
    *,
    settings: str | None = None,
    metadata: Mapping[str, Mapping[str, Any]] | None = None,
    force: bool = False,
    report: Callable[[str], None] | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> IngestSummary:
    """Skip, chunk and write one batch of documents (``{doc id: text}``); returns what it did.

    The one step behind :func:`ingest` and the workers of :func:`hseg.distributed.index_dataset`.
    A document whose stored records are complete and came from the same text and ``settings``
    (:func:`is_complete`; default :func:`chunk_settings` of ``chunker``) is counted ``unchanged``
    unless ``force``. The rest are chunked together and written together, only after the whole
    batch's chunking succeeded, so a document is never half-chunked in the store. Every record
    carries ``source`` (default: the document id), ``content_sha256`` and ``chunk_settings``, next
    to the document's entry of ``metadata``. A document that cannot be chunked, or that the store
    refuses, is passed to ``report`` and counted in ``failed``. Another write failure (a server
    gone away) raises :class:`IngestWriteError`: documents of the batch may be partly written, and
    a re-run redoes them. ``progress(stage, n)`` is told as ``n`` documents pass the stage
    ``"chunking"`` or ``"writing"``. ``seconds["reading"]`` is the look-up of what is stored.

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
    shas = {d: hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for d, t in texts.items()}
    todo = dict(texts)
    if todo and not force:
        stored = store.stored_records(list(todo))
        units = store.unit_segment_ids(list(todo)) if store.unit_index is not None else {}
        for d in [d for d in todo if is_complete(stored.get(d, {}), shas[d], settings, len(todo[d]), units.get(d))]:
            del todo[d]
    summary.unchanged = len(texts) - len(todo)
    t1 = time.perf_counter()
    summary.seconds["reading"] += t1 - t0
    tick("chunking", summary.unchanged)
    tick("writing", summary.unchanged)
    chunkings = _chunk_batch(chunker, todo, problem)
    tick("chunking", len(todo))
    t2 = time.perf_counter()
    summary.seconds["chunking"] += t2 - t1
    extra = metadata or {}
    metas = [{"source": c.doc_id, **extra.get(c.doc_id, {}), "content_sha256": shas[c.doc_id],
              "chunk_settings": settings} for c in chunkings]
    try:
        summary.vectors, chunkings = _write_batch(store, chunkings, metas, problem)
    except Exception as exc:
        raise IngestWriteError(f"writing a batch of {len(chunkings)} documents failed "
                               f"({type(exc).__name__}: {exc})") from exc
    tick("writing", len(todo))
    summary.seconds["writing"] += time.perf_counter() - t2
    for c in chunkings:
        summary.documents += 1
        summary.empty += not c.clusters
        summary.segments += len(c.segments)
        summary.clusters += len(c.clusters)
    return summary


def _write_batch(
    store: Any, chunkings: list[Any], metas: list[dict[str, Any]], problem: Callable[[str, str], None]
) -> tuple[int, list[Any]]:
    """Write a batch; if the store refuses it (a bad vector or metadata: ``ValueError``, raised
    before anything is written), write the documents one by one and skip only those refused.
    Other errors (a server gone away) propagate: the run cannot go on."""
    if not chunkings:
        return 0, []
    try:
        return _add(store, chunkings, metas), chunkings
    except ValueError:
        if len(chunkings) == 1:
            raise
    vectors, written = 0, []
    for chunking, meta in zip(chunkings, metas):
        try:
            vectors += _add(store, [chunking], [meta])
        except ValueError as exc:
            problem(chunking.doc_id, f"not written: {exc}")
            continue
        written.append(chunking)
    return vectors, written


#: seconds to wait before each further try of a write Chroma failed internally
WRITE_RETRY_DELAYS = (0.5, 2.0)


def _add(store: Any, chunkings: list[Any], metas: list[dict[str, Any]]) -> int:
    """``store.add``, tried again after Chroma's ``InternalError``: a server sometimes fails a read
    of a collection another writer is flushing for the first time ("Error creating hnsw segment
    reader: Nothing found on disk", seen with two Ray workers writing to one new collection). An
    add replaces its documents' records, so a second try of a partial write completes it."""
    from chromadb.errors import InternalError

    for delay in WRITE_RETRY_DELAYS:
        try:
            return store.add(chunkings, metas)
        except InternalError as exc:
            logger.warning("writing %d documents failed inside Chroma (%s); trying again in %g s",
                           len(chunkings), exc, delay)
            time.sleep(delay)
    return store.add(chunkings, metas)


def _chunk_batch(chunker: Any, texts: Mapping[str, str], problem: Callable[[str, str], None]) -> list[Any]:
    """Chunk a batch together; if that fails, one by one to find (and skip) the documents at fault."""
    ids = list(texts)
    if not ids:
        return []
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"document .* is blank")  # counted as empty instead
        try:
            return list(chunker.chunk_many([texts[d] for d in ids], ids))
        except Exception as exc:
            if len(ids) == 1:
                problem(ids[0], f"chunking failed ({type(exc).__name__}: {exc})")
                return []
        out = []
        for d in ids:
            try:
                out += chunker.chunk_many([texts[d]], [d])
            except Exception as exc:
                problem(d, f"chunking failed ({type(exc).__name__}: {exc})")
        return out


# --------------------------------------------------------------------------- pruning


def prune_scope(paths: Iterable[str]) -> Callable[[str], bool]:
    """A test of whether a stored ``source`` lies under one of the ``hseg index`` PATH arguments.

    A folder covers everything inside it; a glob pattern covers the paths it matches and what lies
    inside a folder it matches (as :func:`discover` walks them); any other argument, an existing
    file or a missing path, covers that one path (so a folder that vanished, e.g. an unmounted
    disk, covers nothing). Paths compare as absolute paths from the current directory, the way
    document ids are made.
    """
    folders: list[str] = []
    exact: set[str] = set()
    patterns: list[tuple[str, ...]] = []
    for arg in paths:
        path = Path(arg)  # classified in discover's order
        if path.is_file():
            exact.add(os.path.abspath(arg))
        elif path.is_dir():
            folders.append(os.path.abspath(arg))
        elif any(ch in arg for ch in "*?["):
            patterns.append(Path(os.path.abspath(arg)).parts)
        else:
            exact.add(os.path.abspath(arg))

    def covers(source: str) -> bool:
        full = os.path.abspath(source)
        if full in exact or any(full != f and os.path.commonpath([full, f]) == f for f in folders):
            return True
        parts = Path(full).parts
        return any(_glob_match(p, parts[:n]) for p in patterns for n in range(1, len(parts) + 1))

    return covers


def _glob_match(pattern: Sequence[str], parts: Sequence[str]) -> bool:
    """``glob.glob(recursive=True)`` semantics on path components: ``**`` spans any number of
    them; wildcards match no hidden name (``.git``) unless the pattern's component starts with a dot."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        for i in range(len(parts) + 1):
            if _glob_match(rest, parts[i:]):
                return True
            if i < len(parts) and parts[i].startswith("."):
                return False
        return False
    if not parts or (parts[0].startswith(".") and not head.startswith(".")):
        return False
    return fnmatch.fnmatchcase(parts[0], head) and _glob_match(rest, parts[1:])


def stored_sources(store: Any, page: int = 5000) -> dict[str, set[str | None]]:
    """``{doc id: the sources of its records}`` of every hseg document in the store, read page by
    page (``None`` stands for a record without ``source``; records of other writers, without
    ``hseg_doc_id``, are left out)."""
    out: dict[str, set[str | None]] = {}
    for _, meta in store.iter_metadatas(page=page):
        if meta.get("hseg_doc_id") is not None:
            source = meta.get("source")
            out.setdefault(str(meta["hseg_doc_id"]), set()).add(None if source is None else str(source))
    return out


def stale_documents(store: Any, paths: Iterable[str], found: Iterable[str]) -> list[str]:
    """Sorted ids of the stored documents to prune after indexing ``paths``.

    A document is stale when every one of its records names a ``source`` that lies under ``paths``
    (:func:`prune_scope`), that is not among ``found`` (the document ids this run discovered) and
    that is no longer a file: its file was deleted or renamed. A document without ``source``, or
    with one elsewhere, is never stale.
    """
    covers = prune_scope(paths)
    seen = {os.path.abspath(d) for d in found}

    def gone(source: str | None) -> bool:
        return source is not None and os.path.abspath(source) not in seen and covers(source) \
            and not os.path.isfile(source)  # a file this run missed (say, a symlinked folder) stays

    return sorted(d for d, sources in stored_sources(store).items() if all(gone(s) for s in sources))


def prune(store: Any, paths: Iterable[str], found: Iterable[str],
          report: Callable[[str], None] | None = None) -> list[str]:
    """Delete the :func:`stale_documents` from ``store``; returns their ids.

    ``found`` holds every document id the indexing run of ``paths`` discovered (the files it could
    not read included). ``report(doc_id)`` is called after each deletion.
    """
    stale = stale_documents(store, paths, found)
    for doc_id in stale:
        removed = store.delete(doc_id)
        logger.info("prune: %r removed (%d records), its file is gone", doc_id, removed)
        if report is not None:
            report(doc_id)
    return stale
