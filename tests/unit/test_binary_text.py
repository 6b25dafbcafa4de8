"""Raw bytes handed over as text are refused in one line at every door (issue 53): LlamaIndex's
``SimpleDirectoryReader`` without its PDF reader gives a PDF's bytes as one Document, which the node
parser used to store as 11 records of ``%PDF-1.3 ... endobj``; the chunker under the parser, the
LangChain splitter and the library now refuse it and name the fix (convert the file first).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hseg.errors import UnreadableDocumentError
from hseg.text.binary import binary_reason
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder

PROSE = "The tide rises twice a day. Sailors read the tables before they leave the harbour.\n\n" * 4


def _pdf_bytes(tmp_path: Path) -> bytes:
    fpdf = pytest.importorskip("fpdf")
    pdf = fpdf.FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 6, PROSE)
    pdf.output(str(tmp_path / "tides.pdf"))
    return (tmp_path / "tides.pdf").read_bytes()


def test_what_looks_like_bytes() -> None:
    assert binary_reason("\ufeff %PDF-1.4\n%\xe2\xe3") == "the raw bytes of a PDF file"
    assert "ZIP archive" in (binary_reason("PK\x03\x04\x14\x00\x06\x00") or "")
    assert "NUL" in (binary_reason("text\x00more") or "")
    assert "control or undecodable" in (binary_reason(PROSE + "\ufffd\x01\x02" * 50) or "")
    # a few odd characters in real text are not bytes: a form feed, an escape code, one bad byte
    assert binary_reason(PROSE + "\x0c" + "\x1b[1m bold \x1b[0m" + "caf\ufffd") is None


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\ufffd")))
def test_text_without_control_characters_is_text(text: str) -> None:
    if not text.lstrip("\ufeff \t\r\n").startswith(("%PDF-", "GIF8")):
        assert binary_reason(text) is None


def test_the_chunker_refuses_a_pdf_decoded_as_text(tmp_path: Path) -> None:
    raw = _pdf_bytes(tmp_path).decode("latin-1")
    with pytest.raises(UnreadableDocumentError, match=r"texts\[1\] \(document 'tides.pdf'\) looks like the raw bytes "
                                                      r"of a PDF file, not text: convert the file first") as exc:
        small_chunker().chunk_many([PROSE, raw], ["ok.md", "tides.pdf"])
    assert "\n" not in str(exc.value) and isinstance(exc.value, ValueError)


def test_simple_directory_reader_bytes_are_refused_by_the_node_parser(tmp_path: Path) -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core import SimpleDirectoryReader

    from llama_index_hseg import HierarchicalSegmentNodeParser

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "tides.pdf").write_bytes(_pdf_bytes(tmp_path))
    docs = SimpleDirectoryReader(str(folder)).load_data()
    if not docs[0].text.startswith("%PDF"):
        pytest.skip("llama-index-readers-file is installed: SimpleDirectoryReader converts the PDF itself")
    parser = HierarchicalSegmentNodeParser(encoder=HashingEncoder())
    with pytest.raises(UnreadableDocumentError, match="raw bytes of a PDF file"):
        parser.get_nodes_from_documents(docs)


def test_the_langchain_splitter_refuses_bytes(tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document

    from langchain_hseg import HierarchicalSegmentTextSplitter

    splitter = HierarchicalSegmentTextSplitter(encoder=HashingEncoder())
    raw = _pdf_bytes(tmp_path).decode("utf-8", errors="ignore")
    with pytest.raises(UnreadableDocumentError, match="raw bytes of a PDF file"):
        splitter.split_documents([Document(page_content=raw, metadata={"source": "tides.pdf"})])
