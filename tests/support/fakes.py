"""Moved to :mod:`hseg_testing.fakes`, which the benchmarks import too; this name stays only for tests
written before the move (import from ``hseg_testing.fakes``)."""

from hseg_testing.fakes import *  # noqa: F403
