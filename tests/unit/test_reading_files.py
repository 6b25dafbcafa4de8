"""Reading a file to index (issue 54 finding 10): only regular files, a bounded read, and a FIFO
opened without waiting for a writer, also when it takes a file's place after discovery."""

from __future__ import annotations

import os

import pytest

from hseg.ingest import files
from hseg.ingest.files import MAX_FILE_BYTES, discover, read_text_file

posix_only = pytest.mark.skipif(os.name != "posix", reason="FIFOs are POSIX's")


@posix_only
def test_a_fifo_read_directly_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "pipe.md")  # as if it took a discovered file's place
    with pytest.raises(ValueError, match="a FIFO, not a regular file"):
        read_text_file(tmp_path / "pipe.md")


def test_a_file_larger_than_the_bound_is_refused_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 1000)
    (tmp_path / "big.md").write_text("word " * 201)  # 1005 bytes
    (tmp_path / "fits.md").write_text("word " * 200)
    with pytest.raises(ValueError, match=r"larger than .* \(MAX_FILE_BYTES\): split it"):
        read_text_file(tmp_path / "big.md")
    assert read_text_file(tmp_path / "fits.md") == "word " * 200
    assert MAX_FILE_BYTES == 64 * 2**20


@posix_only
def test_discovery_takes_links_to_regular_files_and_reports_the_rest(tmp_path):
    (tmp_path / "a.md").write_text("a")
    os.symlink(tmp_path / "a.md", tmp_path / "link.md")
    os.symlink("/dev/null", tmp_path / "null.md")
    found, problems = discover([str(tmp_path)], anchor=tmp_path)
    assert [f.doc_id for f in found] == ["a.md", "link.md"]
    assert problems == [(str(tmp_path / "null.md"), "a character device, not a regular file: skipped")]
