"""Indexing a folder is one library call (issue 53 items 2 and 4): :func:`hseg.ingest.index_paths` finds,
converts, skips unchanged, prunes and sums up; ``hseg index`` is its caller and reads PDF, DOCX, PPTX
and HTML, named or in folders, lists the files of formats it does not read, and skips (with the install
command) a format whose library is missing. The hashing encoder and a real embedded Chroma; the real
model end to end is ``tests/e2e/test_formats_end_to_end.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.harness.documents import OUTLINE, PAGE_SENTENCES, write
from hseg import ingest
from hseg.chunking.schema import PAGE_END_KEY, PAGE_START_KEY
from hseg.cli import main
from hseg.store import HierarchicalStore
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import FAKE_CLI, HashingEncoder

pytest.importorskip("pypdf")
pytest.importorskip("docx")
pytest.importorskip("pptx")
pytest.importorskip("markdownify")
pytest.importorskip("fpdf")

FORMATS = (".pdf", ".docx", ".pptx", ".html")


def _folder(root: Path) -> Path:
    docs = root / "docs"
    (docs / "deep").mkdir(parents=True)
    (docs / "notes.md").write_text("# Notes\n\nThe harbour master keeps the tide tables in the office.\n",
                                   encoding="utf-8")
    for suffix in FORMATS:
        write(docs / "deep" / f"manual{suffix}", OUTLINE)
    (docs / "sheet.xlsx").write_bytes(b"PK\x03\x04 not read")
    (docs / "deep" / "photo.png").write_bytes(b"\x89PNG")
    (docs / "deep" / "logo.png").write_bytes(b"\x89PNG")
    return docs


def _store(tmp_path: Path) -> HierarchicalStore:
    return HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=HashingEncoder())


def _sources(store: HierarchicalStore) -> set[str]:
    return {str(m["source"]) for _, m in store.iter_metadatas()}


def test_a_folder_of_every_format_in_one_call(tmp_path: Path) -> None:
    docs = _folder(tmp_path)
    store = _store(tmp_path)
    lines: list[str] = []
    summary = ingest.index_paths([docs], store, small_chunker(), anchor=tmp_path, report=lines.append,
                                 progress=False)
    assert summary.documents == 5 and not summary.failed and not summary.skipped, (summary, lines)
    assert summary.unsupported == {".png": 2, ".xlsx": 1}
    assert summary.unsupported_line() == "2 .png files, 1 .xlsx file"
    assert _sources(store) == {"docs/notes.md", *(f"docs/deep/manual{s}" for s in FORMATS)}
    assert summary.total == store.count() > 0 and summary.gone == [] and summary.pruned is None
    # the converted text is stored, not the file's bytes or markup, and the paged formats say their pages
    for suffix in FORMATS:
        records = store.get_records(f"docs/deep/manual{suffix}", include_embeddings=False)
        text = " ".join(r.document for r in records)
        assert "<p>" not in text and "%PDF" not in text and PAGE_SENTENCES[2] in text
        on_page_two = [r for r in records if PAGE_SENTENCES[2] in r.document]
        if suffix in (".pdf", ".pptx"):
            assert all(r.metadata[PAGE_START_KEY] <= 2 <= r.metadata[PAGE_END_KEY] for r in on_page_two)
        else:
            assert all(PAGE_START_KEY not in r.metadata for r in records)

    again = ingest.index_paths([docs], store, small_chunker(), anchor=tmp_path, progress=False)
    assert (again.documents, again.unchanged) == (0, 5)

    (docs / "deep" / "manual.pdf").unlink()
    kept = ingest.index_paths([docs], store, small_chunker(), anchor=tmp_path, progress=False)
    assert kept.gone == ["docs/deep/manual.pdf"] and "docs/deep/manual.pdf" in _sources(store)
    said: list[str] = []
    pruned = ingest.index_paths([docs], store, small_chunker(), anchor=tmp_path, prune=True, progress=False,
                                note=said.append)
    assert pruned.pruned == ["docs/deep/manual.pdf"] and said == ["pruned docs/deep/manual.pdf: its file is gone"]
    assert "docs/deep/manual.pdf" not in _sources(store)


def test_paths_that_name_nothing_to_index_are_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="name no file to index"):
        ingest.index_paths([tmp_path / "empty"], _store(tmp_path), small_chunker(), anchor=tmp_path)
    with pytest.raises(ValueError, match="wrap it in a list"):
        ingest.index_paths(str(tmp_path / "empty"), _store(tmp_path), small_chunker())  # type: ignore[arg-type]


def test_a_missing_converter_library_skips_its_files_with_the_install_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = _folder(tmp_path)
    monkeypatch.setitem(sys.modules, "pypdf", None)  # as if the formats extra were not installed
    lines: list[str] = []
    summary = ingest.index_paths([docs], _store(tmp_path), small_chunker(), anchor=tmp_path, report=lines.append,
                                 progress=False)
    assert summary.documents == 4 and not summary.failed
    assert [d for d, _ in summary.skipped] == ["docs/deep/manual.pdf"]
    assert len(lines) == 1 and 'pip install "hseg[formats]"' in lines[0]


def test_hseg_index_reads_named_html_and_pdf_files_and_lists_what_it_left_out(
        fake: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    docs = _folder(fake)
    # a named HTML file is converted (before, its markup was indexed) and a named PDF read (before: "binary")
    assert main(["index", "docs/deep/manual.html", "docs/deep/manual.pdf", "--db", "db", *FAKE_CLI]) == 0
    out, err = capsys.readouterr()
    assert "2 indexed" in out and "binary" not in err
    store = HierarchicalStore("hseg", path="db", encoder=HashingEncoder(), create=False)
    html = " ".join(r.document for r in store.get_records("docs/deep/manual.html", include_embeddings=False))
    assert "<h2>" not in html and "NAVIGATION_TEXT" not in html and "Tides and Moorings" in html

    assert main(["index", str(docs), "--db", "db", *FAKE_CLI]) == 0
    out, err = capsys.readouterr()
    assert "3 indexed, 2 unchanged" in out
    assert "left out   2 .png files, 1 .xlsx file in the folders" in out

    monkeypatch.setitem(sys.modules, "docx", None)
    (docs / "deep" / "manual.docx").write_bytes((docs / "deep" / "manual.docx").read_bytes() + b"\0")  # changed
    assert main(["index", str(docs), "--db", "db", *FAKE_CLI]) == 0  # skipped is not failed
    out, err = capsys.readouterr()
    assert 'skipped    1 .docx file: their format needs the formats extra (pip install "hseg[formats]")' in out
    assert err.count('pip install "hseg[formats]"') == 1


def test_hseg_chunk_reads_a_presentation(fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    write(fake / "deck.pptx", OUTLINE)
    assert main(["chunk", "deck.pptx", "--format", "json", "--segmenter", "texttiling", "--quiet"]) == 0
    [doc] = json.loads(capsys.readouterr().out)
    text = "".join(s["text"] for s in doc["segments"])
    assert text.startswith("# Harbour Operations Manual") and PAGE_SENTENCES[3] in text
    assert any(s["heading_path"] == ["Safety Rules"] for s in doc["segments"])


def test_a_damaged_file_fails_alone(tmp_path: Path) -> None:
    docs = _folder(tmp_path)
    (docs / "broken.docx").write_bytes(b"PK\x03\x04 a damaged archive")
    lines: list[str] = []
    summary = ingest.index_paths([docs], _store(tmp_path), small_chunker(), anchor=tmp_path, report=lines.append,
                                 progress=False)
    assert summary.documents == 5 and summary.failures == 1
    assert [d for d, _ in summary.failed] == ["docs/broken.docx"] and "not a readable DOCX file" in lines[0]
