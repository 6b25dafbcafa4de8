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
    starts = {h.start: h.path for h in headings}
    opened = [d for d in segments if d.metadata["hseg_start"] + len(d.page_content)
              - len(d.page_content.lstrip()) in starts]
    assert len(opened) == len(headings) > 5  # every heading opens a segment, with its own path
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
