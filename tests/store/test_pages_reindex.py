"""A PDF's page keys through re-indexing (issue 53: the page map is "stored with the document, survives
re-index and --prune"): :func:`hseg.ingest.index_paths` on a folder with a PDF written in the test. An
unchanged PDF is skipped with its records as they were; a PDF given a new first page is replaced, every
record and every search hit naming the new pages, none the old; pruning another file leaves the PDF's
records as they were. The hashing encoder and a real embedded Chroma."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.harness.documents import OUTLINE, PAGE_SENTENCES, Block, write
from hseg import ingest
from hseg.chunking.schema import DOC_ID_KEY, page_range
from hseg.store import HierarchicalStore
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder

pytest.importorskip("pypdf")
pytest.importorskip("fpdf")

PDF = "docs/manual.pdf"


def _index(docs: Path, store: HierarchicalStore, **kwargs: Any) -> ingest.IndexSummary:
    return ingest.index_paths([docs], store, small_chunker(), anchor=docs.parent, progress=False, **kwargs)


def _records(store: HierarchicalStore) -> dict[str, dict[str, Any]]:
    return {rid: m for rid, m in store.iter_metadatas({DOC_ID_KEY: PDF})}


def _pages_of(store: HierarchicalStore, sentence: str) -> set[tuple[int, int] | None]:
    """The pages of the PDF's stored records that hold ``sentence``, and of the search hits that do."""
    held = {r.id for r in store.get_records(PDF, include_embeddings=False) if sentence in r.document}
    pages = {page_range(m) for rid, m in _records(store).items() if rid in held}
    hits = [h for h in store.search(sentence, k=3, unit="segment") if sentence in h.text]
    assert held and hits, sentence
    return pages | {h.pages for h in hits}


def test_page_keys_survive_a_skip_follow_a_change_and_outlive_a_prune(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    write(docs / "manual.pdf", OUTLINE)
    (docs / "notes.md").write_text("# Notes\n\nThe harbour master keeps the tide tables.\n", encoding="utf-8")
    store = HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=HashingEncoder())
    assert _index(docs, store).documents == 2
    for page, sentence in PAGE_SENTENCES.items():
        assert {p[0] <= page <= p[1] for p in _pages_of(store, sentence) if p} == {True}
    first = _records(store)

    again = _index(docs, store)
    assert (again.documents, again.unchanged) == (0, 2) and _records(store) == first

    # a foreword page before the manual: every sentence moves one page on, and nothing keeps the old page
    write(docs / "manual.pdf", [Block("Foreword", 1), Block("This edition adds a foreword page."),
                                Block(OUTLINE[0].text, 1, new_page=True), *OUTLINE[1:]])
    changed = _index(docs, store)
    assert (changed.documents, changed.unchanged) == (1, 1)
    for page, sentence in PAGE_SENTENCES.items():
        assert {p[0] <= page + 1 <= p[1] and not p[0] <= page <= p[1] for p in _pages_of(store, sentence)
                if p} == {True}, (page, sentence)
    replaced = _records(store)
    assert replaced != first and all(page_range(m) is not None for m in replaced.values())
    stats = store.stats()
    assert stats["documents_incomplete"] == 0 and stats["documents_mixed_versions"] == 0, stats

    (docs / "notes.md").unlink()
    pruned = _index(docs, store, prune=True)
    assert pruned.pruned == ["docs/notes.md"] and _records(store) == replaced
    assert {p[0] <= 4 <= p[1] for p in _pages_of(store, PAGE_SENTENCES[3]) if p} == {True}
