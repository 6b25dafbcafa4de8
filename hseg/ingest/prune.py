"""Pruning: stored documents whose files under the indexed paths are gone (deleted or renamed)
are removed, so their text stops being found; other documents are never touched."""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hseg.chunking.schema import DOC_ID_KEY

if TYPE_CHECKING:  # annotations only
    from hseg.store.store import HierarchicalStore


logger = logging.getLogger(__name__)


def prune_scope(paths: Iterable[str]) -> Callable[[str], bool]:
    """A test of whether a stored ``source`` lies under one of the ``hseg index`` PATH arguments.

    A folder covers everything inside it; a glob pattern covers the paths it matches and what lies
    inside a folder it matches (as :func:`discover` walks them); any other argument, an existing
    file or a missing path, covers that one path (so a folder that vanished, e.g. an unmounted
    disk, covers nothing). Paths compare as absolute paths from the current directory, the way
    document ids are made.

    Args:
        paths: the ``hseg index`` PATH arguments: files, folders and glob patterns.

    Returns:
        ``covers(source) -> bool``.

    Raises:
        Nothing of its own.
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


def stored_sources(store: HierarchicalStore, page: int = 5000) -> dict[str, set[str | None]]:
    """The sources every hseg document's records name, read page by page.

    Args:
        store: the store.
        page: records read per call.

    Returns:
        ``{doc id: the sources of its records}`` (``None`` stands for a record without ``source``;
        records of other writers, without ``hseg_doc_id``, are left out).

    Raises:
        ServerUnreachableError: the Chroma server cannot be reached.
    """
    out: dict[str, set[str | None]] = {}
    for _, meta in store.iter_metadatas(page=page):
        if meta.get(DOC_ID_KEY) is not None:
            source = meta.get("source")
            out.setdefault(str(meta[DOC_ID_KEY]), set()).add(None if source is None else str(source))
    return out


def stale_documents(store: HierarchicalStore, paths: Iterable[str], found: Iterable[str],
                    anchor: str | os.PathLike[str] | None = ".") -> list[str]:
    """Sorted ids of the stored documents to prune after indexing ``paths``.

    A document is stale when every one of its records names a ``source`` that lies under ``paths``
    (:func:`prune_scope`), that is not among ``found`` (the document ids this run discovered) and
    that is no longer a file: its file was deleted or renamed. A document without ``source``, or
    with one elsewhere, is never stale. Relative sources and ids are paths from ``anchor`` (see
    :func:`hseg.ingest.files.doc_id_for`).

    Args:
        store: the store.
        paths: the PATH arguments the run indexed.
        found: the document ids the run discovered.
        anchor: the folder relative sources and ids start from; ``None``: they are absolute.

    Returns:
        The ids of the stale documents, sorted.

    Raises:
        ServerUnreachableError: the Chroma server cannot be reached.
    """
    covers = prune_scope(paths)
    base = os.path.abspath("/" if anchor is None else anchor)
    seen = {os.path.join(base, d) for d in found}

    def gone(source: str | None) -> bool:
        if source is None:
            return False
        full = os.path.normpath(os.path.join(base, source))
        return full not in seen and covers(full) \
            and not os.path.isfile(full)  # a file this run missed (say, a symlinked folder) stays

    return sorted(d for d, sources in stored_sources(store).items() if all(gone(s) for s in sources))


def prune(store: HierarchicalStore, paths: Iterable[str], found: Iterable[str],
          report: Callable[[str], None] | None = None, anchor: str | os.PathLike[str] | None = ".") -> list[str]:
    """Delete the :func:`stale_documents` from ``store``.

    Args:
        store: the store.
        paths: the PATH arguments the run indexed.
        found: every document id the run discovered (the files it could not read included).
        report: called as ``report(doc_id)`` after each deletion.
        anchor: the folder relative sources and ids start from; ``None``: they are absolute.

    Returns:
        The ids of the documents deleted, sorted.

    Raises:
        ServerUnreachableError: the Chroma server cannot be reached.
        WriterBusyError: another process holds an embedded store's writer lock too long.
    """
    stale = stale_documents(store, paths, found, anchor)
    for doc_id in stale:
        removed = store.delete(doc_id)
        logger.info("prune: %r removed (%d records), its file is gone", doc_id, removed)
        if report is not None:
            report(doc_id)
    return stale
