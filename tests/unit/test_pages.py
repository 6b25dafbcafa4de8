"""Page Documents joined into one text (issue 53): grouping the loaders' pages, cleaning them, and
every chunk, record and search result of the joined text carrying the pages it spans.

On the hashing encoder and an in-memory store; the real model through both adapters is
``tests/e2e/test_pages_model.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hseg.chunking.chunks import Chunking
from hseg.chunking.records import records_for
from hseg.chunking.schema import (
    PAGE_END_KEY,
    PAGE_START_KEY,
    SegmentMeta,
    chunk_metadata,
    metadata_keys,
    page_range,
)
from hseg.retrieval.results import result_for
from hseg.text.pages import group_pages, join_pages, page_number, rejoin_hyphenated, repeated_edge_lines
from hseg.text.provenance import SourceMap
from hseg_testing.chunkers import SMALL, small_chunker
from hseg_testing.fakes import HashingEncoder, ephemeral_store

WORDS = "tide moon orbit river delta glacier court judge bread yeast engine piston market price".split()


def book_pages(n: int) -> list[str]:
    """Pages with a running header, a two-line footer, and a sentence running across each page break."""
    pages = []
    for p in range(n):
        body = " ".join(f"The {WORDS[(p * 3 + i) % len(WORDS)]} sentence number {i} of page {p + 1} is here."
                        for i in range(12))
        start = "page break and ends here. " if p else ""
        pages.append(f"Annual Report of the River Board\n{start}{body} The last one runs over the\n"
                     f"and it goes on\n{p + 1}\n")
    return pages


# --------------------------------------------------------------------------- grouping


def test_pages_of_one_source_group_and_everything_else_stands_alone():
    docs: list[tuple[str, dict[str, Any] | None]] = [("a", {"source": "x.pdf", "page": 0, "total_pages": 3}),
            ("b", {"source": "x.pdf", "page": 1, "total_pages": 3}),
            ("c", {"source": "x.pdf", "page": 1, "total_pages": 3}),       # not rising: a new run
            ("d", {"source": "y.pdf", "page": 2, "total_pages": 3}),       # another source
            ("e", {"source": "y.pdf", "page": 3, "total_pages": 4}),       # other metadata: a new run
            ("f", {"file_path": "z.pdf", "page_label": "7"}),              # LlamaIndex's key
            ("g", {"file_path": "z.pdf", "page_label": "8"}),
            ("h", {"file_path": "z.pdf", "page_label": "ix"}),             # no number
            ("i", {"page": 4}),                                           # no source
            ("j", None)]
    groups = group_pages(docs)
    assert [(g.indices, g.numbers) for g in groups] == [
        ((0, 1), (1, 2)), ((2,), (2,)), ((3,), (3,)), ((4,), (4,)), ((5, 6), (7, 8)), ((7,), None), ((8,), None),
        ((9,), None)]
    assert groups[0].metadata == {"source": "x.pdf", "total_pages": 3}
    assert groups[5].metadata == {"file_path": "z.pdf", "page_label": "ix"}  # not a page: kept whole
    assert page_number({"page": True}) is None and page_number({"page": -1}) is None


# --------------------------------------------------------------------------- cleaning


def test_running_headers_and_footers_go_and_hyphenated_words_rejoin():
    header = "Annual Report of the River Board\n"
    pages = [f"{header}Page one speaks of tides. A hyphen-\nated word.\nand it goes on\n1\n",
             f"{header}Page two speaks of rivers.\nand it goes on\n2\n",
             f"{header}Page three has a word broken over the page, conti-\n3\n",
             f"{header}nued here. Page four.\nand it goes on\n4\n",
             f"{header}Page five.\nand it goes on\n5\n"]
    assert repeated_edge_lines(pages) == {"annual report of the river board", "#", "and it goes on"}
    text, source_map = join_pages(pages, [10, 11, 12, 13, 14])
    assert "Annual Report" not in text and "\n1\n" not in text and "and it goes on" not in text
    assert "hyphenated word" in text and "continued\nhere. Page four." in text
    # a page's span holds what is left of that page; the carried word is cited where it starts
    by_page = {n: text[a:b] for a, b, n in source_map.spans}
    assert by_page[12].endswith("continued") and by_page[13] == "here. Page four."
    assert sorted(by_page) == [10, 11, 12, 13, 14]
    # kept as it is with clean=False: every page exactly
    raw, raw_map = join_pages(pages, clean=False)
    assert [raw[a:b] for a, b, _ in raw_map.spans] == pages
    assert rejoin_hyphenated("Franco-\nPrussian, 19-\n20") == "Franco-\nPrussian, 19-\n20"
    # a compound the document writes whole elsewhere keeps its hyphen where it wraps
    text, _ = join_pages(["A well-known tide. The well-\nknown river and the conti-\nnued rain.", "Page two."])
    assert "The well-known river and the continued rain." in text


def test_a_sentence_running_over_a_page_break_is_joined_by_a_line_break():
    text, source_map = join_pages(["It rains in", "spring. Then", "Summer comes."], clean=False)
    assert text == "It rains in\nspring. Then\nSummer comes."
    text, _ = join_pages(["One.", "Two."])
    assert text == "One.\n\nTwo."


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab-\n .A1"), max_size=40), max_size=7), st.booleans())
def test_joined_pages_map_exactly(pages: list[str], clean: bool):
    text, source_map = join_pages(pages, clean=clean)
    assert source_map.length == len(text)
    if not clean:
        assert [text[a:b] for a, b, _ in source_map.spans] == [p for p in pages if p]
    # whatever is not on a page is the whitespace that joins them
    on_page = {i for a, b, _ in source_map.spans for i in range(a, b)}
    assert all(text[i].isspace() for i in range(len(text)) if i not in on_page)


# --------------------------------------------------------------------------- chunks and results


@pytest.fixture(scope="module")
def paged() -> tuple[str, SourceMap, Chunking]:
    text, source_map = join_pages(book_pages(8))
    return text, source_map, small_chunker().chunk(text, "report", source=None, source_map=source_map)


def test_every_chunk_reports_the_pages_its_text_is_on(paged):
    text, source_map, chunking = paged
    assert any(c.start for c in chunking.clusters)
    crossing = 0
    for chunk in (*chunking.segments, *chunking.clusters):
        meta = chunk_metadata(chunking, chunk)
        assert set(k for k in meta if k.startswith("hseg_")) == set(
            metadata_keys(meta["hseg_level"], vector=False, paged=True))
        words = [i for i in range(chunk.start, chunk.end) if not text[i].isspace()]
        on = [source_map.page_at(i) for i in words]
        pages = page_range(meta)
        assert pages == (min(p for p in on if p), max(p for p in on if p))
        crossing += pages[0] != pages[1]
    assert crossing, "no chunk crosses a page break"


def test_a_segment_knows_the_pages_before_each_of_its_cuts(paged):
    text, source_map, chunking = paged
    tried = 0
    for seg in chunking.segments:
        view = SegmentMeta.of(chunk_metadata(chunking, seg))
        for offset in [c for c, _ in seg.cuts] + [len(seg.text)]:
            pages = source_map.pages_of(text, seg.start, seg.start + offset)
            assert view.pages_before(offset) == (pages[0], pages[-1])
            tried += pages[0] != pages[-1]
    assert tried


def test_a_chunking_without_a_map_has_no_page_keys():
    chunking = small_chunker().chunk("Plain text. " * 30, "plain")
    meta = chunk_metadata(chunking, chunking.clusters[0])
    assert PAGE_START_KEY not in meta and page_range(meta) is None


def test_a_map_of_another_text_is_refused():
    _, source_map = join_pages(["One page.", "Two pages."])
    with pytest.raises(ValueError, match=r"source_maps\[0\] maps 21 characters but texts\[0\]"):
        small_chunker().chunk("Another text.", "x", source_map=source_map)
    with pytest.raises(ValueError, match="source_map must be an hseg.text.provenance.SourceMap"):
        Chunking("x", "", (), (), source_map="pages")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="page numbers from 1 in order"):
        page_range({PAGE_START_KEY: 3, PAGE_END_KEY: 2})
    with pytest.raises(ValueError, match="page numbers from 1 in order"):
        page_range({PAGE_START_KEY: 3})


@pytest.mark.parametrize("unit", ["cluster", "segment", "auto"])
@pytest.mark.parametrize("lexical_weight", [0.0, 0.3])
def test_search_results_carry_the_pages_of_their_text(paged, unit, lexical_weight):
    text, source_map, chunking = paged
    store = ephemeral_store(HashingEncoder(64))
    store.add([chunking], [{"source": "report.pdf"}])
    store.sync_unit_index()
    budget = {"budget_tokens": 300} if unit != "cluster" else {"k": 4}
    hits = store.search("the glacier sentence of page 5", unit=unit, lexical_weight=lexical_weight, **budget)
    assert hits
    for hit in hits:
        _, meta = result_for(hit)
        assert text[meta["hseg_start"]:meta["hseg_end"]] == hit.text
        pages = source_map.pages_of(text, hit.start, hit.end)
        assert page_range(meta) == (pages[0], pages[-1]), (unit, hit.start, hit.end)
    for record in records_for(chunking, {"source": "report.pdf"}):
        assert page_range(record.metadata) is not None


def test_hseg_query_cites_the_pages_of_a_hit():
    from hseg.cli.query import format_hit
    from hseg.retrieval.hits import SearchHit

    hit = SearchHit("clu-1", "handbook", "Spring tides.", 120, 133, 0.5, 3, "seg-1", "segment", 120, 133,
                    metadata={"source": "handbook.pdf"}, pages=(12, 13))
    assert format_hit(1, hit).splitlines()[0].startswith("#1  score 0.5000  handbook.pdf p. 12\u201313  chars 120-133")
    hit.pages = None
    assert format_hit(1, hit).splitlines()[0].startswith("#1  score 0.5000  handbook.pdf  chars 120-133")


# --------------------------------------------------------------------------- the adapters


def _pages_of(metadata: dict[str, Any]) -> tuple[int, int]:
    pages = page_range(metadata)
    assert pages is not None, metadata
    return pages


def _page_documents(n: int = 6) -> list[tuple[str, dict[str, Any]]]:
    return [(text, {"source": "report.pdf", "page": i, "total_pages": n}) for i, text in enumerate(book_pages(n))]


@pytest.mark.parametrize("mode", ["clean", "exact", "separate"])
def test_the_langchain_splitter_joins_the_pages_of_one_source(mode):
    from langchain_core.documents import Document

    from langchain_hseg import HierarchicalSegmentTextSplitter

    pages = _page_documents()
    docs = [Document(page_content=t, metadata=m) for t, m in pages] + [Document("Notes. " * 20, metadata={"x": 1})]
    splitter = HierarchicalSegmentTextSplitter(chunker=small_chunker(), pages=mode)
    clusters, segments = splitter.split_documents_hierarchical(docs)
    paged = [d for d in clusters + segments if "hseg_page_start" in d.metadata]
    assert len(paged) == len(clusters + segments) - sum(1 for d in clusters + segments if d.metadata.get("x") == 1)
    for d in paged:
        assert d.metadata["page"] == d.metadata["hseg_page_start"] - 1 and d.metadata["total_pages"] == 6
        assert d.metadata["source"] == "report.pdf"
    doc_ids = {d.metadata["hseg_doc_id"] for d in paged}
    if mode == "separate":
        assert len(doc_ids) == 6 and all(_pages_of(d.metadata)[0] == _pages_of(d.metadata)[1] for d in paged)
    else:
        assert len(doc_ids) == 1 and any(_pages_of(d.metadata)[0] != _pages_of(d.metadata)[1] for d in clusters)
    texts = [ch.text for ch in splitter.chunk_documents(docs[:6])]
    if mode == "exact":
        assert len(texts) == 1 and all(t in texts[0] for t, _ in pages)
    elif mode == "clean":
        assert len(texts) == 1 and "Annual Report" not in texts[0]
    # the same pages through create_documents, as LangChain's TextSplitter API takes them
    again = splitter.create_documents([t for t, _ in pages], [m for _, m in pages])
    assert [d.id for d in again] == [d.id for d in clusters if d.metadata.get("source") == "report.pdf"]


def test_the_llama_index_parser_joins_the_pages_of_one_source():
    from llama_index.core import Document

    from llama_index_hseg import HierarchicalSegmentNodeParser

    docs = [Document(text=t, id_=f"report.pdf_part_{m['page']}",
                     metadata={"file_path": "report.pdf", "page_label": str(m["page"] + 1)})
            for t, m in _page_documents()]
    parser = HierarchicalSegmentNodeParser(encoder=HashingEncoder(), **{**SMALL, "segmenter": "texttiling"})
    nodes = parser.get_nodes_from_documents(docs)
    assert {n.ref_doc_id for n in nodes} == {"report.pdf_part_0"}
    assert {n.metadata["hseg_doc_id"] for n in nodes} == {"report.pdf_part_0"}
    assert all(n.metadata["page_label"] == str(n.metadata["hseg_page_start"]) for n in nodes)
    assert any(_pages_of(n.metadata)[0] != _pages_of(n.metadata)[1] for n in nodes)
    assert "page_label" not in nodes[0].excluded_llm_metadata_keys and "hseg_page_start" in \
        nodes[0].excluded_llm_metadata_keys
    with pytest.raises(ValueError, match="pages must be one of"):
        HierarchicalSegmentNodeParser(pages="joined")
    from langchain_hseg import HierarchicalSegmentTextSplitter
    with pytest.raises(ValueError, match="pages must be one of"):
        HierarchicalSegmentTextSplitter(pages="joined")
