"""``hseg index`` says what it knows instead of staying silent (issue 47 item 6): stored documents whose
files are gone, and the chunk options the store remembers from an earlier run (``--target-tokens``,
``--k``, ``--max-cluster-tokens``, ``--structure``, ``--segmenter``), which a later run without them uses
instead of re-chunking every document to the defaults.

The CLI in-process (``hseg.cli.main``) on the hashing encoder and TextTiling, embedded stores.
"""

from __future__ import annotations

import json

import chromadb

from hseg.cli import main
from hseg.store.remembered import CHUNK_OPTIONS_KEY
from hseg_testing.fakes import FAKE_CLI, synthetic_book
from tests.store.test_cli_index import stats_json, write_file


def _index(capsys, *args: str) -> str:
    assert main(["index", "docs", "--db", "db", *FAKE_CLI, *args]) == 0
    return capsys.readouterr().out


def _line(out: str, head: str) -> str | None:
    return next((line for line in out.splitlines() if line.startswith(head)), None)


def _settings(root) -> set[str]:
    """The chunk-settings fingerprints the records carry."""
    col = chromadb.PersistentClient(path=str(root / "db")).get_collection("hseg")
    return {m["chunk_settings"] for m in col.get(include=["metadatas"])["metadatas"]}


def test_a_deleted_file_is_reported_with_the_prune_fix(fake, capsys):  # noqa: F811
    """Without --prune a deleted file's document keeps answering, and the run said only '0 indexed, 2
    unchanged' although its look-up of the files knew one was gone."""
    for name in ("a", "b", "c"):
        write_file(fake / "docs" / f"{name}.md", synthetic_book(2500, seed=ord(name)))
    _index(capsys)
    (fake / "docs" / "b.md").unlink()
    out = _index(capsys)
    assert "0 indexed, 2 unchanged" in out
    assert _line(out, "gone") == ("gone       1 stored document has no file any more under the PATHs (docs/b.md) "
                                  "and still answer queries: re-run with --prune to remove them"), out
    assert stats_json(capsys, "--db", "db")["documents"] == 3  # said, not done: removing is --prune's
    out = _index(capsys, "--prune")
    assert "pruned     1 document whose file is gone" in out and _line(out, "gone") is None
    assert stats_json(capsys, "--db", "db")["documents"] == 2
    assert _line(_index(capsys), "gone") is None


def test_chunk_options_are_remembered_by_the_store(fake, capsys):  # noqa: F811
    """A plain 'hseg index' after 'hseg index --target-tokens 128' re-chunked every document back to the
    default (256) without a word; the store now remembers the options as it remembers the encoder."""
    for name in ("a", "b"):
        write_file(fake / "docs" / f"{name}.md", synthetic_book(6000, seed=ord(name)))
    first = _index(capsys, "--target-tokens", "128")
    assert "2 indexed" in first and _line(first, "chunking") is None  # a new store: nothing to say
    small = _settings(fake)
    assert len(small) == 1 and json.loads(next(iter(small)))["target_tokens"] == 128
    stats = stats_json(capsys, "--db", "db")

    plain = _index(capsys)
    assert "0 indexed, 2 unchanged" in plain, plain
    assert _line(plain, "chunking") == ("chunking   --target-tokens 128, remembered by the store from an earlier "
                                        "run (give an option to change it)"), plain
    assert stats_json(capsys, "--db", "db") == stats and _settings(fake) == small

    larger = _index(capsys, "--target-tokens", "512")
    assert "2 indexed, 0 unchanged" in larger, larger
    assert _line(larger, "chunking").startswith("chunking   --target-tokens 512, was --target-tokens 128 (remembered "
                                                "by the store): documents chunked the old way are chunked again")
    assert {json.loads(s)["target_tokens"] for s in _settings(fake)} == {512}
    assert "0 indexed, 2 unchanged" in _index(capsys)  # the new options are the remembered ones now

    # the size is one choice: --k replaces a remembered --target-tokens (they exclude each other)
    by_k = _index(capsys, "--k", "1.0", "--structure", "none")
    assert "2 indexed" in by_k
    assert "--k 1.0 --structure none, was --target-tokens 512 (remembered" in _line(by_k, "chunking")
    col = chromadb.PersistentClient(path=str(fake / "db")).get_collection("hseg")
    assert json.loads(col.metadata[CHUNK_OPTIONS_KEY]) == {"k": 1.0, "segmenter": "texttiling", "structure": "none"}
    assert "0 indexed, 2 unchanged" in _index(capsys)


def test_a_store_without_remembered_options_takes_the_defaults_quietly(fake, capsys):  # noqa: F811
    """A store written before hseg remembered options has no key: the defaults, as before, and no note."""
    write_file(fake / "docs" / "a.md", synthetic_book(3000, seed=1))
    _index(capsys)
    col = chromadb.PersistentClient(path=str(fake / "db")).get_collection("hseg")
    col.modify(metadata={k: v for k, v in col.metadata.items() if k != CHUNK_OPTIONS_KEY})
    out = _index(capsys)
    assert "0 indexed, 1 unchanged" in out and _line(out, "chunking") is None
