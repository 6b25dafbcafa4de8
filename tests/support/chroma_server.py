"""Moved to :mod:`hseg_testing.chroma_server`, which the benchmarks import too; this name stays only for tests
written before the move (import from ``hseg_testing.chroma_server``)."""

from hseg_testing.chroma_server import *  # noqa: F403
