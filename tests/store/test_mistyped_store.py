"""A mistyped ``path=`` or collection name (issue 57 item 1): opening a store to read where none is
fails clearly and creates nothing; a store that opening created just now refuses a search instead of
answering ``[]`` as if it were an index that found nothing."""

from __future__ import annotations

import pytest

from hseg.cli import main
from hseg.errors import CollectionNotFoundError, StoreNotFoundError
from hseg.store import HierarchicalStore
from hseg_testing.fakes import HashingEncoder
from tests.store.test_cli_index import one_line_error


def test_create_false_on_a_missing_path_raises_and_creates_nothing(tmp_path):
    missing = tmp_path / "empty-lc-db"
    with pytest.raises(StoreNotFoundError, match="no Chroma database at .*empty-lc-db") as err:
        HierarchicalStore("hseg", path=str(missing), create=False)
    assert isinstance(err.value, CollectionNotFoundError)  # what callers caught before
    assert not missing.exists()


def test_create_false_on_a_folder_without_a_database_writes_nothing_into_it(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    with pytest.raises(StoreNotFoundError, match="no Chroma database"):
        HierarchicalStore("hseg", path=str(folder), create=False)
    assert list(folder.iterdir()) == []


def test_a_search_of_a_store_that_opening_created_says_so(tmp_path):
    from langchain_hseg import HierarchicalSegmentRetriever

    path = tmp_path / "empty-lc-db"
    store = HierarchicalStore("hseg", path=str(path), encoder=HashingEncoder())
    retriever = HierarchicalSegmentRetriever(store=store)
    with pytest.raises(StoreNotFoundError, match=r"empty-lc-db.*created.*just now.*create=False"):
        retriever.invoke("What did Galileo see?")
    with pytest.raises(StoreNotFoundError):
        store.search("What did Galileo see?", budget_tokens=64)


def test_a_store_created_then_written_searches_as_before(tmp_path, make_chunking):
    import numpy as np

    store = HierarchicalStore("hseg", path=str(tmp_path / "db"))
    store.add(make_chunking("a", np.random.default_rng(0), dim=16))
    assert store.search(np.ones(16), k=1)
    # an existing store opened again, and a collection emptied by its writer, answer [] as ever
    again = HierarchicalStore("hseg", path=str(tmp_path / "db"), create=False)
    again.delete("a")
    assert again.search(np.ones(16), k=1) == []


def test_a_mistyped_collection_in_an_existing_database_is_named(tmp_path, make_chunking):
    import numpy as np

    HierarchicalStore("hseg", path=str(tmp_path / "db")).add(make_chunking("a", np.random.default_rng(0), dim=16))
    typo = HierarchicalStore("hsge", path=str(tmp_path / "db"))
    with pytest.raises(StoreNotFoundError, match=r"collection 'hsge'.*collections there: hseg"):
        typo.search(np.ones(16), k=1)


def test_cli_query_on_a_folder_that_holds_no_index_writes_nothing_into_it(fake, capsys):
    (fake / "notes").mkdir()
    assert main(["query", "anything", "--db", "notes"]) == 1
    one_line_error(capsys.readouterr().err, "no index at notes")
    assert list((fake / "notes").iterdir()) == []
