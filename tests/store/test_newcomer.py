"""What a new user hit (issue 24), each through the CLI (in-process) or the real framework objects.

The cases that need an ``hseg`` process of their own are ``tests/e2e/test_newcomer_processes.py``."""

from __future__ import annotations

import json
from pathlib import Path

import chromadb
import pytest

from hseg.cli import main
from hseg.encoders import factory
from hseg_testing.fakes import FAKE_CLI, HashingEncoder, synthetic_book

BOOKKEEPING = ("content_sha256", "chunk_settings")


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setattr(factory, "load_encoder", lambda name=None, backend=None, threads=None: HashingEncoder())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_docs(root: Path, n: int = 3) -> dict[str, str]:
    files = {f"docs/f{i}.md": synthetic_book(2_000 + 50 * i, seed=i) for i in range(n)}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return files


def test_bookkeeping_stays_out_of_the_llm_prompt_and_of_results(fake, capsys):
    """``hseg index`` stores content_sha256 and chunk_settings on every record; they took 61% of a
    RetrieverQueryEngine's prompt (k=4) and reached every LangChain Document."""
    from langchain_core.runnables import RunnableLambda
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.schema import MetadataMode

    from langchain_hseg import HierarchicalSegmentRetriever as LCRetriever
    from llama_index_hseg import HierarchicalSegmentRetriever as LIRetriever

    write_docs(fake)
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    collection = chromadb.PersistentClient(path=str(fake / "db")).get_collection("hseg")
    assert all(k in collection.get(limit=1, include=["metadatas"])["metadatas"][0] for k in BOOKKEEPING)

    li = LIRetriever(collection, HashingEncoder(), similarity_top_k=4)
    nodes = li.retrieve("river flood water")
    for n in nodes:
        shown = n.node.get_content(metadata_mode=MetadataMode.LLM)
        assert not any(k in shown or k in n.node.metadata for k in BOOKKEEPING), shown[:300]
        assert "hseg_" not in shown and "source: docs/" in shown
    engine = RetrieverQueryEngine.from_args(li, llm=MockLLM())  # MockLLM answers with its prompt
    prompt = str(engine.query("river flood water"))
    assert nodes[0].node.text[:80] in prompt and not any(k in prompt for k in BOOKKEEPING)

    lc = LCRetriever(store=li.store, k=4)
    chain = lc | RunnableLambda(lambda docs: [d.metadata for d in docs])
    metas = chain.invoke("river flood water")
    assert metas and not any(k in m for m in metas for k in BOOKKEEPING)
    capsys.readouterr()
    assert main(["query", "river flood water", "--db", "db", "--json"]) == 0
    assert not any(k in capsys.readouterr().out for k in BOOKKEEPING)


def test_ids_do_not_depend_on_the_working_directory(fake, monkeypatch, capsys):
    files = write_docs(fake)
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    monkeypatch.chdir(fake / "docs")
    capsys.readouterr()
    assert main(["index", ".", "--db", "../db", *FAKE_CLI, "--prune"]) == 0
    out = capsys.readouterr().out
    assert f"0 indexed, {len(files)} unchanged" in out and "pruned     0" in out
    docs = {m["hseg_doc_id"] for m in chromadb.PersistentClient(path=str(fake / "db")).get_collection("hseg")
            .get(include=["metadatas"])["metadatas"]}
    assert docs == set(files)
    assert main(["query", "river", "--db", "../db", "--source", "f1.md", "--json"]) == 0  # from the cwd
    assert '"source": "docs/f1.md"' in capsys.readouterr().out


def test_source_that_matches_nothing_says_so_with_a_hint(fake, capsys):
    write_docs(fake)
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    capsys.readouterr()
    assert main(["query", "river", "--db", "db", "--source", "elsewhere/f1.md"]) == 1
    err = capsys.readouterr().err
    assert "no document has source 'elsewhere/f1.md'" in err and "docs/f1.md" in err


def test_an_empty_file_is_empty_not_indexed_and_a_no_op_rerun_says_so(fake, capsys):
    write_docs(fake, 2)
    (fake / "docs" / "blank.md").write_text("  \n\n")
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    assert "2 indexed, 0 unchanged (skipped), 1 empty" in capsys.readouterr().out
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    assert "0 indexed, 2 unchanged (skipped), 1 empty" in capsys.readouterr().out
    (fake / "docs" / "f0.md").write_text("\n")  # a document emptied: its old records go
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    assert "1 indexed, 1 unchanged (skipped), 2 empty" in capsys.readouterr().out
    assert main(["stats", "--db", "db", "--json"]) == 0
    assert '"documents": 1' in capsys.readouterr().out


def test_version(capsys):
    from hseg import __version__

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"hseg {__version__}"


def test_an_encoder_that_cannot_load_fails_once_before_anything_is_written(tmp_path, monkeypatch, capsys):
    real = factory.load_encoder
    monkeypatch.setattr(factory, "load_encoder", lambda name=None, backend=None, threads=None:
                        HashingEncoder() if name == HashingEncoder.name else real(name, backend, threads))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    write_docs(tmp_path, 5)

    def no_hub(*args, **kwargs):
        raise AssertionError("a model known to be absent offline was looked for on the hub")

    monkeypatch.setattr(factory, "as_encoder", no_hub)  # offline, an absent model fails before any load try
    assert main(["index", "docs", "--db", "db", "--encoder", "BAAI/bge-small-en-v1.5", "--quiet"]) == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "BAAI/bge-small-en-v1.5" in lines[0] and "HF_HUB_OFFLINE" in lines[0], err
    client = chromadb.PersistentClient(path=str(tmp_path / "db"))
    assert "hseg" not in [c if isinstance(c, str) else c.name for c in client.list_collections()]
    # a collection an older hseg left recorded with that encoder but empty is re-used with another
    client.create_collection("hseg", metadata={"hseg_schema": 1, "hseg_encoder": "BAAI/bge-small-en-v1.5"},
                             configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
    del client
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    assert "5 indexed" in capsys.readouterr().out
    assert main(["stats", "--db", "db", "--json"]) == 0
    assert f'"encoder": "{HashingEncoder.name}"' in capsys.readouterr().out


def test_stats_says_when_documents_are_incomplete(fake, capsys):
    """After an interrupted run, stats showed the counts of a finished one while the unit index held
    637 of 1,054 segments; it now says which documents a re-run of hseg index will redo."""
    files = write_docs(fake, 4)
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    capsys.readouterr()
    assert main(["stats", "--db", "db"]) == 0
    out = capsys.readouterr().out
    assert "complete   all 4 documents" in out and "INCOMPLETE" not in out
    client = chromadb.PersistentClient(path=str(fake / "db"))
    units = client.get_collection("hseg_hseg_units")
    cut = units.get(where={"hseg_doc_id": "docs/f2.md"}, include=[])["ids"]
    units.delete(ids=cut[: len(cut) // 2 + 1])  # as a process killed between records and unit records
    del client
    assert main(["stats", "--db", "db"]) == 0
    out = capsys.readouterr().out
    assert "complete   3 documents; 1 INCOMPLETE" in out and "re-run 'hseg index'" in out
    stats = json.loads(_json_stats(capsys))
    assert stats["incomplete_documents"] == ["docs/f2.md"]
    assert stats["unit_index_segments"] == stats["segments_total"] - (len(cut) // 2 + 1)
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    assert f"1 indexed, {len(files) - 1} unchanged" in capsys.readouterr().out
    assert json.loads(_json_stats(capsys))["documents_incomplete"] == 0


def _json_stats(capsys) -> str:
    capsys.readouterr()
    assert main(["stats", "--db", "db", "--json"]) == 0
    return capsys.readouterr().out
