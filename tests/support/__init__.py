"""What the tests of every lane share and the benchmarks do not: synthetic chunkings
(:mod:`.chunkings`), Chroma clients (:mod:`.clients`), the viewer page parser (:mod:`.pages`) and the
Ray scenarios that ``tests/e2e/test_distributed.py`` runs in a process of their own
(:mod:`.ray_scenarios`). What the benchmarks share with the tests (the hashing encoder and chunker,
the checks of stored documents, a ``chroma run`` server) is :mod:`hseg_testing`.

Nothing here is collected as a test. Child processes that import it put :data:`REPO` on
``sys.path`` first.
"""

from __future__ import annotations

from pathlib import Path

from hseg_testing import REPO

__all__ = ["REPO", "SHARED", "shared_or_skip"]

#: the data sets some tests read, next to the repository (they skip when it is absent)
SHARED = (REPO / ".." / "shared").resolve()


def shared_or_skip(folder: str | None = None) -> Path:
    """:data:`SHARED` (or ``folder`` under it), or a skip that says, for someone with a fresh clone, what
    is skipped and where the data would come from."""
    where = SHARED if folder is None else SHARED / folder
    if not where.is_dir():
        import pytest

        pytest.skip(f"an evaluation on the project's development data, which is not in the repository: it reads "
                    f"{where} (Chroma's evaluation corpora, github.com/brandonstarxel/chunking_evaluation, and text "
                    "segmentation sets); no other test needs it")
    return where
