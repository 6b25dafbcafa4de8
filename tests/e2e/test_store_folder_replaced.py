"""An embedded store's folder renamed or replaced under a long-lived reader (issue 54 finding 13): the
reader refuses, in one line naming the fix, instead of reading two stores at once (Chroma's open files
of the old folder, and the lexical index, write log and new views of the path). A store opened again
reads what is there. The stores are written by child processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from hseg.errors import StoreReplacedError
from hseg.store import HierarchicalStore
from hseg_testing.chunkers import small_chunker
from tests.support import REPO

#: adds documents ``<word>0..2`` to the embedded store at ``sys.argv[1]``
WRITER = r"""
import sys
sys.path.insert(0, {repo!r})
from hseg.store import HierarchicalStore
from hseg_testing.chunkers import small_chunker

chunker = small_chunker()
store = HierarchicalStore("hseg", path=sys.argv[1], encoder=chunker.encoder)
word = sys.argv[2]
store.add([chunker.chunk(f"{{word}} beetles live in the forests of Peru. " * 30, doc_id=f"{{word}}{{i}}")
           for i in range(3)])
"""


#: the documents a hybrid search of the store at ``sys.argv[1]`` finds, sorted
READER = r"""
import sys
sys.path.insert(0, {repo!r})
from hseg.store import HierarchicalStore
from hseg_testing.chunkers import small_chunker

store = HierarchicalStore("hseg", path=sys.argv[1], encoder=small_chunker().encoder)
print(*sorted({{h.doc_id for h in store.search("beetles Peru", k=30, lexical_weight=0.5)}}))
"""


def _write(tmp_path, db, word: str) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(repo=str(REPO)))
    done = subprocess.run([sys.executable, str(script), str(db), word], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]


def _docs(store: HierarchicalStore, lexical_weight: float) -> set[str]:
    return {h.doc_id for h in store.search("beetles Peru", k=6, lexical_weight=lexical_weight)}


@pytest.mark.parametrize("how", ["replaced", "renamed"])
def test_a_store_folder_replaced_under_a_reader_is_refused_not_mixed(tmp_path, how):
    _write(tmp_path, tmp_path / "A", "alpha")
    _write(tmp_path, tmp_path / "B", "beta")
    db = tmp_path / "db"
    shutil.copytree(tmp_path / "A", db)
    reader = HierarchicalStore("hseg", path=str(db), encoder=small_chunker().encoder)
    assert _docs(reader, 0.5) == {"alpha0", "alpha1", "alpha2"}
    os.rename(db, tmp_path / "db.old")
    if how == "replaced":
        shutil.copytree(tmp_path / "B", db)
        _write(tmp_path, db, "gamma")  # and written to there
    for lexical_weight in (0.0, 0.5):
        with pytest.raises(StoreReplacedError, match=r"renamed or replaced after this store opened it .*open it "
                                                     r"again in a new process"):
            _docs(reader, lexical_weight)
    if how == "replaced":  # opened again in a new process: the store that is there, alone
        done = subprocess.run([sys.executable, "-c", READER.format(repo=str(REPO)), str(db)], capture_output=True,
                              text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.split() == ["beta0", "beta1", "beta2", "gamma0", "gamma1", "gamma2"], done.stdout
