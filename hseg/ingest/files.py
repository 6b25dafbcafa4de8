"""Which files ``hseg index`` reads, their document ids, and reading them as text.

:func:`discover` turns files, folders (recursive) and glob patterns into :class:`SourceFile` s;
:func:`read_source` reads one: a PDF, DOCX, PPTX or HTML file through its converter
(:mod:`hseg.convert`: markdown and a page map), any other as UTF-8 text (:func:`read_text_file`),
or says why it cannot.
"""

from __future__ import annotations

import glob
import os
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hseg.convert import CONVERTED_SUFFIXES, Converted, convert, converter_for
from hseg.errors import FormatSupportMissing, UnreadableDocumentError

#: files read as text as they are
TEXT_SUFFIXES = (".txt", ".md", ".markdown")
#: the files folders and patterns contribute: text, and the formats :mod:`hseg.convert` reads
SUPPORTED_SUFFIXES = TEXT_SUFFIXES + CONVERTED_SUFFIXES


#: the most bytes a file may hold to be read: more than any document one reads (~16M tokens of text),
#: and a bound so that a file that never ends (a device behind a link, a growing log) cannot fill memory
MAX_FILE_BYTES = 64 * 2**20


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
    paths: Iterable[str], suffixes: Sequence[str] = SUPPORTED_SUFFIXES, *, anchor: str | os.PathLike[str] | None = ".",
    skipped: Counter[str] | None = None,
) -> tuple[list[SourceFile], list[tuple[str, str]]]:
    """Files to index, and the arguments that name nothing usable.

    A file named explicitly is taken whatever its suffix; folders (recursively, skipping hidden
    entries) and glob patterns (``**`` allowed) contribute files with one of ``suffixes``. The files
    are sorted by document id, without duplicates.

    Args:
        paths: files, folders and glob patterns.
        suffixes: the suffixes of the files that folders and patterns contribute.
        anchor: the folder document ids are relative to (:func:`doc_id_for`); ``None``: absolute paths.
        skipped: when given, counts the other files folders and patterns hold, by suffix (``"(none)"``
            for a name without one), so that a caller can say what was left out.

    Returns:
        ``(files, problems)``: the :class:`SourceFile` s, and ``(argument, problem)`` pairs for the
        arguments that name nothing usable (no such path, a folder without such files, a FIFO, a name
        that is not UTF-8).

    Raises:
        Nothing of its own: an argument that names nothing usable is a problem in the result.
    """
    found: dict[str, SourceFile] = {}
    problems: list[tuple[str, str]] = []

    def add(path: Path) -> bool:
        doc_id = doc_id_for(path, anchor)
        problem = _unusable(path, doc_id)
        if problem is not None:  # said, and the other files indexed
            problems.append((shown_path(path), problem))
            return False
        found.setdefault(doc_id, SourceFile(path, doc_id))
        return True

    def walk(folder: Path) -> int:
        n = 0
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if not name.startswith(".") and name.lower().endswith(tuple(suffixes)):
                    n += add(Path(root) / name)
                elif not name.startswith(".") and skipped is not None:
                    skipped[Path(name).suffix.lower() or "(none)"] += 1
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
                    n += add(m)
                elif m.is_file() and skipped is not None:
                    skipped[m.suffix.lower() or "(none)"] += 1
            if n == 0:
                problems.append((arg, f"the pattern matches no {'/'.join(suffixes)} files"))
        elif path.exists():
            problems.append((arg, "not a regular file or folder"))
        else:
            problems.append((arg, "no such file or folder"))
    return [found[k] for k in sorted(found)], problems


def shown_path(path: str | os.PathLike[str]) -> str:
    """``path`` as text to show, bytes of its name that are not UTF-8 as ``\\xNN``.

    Example:
        >>> shown_path(os.fsdecode(b"docs/caf\\xe9.md"))
        'docs/caf\\\\xe9.md'
    """
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _unusable(path: Path, doc_id: str) -> str | None:
    """Why the file at ``path`` cannot be a document (``None``: it can, or reading it will say why not)."""
    try:
        doc_id.encode("utf-8")
    except UnicodeEncodeError:  # os.walk hands such bytes over as surrogates, which no store takes
        return "its name is not valid UTF-8, and a document id is text: rename the file; skipped"
    try:
        mode = os.stat(path).st_mode  # through a link: what would be read
    except OSError:
        return None
    if not stat.S_ISREG(mode):  # a FIFO would hang the read, a device such as /dev/zero never end it
        return f"{_kind(mode)}, not a regular file: skipped"
    return None


def read_text_file(path: Path) -> str:
    """The file as UTF-8 text.

    Args:
        path: the file.

    Returns:
        Its text.

    Raises:
        ValueError: binary or undecodable content, a file that is not a regular file or one that holds
            more than :data:`MAX_FILE_BYTES`.
        OSError: the file cannot be opened or read.
    """
    # O_NONBLOCK: opening a FIFO for reading would wait for a writer
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{_kind(mode)}, not a regular file: skipped")
        data = fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"larger than {MAX_FILE_BYTES // 2**20} MiB (MAX_FILE_BYTES): split it into smaller files")
    if b"\x00" in data[:8192]:
        raise ValueError("looks like a binary file (NUL bytes), expected UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 text (byte {exc.start})") from None


def read_source(path: str | os.PathLike[str]) -> Converted:
    """The document at ``path``: a PDF, DOCX, PPTX or HTML file converted to markdown with its page map
    (:func:`hseg.convert.convert`), any other file as UTF-8 text (``Converted(text, None, "text")``).

    Raises :class:`~hseg.errors.FormatSupportMissing` when the format's library is not installed,
    ``ValueError`` (:class:`~hseg.errors.UnreadableDocumentError` from a converter) for content it
    cannot read, ``OSError`` when the file cannot be opened.

    Example:
        >>> read_source("reports/annual.pdf").pages.unit  # doctest: +SKIP
        'page'
    """
    if converter_for(path) is None:
        return Converted(read_text_file(Path(path)), None, "text")
    return convert(path)


def read_sources(files: Iterable[SourceFile], problem: Callable[[str, str], None],
                 on_read: Callable[[], None] | None = None,
                 missing: Callable[[str, FormatSupportMissing], None] | None = None) -> dict[str, Converted]:
    """``{doc id: document}`` of the files :func:`read_source` reads; each of the others is passed to
    ``problem(doc id, message)``, except those whose format's library is missing, which go to
    ``missing(doc id, error)`` when it is given. ``on_read()`` is called after each file, read or not."""
    docs: dict[str, Converted] = {}
    for f in files:
        try:
            docs[f.doc_id] = read_source(f.path)
        except FormatSupportMissing as exc:
            (missing or (lambda d, e: problem(d, str(e))))(f.doc_id, exc)
        except OSError as exc:
            problem(f.doc_id, f"cannot read: {exc.strerror or exc}")
        except (ValueError, UnreadableDocumentError) as exc:
            problem(f.doc_id, str(exc))
        if on_read is not None:
            on_read()
    return docs


def read_files(files: Iterable[SourceFile], problem: Callable[[str, str], None],
               on_read: Callable[[], None] | None = None) -> dict[str, str]:
    """The texts of the files :func:`read_source` reads (converted ones as their markdown, without
    their page maps).

    Args:
        files: the files to read.
        problem: called as ``problem(doc id, message)`` for each file that cannot be read.
        on_read: called after each file, read or not (a progress bar's step).

    Returns:
        ``{doc id: text}`` of the files read.

    Raises:
        Nothing of its own: a file that cannot be read goes to ``problem``.
    """
    return {d: doc.text for d, doc in read_sources(files, problem, on_read).items()}
