"""A store copied or moved to a folder at another depth than the one it was indexed from.

Document ids are paths relative to the folder that holds ``--db`` (:func:`hseg.ingest.files.doc_id_for`),
so that one file gets one id whatever the working directory, and a project copied or moved whole (its
files and its store together) keeps its ids. A store copied or moved alone to another depth (``cp -r db
sub/copydb``) would give every file a new id (``../docs/a.md`` for ``docs/a.md``), and the next ``hseg
index`` would store every document twice. Recording an absolute root in the store instead would break
the whole-project copy (``cp -r proj proj2`` would index ``proj2``'s files under ``proj``'s root), so
the rule stays, and such a run is refused before it writes, naming the folder the ids are relative to.

Example:
    >>> check_not_moved(store, files, anchor=Path("db").resolve().parent, db="db")  # doctest: +SKIP
    Traceback (most recent call last):
    StoreMovedError: --db sub/copydb: its documents' ids are paths relative to /proj ...
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hseg.chunking.schema import CLUSTER, CONTENT_HASH_KEY, DOC_ID_KEY, content_sha256, level_is
from hseg.errors import StoreMovedError
from hseg.ingest.files import SourceFile, read_source

if TYPE_CHECKING:  # annotations only
    from hseg.store.store import HierarchicalStore


#: the ``content_sha256`` stored for a document's text
text_sha256 = content_sha256


def _text_sha256(path: Path) -> str | None:
    """The ``content_sha256`` of the document at ``path`` (``None`` where it cannot be read)."""
    try:
        return text_sha256(read_source(path).text)
    except (OSError, ValueError, ImportError):
        return None


def moved_root(stored: dict[str, str], files: Sequence[SourceFile], anchor: Path) -> tuple[Path, str, Path] | None:
    """``(the folder the stored ids are relative to, one stored id, the file that holds its text)`` when
    the store was moved relative to its documents, else ``None``. ``stored`` is ``{doc id:
    content_sha256}`` of the stored documents.

    Moved: more files this run found under a new id hold the text of a stored document whose id is
    the file's path below another folder than stored ids name, from ``anchor``, a file holding their
    text. A store indexed from here keeps finding its documents at their ids; one moved away finds
    few or none of them, whatever files of the same names the new folder happens to hold (a
    ``README.md`` at both levels), and a file moved inside the project below a folder whose path ends
    like its old id is one document among many still in place.
    """
    new = [f for f in files if f.doc_id not in stored]
    if not new:
        return None
    present = [doc_id for doc_id in stored if (anchor / doc_id).is_file()]  # in place at most: no read yet
    moved: list[tuple[Path, str, Path]] = []
    for f in new:
        if len(moved) > len(present):
            return moved[0]
        full = Path(os.path.abspath(f.path))
        parts = full.parts
        for k in range(1, len(parts)):
            doc_id = Path(*parts[k:]).as_posix()
            if doc_id in stored and doc_id != f.doc_id and _text_sha256(f.path) == stored[doc_id]:
                moved.append((Path(*parts[:k]), doc_id, full))
                break
    if not moved:
        return None
    in_place = 0
    for doc_id in present:  # read until they are as many as the moved ones, no further
        if _text_sha256(anchor / doc_id) == stored[doc_id]:
            in_place += 1
            if in_place >= len(moved):
                return None
    return moved[0]


def check_not_moved(store: HierarchicalStore, files: Sequence[SourceFile], anchor: Any, db: str) -> None:
    """Refuse (:class:`StoreMovedError`, one line with the fix) to index ``files`` into ``store`` at
    ``db`` when the store was moved relative to its documents (:func:`moved_root`); nothing for
    absolute ids (``anchor`` ``None``: a server's store)."""
    if anchor is None or not files:
        return
    stored: dict[str, str] = {}
    for _, meta in store.iter_metadatas(level_is(CLUSTER)):
        if meta.get(DOC_ID_KEY) is not None and meta.get(CONTENT_HASH_KEY):
            stored[str(meta[DOC_ID_KEY])] = str(meta[CONTENT_HASH_KEY])
    found = moved_root(stored, files, Path(anchor))
    if found is None:
        return
    root, doc_id, file = found
    raise StoreMovedError(
        f"--db {db}: its documents' ids are paths relative to {root} ({doc_id!r} holds the text of {file}), but ids "
        f"are paths relative to the folder that holds --db ({anchor}): the store was copied or moved to another "
        f"depth, and indexing would store every document twice; move it into {root} (mv {db} {root}/), or index "
        "into a new store")
