"""hseg on a platform without ``fcntl`` (Windows, issue 55 item 5): the packages, both adapters and the
store import, and an embedded store adds and searches, in a child process where ``fcntl`` cannot be
imported. hseg locks files only through portalocker, which picks the platform's own primitive
(``flock`` here, ``LockFileEx`` on Windows); it is imported before ``fcntl`` is taken away, as the
one module allowed to use it here, so that what is checked is hseg's own code."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import REPO

CHILD = r"""
import sys
sys.path.insert(0, {repo!r})
import portalocker  # noqa: F401  (takes its POSIX branch here, its Windows branch there)

sys.modules["fcntl"] = None  # every later ``import fcntl`` raises ImportError, as on Windows
import hseg, langchain_hseg, llama_index_hseg  # noqa: E401,F401
from hseg.chunking.chunker import HierarchicalChunker
from hseg.store import HierarchicalStore
from hseg.store.lock import writer_lock
from hseg_testing.fakes import HashingEncoder, synthetic_book

enc = HashingEncoder()
store = HierarchicalStore("hseg", path=sys.argv[1], encoder=enc)
chunking = HierarchicalChunker(encoder=enc, segmenter="texttiling").chunk(synthetic_book(2_000, seed=1), "x.md")
written = store.add(chunking)
hits = store.search(chunking.segments[0].text[:200], k=2)
with writer_lock(sys.argv[1], timeout_s=1):  # taken again once the add let go
    pass
print("written", written, "hits", len(hits), "doc", hits[0].doc_id)
"""


def test_an_embedded_store_adds_and_searches_where_fcntl_cannot_be_imported(tmp_path):
    script = tmp_path / "no_fcntl.py"
    script.write_text(CHILD.format(repo=str(REPO)))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "db")], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    words = done.stdout.split()
    assert words[0] == "written" and int(words[1]) > 0, done.stdout
    assert words[2:] == ["hits", "2", "doc", "x.md"], done.stdout
