"""``hseg show``: chunk one file and write a self-contained HTML view of its segments and clusters.

Example::

    hseg show examples/data/example.md --html example.html --target-tokens 256
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hseg.cli_args import chunker_from_args, positive_int

__all__ = ["register"]


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
    size = p.add_mutually_exclusive_group()
    size.add_argument("--target-tokens", type=positive_int, default=None,
                      help="mean cluster size to aim for (default 512)")
    size.add_argument("--k", type=float, default=None, help="explicit clustering threshold k (tau = mu + k*sigma)")
    p.add_argument("--max-cluster-tokens", type=positive_int, default=None, help="hard cap per cluster (default 1.5x target)")
    p.add_argument("--segmenter", default=None, help="segmenter name (default: the package default)")
    p.add_argument("--title", default=None, help="page title (default 'hseg: FILE')")
    p.add_argument("--quiet", action="store_true", help="no progress bars and no summary line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hseg.cli_chunk import read_input

    text = read_input(args.file)  # fail before loading the model
    out = None if args.html == "-" else Path(args.html)
    if out is not None:
        if out.is_dir():
            raise IsADirectoryError(f"{args.html}: is a directory")
        if not out.parent.is_dir():
            raise FileNotFoundError(f"{args.html}: directory {str(out.parent)!r} does not exist")
    from hseg.viewer import render_html

    chunker = chunker_from_args(args)
    doc_id = "stdin" if args.file == "-" else args.file
    result = chunker.chunk(text, doc_id)
    page = render_html(result, title=args.title)
    if out is None:
        sys.stdout.write(page)
        return 0
    out.write_text(page, encoding="utf-8")
    if not args.quiet:
        print(f"wrote {out} ({len(result.segments)} segments, {len(result.clusters)} clusters)")
    return 0
