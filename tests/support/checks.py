"""Moved to :mod:`hseg_testing.checks`, which the benchmarks import too; this name stays only for tests
written before the move (import from ``hseg_testing.checks``)."""

from hseg_testing.checks import *  # noqa: F403
