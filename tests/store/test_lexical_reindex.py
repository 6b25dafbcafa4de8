"""Reliability of the lexical index (issues 7 and 26): ``hseg index --prune`` after edits and deletions
keeps the lexical rows equal to the collection's segments (in-process, embedded store, hashing encoder).

Its faults: ``tests/stress/test_lexical_kill_9.py`` (killed writers, two writers) and
``tests/e2e/test_lexical_server_restart.py``. See ``docs/reliability.md``.
"""

from __future__ import annotations

from pathlib import Path

from hseg.store import HierarchicalStore
from hseg_testing.checks import lexical_disagreement
from hseg_testing.fakes import FAKE_CLI, HashingEncoder, fake_cli, synthetic_book


def _write_files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def test_a_reindex_after_edits_and_deletions_keeps_both_sides_equal(tmp_path, monkeypatch, capsys):
    main = fake_cli(monkeypatch)
    monkeypatch.chdir(tmp_path)
    files = {f"docs/f{i}.md": synthetic_book(2_000, seed=600 + i) for i in range(5)}
    _write_files(tmp_path, files)
    args = ["index", "docs", "--db", "db", "--prune", *FAKE_CLI]
    assert main(args) == 0
    assert lexical_disagreement(tmp_path / "db") == []
    edited = files["docs/f0.md"].replace("Chapter", "Section")  # another text, nearly the same spans
    (tmp_path / "docs/f0.md").write_text(edited, encoding="utf-8")
    (tmp_path / "docs/f2.md").write_text(synthetic_book(1_200, seed=699), encoding="utf-8")
    (tmp_path / "docs/f3.md").unlink()
    capsys.readouterr()
    assert main(args) == 0
    assert "2 indexed, 2 unchanged" in capsys.readouterr().out
    assert lexical_disagreement(tmp_path / "db") == []
    store = HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=HashingEncoder())
    hits = store.search("Section", k=3, unit="segment", lexical_weight=10.0)
    assert hits and "Section" in hits[0].text and hits[0].doc_id == "docs/f0.md"
    assert main(args) == 0
    assert "0 indexed, 4 unchanged" in capsys.readouterr().out
