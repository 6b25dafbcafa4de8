"""A store copied or moved to a folder at another depth (issue 47 item 5): document ids are paths relative
to the folder that holds ``--db``, so ``cp -r db sub/copydb; hseg index docs --db sub/copydb`` gave every
file a new id (``../docs/a.md``) and stored every document twice. Such a run is now refused before it
writes, naming the folder the ids are relative to (:mod:`hseg.ingest.relocation`); a store moved to the
same depth, a project copied whole and files moved inside a project index as before.

The CLI in-process (``hseg.cli.main``), hashing encoder, real embedded stores copied with ``shutil``.
"""

from __future__ import annotations

import shutil

import chromadb

from hseg.cli import main
from hseg_testing.fakes import FAKE_CLI, synthetic_book
from tests.store.test_cli_index import one_line_error, write_file


def _docs(root) -> None:
    for name in ("a", "b", "c"):
        write_file(root / "docs" / f"{name}.md", synthetic_book(2500, seed=ord(name)))


def _count(db) -> int:
    return chromadb.PersistentClient(path=str(db)).get_collection("hseg").count()


def test_a_store_copied_to_another_depth_is_refused_with_the_fix(fake, capsys):  # noqa: F811
    _docs(fake)
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    held = _count(fake / "db")
    shutil.copytree(fake / "db", fake / "sub" / "copydb")
    capsys.readouterr()
    assert main(["index", "docs", "--db", "sub/copydb", *FAKE_CLI]) == 1  # was 0, '3 indexed', every document twice
    one_line_error(capsys.readouterr().err, "hseg index: error: --db sub/copydb: its documents' ids are paths relative "
                   f"to {fake} ('docs/a.md' holds the text of {fake / 'docs' / 'a.md'})",
                   "the store was copied or moved to another depth", f"mv sub/copydb {fake}/")
    assert _count(fake / "sub" / "copydb") == held  # nothing written
    shutil.move(fake / "sub" / "copydb", fake / "copydb")  # the fix: the depth it was indexed at
    assert main(["index", "docs", "--db", "copydb", *FAKE_CLI]) == 0
    assert "0 indexed, 3 unchanged" in capsys.readouterr().out and _count(fake / "copydb") == held


def test_a_project_copied_whole_and_files_moved_inside_it_index_as_before(fake, capsys, monkeypatch):  # noqa: F811
    project = fake / "proj"
    _docs(project)
    monkeypatch.chdir(project)
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    shutil.copytree(project, fake / "proj2")  # files and store together: same ids
    monkeypatch.chdir(fake / "proj2")
    capsys.readouterr()
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    assert "0 indexed, 3 unchanged" in capsys.readouterr().out
    # a file moved below another folder whose path ends like its old id: a new document, not a moved store
    write_file(fake / "proj2" / "docs" / "old" / "docs" / "a.md", (fake / "proj2" / "docs" / "a.md").read_text())
    (fake / "proj2" / "docs" / "a.md").unlink()
    assert main(["index", "docs", "--db", "db", *FAKE_CLI]) == 0
    out = capsys.readouterr().out
    assert "1 indexed, 2 unchanged" in out and "gone       1 stored document" in out
