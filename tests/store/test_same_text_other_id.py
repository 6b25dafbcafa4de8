"""A document whose text the store already holds under another id (issue 53: LlamaIndex's
``SimpleDirectoryReader`` gives random ids, so a second run stores every file again): every write
hashes its documents' texts (``content_sha256`` on every record) and looks the hashes up: in the
lexical index's ``documents`` table where writers keep it in step (embedded, in memory), else in one
metadata ``where`` of Chroma; a match under another id is written and named in a warning and to
``on_same_text``.
With the real model, a real ``SimpleDirectoryReader`` and embedded Chroma:
``tests/e2e/test_same_text_model.py``."""

from __future__ import annotations

import logging
from typing import Any

from hseg.chunking.records import records_for
from hseg.chunking.schema import CONTENT_HASH_KEY, content_sha256
from hseg.store import HierarchicalStore
from hseg.store.documents import same_text_elsewhere
from hseg_testing.chunkers import small_chunker

TEXT = "\n\n".join(f"Tide note {i}: the harbour tide rose {i} centimetres above the mark, as the tables said."
                   for i in range(12))
OTHER = TEXT.replace("harbour", "estuary")


def _store(chroma_client, name: str, chunker) -> HierarchicalStore:
    return HierarchicalStore(name, client=chroma_client, encoder=chunker.encoder)


def test_the_same_text_under_another_id_is_written_and_named(chroma_client, chroma_collection_name, caplog):
    chunker = small_chunker()
    store = _store(chroma_client, chroma_collection_name, chunker)
    heard: list[dict[str, list[str]]] = []
    store.add(chunker.chunk(TEXT, doc_id="3f1c-random"), {"source": "tides.md"}, on_same_text=heard.append)
    store.add(chunker.chunk(TEXT, doc_id="3f1c-random"), {"source": "tides.md"}, on_same_text=heard.append)
    assert heard == []  # the same id again is the same document, replaced
    with caplog.at_level(logging.WARNING, logger="hseg.store.store"):
        store.add([chunker.chunk(TEXT, doc_id="9a07-random"), chunker.chunk(OTHER, doc_id="estuary")],
                  on_same_text=heard.append)
    assert heard == [{"9a07-random": ["3f1c-random"]}]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "'9a07-random'" in warned[0] and "'3f1c-random'" in warned[0], warned
    assert sorted(store.doc_ids()) == ["3f1c-random", "9a07-random", "estuary"]  # warned, not refused
    shas = {m[CONTENT_HASH_KEY] for _, m in store.iter_metadatas({"hseg_doc_id": "9a07-random"})}
    assert shas == {content_sha256(TEXT)}


def test_records_written_whole_are_hashed_from_their_text(chroma_client, chroma_collection_name):
    """``add_records`` (the LlamaIndex vector store's door) hashes the text its cluster records tile,
    which is the chunked text: the same hash ``add`` stores, so the two doors find each other."""
    chunker = small_chunker()
    store = _store(chroma_client, chroma_collection_name, chunker)
    store.add(chunker.chunk(TEXT, doc_id="a"))
    heard: list[dict[str, list[str]]] = []
    store.add_records({"b": records_for(chunker.chunk(TEXT, doc_id="b"))}, on_same_text=heard.append)
    assert heard == [{"b": ["a"]}]
    assert {m[CONTENT_HASH_KEY] for _, m in store.iter_metadatas()} == {content_sha256(TEXT)}


def test_the_lookup_reads_only_the_records_of_the_same_text(chroma_client, chroma_collection_name):
    """The cost of the check is the records holding the text, not the store: the lookup is a ``where``
    on the hash, so it reads nothing of the other documents however many there are."""
    chunker = small_chunker()
    store = _store(chroma_client, chroma_collection_name, chunker)
    others = [chunker.chunk(TEXT.replace("harbour", f"harbour {i}"), doc_id=f"other-{i}") for i in range(20)]
    store.add(others + [chunker.chunk(TEXT, doc_id="a")])
    held = store.count({"hseg_doc_id": "a"})

    class Counting:
        read = 0

        def get(self, **kwargs: Any) -> dict[str, Any]:
            got = store.collection.get(**kwargs)
            Counting.read += len(got["ids"])
            return got

    assert same_text_elsewhere(Counting(), {"b": content_sha256(TEXT)}) == {"b": ["a"]}
    assert Counting.read == held
    Counting.read = 0
    assert same_text_elsewhere(Counting(), {"c": content_sha256("a text nobody stored")}) == {}
    assert Counting.read == 0


def test_hseg_index_says_which_files_hold_a_stored_text(fake, capsys):
    """A copy of a file indexed beside it: the summary's ``same_text`` and one line of ``hseg index``."""
    from hseg.cli import main
    from hseg_testing.fakes import FAKE_CLI

    (fake / "docs").mkdir()
    (fake / "docs" / "tides.md").write_text(TEXT, encoding="utf-8")
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    assert "same text" not in capsys.readouterr().out
    (fake / "docs" / "tides copy.md").write_text(TEXT, encoding="utf-8")
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("same text"))
    assert "1 document " in line and "'docs/tides copy.md'" in line and "'docs/tides.md'" in line, out


class _CountingGets:
    """A collection's ``get`` that counts its calls (the Chroma side of the look-up)."""

    def __init__(self, collection: Any) -> None:
        self.collection, self.calls = collection, 0

    def get(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        return self.collection.get(**kwargs)


def test_the_lookup_asks_the_lexical_index_where_writers_keep_it(chroma_client, chroma_collection_name):
    """A maintained index in step (embedded, in memory) answers from its ``documents`` table and Chroma
    is not asked; a server client's cache leaves the look-up to Chroma (it may be behind another
    client's write). The answer is the same either way, and the write itself asks the index."""
    chunker = small_chunker()
    store = _store(chroma_client, chroma_collection_name, chunker)
    store.add([chunker.chunk(TEXT, doc_id="a"), chunker.chunk(OTHER, doc_id="estuary")])
    store.add(chunker.chunk(TEXT, doc_id="b"))
    lexical = store._parts.lexical
    assert lexical is not None
    counting = _CountingGets(store.collection)
    shas = {"c": content_sha256(TEXT), "d": content_sha256("a text nobody stored"), "e": content_sha256(OTHER)}
    assert same_text_elsewhere(counting, shas, lexical) == {"c": ["a", "b"], "e": ["estuary"]}
    assert counting.calls == (0 if lexical.maintained else 1)
    assert same_text_elsewhere(counting, shas) == {"c": ["a", "b"], "e": ["estuary"]}  # Chroma's own answer

    answers: list[Any] = []
    asked = lexical.documents_holding

    def spying(hashes: Any) -> Any:
        answers.append(asked(hashes))
        return answers[-1]

    lexical.documents_holding = spying  # type: ignore[method-assign]
    heard: list[dict[str, list[str]]] = []
    store.add(chunker.chunk(OTHER, doc_id="estuary-copy"), on_same_text=heard.append)
    assert heard == [{"estuary-copy": ["estuary"]}]
    assert answers == ([{content_sha256(OTHER): {"estuary"}}] if lexical.maintained else [None])


def test_an_index_out_of_step_leaves_the_lookup_to_chroma(tmp_path):
    """What an embedded store's index may not hold is asked of Chroma: a document a write cut short
    left *pending*, and records written around hseg (the record count changed), seen by a store
    opened afterwards."""
    chunker = small_chunker()
    store = HierarchicalStore("tides", path=str(tmp_path / "db"), encoder=chunker.encoder)
    store.add(chunker.chunk(TEXT, doc_id="a"))
    lexical = store._parts.lexical
    assert lexical is not None and lexical.maintained
    sha = content_sha256(TEXT)
    assert lexical.documents_holding([sha]) == {sha: {"a"}}
    with lexical.table.db.transaction() as c:
        c.execute("INSERT INTO pending VALUES ('a')")
    assert lexical.documents_holding([sha]) is None
    lexical.ensure_fresh()  # a search's check re-reads the pending document
    assert lexical.documents_holding([sha]) == {sha: {"a"}}

    # a document of the same text written around hseg: its records copied under another id
    got = store.collection.get(where={"hseg_doc_id": "a"}, include=["embeddings", "documents", "metadatas"])
    store.collection.add(ids=[f"raw-{i}" for i in got["ids"]], embeddings=got["embeddings"],
                         documents=got["documents"],
                         metadatas=[{**m, "hseg_doc_id": "raw"} for m in got["metadatas"]])
    again = HierarchicalStore("tides", path=str(tmp_path / "db"), encoder=chunker.encoder)
    assert again._parts.lexical is not None and again._parts.lexical.documents_holding([sha]) is None
    heard: list[dict[str, list[str]]] = []
    again.add(chunker.chunk(TEXT, doc_id="b"), on_same_text=heard.append)
    assert heard == [{"b": ["a", "raw"]}]


def test_the_lookup_is_one_range_of_the_hash_index_which_an_older_file_gains(tmp_path):
    """The look-up's statement reads the ``documents_sha`` index (SQLite's plan), not the table; a
    file written before the index existed gains it when next opened, its rows kept."""
    from hseg.store.lexical.database import Database
    from hseg.store.lexical.tables import documents_holding

    path = tmp_path / "lexical.sqlite"
    db = Database(path)
    with db.transaction() as c:
        c.executemany("INSERT INTO documents VALUES (?, ?)", [(f"d{i}", f"sha{i % 50}") for i in range(500)])
        c.execute("DROP INDEX documents_sha")
    db.close()

    db = Database(path)
    assert db.rows("SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'documents_sha'") == \
        [("documents_sha",)]
    statements: list[str] = []
    db.conn.set_trace_callback(statements.append)
    with db.lock:
        assert documents_holding(db.conn, ["sha7", "sha9", "nobody"]) == \
            {"sha7": {f"d{i}" for i in range(7, 500, 50)}, "sha9": {f"d{i}" for i in range(9, 500, 50)}}
    db.conn.set_trace_callback(None)
    (statement,) = statements
    plan = " ".join(str(row[-1]) for row in db.rows(f"EXPLAIN QUERY PLAN {statement}"))
    assert "USING" in plan and "documents_sha" in plan, plan
    db.close()
