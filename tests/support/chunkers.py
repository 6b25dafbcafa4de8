"""Moved to :mod:`hseg_testing.chunkers`, which the benchmarks import too; this name stays only for tests
written before the move (import from ``hseg_testing.chunkers``)."""

from hseg_testing.chunkers import *  # noqa: F403
