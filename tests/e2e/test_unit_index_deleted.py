"""The unit-index collection deleted by another process under a long-lived reader (issue 54 finding
14): the reader's next searches answer (by the slower path, with the warning a store without the
index gives) instead of failing every search until a write; a write builds the index again.
Embedded and on a ``chroma run`` server."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hseg.retrieval.unit_vectors import companion_name
from hseg.store import HierarchicalStore
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import synthetic_book

#: deletes the collection ``sys.argv[2]`` of the embedded database ``sys.argv[1]`` (or, with four
#: arguments, of the server ``sys.argv[3]:sys.argv[4]``)
DELETER = r"""
import sys
import chromadb
client = chromadb.PersistentClient(path=sys.argv[1]) if len(sys.argv) == 3 else \
    chromadb.HttpClient(host=sys.argv[3], port=int(sys.argv[4]))
client.delete_collection(sys.argv[2])
print("deleted", flush=True)
"""


def _delete_elsewhere(tmp_path, *args: str) -> None:
    script = tmp_path / "deleter.py"
    script.write_text(DELETER)
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0 and "deleted" in done.stdout, done.stderr[-3000:]


def _searches_answer(store: HierarchicalStore) -> None:
    for unit in ("auto", "cluster", "segment"):
        for _ in range(2):  # and again: not only the first search after the delete
            assert store.search("river sediment tide", k=2, unit=unit), unit


def _check(store: HierarchicalStore, delete, caplog) -> None:
    chunker = small_chunker()
    store.add([chunker.chunk(synthetic_book(1500, seed=i), doc_id=f"d{i}") for i in range(4)])
    _searches_answer(store)
    delete()
    with caplog.at_level("WARNING"):
        _searches_answer(store)  # was: NotFoundError "Collection [..._hseg_units] does not exist", every search
    assert "the unit index holds 0 records" in caplog.text
    store.add(chunker.chunk(synthetic_book(1500, seed=9), doc_id="d9"))  # a write builds it again
    assert store._parts.units is not None and store._parts.units.count() > 0
    _searches_answer(store)


def test_an_embedded_unit_index_deleted_by_another_process_leaves_searches_answering(tmp_path, caplog):
    db = str(tmp_path / "db")
    store = HierarchicalStore("hseg", path=db, encoder=small_chunker().encoder)
    _check(store, lambda: _delete_elsewhere(tmp_path, db, companion_name("hseg")), caplog)


@pytest.mark.integration
def test_a_server_unit_index_deleted_by_another_client_leaves_searches_answering(
        chroma_server, chroma_collection_name, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("HSEG_CACHE", str(tmp_path / "cache"))
    store = HierarchicalStore(chroma_collection_name, client=chroma_server.client(),
                              encoder=small_chunker().encoder)
    _check(store, lambda: _delete_elsewhere(tmp_path, "-", companion_name(chroma_collection_name),
                                            chroma_server.host, str(chroma_server.port)), caplog)
