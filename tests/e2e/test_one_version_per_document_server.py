"""Two clients of one ``chroma run`` server adding one document id at the same moment end with one
version of it every round (issue 54, finding 2: before the per-document turn, 16 of 16 rounds left
both versions mixed in one document). Real processes, the real model's chunkings; threads of one
process: ``tests/store/test_one_version_per_document.py``, whose tests run here over HTTP too."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.store import HierarchicalStore
from tests.store import test_one_version_per_document
from tests.store.test_one_version_per_document import TEXTS, versions_of
from tests.support import REPO
from tests.support.clients import server_variants

pytestmark = pytest.mark.integration

globals().update(server_variants(test_one_version_per_document))

ROUNDS = 20

WRITER = r"""
import pickle, sys
sys.path.insert(0, {repo!r})
from hseg.store import HierarchicalStore

host, port, name, me, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
chunkings = pickle.load(open(path, "rb"))
store = HierarchicalStore(name, host=host, port=port)
print("ready", flush=True)
for line in sys.stdin:
    r = int(line)
    store.add(chunkings[(me + r) % 2])
    print("done", r, flush=True)
"""


def test_two_server_clients_adding_one_document_leave_one_version(chroma_server, encoder, tmp_path):
    chunker = HierarchicalChunker(encoder=encoder, target_tokens=64)
    chunkings = [chunker.chunk(t, doc_id="report") for t in TEXTS]
    assert chunkings[0].clusters and chunkings[1].clusters
    (tmp_path / "chunkings.pkl").write_bytes(pickle.dumps(chunkings))
    (tmp_path / "writer.py").write_text(WRITER.format(repo=str(REPO)))
    name = "one-version"
    store = HierarchicalStore(name, host=chroma_server.host, port=chroma_server.port, encoder=encoder)
    writers = [subprocess.Popen([sys.executable, str(tmp_path / "writer.py"), chroma_server.host,
                                 str(chroma_server.port), name, str(i), str(tmp_path / "chunkings.pkl")],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tmp_path)
               for i in range(2)]
    try:
        for w in writers:
            assert w.stdout.readline().strip() == "ready"
        mixed = []
        for r in range(ROUNDS):
            for w in writers:  # both told before either is read: the two adds overlap
                w.stdin.write(f"{r}\n")
                w.stdin.flush()
            for w in writers:
                assert w.stdout.readline().split() == ["done", str(r)], f"writer {w.pid} failed in round {r}"
            if len(versions_of(store, "report")) != 1:
                mixed.append(r)
        assert mixed == [], f"{len(mixed)} of {ROUNDS} rounds left both versions"
    finally:
        for w in writers:
            w.stdin.close()
            w.wait(timeout=60)
