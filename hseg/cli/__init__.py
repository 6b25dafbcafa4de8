"""The ``hseg`` command line (the ``hseg`` console script, or ``python -m hseg.cli``).

Subcommands live in the modules of this package that each expose ``register(subparsers)``
(:mod:`~hseg.cli.index`, :mod:`~hseg.cli.repair`, :mod:`~hseg.cli.query`, :mod:`~hseg.cli.chunk`,
:mod:`~hseg.cli.segmenter`, :mod:`~hseg.cli.show`, :mod:`~hseg.cli.mcp`); the options several commands
share are built in :mod:`hseg.cli.options`.
This file only wires them together, so heavy imports (torch, chromadb) happen when a command runs,
not at ``--help``.

Example::

    >>> from hseg.cli import main
    >>> main(["chunk", "notes.md", "--target-tokens", "256"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from hseg.errors import HsegError

__all__ = ["main", "build_parser"]

#: modules that contribute subcommands, in the order ``hseg --help`` lists them
COMMAND_MODULES = ("hseg.cli.index", "hseg.cli.repair", "hseg.cli.query", "hseg.cli.chunk", "hseg.cli.segmenter",
                   "hseg.cli.show", "hseg.cli.mcp")


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (usage hint, then the message) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _version() -> str:
    from hseg import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="hseg",
        description="Hierarchical segmentation chunking for RAG: segments, clique clusters, multi-vector retrieval.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    parser.add_argument("--version", action="version", version=f"hseg {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    restore_progress = None
    # long work (a first query may build a lexical index): a line every few seconds (hseg.progress)
    if args.command in ("chunk", "show", "index", "repair", "query"):
        from hseg.cli.options import progress_lines

        restore_progress = progress_lines(args.command, quiet=args.quiet)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, so that a reader gone away is met inside this try
        return code
    except KeyboardInterrupt:
        print(f"hseg {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of our output went away (``hseg stats | head -1``): what was asked is done, and
        # nothing more can be told; point stdout at /dev/null so the interpreter's final flush is quiet
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    # hseg's errors (hseg.errors) say what failed and the fix; OSError: missing files, permissions, a full disk
    except (HsegError, ValueError, UnicodeDecodeError, OSError) as exc:
        print(f"hseg {args.command}: error: {exc}", file=sys.stderr)
        return 1
    finally:
        if restore_progress is not None:
            restore_progress()

