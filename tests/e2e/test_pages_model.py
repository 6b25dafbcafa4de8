"""Page Documents with the real MiniLM and embedded Chroma (issue 53): a PDF written in the test (a
running head and a "Page N" foot on every page) read by LangChain's ``PyPDFLoader`` into one Document
per page, and the same pages as LlamaIndex Documents (``file_path`` + ``page_label``, as
``SimpleDirectoryReader``'s PDF reader writes them), through each framework's retriever.

What is checked comes from the PDF, not from hseg: the pages pypdf reads are the truth for every
result's ``hseg_page_start``/``hseg_page_end`` and framework page key; the stored text (the document's
cluster records, which tile it) holds every result at its offsets; the running head and foot are not
stored; clusters cross page breaks.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks.harness.documents import book, write
from hseg.chunking.schema import page_range

pytest.importorskip("fpdf")
pytest.importorskip("pypdf")

RUNNING = "Port Authority Handbook - internal edition"
QUESTIONS = ["What is duty 2.3 at berth 2?", "Which procedures apply at berth 4?", "duty 3.1.0 plain fact",
             "What does the handbook note explain?"]


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def pdf_pages(tmp_path_factory) -> tuple[Path, list[str]]:
    """The PDF and the text of each of its pages as pypdf reads it (page 1 first)."""
    from pypdf import PdfReader

    path = write(tmp_path_factory.mktemp("pdf") / "handbook.pdf", book(5), bookmarks=False, running=RUNNING)
    pages = [p.extract_text() for p in PdfReader(path).pages]
    assert len(pages) >= 5 and all(RUNNING in p for p in pages)
    return path, pages


def _stored_text(store, doc_id: str) -> str:
    from hseg.chunking.schema import CLUSTER, LEVEL_KEY, START_KEY, of_document

    got = store.collection.get(where={"$and": [of_document(doc_id), {LEVEL_KEY: CLUSTER}]},
                               include=["metadatas", "documents"])
    parts = sorted(zip((m[START_KEY] for m in got["metadatas"]), got["documents"]))
    return "".join(d for _, d in parts)


def _check_results(results: list[tuple[str, dict]], stored: str, pages: list[str]) -> int:
    """Every result's text is the stored text at its offsets, and its first and last lines are on the
    PDF pages its page keys name (pypdf's text of those pages); returns how many span a page break."""
    crossing = 0
    for text, meta in results:
        assert stored[meta["hseg_start"]:meta["hseg_end"]] == text
        first, last = page_range(meta)  # type: ignore[misc]
        # a page break falls between lines, so a line's words are on one page
        lines = [_flat(line) for line in text.splitlines() if line.strip()]
        assert lines[0][:24] in _flat(pages[first - 1]), (first, lines[0][:24])
        assert lines[-1][-24:] in _flat(pages[last - 1]), (last, lines[-1][-24:])
        crossing += first != last
    return crossing


@pytest.mark.model
def test_pypdfloader_pages_through_the_langchain_retriever(encoder, pdf_pages, tmp_path):
    pytest.importorskip("langchain_community")
    from langchain_community.document_loaders import PyPDFLoader

    from langchain_hseg import HierarchicalSegmentRetriever, HierarchicalSegmentTextSplitter

    path, pages = pdf_pages
    documents = PyPDFLoader(str(path)).load()
    assert [d.metadata["page"] for d in documents] == list(range(len(pages)))
    splitter = HierarchicalSegmentTextSplitter(encoder=encoder, target_tokens=256)
    clusters = splitter.split_documents(documents)
    assert {d.metadata["source"] for d in clusters} == {str(path)} and len({d.metadata["hseg_doc_id"]
                                                                            for d in clusters}) == 1
    assert any(page_range(d.metadata)[0] != page_range(d.metadata)[1] for d in clusters)  # type: ignore[index]
    assert all(d.metadata["page"] == page_range(d.metadata)[0] - 1 for d in clusters)  # type: ignore[index]

    retriever = HierarchicalSegmentRetriever.from_documents(documents, splitter=splitter,
                                                            path=str(tmp_path / "chroma"), k=3)
    doc_id = clusters[0].metadata["hseg_doc_id"]
    stored = _stored_text(retriever.store, doc_id)
    assert RUNNING not in stored and not re.search(r"^Page \d+$", stored, re.M)
    results = []
    for question in QUESTIONS:
        for unit in ("cluster", "auto"):
            budget = {"budget_tokens": 600} if unit == "auto" else {}
            for doc in retriever.invoke(question, unit=unit, **budget):
                assert doc.metadata["page"] == doc.metadata["hseg_page_start"] - 1
                results.append((doc.page_content, doc.metadata))
    assert results
    crossing = _check_results(results, stored, pages)
    assert crossing, "no result spans a page break"


@pytest.mark.model
def test_page_documents_through_the_llama_index_retriever(encoder, pdf_pages, tmp_path):
    from llama_index.core import Document

    from llama_index_hseg import HierarchicalSegmentNodeParser, HierarchicalSegmentRetriever

    path, pages = pdf_pages
    documents = [Document(text=text, id_=f"{path}_part_{i}",
                          metadata={"file_path": str(path), "file_name": path.name, "page_label": str(i + 1)})
                 for i, text in enumerate(pages)]
    parser = HierarchicalSegmentNodeParser(encoder=encoder, target_tokens=256)
    nodes = parser.get_nodes_from_documents(documents)
    assert {n.ref_doc_id for n in nodes} == {documents[0].id_}
    assert all(n.metadata["page_label"] == str(page_range(n.metadata)[0]) for n in nodes)  # type: ignore[index]
    retriever = HierarchicalSegmentRetriever.from_documents(documents, parser=parser, path=str(tmp_path / "chroma"),
                                                            similarity_top_k=3)
    stored = _stored_text(retriever.store, documents[0].id_)
    assert RUNNING not in stored
    results = []
    for question in QUESTIONS:
        for found in retriever.retrieve(question):
            meta = found.node.metadata
            assert meta["page_label"] == str(meta["hseg_page_start"])
            assert meta["file_path"] == str(path) and "page" not in meta
            results.append((found.node.get_content(), meta))
    assert results
    _check_results(results, stored, pages)
