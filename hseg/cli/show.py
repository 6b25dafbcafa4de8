"""``hseg show``: chunk one file and write a self-contained HTML view of its segments and clusters.

Example::

    hseg show examples/data/example.md --html example.html --target-tokens 256
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hseg.cli.chunk import read_source
from hseg.cli.options import add_chunker_options, chunker_from_args, quiet_model_loading


def register(sub: Any) -> None:
    p = sub.add_parser(
        "show",
        help="chunk a file and write an HTML page showing its segments and clusters",
        description="Chunk FILE ('-' reads stdin) and write a self-contained HTML page (no external resources) "
                    "showing segment boundaries with their probabilities, clusters as coloured bands and "
                    "token counts.",
    )
    p.add_argument("file", metavar="FILE", help="UTF-8 text or markdown file; '-' for stdin")
    p.add_argument("--html", required=True, metavar="PATH", help="HTML file to write ('-' writes to stdout)")
    add_chunker_options(p)
    p.add_argument("--title", default=None, help="page title (default 'hseg: FILE')")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars or progress lines (on stderr) and no summary line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the page of FILE to ``--html`` (or stdout) and print a summary line unless ``--quiet``."""
    doc = read_source(args.file)  # fail before loading the model
    out = None if args.html == "-" else Path(args.html)
    if out is not None:
        if out.is_dir():
            raise IsADirectoryError(f"{args.html}: is a directory")
        if not out.parent.is_dir():
            raise FileNotFoundError(f"{args.html}: directory {str(out.parent)!r} does not exist")
    from hseg.chunking.viewer import render_html

    if args.quiet:
        quiet_model_loading()
    chunker = chunker_from_args(args, progress=not args.quiet)
    doc_id = "stdin" if args.file == "-" else args.file
    result = chunker.chunk(doc.text, doc_id, source_map=doc.pages)
    page = render_html(result, title=args.title)
    if out is None:
        sys.stdout.write(page)
        return 0
    out.write_text(page, encoding="utf-8")
    if not args.quiet:
        print(f"wrote {out} ({len(result.segments)} segments, {len(result.clusters)} clusters)")
    return 0
