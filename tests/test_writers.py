"""Two writers on one embedded store (issue 25 item 1): writers take turns through the lock file,
and a document whose records lost their vectors is redone by the next ``hseg index``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import chromadb
import numpy as np
import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.retrieval.unit_vectors import companion_name
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
    for trial in range(10):
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
        t0 = time.monotonic()
        with writer_lock(tmp_path / "db", timeout_s=30):
            assert time.monotonic() - t0 < 5
    finally:
        holder.kill()
        holder.wait(timeout=30)
        holder.stdout.close()


def test_a_document_whose_vectors_are_lost_is_redone(tmp_path, monkeypatch):
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
            raise chromadb.errors.InternalError(f"Error finding id {victim}")
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(type(store.collection), "get", get)
    assert store.documents_missing_vectors({d: list(r) for d, r in store.stored_records(list(texts)).items()}) \
        == {"b.md"}
    done = ingest.ingest_batch(texts, chunker, store)
    assert (done.documents, done.unchanged) == (1, 1)
