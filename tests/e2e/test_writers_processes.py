"""Two processes on one store (issue 25): the writer lock is released when its holder is killed, a
long-lived reader of an embedded store sees another process's writes (item 1), and two writers creating
one collection on a Chroma server both open it (item 3). In one process: ``tests/store/test_writers.py``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.retrieval.unit_vectors import companion_name
from hseg.store import HierarchicalStore
from hseg.store.lock import WriterBusyError, writer_lock
from hseg_testing.fakes import HashingEncoder, synthetic_book
from tests.support import REPO


def test_the_lock_is_released_when_its_holder_is_killed(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, {!r})\n"
        "from hseg.store.lock import writer_lock\n"
        "with writer_lock({!r}):\n"
        "    print('held', flush=True); time.sleep(120)\n").format(str(REPO), str(tmp_path / "db"))],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        told = []
        with pytest.raises(WriterBusyError, match=rf"process {holder.pid} is writing"):
            with writer_lock(tmp_path / "db", timeout_s=0.5, on_wait=told.append):
                pass
        assert told == [f"process {holder.pid}"]
        holder.kill()
        holder.wait(timeout=30)
        with writer_lock(tmp_path / "db", timeout_s=30):  # raises WriterBusyError if the dead holder still held it
            pass
    finally:
        holder.kill()
        holder.wait(timeout=30)
        holder.stdout.close()


# --------------------------------------------------------------------------- two creators on a server (item 3)

RACER = r"""
import sys, time
sys.path.insert(0, {repo!r})
import chromadb
from hseg.store import HierarchicalStore
from hseg_testing.fakes import HashingEncoder

host, port, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
client = chromadb.HttpClient(host=host, port=port)
client.heartbeat()
print("ready", flush=True)
start = float(sys.stdin.readline())
for i in range(rounds):
    time.sleep(max(0.0, start + 1.0 * i - time.time()))  # both processes open round i's new collection at once
    try:
        store = HierarchicalStore(f"race-{{i}}", client=client, encoder=HashingEncoder())
        print(i, store.collection.id, store._parts.units.collection.id, flush=True)
    except Exception as exc:
        print(i, "error", type(exc).__name__, str(exc).replace("\n", " "), flush=True)
"""


@pytest.mark.integration
def test_two_processes_creating_one_collection_on_a_server_both_open_it(tmp_path, chroma_server):
    script = tmp_path / "racer.py"
    script.write_text(RACER.format(repo=str(REPO)))
    rounds = 12
    procs = [subprocess.Popen([sys.executable, str(script), chroma_server.host, str(chroma_server.port), str(rounds)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
             for _ in range(2)]
    try:
        for p in procs:  # both have imported chromadb and hseg: what is left to race is the opening itself
            assert p.stdout.readline().strip() == "ready"
        start = time.time() + 0.5
        for p in procs:
            p.stdin.write(f"{start}\n")
            p.stdin.flush()
        results = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=30)
    lines = [dict(line.split(" ", 1) for line in out.splitlines()) for out, _ in results]
    for (out, err), p in zip(results, procs):
        assert p.returncode == 0, err[-2000:]
        assert "error" not in out, out
    # both opened the same collection and the same unit index in every round
    assert [lines[0][str(i)] for i in range(rounds)] == [lines[1][str(i)] for i in range(rounds)]


@pytest.mark.integration
def test_a_collection_and_unit_index_created_between_look_up_and_create_are_opened(chroma_server, monkeypatch):
    """The race forced on a real server: another client creates the collection and its unit index just
    after this client's look-ups found neither, so this client's creates get the server's own answer,
    ``ChromaError: Collection [x] already exists``."""
    from chromadb.errors import NotFoundError

    name = f"forced-{uuid.uuid4().hex[:8]}"
    ours, other = chroma_server.client(), chroma_server.client()
    others: list[HierarchicalStore] = []
    real_get, api_type = type(ours).get_collection, type(ours._server)
    real_api_get = api_type.get_collection

    def get_collection(self, *args, **kwargs):
        wanted = args[0] if args else kwargs.get("name")
        if self is ours and wanted == name and not others:
            others.append(HierarchicalStore(name, client=other, encoder=HashingEncoder()))  # both collections
            raise NotFoundError(f"Collection [{wanted}] does not exist")  # what our look-up saw a moment before
        return real_get(self, *args, **kwargs)

    looked: list[str] = []

    def api_get_collection(self, *args, **kwargs):
        wanted = args[0] if args else kwargs.get("name")
        if wanted == companion_name(name) and others and not looked:  # our look-up, after the other's creates
            looked.append(wanted)
            raise NotFoundError(f"Collection [{wanted}] does not exist")
        return real_api_get(self, *args, **kwargs)

    monkeypatch.setattr(type(ours), "get_collection", get_collection)
    monkeypatch.setattr(api_type, "get_collection", api_get_collection)
    # as a server whose get_or_create is not atomic would answer: a plain create of what now exists
    monkeypatch.setattr(api_type, "get_or_create_collection",
                        lambda self, **kwargs: self.create_collection(get_or_create=False, **kwargs))
    store = HierarchicalStore(name, client=ours, encoder=HashingEncoder())
    assert looked and others
    assert store.collection.id == others[0].collection.id
    assert store._parts.units is not None and others[0]._parts.units is not None
    assert store._parts.units.collection.id == others[0]._parts.units.collection.id


# --------------------------------------------------------------------------- a long-lived reader (item 4)

WRITER = r"""
import sys
sys.path.insert(0, {repo!r})
from hseg.chunking.chunker import HierarchicalChunker
from hseg.store import HierarchicalStore
from hseg_testing.fakes import HashingEncoder

enc = HashingEncoder()
store = HierarchicalStore("hseg", path=sys.argv[1], encoder=enc)
chunker = HierarchicalChunker(encoder=enc, segmenter="texttiling", target_tokens=64, min_segment_tokens=8,
                              max_segment_tokens=48)
store.add(chunker.chunk(sys.argv[3], sys.argv[2]))
"""


def _reopened(store: HierarchicalStore) -> int:
    """Private clients the store opened to read other processes' writes (hseg.store.freshness)."""
    fresh = getattr(store, "_fresh", None)
    return 0 if fresh is None else fresh.reopened


def test_a_long_lived_reader_of_an_embedded_store_sees_another_processs_writes(tmp_path):
    """Chroma's embedded client loads a collection's vector index once: before, a reader's count()
    rose after another process wrote, but its searches never returned the new document."""
    enc = HashingEncoder()
    chunker = HierarchicalChunker(encoder=enc, segmenter="texttiling", target_tokens=64, min_segment_tokens=8,
                                  max_segment_tokens=48)
    db = tmp_path / "db"
    writer = HierarchicalStore("hseg", path=str(db), encoder=enc)
    writer.add(chunker.chunk_many([synthetic_book(2_000, seed=i) for i in range(3)], ["a", "b", "c"]))
    reader = HierarchicalStore("hseg", path=str(db), encoder=enc)  # another store object on the same client
    assert {h.doc_id for h in reader.search("river delta", k=3)} <= {"a", "b", "c"}  # its index is loaded
    assert _reopened(reader) == 0
    own = "lemur tapir lemur tapir"
    writer.add(chunker.chunk(f"{own}.", "own"))  # a write of this process, through its shared client
    assert writer.search(own, k=1)[0].doc_id == "own" and _reopened(writer) == 0  # its own: no reopen
    assert reader.search(own, k=1)[0].doc_id == "own"

    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(repo=str(REPO)))
    before = reader.count()
    question = "zebra quagga okapi giraffe savanna"
    done = subprocess.run([sys.executable, str(script), str(db), "zebra", f"{question}."], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert reader.count() > before
    for unit in ("cluster", "segment", "auto"):  # at the first search after the write
        assert reader.search(question, k=1, unit=unit)[0].doc_id == "zebra", unit
    assert reader.search_many([question], k=1)[0][0].doc_id == "zebra"
    assert reader.get_records("zebra", include_embeddings=True)
    assert writer.search(question, k=1)[0].doc_id == "zebra"
    reopened = _reopened(reader)
    assert reader.search(question, k=1)[0].doc_id == "zebra" and _reopened(reader) == reopened  # once


# --------------------------------------------------------------------------- a writer writing back to back

WORDS = ["river", "flood", "delta", "trade", "price", "glacier", "summit", "harbour", "tariff", "silt"]

BACK_TO_BACK = r"""
import sys, time
sys.path.insert(0, {repo!r})
import numpy as np
from hseg.store import HierarchicalStore
from tests.support.chunkings import build_synthetic_chunking
from hseg_testing.fakes import HashingEncoder

store = HierarchicalStore("hseg", path=sys.argv[1], encoder=HashingEncoder(16))
rng = np.random.default_rng(1)
print("ready", flush=True)
end, n = time.time() + float(sys.argv[2]), 0
while time.time() < end:
    store.add(build_synthetic_chunking(f"live-{{n}}", rng, n_clusters=2, vocabulary={words!r}))
    n += 1
print(n, flush=True)
"""


def test_a_reader_of_an_embedded_store_answers_while_another_process_writes_back_to_back(tmp_path, make_chunking):
    """Every view a reader opened while a writer saved its vector index was torn: under a writer
    writing back to back, every default search of another process failed ("Error finding id").
    Views are now loaded under a shared hold of the writer lock: every search answers, with passages
    that are the stored text, and the writer's documents are found."""
    import numpy as np

    db = tmp_path / "db"
    reader = HierarchicalStore("hseg", path=str(db), encoder=HashingEncoder(16))
    rng = np.random.default_rng(0)
    docs = [make_chunking(f"doc-{i}", rng, vocabulary=WORDS) for i in range(300)]  # ~3k records: on disk
    reader.add(docs)
    texts = {d.doc_id: d.text for d in docs}
    script = tmp_path / "writer.py"
    script.write_text(BACK_TO_BACK.format(repo=str(REPO), words=WORDS))
    writer = subprocess.Popen([sys.executable, str(script), str(db), "10"], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        searches, live = 0, 0
        while writer.poll() is None:
            hits = reader.search("river flood delta trade", budget_tokens=400)  # the default: hybrid, auto
            searches += 1
            for h in hits:
                assert h.doc_id.startswith("live-") or texts[h.doc_id][h.start:h.end] == h.text
                live += h.doc_id.startswith("live-")
        out = writer.stdout.read()
    finally:
        writer.kill()
        writer.wait()
    assert writer.returncode == 0 and int(out.strip()) > 5, out
    assert searches > 5, (searches, live)
    # the writer's documents are found (whether they ranked among the hits above is chance)
    assert {h.doc_id for h in reader.search("river flood delta trade", k=3, where={"hseg_doc_id": "live-0"})} \
        == {"live-0"}
