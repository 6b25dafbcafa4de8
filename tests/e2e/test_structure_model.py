"""Markdown structure (issue 14) with the real MiniLM: the example document through both adapters and an
on-disk Chroma store keeps its outline in every chunk's heading path. The rest, on the hashing encoder
and TextTiling (property tests on generated outlines included), is ``tests/unit/test_structure.py``.
"""

from __future__ import annotations

import chromadb
import pytest

from hseg.chunking.records import (
    HEADING_PATH_KEY,
    heading_path,
)
from hseg.text.structure import find_headings


@pytest.mark.model
def test_real_model_markdown_through_both_adapters_and_a_persistent_store(encoder, example_text, tmp_path):
    from langchain_core.documents import Document as LCDocument
    from llama_index.core import Document as LIDocument

    from hseg.store import HierarchicalStore
    from langchain_hseg import HierarchicalSegmentRetriever, HierarchicalSegmentTextSplitter
    from llama_index_hseg import HierarchicalSegmentNodeParser

    text = example_text[:20000]
    splitter = HierarchicalSegmentTextSplitter(encoder=encoder, target_tokens=256)
    clusters, segments = splitter.split_documents_hierarchical(
        [LCDocument(text, id="astronomy", metadata={"source": "example.md"})])
    headings = find_headings(text)
    # every heading opens a segment, with its own path; one with no text under it (the title above the
    # first section) opens the next one's, which has the path of its text
    joined = {a.start for a, b in zip(headings, headings[1:]) if not text[a.end:b.start].strip()}
    starts: dict[int, tuple[str, ...]] = {}
    run: int | None = None
    for h in headings:
        run = h.start if run is None else run
        if h.start not in joined:
            starts[run], run = h.path, None
    opened = [d for d in segments if d.metadata["hseg_start"] + len(d.page_content)
              - len(d.page_content.lstrip()) in starts]
    assert len(opened) == len(starts) > 5 and joined
    for d in opened:
        first = d.metadata["hseg_start"] + len(d.page_content) - len(d.page_content.lstrip())
        assert heading_path(d.metadata) == starts[first]
    assert all(heading_path(d.metadata)[:1] == (headings[0].title,) for d in clusters + segments
               if d.metadata["hseg_start"] >= headings[0].start)

    nodes = HierarchicalSegmentNodeParser(encoder=encoder, target_tokens=256).get_nodes_from_documents(
        [LIDocument(text=text, id_="astronomy", metadata={"file_name": "example.md"})])
    lc = {d.id: d.metadata[HEADING_PATH_KEY] for d in clusters + segments}
    assert {n.id_: n.metadata[HEADING_PATH_KEY] for n in nodes} == lc

    store = HierarchicalStore("hseg", path=str(tmp_path / "chroma"), encoder=encoder)
    splitter.add_to_vectorstore(store, [LCDocument(text, id="astronomy", metadata={"source": "example.md"})])
    reopened = HierarchicalStore("hseg", client=chromadb.PersistentClient(path=str(tmp_path / "chroma")),
                                 encoder=encoder)
    hits = reopened.search("What is the celestial equator?", k=3)
    assert hits and all(HEADING_PATH_KEY in h.metadata for h in hits)
    assert any("Celestial Poles and Celestial Equator" in heading_path(h.metadata) for h in hits)
    docs = HierarchicalSegmentRetriever(store=reopened, unit="auto", budget_tokens=512).invoke(
        "What is the celestial equator?")
    assert docs and all(HEADING_PATH_KEY in d.metadata for d in docs)
    assert any(heading_path(d.metadata)[-1:] == ("Celestial Poles and Celestial Equator",) for d in docs)


@pytest.mark.model
def test_real_model_passages_end_on_text_not_on_the_next_heading(encoder):
    # issue 47 item 10 with MiniLM and the BiLSTM: passages ended with the next section's heading and
    # none of its text, and the 4-token title came back as a passage of its own
    from hseg.chunking.chunker import HierarchicalChunker
    from hseg_testing.fakes import ephemeral_store
    from tests.unit.test_structure import FAQ, ends_on_a_heading

    result = HierarchicalChunker(encoder=encoder).chunk(FAQ, "faq.md")
    assert not [s.text for s in result.segments if ends_on_a_heading(s.text)]
    store = ephemeral_store(encoder)
    store.add(result, {"source": "faq.md"})
    for query in ("billing", "billing faq", "Why was I charged twice?", "How do I change my card?", "refund", "help"):
        for budget in (16, 64, 120, 200):
            for hit in store.search(query, unit="auto", budget_tokens=budget):
                assert FAQ[hit.start:hit.end] == hit.text
                assert not ends_on_a_heading(hit.text) and hit.token_count > 8, (query, budget, hit.text)
