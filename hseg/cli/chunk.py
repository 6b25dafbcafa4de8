"""``hseg chunk``: print the segments and clusters of files (or stdin) with spans and token counts.

Example::

    hseg chunk notes.md --target-tokens 256 --segmenter my_segmenter.pt --format json
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from hseg.chunking.chunks import Chunking
from hseg.cli.options import add_chunker_options, chunker_from_args, quiet_model_loading
from hseg.convert import Converted
from hseg.errors import FormatSupportMissing
from hseg.ingest import read_source as read_document


def register(sub: Any) -> None:
    p = sub.add_parser(
        "chunk",
        help="segment and cluster text files, print spans and token counts",
        description="Chunk each FILE ('-' reads stdin) and print its segments and clusters.",
    )
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="UTF-8 text or markdown files, or PDF, DOCX, PPTX and HTML files (converted to markdown; "
                        "the formats extra); '-' for stdin. A file that cannot be read (binary, not UTF-8) is "
                        "reported and skipped; the exit code is then 1")
    add_chunker_options(p)
    p.add_argument("--format", choices=("json", "markdown"), default="markdown", help="output format")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars (drawn only when stderr is a terminal) and no progress lines (every few "
                        "seconds of long work, on stderr)")
    p.set_defaults(func=run)


def read_source(name: str) -> Converted:
    """The document in FILE ``name`` (``'-'``: stdin), through :func:`hseg.ingest.read_source` (PDF, DOCX,
    PPTX and HTML converted to markdown with their page map, any other file read as UTF-8 text), with
    errors that start with the name (the command reports several files)."""
    if name == "-":
        return Converted(sys.stdin.read(), None, "text")
    path = Path(name)
    if not path.exists():
        raise FileNotFoundError(f"{name}: no such file")
    if path.is_dir():
        raise IsADirectoryError(f"{name}: is a directory")
    try:
        return read_document(path)
    except FormatSupportMissing as exc:
        raise FormatSupportMissing(f"{name}: {exc}", module=exc.module) from None
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    """Chunk every readable FILE; a file that cannot be read is reported by name and skipped, and the
    exit code is 1 if any was."""
    texts, failed = [], 0
    for name in args.files:  # read everything first: report bad files before loading the model
        try:
            texts.append((name, read_source(name)))
        except (ValueError, OSError, FormatSupportMissing) as exc:
            print(f"hseg chunk: error: {exc}", file=sys.stderr)
            failed += 1
    if not texts:
        return 1
    if args.quiet:
        quiet_model_loading()
    chunker = chunker_from_args(args, progress=not args.quiet)
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", message=r"document .* is blank")
        results = chunker.chunk_many([d.text for _, d in texts], [name for name, _ in texts],
                                     source_maps=[d.pages for _, d in texts])
    for w in caught:
        if "is blank" in str(w.message):
            print(f"hseg chunk: warning: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if args.format == "json":
        json.dump([to_json(r) for r in results], sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        for r in results:
            sys.stdout.write(to_markdown(r))
    return 1 if failed else 0


def to_json(result: Chunking) -> dict[str, Any]:
    """The ``--format json`` object of one document: its segments and clusters with spans, tokens and
    heading paths (lists of titles, empty for text not read as markdown)."""
    return {
        "doc_id": result.doc_id,
        "k": result.k,
        "segments": [
            {"id": s.id, "index": s.index, "start": s.start, "end": s.end, "tokens": s.token_count,
             "heading_path": list(s.heading_path), "text": s.text}
            for s in result.segments
        ],
        "clusters": [
            {"id": c.id, "index": c.index, "start": c.start, "end": c.end, "tokens": c.token_count,
             "segments": [s.index for s in c.segments], "split_by_cap": c.split_by_cap,
             "heading_path": list(c.heading_path)}
            for c in result.clusters
        ],
    }


def _preview(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _section(path: tuple[str, ...]) -> str:
    return " › ".join(path).replace("|", "/")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def to_markdown(result: Chunking) -> str:
    """The ``--format markdown`` section of one document: a summary line and a table, cluster by
    cluster; a ``section`` column with each unit's heading path when the document has headings."""
    sizes = [c.token_count for c in result.clusters]
    mean = sum(sizes) / len(sizes) if sizes else 0
    k = f"{result.k:.3f}" if result.k is not None else "-"
    sections = any(s.heading_path for s in result.segments)

    def section(cell: str) -> list[str]:  # the section column's cell, when the table has one
        return [cell] if sections else []

    head = ["cluster", "segment", "start", "end", "tokens", *section("section"), "text"]
    lines = [
        f"## {result.doc_id}",
        "",
        f"{len(result.segments)} segments, {len(result.clusters)} clusters, mean cluster {mean:.0f} tokens, k = {k} "
        "(segments join a cluster when their cosine exceeds tau = mean + k * std of the document's segment "
        "similarities; k is searched for the target size, and negative when the segments are alike)",
        "",
        _row(head),
        "|" + "---|" * len(head),
    ]
    for c in result.clusters:
        path = f"**{_section(c.heading_path)}**" if c.heading_path else ""
        lines.append(_row([f"**{c.index}**", "", str(c.start), str(c.end), f"**{c.token_count}**", *section(path), ""]))
        for s in c.segments:
            preview = _preview(s.text).replace("|", "/")
            lines.append(_row(["", str(s.index), str(s.start), str(s.end), str(s.token_count),
                               *section(_section(s.heading_path)), preview]))
    return "\n".join(lines) + "\n\n"
