"""What the tests (``tests/``) and the benchmarks (``benchmarks/``) share: test doubles (:mod:`.fakes`:
the hashing encoder, synthetic books, ``hseg`` on the fake encoder in-process or as a child script),
the small hashing chunker (:mod:`.chunkers`), checks of chunkings and stored documents with the
hypothesis strategies of arbitrary text (:mod:`.checks`) and a throwaway ``chroma run`` server
(:mod:`.chroma_server`).

It lives in the repository, not in the wheel (``pyproject.toml``'s wheel packages are hseg and the two
adapters), and needs the ``dev`` extra. Helpers only the tests use stay in ``tests/support``. Child
processes that import it put :data:`REPO` on ``sys.path`` first.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO"]

#: the repository root (this file is ``hseg_testing/__init__.py``)
REPO = Path(__file__).resolve().parents[1]
