"""The structure a markdown document already has: its headings, and what the chunker makes of them.

How and why: docs/design.md, ``hseg.text.structure``.

Example:
    >>> text = "# Chapter 2\\n\\nIntro.\\n\\nOrbits\\n------\\n\\nKepler.\\n\\n```\\n# not a heading\\n```\\n"
    >>> [(h.level, h.title, h.path) for h in find_headings(text)]
    [(1, 'Chapter 2', ('Chapter 2',)), (2, 'Orbits', ('Chapter 2', 'Orbits'))]
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# the line kinds of the sentence splitter: a line it reads as code is never a heading here either
from hseg.text.sentences import _HEADING, _classify, _Kind, _lines

#: values of the ``structure`` chunker setting
STRUCTURES = ("auto", "markdown", "none")
#: source names with these endings are plain text for ``structure="auto"``
PLAIN_TEXT_SUFFIXES = (".txt", ".text")
#: metadata keys that name a document's source, in the order the adapters look: LangChain loaders
#: write ``source``, LlamaIndex readers ``file_path`` and ``file_name``
SOURCE_KEYS = ("source", "file_path", "file_name")

_SETEXT_UNDERLINE = re.compile(r"[ \t]{0,3}(=+|-+)[ \t]*$")
_FRONT_MATTER_END = re.compile(r"(?:---|\.\.\.)[ \t]*$")


@dataclass(frozen=True)
class Heading:
    """One markdown heading: ``text[start:end]`` is its markup, from the first non-blank character
    of its first line to the end of its last line (the underline of a Setext heading).

    Attributes:
        start, end: character offsets into the document.
        level: 1 to 6 (a Setext heading is 1 for ``===``, 2 for ``---``).
        title: the heading text, heading markup stripped (inline markup such as ``**`` is kept).
        path: the titles of the enclosing headings and its own, outermost first.
    """

    start: int
    end: int
    level: int
    title: str
    path: tuple[str, ...]


def _atx_title(line: str) -> str:
    """CommonMark: the text after the opening ``#`` run, without a closing ``#`` run that follows a space."""
    content = line.strip().lstrip("#").strip()
    without = content.rstrip("#")
    if not without:
        return ""
    if without != content and without[-1] in " \t":
        return without.strip()
    return content


def _front_matter_end(lines: Sequence[Any]) -> int:
    """Index of the first line after a YAML front-matter block at the very top (0 when there is none)."""
    if not lines or lines[0].text.rstrip() != "---":
        return 0
    for j in range(1, len(lines)):
        if _FRONT_MATTER_END.match(lines[j].text):
            return j + 1
    return 0


def find_headings(text: str) -> list[Heading]:
    """The markdown headings of ``text``, in document order (the rules: docs/design.md, ``hseg.text.structure``).

    Example:
        >>> [h.path for h in find_headings("Title\\n=====\\n\\n## Part *one* ##\\n\\nText.\\n")]
        [('Title',), ('Title', 'Part *one*')]
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    lines = _lines(text)
    kinds = _classify(lines)
    found: list[tuple[int, int, int, str]] = []  # start, end, level, title
    # first line of the run of plain paragraph lines just above the current line (None: no run);
    # kept while scanning, so a long paragraph under many would-be underlines is not walked again
    run: int | None = None
    for i in range(_front_matter_end(lines), len(lines)):
        line, kind = lines[i], kinds[i]
        if kind in (_Kind.CODE, _Kind.BLANK):
            run = None
            continue
        if _HEADING.match(line.text):
            level = len(line.text.strip()) - len(line.text.strip().lstrip("#"))
            indent = len(line.text) - len(line.text.lstrip())
            found.append((line.start + indent, line.start + len(line.text.rstrip()), level, _atx_title(line.text)))
            run = None
            continue
        underline = _SETEXT_UNDERLINE.match(line.text)
        # a paragraph that continues a list item (CommonMark: a lazy continuation line cannot be
        # a heading's) or is indented as code has no Setext heading
        if underline is not None and run is not None and not (run > 0 and kinds[run - 1] == _Kind.LIST) \
                and len(lines[run].text) - len(lines[run].text.lstrip(" ")) < 4 and lines[run].text[:1] != "\t":
            body = lines[run:i]
            indent = len(body[0].text) - len(body[0].text.lstrip())
            title = " ".join(b.text.strip() for b in body)
            level = 1 if underline.group(1)[0] == "=" else 2
            found.append((body[0].start + indent, line.start + len(line.text.rstrip()), level, title))
            run = None
        elif kind == _Kind.PROSE:
            run = i if run is None else run
        else:
            run = None
    out: list[Heading] = []
    stack: list[tuple[int, str]] = []
    for start, end, level, title in found:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        out.append(Heading(start, end, level, title, tuple(t for _, t in stack)))
    return out


def path_at(headings: Sequence[Heading], position: int) -> tuple[str, ...]:
    """The heading path at ``position``: that of the last heading starting at or before it.

    Example:
        >>> hs = find_headings("# A\\n\\ntext\\n\\n## B\\n\\nmore\\n")
        >>> path_at(hs, 0), path_at(hs, 6), path_at(hs, 14)
        (('A',), ('A',), ('A', 'B'))
    """
    i = bisect.bisect_right(headings, position, key=lambda h: h.start) - 1
    return headings[i].path if i >= 0 else ()


def common_prefix(paths: Iterable[Sequence[str]]) -> tuple[str, ...]:
    """The longest common prefix of heading paths (``()`` for none).

    Example:
        >>> common_prefix([("Ch 2", "2.1"), ("Ch 2", "2.2")])
        ('Ch 2',)
    """
    prefix: tuple[str, ...] | None = None
    for path in paths:
        path = tuple(path)
        if prefix is None:
            prefix = path
            continue
        n = 0
        while n < min(len(prefix), len(path)) and prefix[n] == path[n]:
            n += 1
        prefix = prefix[:n]
    return prefix or ()


def section_level(headings: Sequence[Heading]) -> int | None:
    """The deepest heading level clusters do not merge across: the shallowest level that occurs at
    least twice (the level that divides the document; a title above it occurs once), else the
    deepest level present; ``None`` without headings.

    Example:
        >>> section_level(find_headings("# Title\\n\\n## A\\n\\n### a\\n\\n## B\\n"))
        2
    """
    counts = Counter(h.level for h in headings)
    if not counts:
        return None
    repeated = [level for level, n in counts.items() if n >= 2]
    return min(repeated) if repeated else max(counts)


def cluster_breaks(headings: Sequence[Heading], unit_starts: Sequence[int], unit_tokens: Sequence[int],
                   min_tokens: int) -> list[int]:
    """Indices of the units (segments) that must start a new cluster, sorted.

    ``unit_starts`` are the offsets of the units' first non-blank characters (every heading starts
    one or lies in a run of headings that opens one), ``unit_tokens`` their sizes. A unit opening a
    heading of :func:`section_level` or shallower starts a new cluster, except where the section
    before it, or the last section, is smaller than ``min_tokens``: such a section may merge with
    the section after it (the last one with the section before it).

    Example:
        >>> hs = find_headings("# T\\n\\n## A\\n\\ntext\\n\\n## B\\n\\ntext\\n")
        >>> cluster_breaks(hs, [h.start for h in hs], [1, 60, 60], min_tokens=48)
        [2]
    """
    level = section_level(headings)
    if level is None or len(unit_starts) < 2:
        return []
    if len(unit_starts) != len(unit_tokens):
        raise ValueError(f"unit_tokens: {len(unit_tokens)} sizes for {len(unit_starts)} units")
    # the unit holding each heading: the one it starts, or, for a heading with no text under it, the
    # one the run of headings it belongs to opens
    holder = [bisect.bisect_right(unit_starts, h.start) - 1 for h in headings]
    opening = {h.start for h in headings}
    wrong = [h.start for h, i in zip(headings, holder) if i < 0 or unit_starts[i] not in opening]
    if wrong:
        raise ValueError(f"unit_starts: no unit starts at the heading at offset {wrong[0]} nor at a heading before it")
    bounds = [0] + sorted({i for h, i in zip(headings, holder) if h.level <= level} - {0}) + [len(unit_starts)]
    breaks = set(bounds[1:-1])
    for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
        if sum(unit_tokens[a:b]) < min_tokens:
            breaks.discard(b if k + 2 < len(bounds) else a)
    return sorted(breaks)


def reads_markdown(structure: str, name: str | None = None) -> bool:
    """Whether a document named ``name`` (a file name, path or URL; ``None``: unknown) is read as
    markdown under the ``structure`` setting (docs/design.md, ``hseg.text.structure``).

    Example:
        >>> reads_markdown("auto", "notes/a.md"), reads_markdown("auto", "notes/a.TXT"), reads_markdown("auto")
        (True, False, True)
        >>> reads_markdown("none", "a.md"), reads_markdown("markdown", "a.txt")
        (False, True)
    """
    if structure not in STRUCTURES:
        raise ValueError(f"structure must be one of {STRUCTURES}, got {structure!r}")
    if structure != "auto":
        return structure == "markdown"
    if name is None:
        return True
    if not isinstance(name, str):
        raise ValueError(f"source must be a str or None, got {type(name).__name__}")
    # a URL's query or fragment is not part of its file name
    bare = name.split("#", 1)[0].split("?", 1)[0] if "://" in name else name
    return not bare.rstrip().lower().endswith(PLAIN_TEXT_SUFFIXES)


def source_name(metadata: Mapping[str, Any] | None) -> str | None:
    """The first string value of :data:`SOURCE_KEYS` in a document's metadata (``None`` when absent).

    Example:
        >>> source_name({"file_name": "a.txt", "source": "docs/a.txt"}), source_name({"page": 3})
        ('docs/a.txt', None)
    """
    for key in SOURCE_KEYS:
        value = (metadata or {}).get(key)
        if isinstance(value, str) and value:
            return value
    return None
