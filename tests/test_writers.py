"""Two processes on one store (issue 25): two writers on one embedded store take turns through the
lock file, and a document whose records lost their vectors is redone by the next ``hseg index``
(item 1); two writers creating one collection on a Chroma server both open it (item 3)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import chromadb
import numpy as np
import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.retrieval.unit_vectors import _SEP, UnitKey, companion_name
from hseg.store import HierarchicalStore
from hseg.store.lock import WriterBusyError, writer_lock
from tests.fakes import HashingEncoder, synthetic_book
from tests.test_reliability import lexical_disagreement

REPO = Path(__file__).resolve().parents[1]
FAKE_CLI = ["--encoder", HashingEncoder.name, "--segmenter", "texttiling", "--quiet"]
CHILD = r"""
import sys
sys.path.insert(0, {repo!r})
from hseg.cli import main
from hseg.encoders import factory
from tests.fakes import HashingEncoder

factory.load_encoder = lambda name=None, backend=None, threads=None: HashingEncoder()
sys.exit(main(sys.argv[1:]))
"""


def _spawn(script: Path, args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(script), *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


def _findable(db: Path, doc_ids: set[str]) -> list[str]:
    """Documents some record of which a search cannot return: a record with no vector, or a
    segment whose own vector does not find it (in the collection or in the unit index)."""
    client = chromadb.PersistentClient(path=str(db))
    problems = []
    for name in ("hseg", companion_name("hseg")):
        col = client.get_collection(name)
        got = col.get(include=["metadatas"])
        by_doc: dict[str, list[str]] = {}
        for rid, meta in zip(got["ids"], got["metadatas"]):
            by_doc.setdefault(str(meta["hseg_doc_id"]), []).append(rid)
        for doc in sorted(doc_ids):
            ids = by_doc.get(doc, [])
            if not ids:
                problems.append(f"{name}: {doc} has no records")
                continue
            try:
                vectors = col.get(ids=ids, include=["embeddings"])["embeddings"]
            except Exception as exc:  # InternalError: Error finding id
                problems.append(f"{name}: {doc}: {exc}")
                continue
            hit = col.query(query_embeddings=[np.asarray(vectors[0])], n_results=1, include=["distances"])
            if hit["distances"][0][0] > 1e-4:
                problems.append(f"{name}: {doc}: its own vector does not find it")
    return problems


def test_two_hseg_index_processes_on_one_embedded_store_lose_nothing(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO)))
    # three trials: with the lock off the first one already loses vectors (checked); ten took 4 minutes of a
    # 20-minute suite on a busy 2-core machine
    for trial in range(3):
        work = tmp_path / f"t{trial}"
        # over 1,000 records a writer: Chroma persists its vector index from memory past its sync
        # threshold, which is when two unserialised writers overwrite each other's vectors (about 400
        # of 2,071 records lost in one run with the lock off)
        files = {f"{part}/f{i}.md": synthetic_book(20_000 + 97 * i, seed=1000 * trial + 100 * ord(part[0]) + i)
                 for part in ("a", "b") for i in range(20)}
        for name, text in {**files, "seed.md": synthetic_book(3_000, seed=trial)}.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(text, encoding="utf-8")
        first = subprocess.run([sys.executable, str(script), "index", "seed.md", "--db", "db", *FAKE_CLI], cwd=work,
                               capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr[-2000:]
        procs = [_spawn(script, ["index", part, "--db", "db", "--batch-docs", "4", *FAKE_CLI], work)
                 for part in ("a", "b")]
        results = [_finish(p) for p in procs]
        for rc, out, err in results:
            assert rc == 0, err[-2000:]
            assert "20 indexed" in out, out
        assert _findable(work / "db", {*files, "seed.md"}) == [], f"trial {trial}"
        assert lexical_disagreement(work / "db") == [], f"trial {trial}"
        shutil.rmtree(work)


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


#: the two ways Chroma's embedded engine fails a get of vectors when a client's vector index lacks one
#: (the second seen in test_eight_readers_and_one_writer_on_one_persistent_store, about one run in five)
MISSING_VECTOR = ["Error finding id {}", "Error executing plan: Internal error: Error getting embedding"]


@pytest.mark.parametrize("message", MISSING_VECTOR)
def test_a_document_whose_vectors_are_lost_is_redone(tmp_path, monkeypatch, message):
    """Completeness is judged by what a search needs: metadata and vectors, in both collections."""
    from hseg import ingest

    enc = HashingEncoder()
    store = HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=enc)
    chunker = HierarchicalChunker(encoder=enc, segmenter="texttiling")
    texts = {"a.md": synthetic_book(1500, seed=1), "b.md": synthetic_book(1500, seed=2)}
    assert ingest.ingest_batch(texts, chunker, store).documents == 2
    assert ingest.ingest_batch(texts, chunker, store).unchanged == 2
    lost = store.stored_records(["b.md"])["b.md"]
    victim = next(iter(lost))
    real_get = type(store.collection).get

    def get(self, *args, **kwargs):  # as Chroma answers for a record whose vector the HNSW index lacks
        if victim in (kwargs.get("ids") or []) and "embeddings" in (kwargs.get("include") or []):
            raise chromadb.errors.InternalError(message.format(victim))
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(type(store.collection), "get", get)
    assert store.documents_missing_vectors({d: list(r) for d, r in store.stored_records(list(texts)).items()}) \
        == {"b.md"}
    done = ingest.ingest_batch(texts, chunker, store)
    assert (done.documents, done.unchanged) == (1, 1)


@pytest.mark.parametrize("message", MISSING_VECTOR)
def test_a_search_leaves_out_records_whose_vectors_its_view_lacks(tmp_path, monkeypatch, message):
    """A reader's view of an embedded store can trail another client's write: its vector index lacks
    records its metadata already has, and its unit index lacks their rows (so unit='auto' reads the
    records' vectors itself). Such records are not results of that view; the search answers without
    them instead of failing."""
    enc = HashingEncoder()
    store = HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=enc)
    chunker = HierarchicalChunker(encoder=enc, segmenter="texttiling")
    store.add(chunker.chunk_many([synthetic_book(2500, seed=1), synthetic_book(2500, seed=2)], ["a.md", "b.md"]))
    b_records = set(store.stored_records(["b.md"])["b.md"])
    companion = store.unit_index.collection
    companion.delete(where={"hseg_doc_id": "b.md"})  # the write's unit-index rows, not in this view yet
    real_get = type(store.collection).get
    refused = []

    def lacking(rid: str) -> bool:  # b.md's records, and their rows in the unit index
        return rid in b_records or (_SEP in rid and UnitKey.parse(rid).segment_id in b_records)

    def get(self, *args, **kwargs):  # as Chroma answers when the HNSW index lacks one of the vectors asked for
        missing = [rid for rid in kwargs.get("ids") or [] if lacking(rid)]
        if missing and "embeddings" in (kwargs.get("include") or []):
            refused.append(missing[0])
            raise chromadb.errors.InternalError(message.format(missing[0]))
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(type(store.collection), "get", get)
    for kwargs in ({"k": 4, "unit": "auto"}, {"budget_tokens": 600, "unit": "auto"},
                   {"k": 4, "unit": "auto", "lexical_weight": 0.5}):
        hits = store.search("river flood trade", **kwargs)
        assert hits and {h.doc_id for h in hits} <= {"a.md", "b.md"}, kwargs
    assert refused  # the searches did ask for vectors the view lacked


@pytest.mark.parametrize("message", MISSING_VECTOR)
def test_a_search_that_meets_a_torn_view_reads_again_through_a_newer_one(tmp_path, monkeypatch, message):
    """A reader that opens its private view while another writer is saving its vector index gets a
    torn index, on which a kNN fails as a whole (what made the eight-readers test fail ~1 run in 15).
    The search discards that view and answers through one opened after it; a store's own collections
    are never discarded, and a kNN that keeps failing fails after a bounded number of views."""
    enc = HashingEncoder()
    path = str(tmp_path / "db")
    chunker = HierarchicalChunker(encoder=enc, segmenter="texttiling")
    reader = HierarchicalStore("hseg", path=path, encoder=enc)
    writer = HierarchicalStore("hseg", path=path, encoder=enc)  # another writer: the reader's own view goes stale
    writer.add(chunker.chunk(synthetic_book(2500, seed=1), "a.md"))
    expected = [(h.cluster_id, h.start, h.end) for h in writer.search("river flood trade", k=3)]
    real_query = type(reader.collection).query
    torn = {"left": 1}

    def query(self, *args, **kwargs):  # Chroma's kNN on a view whose index lacks a vector its metadata names
        if self is not reader.collection and self is not writer.collection and torn["left"] > 0:
            torn["left"] -= 1
            raise chromadb.errors.InternalError(message.format("seg-0123"))
        return real_query(self, *args, **kwargs)

    monkeypatch.setattr(type(reader.collection), "query", query)
    hits = reader.search("river flood trade", k=3)
    assert [(h.cluster_id, h.start, h.end) for h in hits] == expected
    assert reader._fresh.reopened == 2 and torn["left"] == 0  # the torn view, then a newer one

    torn["left"] = 100  # every view torn: the search fails, after a bounded number of them
    writer.add(chunker.chunk(synthetic_book(2500, seed=2), "b.md"))
    with pytest.raises(chromadb.errors.InternalError):
        reader.search("river flood trade", k=3)
    assert 2 < reader._fresh.reopened <= 2 + 5

    calls = []  # the store's own collections (no other writer since): an error there is not a torn view
    own = HierarchicalStore("own", path=str(tmp_path / "own"), encoder=enc)
    own.add(chunker.chunk(synthetic_book(2500, seed=3), "c.md"))

    def failing(self, *args, **kwargs):
        calls.append(self)
        raise chromadb.errors.InternalError(message.format("seg-0123"))

    monkeypatch.setattr(type(reader.collection), "query", failing)
    with pytest.raises(chromadb.errors.InternalError):
        own.search("river flood trade", k=3)
    assert calls == [own.collection]


def test_a_search_whose_torn_view_another_search_replaced_reads_again(tmp_path, monkeypatch):
    """Many readers share one store's views: while one search fails on a torn private view, another
    may already have replaced that view (the log moved on and its search opened a newer one). The
    failed search reads again through the newer view instead of raising (the eight-readers test
    failed so, 3 runs in ~110 under load, in round 8)."""
    enc = HashingEncoder()
    path = str(tmp_path / "db")
    chunker = HierarchicalChunker(encoder=enc, segmenter="texttiling")
    reader = HierarchicalStore("hseg", path=path, encoder=enc)
    writer = HierarchicalStore("hseg", path=path, encoder=enc)
    writer.add(chunker.chunk(synthetic_book(2500, seed=1), "a.md"))
    real_query = type(reader.collection).query
    torn = {"left": 1}

    def query(self, *args, **kwargs):
        if self is not reader.collection and self is not writer.collection and torn["left"] > 0:
            torn["left"] -= 1
            writer.add(chunker.chunk(synthetic_book(2500, seed=2), "b.md"))  # the log moves on ...
            assert reader.search("glacier ice summit", k=1)  # ... and another search opens a newer view
            raise chromadb.errors.InternalError("Error executing plan: Internal error: Error finding id")
        return real_query(self, *args, **kwargs)

    monkeypatch.setattr(type(reader.collection), "query", query)
    hits = reader.search("river flood trade", k=3)
    monkeypatch.setattr(type(reader.collection), "query", real_query)
    expected = [(h.cluster_id, h.start, h.end) for h in writer.search("river flood trade", k=3)]
    assert [(h.cluster_id, h.start, h.end) for h in hits] == expected  # answered by the newer view
    assert torn["left"] == 0 and reader._fresh.reopened == 2  # the torn view, the other search's newer one


# --------------------------------------------------------------------------- two creators on a server (item 3)

RACER = r"""
import sys, time
sys.path.insert(0, {repo!r})
import chromadb
from hseg.store import HierarchicalStore
from tests.fakes import HashingEncoder

host, port, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
client = chromadb.HttpClient(host=host, port=port)
client.heartbeat()
print("ready", flush=True)
start = float(sys.stdin.readline())
for i in range(rounds):
    time.sleep(max(0.0, start + 1.0 * i - time.time()))  # both processes open round i's new collection at once
    try:
        store = HierarchicalStore(f"race-{{i}}", client=client, encoder=HashingEncoder())
        print(i, store.collection.id, store.unit_index.collection.id, flush=True)
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
    assert store.unit_index is not None and others[0].unit_index is not None
    assert store.unit_index.collection.id == others[0].unit_index.collection.id


# --------------------------------------------------------------------------- a long-lived reader (item 4)

WRITER = r"""
import sys
sys.path.insert(0, {repo!r})
from hseg.chunking.chunker import HierarchicalChunker
from hseg.store import HierarchicalStore
from tests.fakes import HashingEncoder

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
