"""hseg.ingest.chunk_settings: the fingerprint ``hseg index`` compares to skip documents stored unchanged.

Everything that changes the chunks must change it (the hseg version, the token counter, the
segmenter's own configuration, ...), and nothing else may: an unchanged re-run must still skip.
Fast: the bag-of-words ``HashingEncoder`` and a real embedded Chroma in a temp folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import hseg
from hseg import ingest
from hseg.chunking.chunker import HierarchicalChunker
from hseg.ingest import run as ingest_run
from hseg.segmentation.bilstm import BiLSTMSegmenter
from hseg.segmentation.segmenters import TextTilingSegmenter
from hseg.store import HierarchicalStore
from hseg_testing.chunkers import hashing_chunker
from hseg_testing.fakes import HashingEncoder, ephemeral_store

TEXT = ("The tide is the rise and fall of the sea. Tides are caused by the gravity of the moon and the sun. "
        "High tide and low tide alternate twice a day on most coasts.\n\n") * 3 + \
       ("Cats are small carnivorous mammals. A cat sleeps for most of the day. Cats hunt mice and birds, "
        "and people keep cats as companions in their homes.\n\n") * 3


def _words(text: str) -> int:
    return len(text.split())


def _bilstm(**kwargs: Any) -> BiLSTMSegmenter:
    return BiLSTMSegmenter.load(fallback=TextTilingSegmenter(), device="cpu", **kwargs)


def _retrained() -> BiLSTMSegmenter:
    seg = _bilstm()
    with torch.no_grad():
        next(seg.model.parameters()).add_(1e-3)  # other weights, same file name and card
    return seg


def _chunker(segmenter: Any = None, **kwargs: Any) -> HierarchicalChunker:
    chunker = hashing_chunker(segmenter="texttiling", **kwargs)
    if segmenter is not None:
        # set after construction: the BiLSTM refuses the fake encoder's name (it falls back to
        # TextTiling for 64-d vectors, which is all these tests need)
        chunker.segmenter = segmenter
    return chunker


def _new_version(monkeypatch: pytest.MonkeyPatch) -> HierarchicalChunker:
    monkeypatch.setattr(hseg, "__version__", "999.0.0")
    return _chunker()


#: change -> (chunker before, chunker after the change); each call builds a fresh chunker
CHANGES: dict[str, tuple[Callable[[], HierarchicalChunker], Callable[[pytest.MonkeyPatch], HierarchicalChunker]]] = {
    "hseg version": (_chunker, _new_version),
    "tokenizer": (_chunker, lambda mp: _chunker(tokenizer=_words)),
    "texttiling window": (_chunker, lambda mp: _chunker(TextTilingSegmenter(window=4))),
    "texttiling threshold": (_chunker, lambda mp: _chunker(TextTilingSegmenter(threshold_std=0.5))),
    "bilstm threshold": (lambda: _chunker(_bilstm()), lambda mp: _chunker(_bilstm(threshold=0.3))),
    "bilstm weights": (lambda: _chunker(_bilstm()), lambda mp: _chunker(_retrained())),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_changed_setting_reindexes_and_an_unchanged_rerun_skips(change, tmp_path, monkeypatch):
    before, after = CHANGES[change]
    path = tmp_path / "a.md"
    path.write_text(TEXT, encoding="utf-8")
    files = [ingest.SourceFile(path, "a.md")]
    store = HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=HashingEncoder())
    assert ingest.ingest(files, before(), store).documents == 1
    again = ingest.ingest(files, before(), store)  # a fresh but equal chunker
    assert (again.documents, again.unchanged) == (0, 1)

    old, new = ingest.chunk_settings(before()), ingest.chunk_settings(after(monkeypatch))
    assert old != new
    records = {r.id: r.metadata for r in store.get_records("a.md", include_embeddings=False)}
    sha = hashlib.sha256(TEXT.encode("utf-8")).hexdigest()
    assert ingest.is_complete(records, sha, old, len(TEXT))
    assert not ingest.is_complete(records, sha, new, len(TEXT))

    changed = ingest.ingest(files, after(monkeypatch), store)
    assert (changed.documents, changed.unchanged) == (1, 0)
    again = ingest.ingest(files, after(monkeypatch), store)
    assert (again.documents, again.unchanged) == (0, 1)


def test_settings_are_deterministic_json_naming_what_decides_the_chunks():
    settings = ingest.chunk_settings(_chunker(_bilstm(), tokenizer=_words))
    assert settings == ingest.chunk_settings(_chunker(_bilstm(), tokenizer=_words))
    parts = json.loads(settings)
    assert parts["hseg"] == hseg.__version__
    assert parts["tokenizer"] == "tests.store.test_ingest._words"
    assert json.loads(ingest.chunk_settings(_chunker()))["tokenizer"] == "tiktoken:cl100k_base"
    seg = parts["segmenter"]
    assert seg["name"] == "bilstm" and seg["threshold"] == _bilstm().threshold
    assert len(seg["weights_sha256"]) == 64
    assert seg["fallback"] == {"name": "texttiling", "window": 6, "threshold_std": 1.0, "min_sentences": 3}
    assert "device" not in seg and "cpu_threads" not in seg  # speed, not boundaries


def test_the_same_weights_from_another_file_are_the_same_segmenter(tmp_path):
    copy = _bilstm().save(Path(tmp_path) / "copy.pt")  # float16 on disk, as the shipped file
    assert ingest.segmenter_config(BiLSTMSegmenter.load(copy, fallback=TextTilingSegmenter())) == \
        ingest.segmenter_config(_bilstm())
    assert ingest.segmenter_config(BiLSTMSegmenter.load(copy, fallback=TextTilingSegmenter(),
                                                        cpu_threads=2)) == ingest.segmenter_config(_bilstm())


def test_a_custom_segmenter_is_described_by_its_public_settings():
    class Fixed:  # no name, no dataclass: only the known parameter names are read
        threshold = 0.7
        device = "cpu"

        def boundaries(self, sentences, embeddings):
            return [len(sentences) - 1]

    assert ingest.segmenter_config(Fixed()) == {"name": "Fixed", "threshold": 0.7}


# --------------------------------------------------------------------------- pruning scope


def test_prune_scope_follows_what_each_path_argument_covers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for folder in ("docs/sub", "notes/x/deep", "other"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "one.md").write_text("x", encoding="utf-8")

    docs = ingest.prune_scope(["docs"])
    assert all(map(docs, ["docs/a.md", "docs/sub/b.txt", "docs/notes.rst", "./docs/a.md"]))
    assert not any(map(docs, ["docs", "docsx/a.md", "other/a.md", "a.md", "../docs/a.md"]))
    assert ingest.prune_scope([str(tmp_path / "docs")])("docs/a.md")  # an absolute argument

    here = ingest.prune_scope(["."])
    assert here("a.md") and here("docs/sub/b.txt") and not here("../a.md")

    recursive = ingest.prune_scope(["notes/**/*.md"])
    assert recursive("notes/a.md") and recursive("notes/x/deep/b.md")
    assert not any(map(recursive, ["notes/a.txt", "notes/.hidden/a.md", "other/notes/a.md", "docs/a.md"]))
    folders = ingest.prune_scope(["notes/*"])  # matches the folder notes/x, which discover walks
    assert folders("notes/x/deep/c.md") and folders("notes/gone.md") and not folders("notes/.git/c.md")

    named = ingest.prune_scope(["one.md", "gone.md", "vanished"])  # files, existing or not
    assert named("one.md") and named("./gone.md") and named("vanished")
    assert not named("vanished/a.md")  # a missing folder (an unmounted disk?) covers nothing inside


class FlakyStore:
    """A store whose ``add`` fails inside Chroma ``failures`` times, then writes (counts them)."""

    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0

    def add(self, chunkings, metas):
        from chromadb.errors import InternalError

        self.calls += 1
        if self.calls <= self.failures:
            raise InternalError("Error creating hnsw segment reader: Nothing found on disk")
        return len(chunkings)


def test_a_write_chroma_fails_internally_is_tried_again(monkeypatch, caplog):
    monkeypatch.setattr(ingest_run, "WRITE_RETRY_DELAYS", (0.0, 0.0))
    chunkings = _chunker().chunk_many([TEXT, TEXT], ["a", "b"])
    store = FlakyStore(failures=2)
    with caplog.at_level("WARNING", logger="hseg.ingest"):
        assert ingest_run._write_batch(store, chunkings, [{}, {}], lambda d, m: None) == (2, chunkings)
    assert store.calls == 3 and caplog.text.count("trying again") == 2
    stubborn = FlakyStore(failures=3)  # more failures than tries: the error reaches the caller
    with pytest.raises(Exception, match="Nothing found on disk"):
        ingest_run._write_batch(stubborn, chunkings, [{}, {}], lambda d, m: None)
    assert stubborn.calls == 3


def test_a_unit_record_left_from_another_text_makes_hseg_index_redo_the_document(tmp_path):
    """A crash between a re-added document's records and its unit records can leave a unit record
    written from the old text under a current segment's id (ids come from spans), holding the old
    vector: ``hseg index`` redoes the document, and then every unit record is the text's."""

    path = tmp_path / "a.md"
    path.write_text(TEXT, encoding="utf-8")
    files = [ingest.SourceFile(path, "a.md")]
    store = HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=HashingEncoder())
    assert ingest.ingest(files, _chunker(), store).documents == 1
    units = store._parts.units.collection
    first = units.get(limit=1, include=[])["ids"]
    units.update(ids=first, metadatas=[{"content_sha256": "from another text"}])
    again = ingest.ingest(files, _chunker(), store)
    assert (again.documents, again.unchanged) == (1, 0)
    sha = hashlib.sha256(TEXT.encode("utf-8")).hexdigest()
    segments = {r.id: r.document for r in store.get_records("a.md", include_embeddings=False)
                if r.metadata["hseg_level"] == "segment"}
    got = units.get(include=["metadatas"])
    assert sorted(uid.split("|")[0] for uid in got["ids"]) == sorted(segments)
    assert all(meta["content_sha256"] == sha for meta in got["metadatas"])
    assert ingest.ingest(files, _chunker(), store).unchanged == 1


# --------------------------------------------------------------------------- one question to the store


def _records_reads(monkeypatch) -> list[list[str]]:
    """The documents of every read of stored records (``Maintenance.records``) from here on."""
    from hseg.store.maintenance import Maintenance

    reads: list[list[str]] = []
    real = Maintenance.records

    def counted(self, doc_ids):
        reads.append(list(doc_ids))
        return real(self, doc_ids)

    monkeypatch.setattr(Maintenance, "records", counted)
    return reads


@pytest.mark.parametrize("held", [True, False])
def test_a_batch_asks_the_store_once_and_add_takes_the_answer(tmp_path, monkeypatch, held):
    """``ingest_batch`` asks ``store.maintenance.incomplete`` once and hands its answer to ``add``, which
    reads the documents' records again only when another hold of the writer lock may have changed them."""
    store = HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=HashingEncoder())
    chunker = hashing_chunker(segmenter="texttiling")
    texts = {"a.md": TEXT, "b.md": TEXT.replace("Cats", "Dogs")}
    assert ingest.ingest_batch(texts, chunker, store).documents == 2
    reads = _records_reads(monkeypatch)
    changed = {"a.md": TEXT + "The sea is salty.\n", "b.md": texts["b.md"]}
    with store.writing() if held else contextlib.nullcontext():  # hseg index holds it for its run
        done = ingest.ingest_batch(changed, chunker, store)
    assert (done.documents, done.unchanged) == (1, 1)
    # one read for the question; the write reads a.md's records again only outside that hold of the lock
    assert reads == ([["a.md", "b.md"]] if held else [["a.md", "b.md"], ["a.md"]])
    assert ingest.ingest_batch(changed, chunker, store).unchanged == 2  # and what it wrote is whole


def test_add_with_the_answer_replaces_what_the_answer_read(monkeypatch):
    """A store with no writer lock (in memory, or a server) reads a re-added document's records again in
    its turn (another writer may have written it since the answer was read: issue 54), and replaces them."""
    from hseg.store.maintenance import Expected

    store = ephemeral_store()
    chunker = hashing_chunker(segmenter="texttiling")
    store.add(chunker.chunk(TEXT, doc_id="a.md"))
    before = set(store.maintenance.records(["a.md"])["a.md"])
    reads = _records_reads(monkeypatch)
    answer = store.maintenance.incomplete({"a.md": Expected("other", "settings", len(TEXT))})
    assert answer.doc_ids == ("a.md",) and answer.holds("a.md") and reads == [["a.md"]]
    store.add(chunker.chunk(TEXT[: len(TEXT) // 2], doc_id="a.md"), stored=answer)
    assert reads == [["a.md"], ["a.md"]]
    after = set(store.maintenance.records(["a.md"])["a.md"])
    assert after and after != before and store.count() == len(after)  # the old version's records are gone
