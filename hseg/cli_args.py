"""argparse value types shared by the ``hseg`` subcommands (a bad value → exit 2, one line)."""

from __future__ import annotations

import argparse
import math
from typing import Any

__all__ = ["positive_int", "finite_float", "quiet_model_loading", "chunker_from_args"]


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def finite_float(text: str) -> float:
    """A finite number (no nan or inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def quiet_model_loading() -> None:
    """Silence transformers' weight-loading bar (the CLI owns the process, so this is its call)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()


def chunker_from_args(args: argparse.Namespace) -> Any:
    """The ``HierarchicalChunker`` of ``--k/--target-tokens/--max-cluster-tokens/--segmenter/--quiet``."""
    if args.quiet:
        quiet_model_loading()
    from hseg.chunker import HierarchicalChunker

    return HierarchicalChunker(
        k=args.k,
        target_tokens=args.target_tokens,
        max_cluster_tokens=args.max_cluster_tokens,
        segmenter=args.segmenter,
        show_progress=not args.quiet,
    )
