"""LlamaIndex writes through hseg, with the real model and real processes (issue 54):

* finding 1: the README's pipeline (``IngestionPipeline`` into :class:`HierarchicalSegmentVectorStore`)
  beside a library ``store.add`` in another process on one embedded store loses no vector (before, the
  pipeline's ``ChromaVectorStore`` took no writer lock and saved a stale vector index over the other
  process's vectors);
* findings 5 and 6, the plain ``ChromaVectorStore`` path, which stays possible: ``hseg stats`` names a
  document that holds two versions of its text after the pipeline ran again on an edited document, and
  ``hseg repair`` names it with the remedy that works (adding it again through hseg); a document written
  by the pipeline and followed by an hseg write gets its lexical rows from ``hseg repair`` (before:
  "nothing to repair").

The same on the hashing encoder, in one process: ``tests/store/test_llama_index_vector_store.py``."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest

pytest.importorskip("llama_index.vector_stores.chroma")

from llama_index.core import Document  # noqa: E402
from llama_index.core.ingestion import IngestionPipeline  # noqa: E402
from llama_index.vector_stores.chroma import ChromaVectorStore  # noqa: E402

from hseg.chunking.chunker import HierarchicalChunker  # noqa: E402
from hseg.store import HierarchicalStore  # noqa: E402
from llama_index_hseg import HierarchicalSegmentNodeParser, HierarchicalSegmentVectorStore  # noqa: E402
from tests.support import REPO  # noqa: E402

pytestmark = pytest.mark.model


def paragraphs(topic: str, n: int, edit: str = "") -> str:
    return "\n\n".join(f"{topic} {edit}note {i}: the {topic} was measured again on day {i}, and the "
                       f"readings of the {topic} agreed with the model within a few percent." for i in range(n))


def hseg_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hseg.cli", *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})


def stats_of(db) -> dict:
    done = hseg_cli("stats", "--db", str(db), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


WRITER = r"""
import os, pickle, sys, time
sys.path.insert(0, {repo!r})
from hseg.store import HierarchicalStore

db, path, stop = sys.argv[1], sys.argv[2], sys.argv[3]
chunkings = pickle.load(open(path, "rb"))
store = HierarchicalStore("hseg", path=db)
print("ready", flush=True)
rounds = 0
while not os.path.exists(stop) or rounds < 2:
    for ch in chunkings:
        store.add(ch, {{"source": "library"}})
        time.sleep(0.05)  # a writer polling for the lock gets a turn between adds (the lock is not fair)
    rounds += 1
print("rounds", rounds, flush=True)
"""


def test_the_readme_pipeline_beside_a_library_writer_loses_no_vector(encoder, tmp_path):
    """Finding 1: two processes writing one embedded store, one through the pipeline, one through
    ``store.add``: every record keeps its vector and every document is whole."""
    db = tmp_path / "db"
    parser = HierarchicalSegmentNodeParser(encoder=encoder, target_tokens=128)
    vector_store = HierarchicalSegmentVectorStore(path=str(db), encoder=parser.hseg_encoder)
    chunker = HierarchicalChunker(encoder=encoder, target_tokens=128)
    library = [chunker.chunk(paragraphs(t, 8), doc_id=f"lib-{t}") for t in ("tide", "comet", "glacier", "reef")]
    (tmp_path / "chunkings.pkl").write_bytes(pickle.dumps(library))
    (tmp_path / "writer.py").write_text(WRITER.format(repo=str(REPO)))
    stop = tmp_path / "stop"
    writer = subprocess.Popen([sys.executable, str(tmp_path / "writer.py"), str(db), str(tmp_path / "chunkings.pkl"),
                               str(stop)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "ready"
        pipeline = IngestionPipeline(transformations=[parser], vector_store=vector_store)
        for run in range(2):
            pipeline.run(documents=[Document(text=paragraphs(t, 6, f"run {run} "), id_=f"llama-{t}")
                                    for t in ("volcano", "orbit")])
        stop.touch()
        out, err = writer.communicate(timeout=300)
    finally:
        stop.touch()
        if writer.poll() is None:
            writer.kill()
            writer.wait(timeout=60)
    assert writer.returncode == 0, err[-3000:]
    stats = stats_of(db)
    assert stats["records_without_vectors"] == 0 and stats["unit_records_without_vectors"] == 0, stats
    assert stats["documents"] == 6 and stats["documents_incomplete"] == 0, stats
    assert stats["unit_index_segments"] == stats["segments_total"] == stats["lexical_index"]["segments"], stats


def chroma_pipeline(db, encoder):
    """The old README's path: the core store opens the collection, the pipeline writes around it."""
    store = HierarchicalStore("hseg", path=str(db), encoder=encoder)
    parser = HierarchicalSegmentNodeParser(encoder=encoder, target_tokens=128)
    return store, parser, IngestionPipeline(transformations=[parser],
                                            vector_store=ChromaVectorStore(chroma_collection=store.collection))


def test_stats_and_repair_name_a_document_the_pipeline_left_in_two_versions(encoder, tmp_path):
    """Finding 5: the plain ChromaVectorStore pipeline run again on an edited document keeps the old
    text answering beside the new; stats and repair name it, and adding it again through hseg fixes it."""
    db = tmp_path / "db"
    store, parser, pipeline = chroma_pipeline(db, encoder)
    pipeline.run(documents=[Document(text=paragraphs("tide", 8), id_="report")])
    edited = paragraphs("tide", 8, "revised ")
    pipeline.run(documents=[Document(text=edited, id_="report")])
    store.sync_unit_index()
    stats = stats_of(db)
    assert stats["documents_mixed_versions"] == 1 and stats["mixed_documents"] == ["report"], stats
    shown = hseg_cli("stats", "--db", str(db))
    assert "two versions" in shown.stdout and "'report'" in shown.stdout, shown.stdout
    repaired = hseg_cli("repair", "--db", str(db), "--quiet")
    assert repaired.returncode == 1 and "two versions" in repaired.stdout and "report" in repaired.stdout, \
        repaired.stdout
    assert "nothing to repair" not in repaired.stdout
    # the remedy named: add it again from its source through hseg
    HierarchicalSegmentVectorStore(HierarchicalStore("hseg", path=str(db), encoder=encoder)).add(
        parser.get_nodes_from_documents([Document(text=edited, id_="report")]))
    stats = stats_of(db)
    assert stats["documents_complete"] == 1 and stats["documents_incomplete"] == 0, stats
    hits = HierarchicalStore("hseg", path=str(db), encoder=encoder).search("tide measured", k=10)
    assert hits and all(h.text in edited for h in hits)


def test_repair_gives_lexical_rows_to_pipeline_documents_an_hseg_write_followed(encoder, tmp_path):
    """Finding 6: documents the pipeline wrote, then an hseg write: stats names them and repair gives
    them their lexical rows, so the hybrid search ranks them by their words again."""
    db = tmp_path / "db"
    store, parser, pipeline = chroma_pipeline(db, encoder)
    chunker = HierarchicalChunker(encoder=encoder, target_tokens=128)
    store.add(chunker.chunk(paragraphs("glacier", 6), doc_id="library-doc"))  # the store's lexical index exists
    pipeline.run(documents=[Document(text=paragraphs("volcano", 6), id_="pipeline-doc")])
    store.sync_unit_index()  # the old README's step
    store.add(chunker.chunk(paragraphs("reef", 6), doc_id="library-doc-2"))  # any hseg write
    stats = stats_of(db)
    assert stats["documents_incomplete"] == 1 and stats["incomplete_documents"] == ["pipeline-doc"], stats
    assert stats["documents_unit_rows_only"] == 1, stats
    repaired = hseg_cli("repair", "--db", str(db), "--quiet")
    assert repaired.returncode == 0 and "repaired   1 documents" in repaired.stdout, repaired.stdout
    stats = stats_of(db)
    assert stats["documents_incomplete"] == 0 and stats["lexical_index"]["segments"] == stats["segments"], stats
    lexical = HierarchicalStore("hseg", path=str(db), encoder=encoder)._parts.lexical
    assert lexical is not None and "pipeline-doc" in lexical.documents(["pipeline-doc"])
