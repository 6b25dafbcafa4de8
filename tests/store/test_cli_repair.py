"""``hseg stats`` and ``hseg repair`` on a store written around hseg's writers (issue 47 item 12): the
README's LlamaIndex pipeline without ``store.sync_unit_index()`` leaves documents without unit-index rows
and without paths. ``stats`` said "INCOMPLETE ... re-run 'hseg index' on their paths", a remedy that
does not apply, and the only remedy was Python. The CLI in-process (``hseg.cli.main``), hashing encoder,
an embedded store.
"""

from __future__ import annotations

import sys

import chromadb
import pytest

from hseg.cli import main
from hseg.store import HierarchicalStore
from hseg_testing.fakes import FAKE_CLI, HashingEncoder, synthetic_book
from tests.store.test_cli_index import stats_json, write_file

pytest.importorskip("llama_index.vector_stores.chroma")


def _pipeline_store(root, n: int = 3) -> None:
    """The README's LlamaIndex quickstart, without ``store.sync_unit_index()``."""
    from llama_index.core import Document
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from llama_index_hseg import HierarchicalSegmentNodeParser

    parser = HierarchicalSegmentNodeParser(encoder=HashingEncoder(), segmenter="texttiling", target_tokens=128)
    store = HierarchicalStore("hseg", path=str(root / "db"), encoder=parser.hseg_encoder)
    IngestionPipeline(transformations=[parser], vector_store=ChromaVectorStore(chroma_collection=store.collection)).run(
        documents=[Document(text=synthetic_book(4000, seed=i), id_=f"doc{i}") for i in range(n)])


def _complete_line(capsys) -> str:
    capsys.readouterr()
    assert main(["stats", "--db", "db"]) == 0
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("complete"))


def test_stats_names_the_repair_a_pipeline_store_needs_and_repair_does_it(fake, capsys):  # noqa: F811
    _pipeline_store(fake)
    line = _complete_line(capsys)
    assert line == ("complete   0 documents; 3 INCOMPLETE: 3 lack only unit-index or lexical rows (written around "
                    "hseg, e.g. by a LlamaIndex IngestionPipeline into a ChromaVectorStore): run 'hseg repair --db db'")
    assert "hseg index" not in line  # they have no paths to re-run it on
    before = sys.modules.copy()
    assert main(["repair", "--db", "db"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("repaired   3 documents of collection 'hseg' at db: ") and "unit-index rows" in out
    assert "torch" not in set(sys.modules) - set(before)  # no model: the records' vectors are the rows'
    stats = stats_json(capsys, "--db", "db")
    assert stats["documents_complete"] == 3 and stats["unit_index_segments"] == stats["segments"]
    assert main(["repair", "--db", "db"]) == 0
    assert "nothing to repair: all 3 documents" in capsys.readouterr().out


def test_what_the_store_cannot_give_back_is_counted_with_the_remedy_that_applies(fake, capsys):  # noqa: F811
    _pipeline_store(fake)
    write_file(fake / "docs" / "a.md", synthetic_book(3000, seed=9))
    assert main(["index", "docs", "--db", "db", *FAKE_CLI, "--target-tokens", "128"]) == 0
    col = chromadb.PersistentClient(path=str(fake / "db")).get_collection("hseg")
    for doc in ("doc1", "docs/a.md"):  # a record lost: a write cut short
        seg = col.get(where={"$and": [{"hseg_doc_id": doc}, {"hseg_level": "segment"}]}, limit=1)["ids"]
        col.delete(ids=seg)
    line = _complete_line(capsys)
    assert "4 INCOMPLETE: 1 of files" in line and "2 lack only unit-index or lexical rows" in line
    assert "run 'hseg repair --db db'" in line
    assert "1 of files (an interrupted or failed write, or lost vectors): re-run 'hseg index' on their paths" in line
    assert "1 miss records or vectors and came from no file (another writer): add them again from their source" \
           in line
    assert main(["repair", "--db", "db"]) == 1
    out = capsys.readouterr().out
    assert "repaired   2 documents" in out
    assert "left       2 documents miss records or vectors, which the store cannot give back (doc1, docs/a.md)" in out


def test_repair_shows_progress_lines_unless_quiet(fake, capsys, monkeypatch):  # noqa: F811
    # rebuilding the rows of a large store takes minutes; the command showed nothing until it ended
    import hseg.progress

    _pipeline_store(fake)
    monkeypatch.setattr(hseg.progress, "INTERVAL_S", 0.0)  # every line, for the test
    capsys.readouterr()
    assert main(["repair", "--db", "db", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    _pipeline_store(fake, n=4)  # one more document without its rows
    assert main(["repair", "--db", "db"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert any(line.startswith("hseg repair: unit index of 'hseg': 1 of 1 documents") for line in err), err
