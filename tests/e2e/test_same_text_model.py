"""LlamaIndex's ``SimpleDirectoryReader`` run twice into one store, with the real MiniLM and embedded
Chroma (issue 53): without ``filename_as_id`` its ids are random, so the second run writes every file
again under new ids; each such write is named in a warning with both ids. With ``filename_as_id=True``
(what the README and notebooks use) a second run replaces each file's one version.

The store-lane tests of the lookup: ``tests/store/test_same_text_other_id.py``."""

from __future__ import annotations

import logging

import pytest
from llama_index.core import SimpleDirectoryReader
from llama_index.core.ingestion import IngestionPipeline

from llama_index_hseg import HierarchicalSegmentNodeParser, HierarchicalSegmentVectorStore

pytestmark = pytest.mark.model

FILES = {
    "tides.md": "# Tides\n\n" + "\n\n".join(
        f"The harbour tide on day {i} rose {i + 3} centimetres above the mark, as the almanac had said it would."
        for i in range(8)),
    "orbits.txt": "\n\n".join(
        f"Orbit note {i}: the moon's orbit was measured again, and its period agreed with the tables."
        for i in range(8)),
}


@pytest.fixture
def folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in FILES.items():
        (docs / name).write_text(text, encoding="utf-8")
    return docs


def _run(folder, vector_store, parser, **reader) -> list[str]:
    """One read of the folder through a pipeline into the store; the Documents' ids."""
    documents = SimpleDirectoryReader(str(folder), **reader).load_data()
    assert len(documents) == len(FILES)
    IngestionPipeline(transformations=[parser], vector_store=vector_store).run(documents=documents)
    return [d.id_ for d in documents]


def test_a_reader_run_twice_with_random_ids_is_named(encoder, folder, tmp_path, caplog):
    parser = HierarchicalSegmentNodeParser(encoder=encoder, target_tokens=128)
    vector_store = HierarchicalSegmentVectorStore(path=str(tmp_path / "chroma"), encoder=parser.hseg_encoder)
    first = _run(folder, vector_store, parser)
    with caplog.at_level(logging.WARNING, logger="hseg.store.store"):
        second = _run(folder, vector_store, parser)
    assert set(first).isdisjoint(second)  # the reader's random ids
    warned = [r.getMessage() for r in caplog.records
              if r.levelno == logging.WARNING and "also stored" in r.getMessage()]
    assert len(warned) == len(FILES), warned
    for old, new in zip(first, second):  # the reader lists the files in one order
        assert any(repr(new) in w and repr(old) in w for w in warned), (old, new, warned)
    assert sorted(vector_store.store.doc_ids()) == sorted(first + second)  # warned, still written


def test_a_reader_run_twice_with_filename_ids_keeps_one_version(encoder, folder, tmp_path, caplog):
    parser = HierarchicalSegmentNodeParser(encoder=encoder, target_tokens=128)
    vector_store = HierarchicalSegmentVectorStore(path=str(tmp_path / "chroma"), encoder=parser.hseg_encoder)
    first = _run(folder, vector_store, parser, filename_as_id=True)
    records = vector_store.store.count()
    with caplog.at_level(logging.WARNING, logger="hseg.store.store"):
        second = _run(folder, vector_store, parser, filename_as_id=True)
    assert first == second and sorted(vector_store.store.doc_ids()) == sorted(first)
    assert vector_store.store.count() == records
    assert not [r for r in caplog.records if "also stored" in r.getMessage()]
    stats = vector_store.store.stats()
    assert stats["documents_incomplete"] == 0 and stats["documents_complete"] == len(FILES), stats
