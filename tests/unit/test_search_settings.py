"""SearchSettings: declared and validated once, and every door (store, both retrievers, the CLI)
derives its options and defaults from it."""

from __future__ import annotations

import dataclasses
import json
import uuid

import chromadb
import numpy as np
import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.cli import build_parser, main
from hseg.cli.options import search_option_docs
from hseg.encoders import DEFAULT_MODEL, factory
from hseg.retrieval.settings import DEFAULT_K, SearchSettings
from hseg.store import HierarchicalStore
from hseg_testing.fakes import HashingEncoder

TIDES = ("The tide is the rise and fall of the sea. Tides are caused by the gravity of the moon and the sun. "
         "High tide and low tide alternate twice a day on most coasts.\n\n")
CATS = ("Cats are small carnivorous mammals. A cat sleeps for most of the day. Cats hunt mice and birds, "
        "and people keep cats as companions in their homes.\n\n")


@pytest.mark.parametrize(("fields", "named"), [
    ({"k": 0}, "k"), ({"k": True}, "k"), ({"k": "3"}, "k"), ({"budget_tokens": -1}, "budget_tokens"),
    ({"k": 2, "budget_tokens": 10}, "budget_tokens"), ({"unit": "page"}, "unit"), ({"mode": "x"}, "mode"),
    ({"unit": "auto", "mode": "cluster"}, "mode"), ({"cluster_weight": -0.1}, "cluster_weight"),
    ({"neighbour_weight": 11}, "neighbour_weight"), ({"neighbour_weight": float("nan")}, "neighbour_weight"),
    ({"where": "source"}, "where"), ({"where_document": ["x"]}, "where_document"),
    ({"lexical_weight": -0.5}, "lexical_weight"), ({"lexical_weight": "0.3"}, "lexical_weight"),
])
def test_bad_settings_fail_at_construction_naming_the_field(fields, named):
    with pytest.raises(ValueError, match=named):
        SearchSettings(**fields)


def test_settings_defaults_and_overrides():
    s = SearchSettings()
    assert s.effective_k == DEFAULT_K and s.unit is None and s.resolved_unit == "cluster"
    # no unit chosen: whole parents for k or a mode, budget-aware passages for a budget, hybrid either way
    assert s.override(budget_tokens=512).resolved_unit == "auto" and s.lexical_weight > 0
    assert SearchSettings(budget_tokens=512, mode="cluster").resolved_unit == "cluster"
    budget = s.override(budget_tokens=512, unit="auto")
    assert budget.effective_k is None and budget.k is None
    assert budget.override(k=2).budget_tokens is None  # a per-call k replaces a configured budget
    assert SearchSettings(k=3).override(budget_tokens=100).k is None
    assert SearchSettings(where={}).where is None  # an empty filter is no filter
    with pytest.raises(TypeError, match="colour"):
        s.override(colour="blue")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.k = 3  # type: ignore[misc]


@pytest.fixture
def store():
    enc = HashingEncoder()
    st = HierarchicalStore(f"t-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(), encoder=enc)
    chunker = HierarchicalChunker(encoder=enc, segmenter="texttiling", target_tokens=64, min_segment_tokens=8)
    st.add(chunker.chunk_many([TIDES * 3, CATS * 3], ["tides", "cats"]), [{"source": "t.md"}, {"source": "c.md"}])
    return st


def test_the_store_takes_settings_or_their_fields_with_the_same_answers(store):
    settings = SearchSettings(budget_tokens=120, unit="auto", neighbour_weight=0.0)
    by_object = store.search("moon gravity", settings=settings)
    by_fields = store.search("moon gravity", budget_tokens=120, unit="auto", neighbour_weight=0.0)
    assert [(h.start, h.end, h.score) for h in by_object] == [(h.start, h.end, h.score) for h in by_fields]
    assert store.search_many(["moon gravity"], settings=settings)[0][0].text == by_object[0].text
    only_cats = store.search("moon gravity", k=4, where_document={"$contains": "Cats"})
    assert only_cats and all(h.doc_id == "cats" for h in only_cats)
    with pytest.raises(ValueError, match="mutually exclusive"):
        store.search("tide", settings=SearchSettings(budget_tokens=100), k=2, budget_tokens=100)


def test_langchain_fields_are_the_settings_fields(store):
    from langchain_hseg import HierarchicalSegmentRetriever

    fields = HierarchicalSegmentRetriever.model_fields
    for name, default in SearchSettings.defaults().items():
        assert fields[name].default == default, name
        assert fields[name].description == SearchSettings.docs()[name]
    r = HierarchicalSegmentRetriever(store=store, unit="auto", budget_tokens=100, neighbour_weight=0.0,
                                     where_document={"$contains": "Cats"})
    assert r.search_settings() == SearchSettings(unit="auto", budget_tokens=100, neighbour_weight=0.0,
                                                 where_document={"$contains": "Cats"})
    docs = r.invoke("moon gravity")
    assert docs and all(d.metadata["hseg_doc_id"] == "cats" for d in docs)
    hybrid = HierarchicalSegmentRetriever(store=store, unit="auto", budget_tokens=100, lexical_weight=0.5)
    assert hybrid.search_settings().lexical_weight == 0.5
    expected = store.search("hunting mice", budget_tokens=100, unit="auto", lexical_weight=0.5)
    assert [d.page_content for d in hybrid.invoke("hunting mice")] == [h.text for h in expected]
    assert [[d.page_content for d in docs] for docs in hybrid.batch(["hunting mice"])] == [[h.text for h in expected]]
    assert len(r.invoke("cats", k=1)) == 1  # a per-call k replaces the budget
    with pytest.raises(ValueError, match="neighbour_weight"):
        HierarchicalSegmentRetriever(store=store, neighbour_weight=-1)


def test_llama_index_keywords_are_the_settings_fields(store):
    from llama_index_hseg import HierarchicalSegmentRetriever

    every = {"k": None, "budget_tokens": 100, "unit": "auto", "mode": "segment+cluster", "cluster_weight": 0.4,
             "neighbour_weight": 0.0, "lexical_weight": 0.5, "lexical_weighting": "coverage",
             "where": {"source": "c.md"}, "where_document": {"$contains": "cat"}, "whole_cluster_min": 2,
             "whole_cluster_share": 0.5, "read_on_share": 0.25, "read_on_margin": 0.0}
    assert set(every) == set(SearchSettings.field_names())
    r = HierarchicalSegmentRetriever(store, **every)
    assert r.settings == SearchSettings(**every)
    nodes = r.retrieve("hunting mice")
    assert nodes and all(n.node.metadata["source"] == "c.md" for n in nodes)
    # a bundle carrying its embedding: the lexical side still reads the question's words
    from llama_index.core.schema import QueryBundle

    vector = store.encoder.encode_query("hunting mice").tolist()
    by_vector = r.retrieve(QueryBundle("hunting mice", embedding=vector))
    assert [n.node.text for n in by_vector] == [n.node.text for n in nodes]
    assert HierarchicalSegmentRetriever(store, similarity_top_k=2).settings.k == 2
    with pytest.raises(ValueError, match="similarity_top_k or k"):
        HierarchicalSegmentRetriever(store, similarity_top_k=2, k=3)
    with pytest.raises(TypeError, match="colour"):
        HierarchicalSegmentRetriever(store, colour="blue")


def test_cli_query_options_are_the_settings_fields():
    parser = build_parser()
    query = next(a for a in parser._subparsers._group_actions[0].choices.values() if a.prog.endswith("query"))
    dests = {a.dest: a for a in query._actions}
    for name, doc in search_option_docs().items():  # each setting's description, in options' words
        assert name in dests and doc in dests[name].help, name


def test_cli_query_passes_every_setting(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(factory, "load_encoder", lambda name=None, backend=None, threads=None: HashingEncoder())
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.md").write_text(TIDES * 3)
    (tmp_path / "c.md").write_text(CATS * 3)
    fake = ["--encoder", HashingEncoder.name, "--segmenter", "texttiling", "--quiet"]
    assert main(["index", "t.md", "c.md", "--db", "db", *fake]) == 0
    capsys.readouterr()
    assert main(["query", "moon gravity", "--db", "db", "--unit", "auto", "--budget-tokens", "200",
                 "--neighbour-weight", "0", "--cluster-weight", "0.3", "--lexical-weight", "0.5",
                 "--where-document", '{"$contains": "Cats"}', "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits and all(h["metadata"]["hseg_doc_id"] == "c.md" for h in hits)
    assert main(["query", "moon", "--db", "db", "--where", '{"source": "t.md"}', "--source", "c.md", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []  # --source and --where are ANDed
    with pytest.raises(SystemExit):
        main(["query", "moon", "--db", "db", "--unit", "auto", "--mode", "cluster"])
    assert "--mode applies to --unit='cluster' only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["query", "moon", "--db", "db", "--lexical-weight", "-1"])
    assert "--lexical-weight must be a number in [0, 10]" in capsys.readouterr().err


def test_cli_index_accepts_another_name_of_the_recorded_encoder(tmp_path, monkeypatch, capsys):
    """The CLI used to compare raw names: --encoder all-MiniLM-L6-v2 was refused on a store built with the
    default encoder (recorded as sentence-transformers/all-MiniLM-L6-v2), which the library accepts."""
    monkeypatch.chdir(tmp_path)
    client = chromadb.PersistentClient(path=str(tmp_path / "db"))
    store = HierarchicalStore("hseg", client=client)
    store._parts.binding.record(DEFAULT_MODEL)
    store.collection.add(ids=["r"], embeddings=[[1.0] * 384])  # it holds something: its encoder binds
    del client, store
    seen = []

    def load(name=None, backend=None, threads=None):
        seen.append(name)
        raise RuntimeError("stop here: the encoder check passed")

    monkeypatch.setattr(factory, "load_encoder", load)
    (tmp_path / "a.md").write_text(TIDES)
    capsys.readouterr()
    main(["index", "a.md", "--db", "db", "--encoder", "all-MiniLM-L6-v2", "--segmenter", "texttiling", "--quiet"])
    assert seen == ["all-MiniLM-L6-v2"] and "encoder check passed" in capsys.readouterr().err  # not refused
    assert main(["index", "a.md", "--db", "db", "--encoder", "BAAI/bge-small-en-v1.5", "--quiet"]) != 0
    assert "was built with encoder" in capsys.readouterr().err


def test_query_vector_of_the_store(store):
    hits = store.search(np.ones(HashingEncoder().dim, dtype=np.float32), k=2)
    assert len(hits) == 2
