"""Which files ``hseg index`` reads, their document ids, and reading them as text.

:func:`discover` turns files, folders (recursive) and glob patterns into :class:`SourceFile` s;
:func:`read_text_file` reads one as UTF-8 text or says why it cannot.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SUPPORTED_SUFFIXES", "SourceFile", "discover", "doc_id_for", "read_text_file", "read_files"]


SUPPORTED_SUFFIXES = (".txt", ".md", ".markdown")


@dataclass(frozen=True)
class SourceFile:
    """A file to index; ``doc_id`` is its path relative to :func:`discover`'s anchor (POSIX form)."""

    path: Path
    doc_id: str


def doc_id_for(path: str | os.PathLike[str], anchor: str | os.PathLike[str] | None = ".") -> str:
    """The document id of a file: its path relative to ``anchor`` (a folder; ``"."``: the current
    directory), or its absolute path with ``anchor=None``, in POSIX form.

    ``hseg index`` anchors ids at the folder that holds ``--db``, so one file gets one id whatever
    the working directory the command runs in (with ``--host``, ids are absolute paths).

    Example:
        >>> doc_id_for("/srv/docs/a.md", anchor="/srv")
        'docs/a.md'
    """
    full = os.path.abspath(path)
    if anchor is None:
        return Path(full).as_posix()
    return Path(os.path.relpath(full, os.path.abspath(anchor))).as_posix()


def discover(
    paths: Iterable[str], suffixes: Sequence[str] = SUPPORTED_SUFFIXES, *, anchor: str | os.PathLike[str] | None = "."
) -> tuple[list[SourceFile], list[tuple[str, str]]]:
    """Files to index and ``(argument, problem)`` pairs for arguments that name nothing usable.

    A file named explicitly is taken whatever its suffix; folders (recursively, skipping hidden
    entries) and glob patterns (``**`` allowed) contribute files with one of ``suffixes``. The
    result is sorted by document id, without duplicates. Ids are made by :func:`doc_id_for` with ``anchor``.
    """
    found: dict[str, SourceFile] = {}
    problems: list[tuple[str, str]] = []

    def add(path: Path) -> None:
        doc_id = doc_id_for(path, anchor)
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
