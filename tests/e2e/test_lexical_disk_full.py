"""A full disk under ``hseg-lexical/`` (issue 54 finding 15): the lexical file is not damaged, so it is
kept as it is (no ``.damaged`` copy, none overwritten), searches answer by the dense side with the
advice to free space, and once space is freed the next search brings the index in step, exactly.
Was: "cannot be read (database or disk is full); building it again", the good file set aside over
the last saved copy, and "remove it, or make its folder writable".

The folder is a 1 MiB tmpfs mounted at ``<db>/hseg-lexical`` (root only; skipped elsewhere); the
store is used by child processes, so that nothing of this process holds the mount."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support import REPO

CHILD = r"""
import json, logging, sys
sys.path.insert(0, {repo!r})
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
from hseg.store import HierarchicalStore
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import synthetic_book

db, phase = sys.argv[1], sys.argv[2]
chunker = small_chunker()
store = HierarchicalStore("hseg", path=db, encoder=chunker.encoder)
out = {{}}
if phase == "seed":
    store.add([chunker.chunk(synthetic_book(1500, seed=i), doc_id=f"d{{i}}") for i in range(4)])
elif phase == "full":
    try:
        store.add(chunker.chunk(synthetic_book(60000, seed=10), doc_id="big"))
    except Exception as exc:
        out["add"] = f"{{type(exc).__name__}}: {{exc}}"
    out["hits"] = [len(store.search("river tide", k=2, lexical_weight=0.5)) for _ in range(2)]
else:
    store.search("river tide", k=2, lexical_weight=0.5)
    index = store._parts.lexical
    rows = dict(index.db.rows("SELECT s.id, f.text FROM segments s JOIN fts f ON f.rowid = s.rowid"))
    got = store.collection.get(where={{"hseg_level": "segment"}}, include=["documents"])
    out["in_step"] = rows == dict(zip(got["ids"], got["documents"]))
    out["segments"] = len(rows)
print(json.dumps(out))
"""


def _run(tmp_path, db, phase: str) -> tuple[dict, str]:
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO)))
    done = subprocess.run([sys.executable, str(script), db, phase], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.skipif(os.name != "posix", reason="mounts a tmpfs")
def test_a_full_disk_under_the_lexical_folder_keeps_the_file_and_says_free_space(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    db = str(tmp_path / "db")
    _run(tmp_path, db, "seed")
    folder, saved = tmp_path / "db" / "hseg-lexical", tmp_path / "saved"
    shutil.copytree(folder, saved)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        for name in os.listdir(saved):
            shutil.copy(saved / name, folder / name)
        with open(folder / "filler", "wb") as fh:  # leave ~48 KiB: a write starts, then runs out
            while shutil.disk_usage(folder).free > 48 * 1024:
                fh.write(b"\0" * 4096)
                fh.flush()
        full, err = _run(tmp_path, db, "full")
        assert full["add"].startswith("LexicalIndexStorageError: the disk of the lexical index folder"), full
        assert full["hits"] == [2, 2], full
        assert "is full" in err and "free space and run again" in err and "by the dense side alone" in err, err
        assert "building it again" not in err and "remove it" not in err, err
        assert sorted(os.listdir(folder)) == sorted(["filler", *os.listdir(saved)])  # nothing set aside
        (folder / "filler").unlink()  # space freed
        freed, _ = _run(tmp_path, db, "freed")
        assert freed["in_step"] and freed["segments"] > 0, freed
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)
