"""Reliability (issue 7): bad and odd input, fuzzing, large input, faults, concurrency.

Everything here uses the bag-of-words ``HashingEncoder`` (no model) and TextTiling, so the whole
module runs in well under a minute. The long fuzz run is ``python benchmarks/fuzz.py --seconds 120``
(it reuses the strategies and checks defined here); the 1-5 MB numbers come from
``benchmarks/large_input.py``. See ``docs/reliability.md``.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
import unicodedata
import uuid
import warnings
from pathlib import Path

import chromadb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hseg.chunking import clustering
from hseg.chunking.chunker import HierarchicalChunker
from hseg.chunking.chunks import Chunking, Cluster, Segment
from hseg.retrieval.unit_vectors import UnitKey, companion_name
from hseg.store import SCHEMA_VERSION, HierarchicalStore, flatten_metadata, records_for
from hseg.text.sentences import split_sentences
from tests.fakes import CLI_CHILD as CHILD
from tests.fakes import HashingEncoder, synthetic_book

REPO = Path(__file__).resolve().parents[1]
FAKE_CLI = ["--encoder", HashingEncoder.name, "--segmenter", "texttiling", "--quiet"]


def small_chunker(**kwargs) -> HierarchicalChunker:
    params = dict(encoder=HashingEncoder(), segmenter="texttiling", target_tokens=64, min_segment_tokens=8,
                  max_segment_tokens=48)
    return HierarchicalChunker(**{**params, **kwargs})


@pytest.fixture(scope="module")
def chunker():
    return small_chunker()


def ephemeral_store(encoder=None) -> HierarchicalStore:
    return HierarchicalStore(f"rel-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(),
                             encoder=encoder or HashingEncoder())


# --------------------------------------------------------------------------- shared checks
# (benchmarks/fuzz.py imports these)


def check_chunking(result: Chunking, text: str) -> None:
    """Exact spans and complete coverage: the contract every adapter relies on."""
    if not text.strip():
        assert result.segments == () and result.clusters == ()
        return
    assert "".join(c.text for c in result.clusters) == text
    assert "".join(s.text for s in result.segments) == text
    for unit in (*result.segments, *result.clusters):
        assert text[unit.start : unit.end] == unit.text
        assert unit.embedding is not None and np.isfinite(unit.embedding).all()


def stored_documents(collection) -> dict[str, dict[str, dict]]:
    """``{doc_id: {record id: {"meta": ..., "doc": ...}}}`` of every hseg record in a collection."""
    got = collection.get(include=["metadatas", "documents"])
    out: dict[str, dict[str, dict]] = {}
    for rid, meta, doc in zip(got["ids"], got["metadatas"], got["documents"]):
        out.setdefault(str(meta["hseg_doc_id"]), {})[rid] = {"meta": meta, "doc": doc}
    return out


def document_problems(records: dict[str, dict], text: str | None = None) -> list[str]:
    """Why a stored document is not complete and consistent (empty list: it is).

    Complete: its cluster records tile the text in order, each lists ``hseg_n_segments`` segment ids
    that are all present (and no other segment records exist), and the segments tile the cluster."""
    problems = []
    clusters = sorted((r for r in records.values() if r["meta"]["hseg_level"] == "cluster"),
                      key=lambda r: r["meta"]["hseg_cluster_index"])
    segments = {rid: r for rid, r in records.items() if r["meta"]["hseg_level"] == "segment"}
    listed: set[str] = set()
    pos = 0
    for i, c in enumerate(clusters):
        m = c["meta"]
        ids = json.loads(m["hseg_segment_ids"])
        listed.update(ids)
        if m["hseg_cluster_index"] != i or m["hseg_start"] != pos or len(ids) != m["hseg_n_segments"]:
            problems.append(f"cluster {i}: bad index/start/n_segments")
        missing = [s for s in ids if s not in segments]
        if missing:
            problems.append(f"cluster {i}: {len(missing)} of {len(ids)} segment records missing")
        elif "".join(segments[s]["doc"] for s in ids) != c["doc"]:
            problems.append(f"cluster {i}: segments do not tile the parent text")
        if text is not None and text[m["hseg_start"] : m["hseg_end"]] != c["doc"]:
            problems.append(f"cluster {i}: text is not source[start:end]")
        pos = m["hseg_end"]
    if set(segments) - listed:
        problems.append(f"{len(set(segments) - listed)} segment records without their cluster record")
    if text is not None and pos != len(text):
        problems.append(f"clusters end at {pos}, the text at {len(text)}")
    return problems


def check_store_round_trip(store: HierarchicalStore, result: Chunking, text: str) -> None:
    store.add(result)
    docs = stored_documents_of(store, result.doc_id)
    if not text.strip():
        assert docs == {}
        return
    assert document_problems(docs, text) == []
    assert len(docs) == len(result.segments) + len(result.clusters)


def stored_documents_of(store: HierarchicalStore, doc_id: str) -> dict[str, dict]:
    got = store.collection.get(where={"hseg_doc_id": doc_id}, include=["metadatas", "documents"])
    return {rid: {"meta": m, "doc": d} for rid, m, d in zip(got["ids"], got["metadatas"], got["documents"])}


WORDS = st.sampled_from(
    "the cat sat on a mat . , ; Dr. e.g. 3.5 ! ? … 東京 は 。 「 」 مرحبا ، ؟ 😀 👨\u200d👩\u200d👧 🇫🇷 e\u0301 \u200f "
    "# ## - * | |---| ``` ~~~ > 1. \\n \t \n \n\n \r\n  http://x.io/a.b".split(" ")
)
#: arbitrary unicode (hypothesis leaves out lone surrogates: the store refuses them, see
#: test_text_that_is_not_valid_unicode_is_refused_by_the_store) and word salad with markdown,
#: CJK, Arabic, emoji and odd whitespace
TEXTS = st.one_of(st.text(max_size=500), st.lists(WORDS, max_size=300).map(" ".join),
                  st.lists(WORDS, max_size=300).map("".join))


# --------------------------------------------------------------------------- 1. bad and odd input


def test_blank_documents_warn_write_nothing_and_clear_old_records(chunker):
    store = ephemeral_store()
    texts = ["", "   \n\t  \n", "\u3000\u00a0\n", "Real text here. And more of it."]
    with pytest.warns(UserWarning, match="blank") as caught:
        results = chunker.chunk_many(texts, ["empty", "spaces", "unicode-spaces", "real"])
    assert len([w for w in caught if "blank" in str(w.message)]) == 2  # "" has nothing to warn about
    assert [len(r.clusters) for r in results] == [0, 0, 0, 1]
    written = store.add(results, [{"source": t} for t in ("a", "b", "c", "d")])
    assert written == store.count() == 2  # one cluster record, one segment record
    assert store.doc_ids() == ["real"]
    # a document that became blank: re-adding it removes what the store held
    with pytest.warns(UserWarning, match="blank"):
        blank = chunker.chunk("  \n", "real")
    store.add(blank)
    assert store.count() == 0 and store.search("real text", k=3, unit="cluster") == []


def test_single_sentence_and_single_character(chunker):
    store = ephemeral_store()
    for doc_id, text in (("one", "Just one sentence without an ending"), ("char", "x"), ("nl", "\nx\n")):
        result = chunker.chunk(text, doc_id)
        check_chunking(result, text)
        assert len(result.segments) == len(result.clusters) == 1
        check_store_round_trip(store, result, text)
    hits = store.search("one sentence", k=10, unit="cluster")
    assert {h.doc_id for h in hits} == {"one", "char", "nl"} and len(hits) == 3


def test_one_200k_character_line_without_punctuation_chunks_quickly():
    rnd = random.Random(7)
    line = " ".join("".join(rnd.choice("abcdefghijklmnop") for _ in range(rnd.randint(2, 9)))
                    for _ in range(40_000))[:200_000]
    no_spaces = "x" * 200_000  # not even whitespace to cut at
    chunker = HierarchicalChunker(encoder=HashingEncoder(), segmenter="texttiling")  # default sizes
    for text in (line, no_spaces):
        start = time.process_time()  # CPU time: other jobs on a busy machine do not stretch it
        result = chunker.chunk(text, "long")
        elapsed = time.process_time() - start
        check_chunking(result, text)
        assert elapsed < 30, elapsed  # ~1 s here; the bound only catches a quadratic blow-up
        # the sentence splitter caps units ...
        units = split_sentences(text, max_tokens=chunker.max_segment_tokens, count_tokens=chunker.count_tokens)
        assert len(units) > 100
        assert max(chunker.count_tokens(u.of(text)) for u in units) <= chunker.max_segment_tokens
        # ... so segments stay near the segment maximum (sizes are summed per unit: a token or two
        # can appear where units join) and clusters within their cap (checked on the joined text)
        assert max(s.token_count for s in result.segments) <= chunker.max_segment_tokens + 4
        assert max(c.token_count for c in result.clusters) <= chunker.max_cluster_tokens


MIXED = ("東京は日本の首都です。人口は約千四百万人です。富士山は日本で一番高い山です。\n\n"
         "مرحبا بالعالم. هذه جملة عربية؟ نعم، إنها كذلك!\n\n"
         "Family 👨\u200d👩\u200d👧\u200d👦, flags 🇫🇷🇯🇵, tones 👍🏽. Combining: e\u0301te\u0301. RTL \u200f mark.\n\n")


def test_mixed_scripts_keep_exact_spans_and_whole_graphemes():
    chunker = small_chunker(min_segment_tokens=4, max_segment_tokens=16, target_tokens=32)
    text = MIXED * 6
    result = chunker.chunk(text, "mixed")
    check_chunking(result, text)
    assert len(result.segments) > 6
    for seg in result.segments[1:]:  # no boundary inside a grapheme cluster
        a = seg.start
        assert unicodedata.combining(text[a]) == 0 and text[a] != "\u200d" and text[a - 1] != "\u200d"
        assert not ("\U0001F1E6" <= text[a] <= "\U0001F1FF" and "\U0001F1E6" <= text[a - 1] <= "\U0001F1FF"
                    and text[:a].count("\U0001F1EB") != text[:a].count("\U0001F1F7"))
        assert not ("\U0001F3FB" <= text[a] <= "\U0001F3FF")  # a skin tone stays with its emoji
    store = ephemeral_store()
    check_store_round_trip(store, result, text)
    hit = store.search("富士山は日本で一番高い山です", k=1, unit="cluster")[0]
    assert hit.text == text[hit.start : hit.end] and "富士山" in hit.text


def test_markdown_tables_and_code_are_cut_at_line_starts_only():
    table = "| name | value |\n|---|---|\n" + "".join(f"| row {i} | {i * i} |\n" for i in range(40)) + "\n"
    code = "```python\n" + "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(30)) + "```\n"
    text = ("# Title\n\nSome prose before the table. It has two sentences.\n\n"
            + table + "Between.\n\n" + code + "After.\n")
    chunker = small_chunker()
    result = chunker.chunk(text, "md")
    check_chunking(result, text)
    t0, t1 = text.index("| name"), text.index("Between.")
    c0, c1 = text.index("```python"), text.index("After.")
    inner = [s.start for s in result.segments if t0 < s.start < t1 or c0 < s.start < c1]
    assert inner, "the table and the code block should need several segments at this size"
    for a in inner:  # a segment starts a line (its leading indentation stays with the line before)
        assert text[:a].rstrip(" \t").endswith("\n"), repr(text[a - 20 : a + 20])


def test_whitespace_heavy_text_keeps_segment_and_cluster_sizes(chunker):
    """Found by benchmarks/fuzz.py: whitespace between sentences belongs to a segment but to no
    sentence, so runs of tabs and blank lines made segments of 2-3x ``max_segment_tokens`` and
    clusters over ``max_cluster_tokens``."""
    for text in ("cat \t \r\n \n\n \t\t mat . ; \t \n " * 40, ("| a |" + " " * 30 + "| b |\n") * 60):
        result = chunker.chunk(text, "ws")
        check_chunking(result, text)
        assert max(s.token_count for s in result.segments) <= chunker.max_segment_tokens + 4
        assert max(c.token_count for c in result.clusters) <= chunker.max_cluster_tokens


def test_duplicate_document_ids_in_one_batch(chunker):
    store = ephemeral_store()
    text = "Alpha beta gamma. Delta epsilon zeta. " * 10
    # same id, same text: both the chunker and the store accept it and write the document once
    twins = chunker.chunk_many([text, text], ["dup", "dup"])
    assert [r.doc_id for r in twins] == ["dup", "dup"]
    single = len(twins[0].segments) + len(twins[0].clusters)
    assert store.add(twins) == single == store.count()
    # same id, different text: refused by both, naming the argument and the id, nothing written
    with pytest.raises(ValueError, match="doc_ids.*'dup'"):
        chunker.chunk_many([text, text + " More."], ["dup", "dup"])
    other = chunker.chunk(text + " More.", "dup")
    fresh = ephemeral_store()
    with pytest.raises(ValueError, match="doc_ids: duplicate doc_id 'dup'.*different texts"):
        fresh.add([twins[0], other])
    with pytest.raises(ValueError, match="doc_ids: duplicate doc_id 'dup'.*different metadata"):
        fresh.add([twins[0], twins[1]], [{"v": 1}, {"v": 2}])
    assert fresh.count() == 0


def test_metadata_chroma_cannot_store_is_flattened_or_refused(chunker):
    store = ephemeral_store()
    result = chunker.chunk("Metadata test text. Second sentence here.", "meta")
    meta = {"source": "a.md", "none": None, "nested": {"year": 2024, "deep": {"k": "v"}, "gone": None},
            "tags": ["x", 2, None], "empty": [], "mixed": [1, "a", {"b": [True]}], "np": np.float32(0.5)}
    store.add(result, meta)
    stored = store.get_records("meta", include_embeddings=False)[0].metadata
    assert {k: stored[k] for k in flatten_metadata(meta)} == {
        "source": "a.md", "nested.year": 2024, "nested.deep.k": "v", "tags": '["x", 2, null]', "empty": "[]",
        "mixed": '[1, "a", {"b": [true]}]', "np": 0.5}
    assert "none" not in stored and "nested.gone" not in stored

    bad = [
        ({"x": float("nan")}, "'x'.*NaN"), ({"x": float("inf")}, "'x'.*inf"), ({"x": 2**70}, "'x'.*64 bits"),
        ({"$x": 1}, "'\\$x'"), ({"#x": 1}, "'#x'"), ({"x": "\ud800"}, "'x'.*surrogate"),
        ({"x\udc80": 1}, "surrogate"), ({"x": {1, 2}}, "'x'.*set"), ({"x": object()}, "'x'.*object"),
        ({"x": [object()]}, "'x'.*JSON"), ({"hseg_doc_id": "y"}, "reserved"), ({"": 1}, "non-empty"),
        ({"a": {"b": 1}, "a.b": 2}, "'a.b'.*twice"), ("not a dict", "metadatas"), ([1], "metadata must be a dict"),
    ]
    for md, pattern in bad:
        with pytest.raises(ValueError, match=pattern):
            store.add(chunker.chunk("Other text. Refused metadata.", "refused"), md)
    assert store.doc_ids() == ["meta"]  # nothing of the refused document was written


def test_text_that_is_not_valid_unicode_is_refused_by_the_chunker_and_the_store(chunker, monkeypatch):
    text = "Decoded with surrogateescape: caf\udce9 au lait. Second sentence."
    # the chunker refuses it up front (a model's tokenizer fails on it with a bare TypeError:
    # tests/test_unicode_input.py) ...
    with pytest.raises(ValueError, match=r"texts\[0\] \(document 'sur'\): not valid Unicode \(a lone surrogate "
                                         r"'\\udce9' at offset 33\).*errors='replace'"):
        chunker.chunk(text, "sur")
    # ... and the store refuses a chunking of such text made without that check, before writing anything
    from hseg.chunking import chunker as chunker_module

    monkeypatch.setattr(chunker_module, "check_unicode", lambda *args, **kwargs: None)
    result = chunker.chunk(text, "sur")
    good = chunker.chunk("A good document. It is fine.", "good")
    store = ephemeral_store()
    with pytest.raises(ValueError, match="document 'sur'.*surrogate.*errors='replace'"):
        store.add([good, result])
    assert store.count() == 0
    with pytest.raises(ValueError, match="doc_ids"):
        chunker.chunk("Fine text.", "bad\udc80id")


@pytest.mark.parametrize("call, name", [
    (lambda s: s.search("q", k=0, unit="cluster"), "k"),
    (lambda s: s.search("q", k=-3, unit="cluster"), "k"),
    (lambda s: s.search("q", k=2.5, unit="cluster"), "k"),
    (lambda s: s.search("q", k=True, unit="cluster"), "k"),
    (lambda s: s.search("q", budget_tokens=0, unit="cluster"), "budget_tokens"),
    (lambda s: s.search("q", k=2, budget_tokens=100, unit="cluster"), "budget_tokens"),
    (lambda s: s.search("q", mode="nearest", unit="cluster"), "mode"),
    (lambda s: s.search("q", unit="sentence"), "unit"),
    (lambda s: s.search("q", unit="auto", mode="cluster"), "mode"),
    (lambda s: s.search("q", cluster_weight=-1, unit="cluster"), "cluster_weight"),
    (lambda s: s.search("q", where="source", unit="cluster"), "where"),
    (lambda s: s.search(np.zeros(64), unit="cluster"), "query"),
    (lambda s: s.search(np.full(64, np.nan), unit="cluster"), "query"),
    (lambda s: HierarchicalStore("x", client=s.client), "collection_name"),
    (lambda s: HierarchicalStore(f"c-{uuid.uuid4().hex}", client=s.client, oversample=0.5), "oversample"),
    (lambda s: HierarchicalStore(f"c-{uuid.uuid4().hex}", client=s.client, configuration={"space": "l2"}), "space"),
    (lambda s: s.add(["not a chunking"]), "chunkings"),
])
def test_invalid_store_arguments_raise_value_error_naming_them(call, name, chunker):
    store = ephemeral_store()
    store.add(chunker.chunk("Some text to search. Another sentence.", "d"))
    with pytest.raises(ValueError, match=name):
        call(store)


def test_a_query_vector_of_another_dimension_is_a_value_error_read_once(chunker, monkeypatch):
    """Issue 25 item 8: Chroma's InvalidArgumentError was what a wrong-sized query vector got."""
    store = ephemeral_store()
    store.add(chunker.chunk("Some text to search. Another sentence.", "d"))
    reads = []
    real_get = type(store.collection).get

    def get(self, *args, **kwargs):
        reads.append(kwargs)
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(type(store.collection), "get", get)
    for call in (lambda: store.search(np.ones(32)), lambda: store.search_many([np.ones(64), np.ones(32)]),
                 lambda: store.search(np.ones(65), unit="auto")):
        with pytest.raises(ValueError, match=r"(query|queries\[1\]): got a vector of dimension (32|65), but "
                                             r"collection .* dimension 64") as err:
            call()
        assert type(err.value) is ValueError
    other = HierarchicalStore.from_collection(store.collection, HashingEncoder(dim=16), allow_encoder_mismatch=True)
    with pytest.raises(ValueError, match="query: the encoder 'test-hashing-encoder' gives a vector of dimension 16"):
        other.search("some text", unit="cluster")
    assert len(store.search(np.ones(64), k=1, unit="cluster")) == 1
    # the collection's dimension is read once per store object, not once per query
    assert sum(kw.get("limit") == 1 and kw.get("include") == ["embeddings"] for kw in reads) == 2


@pytest.mark.parametrize("kwargs, name", [
    ({"target_tokens": 20}, "target_tokens"),  # below min_segment_tokens (48)
    ({"target_tokens": -5}, "target_tokens"),
    ({"target_tokens": "512"}, "target_tokens"),
    ({"target_tokens": 512.0}, "target_tokens"),
    ({"k": "1.0"}, "k"),
    ({"k": float("inf")}, "k"),
    ({"max_segment_tokens": 0}, "max_segment_tokens"),
    ({"min_segment_tokens": -1}, "min_segment_tokens"),
    ({"segmenter": "nope"}, "segmenter"),
    ({"segment_vector": "max"}, "segment_vector"),
    ({"clique_method": "louvain"}, "clique_method"),
])
def test_invalid_chunker_arguments_raise_value_error_naming_them(kwargs, name):
    with pytest.raises(ValueError, match=name):
        HierarchicalChunker(encoder=HashingEncoder(), **kwargs)


class _Opposites(HashingEncoder):
    """Sentences with an "A" get +e0, the others -e0: a segment of one of each averages to zero."""

    name = "test-opposites"

    def _vector(self, text):
        v = np.zeros(self.dim, dtype=np.float32)
        v[0] = 1.0 if "A" in text else -1.0
        return v


def test_sentence_vectors_that_cancel_out_still_give_unit_vectors():
    """Found by benchmarks/fuzz.py: two opposite sentence vectors made a zero segment/cluster vector,
    which the store then refused for the whole document."""
    chunker = HierarchicalChunker(encoder=_Opposites(), segmenter="texttiling", target_tokens=64,
                                  min_segment_tokens=16, max_segment_tokens=48)
    text = "Alpha is here. Then beta comes."
    result = chunker.chunk(text, "cancel")
    assert len(result.segments) == 1  # both sentences in one segment: their mean is zero
    for unit in (*result.segments, *result.clusters):
        assert abs(np.linalg.norm(unit.embedding) - 1) < 1e-6
    check_store_round_trip(ephemeral_store(_Opposites()), result, text)


def test_invalid_texts_and_ids(chunker):
    with pytest.raises(ValueError, match=r"texts\[1\]"):
        chunker.chunk_many(["ok", b"bytes"], ["a", "b"])
    with pytest.raises(ValueError, match="doc_ids"):
        chunker.chunk_many(["ok"], [""])
    with pytest.raises(ValueError, match="doc_ids"):
        chunker.chunk_many(["ok", "ok"], ["a"])


def _cli(monkeypatch):
    """``hseg.cli.main`` with the hashing encoder instead of the model (for ``chunk`` and ``index``)."""
    from hseg.chunking import chunker as chunker_module
    from hseg.cli import main
    from hseg.encoders import factory

    real = chunker_module.as_encoder
    monkeypatch.setattr(chunker_module, "as_encoder",
                        lambda enc, **kw: HashingEncoder() if enc is None else real(enc, **kw))
    monkeypatch.setattr(factory, "load_encoder", lambda name=None, backend=None, threads=None: HashingEncoder())
    return main


def _bad_files(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "good.md").write_text("# Tides\n\nThe moon pulls the sea. Tides rise and fall twice a day.\n" * 5)
    (folder / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (folder / "latin1.txt").write_bytes("caf\xe9 au lait, cr\xe8me br\xfbl\xe9e".encode("latin-1"))
    (folder / "blank.md").write_text("  \n\n\t\n")
    (folder / "zero.txt").write_bytes(b"")


def test_cli_chunk_reports_undecodable_files_and_continues(tmp_path, monkeypatch, capsys):
    main = _cli(monkeypatch)
    _bad_files(tmp_path / "in")
    names = [str(tmp_path / "in" / n) for n in ("binary.md", "good.md", "latin1.txt", "blank.md", "zero.txt")]
    code = main(["chunk", *names, "--format", "json", "--segmenter", "texttiling", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 1  # some files failed
    assert "binary.md: looks like a binary file" in err and "latin1.txt: not valid UTF-8" in err
    assert "blank.md" in err and "is blank" in err and "Traceback" not in err
    results = {r["doc_id"]: r for r in json.loads(out)}
    assert set(results) == {names[1], names[3], names[4]}  # the batch went on without the bad files
    assert results[names[1]]["clusters"] and results[names[3]]["clusters"] == []
    # all good: exit code 0
    assert main(["chunk", names[1], "--segmenter", "texttiling", "--quiet"]) == 0


def test_cli_index_reports_bad_and_blank_files_and_continues(tmp_path, monkeypatch, capsys):
    main = _cli(monkeypatch)
    monkeypatch.chdir(tmp_path)
    _bad_files(tmp_path / "in")
    code = main(["index", "in", "--db", "db", *FAKE_CLI])
    out, err = capsys.readouterr()
    assert code == 1
    assert "in/binary.md" in err and "in/latin1.txt" in err and "Traceback" not in err
    assert "in/good.md" not in err
    col = chromadb.PersistentClient(path=str(tmp_path / "db")).get_collection("hseg")
    docs = stored_documents(col)
    assert set(docs) == {"in/good.md"}  # blank files have no records, bad files were skipped
    assert document_problems(docs["in/good.md"], (tmp_path / "in" / "good.md").read_text()) == []


# --------------------------------------------------------------------------- 2. fuzzing (short)


@pytest.mark.filterwarnings("ignore:document .* is blank")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(text=TEXTS)
def test_fuzz_chunk_and_store_round_trip(text):
    """Arbitrary unicode through the whole path: chunk, write, read back; spans exact, nothing lost."""
    result = FUZZ_CHUNKER.chunk(text, f"doc-{uuid.uuid4().hex[:8]}")
    check_chunking(result, text)
    check_store_round_trip(FUZZ_STORE, result, text)


FUZZ_CHUNKER = small_chunker()
FUZZ_STORE = HierarchicalStore(f"rel-fuzz-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(),
                               encoder=HashingEncoder())


# --------------------------------------------------------------------------- 3. large input


def test_300kb_document_chunks_in_bounded_time_and_memory():
    import tracemalloc

    text = synthetic_book(300_000, seed=3)
    chunker = HierarchicalChunker(encoder=HashingEncoder(), segmenter="texttiling")
    tracemalloc.start()
    try:
        start = time.process_time()  # CPU time: other jobs on a busy machine do not stretch it
        result = chunker.chunk(text, "book")
        elapsed = time.process_time() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    check_chunking(result, text)
    assert len(result.segments) > 300 and len(result.clusters) > 50
    assert elapsed < 60, elapsed  # ~2 s (with tracemalloc) here; 5 MB takes ~15 s, see docs/reliability.md
    # numpy's buffers are traced too; the process's high-water RSS is not checked here, since it
    # holds whatever models earlier tests of the session loaded (torch and onnx, 2 GB together)
    assert peak < 300 * 2**20, peak / 2**20  # ~40 MB of Python/numpy allocations


def _two_topics(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(dim)
    b = a + rng.standard_normal(dim)
    v = np.vstack([a + 0.05 * rng.standard_normal((n // 2, dim)), b + 0.05 * rng.standard_normal((n - n // 2, dim))])
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def test_clustering_similarity_blocks_are_tiled_with_the_same_result(monkeypatch):
    """Two huge neighbouring initial clusters: the edge test between them is tiled (bounded memory)
    and gives exactly what one big block gives."""
    v = _two_topics(1200)
    rng = np.random.default_rng(1)
    w = np.cumsum(rng.standard_normal((600, 16)), axis=0)
    w = (w / np.linalg.norm(w, axis=1, keepdims=True)).astype(np.float32)
    tokens = np.full(len(v), 50)
    ks = (-1.0, 0.0, 0.5, 1.0, 2.0)
    whole = [clustering.cluster_segments(x, k).ranges for x in (v, w) for k in ks]
    shapes: list[tuple[int, int]] = []
    real_matmul_any_edge = clustering._any_edge

    def spy(vv, a, b, tau):
        shapes.append((len(a), len(b)))
        return real_matmul_any_edge(vv, a, b, tau)

    monkeypatch.setattr(clustering, "EDGE_BLOCK_ELEMENTS", 997)  # force tiles on every block > 997
    monkeypatch.setattr(clustering, "_any_edge", spy)
    tiled = [clustering.cluster_segments(x, k).ranges for x in (v, w) for k in ks]
    assert tiled == whole
    assert max(a * b for a, b in shapes) > 997  # the tiled path was exercised
    plan = clustering.search_k(v, tokens, 512, max_cluster_tokens=768)
    assert all(len(r) * 50 <= 768 for r in plan.ranges)


def test_singleton_absorption_prefix_means_match_the_exact_means(monkeypatch):
    rng = np.random.default_rng(5)
    for trial in range(20):
        v = np.cumsum(rng.standard_normal((300, 24)), axis=0)
        v = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
        ks = (0.5, 2.0, 4.0)
        monkeypatch.setattr(clustering, "PREFIX_MEAN_FROM", 64)
        exact = [clustering.cluster_segments(v, k).ranges for k in ks]
        monkeypatch.setattr(clustering, "PREFIX_MEAN_FROM", 1)  # prefix sums for every cluster of 2+
        assert [clustering.cluster_segments(v, k).ranges for k in ks] == exact, trial


def test_search_k_computes_the_similarity_statistics_once(monkeypatch):
    calls = []
    real = clustering.similarity_stats
    monkeypatch.setattr(clustering, "similarity_stats", lambda v: calls.append(len(v)) or real(v))
    v = _two_topics(400)
    plan = clustering.search_k(v, np.full(400, 60), 512, max_cluster_tokens=768)
    assert plan.ranges and calls == [400]  # once, not once per k tried (~25-100 times)


def _median_time(fn, repeat: int = 3) -> float:
    """The median CPU time of ``fn``: a ratio of wall-clock times swung past the bound when another job
    on the machine took the cores during one measurement and not the other."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return sorted(times)[len(times) // 2]


def test_texttiling_and_clustering_scale_linearly():
    """4x the sentences/segments may cost at most ~8x the time (linear: 4x; the old quadratic
    TextTiling spacing test and per-k statistics were 10-16x)."""
    from hseg.segmentation.segmenters import TextTilingSegmenter

    rng = np.random.default_rng(2)
    seg = TextTilingSegmenter(window=2, threshold_std=-1.0, min_sentences=2)  # many peaks

    def tiling(n):
        e = rng.standard_normal((n, 8)).astype(np.float32)
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        return lambda: seg.boundaries([""] * n, e)

    small, large = _median_time(tiling(8_000)), _median_time(tiling(32_000))
    assert large < 8 * small + 0.05, (small, large)

    def search(n):
        v = _two_topics(n, dim=64, seed=n)
        return lambda: clustering.search_k(v, np.full(n, 100), 512, max_cluster_tokens=768)

    small, large = _median_time(search(500)), _median_time(search(2000))
    assert large < 8 * small + 0.2, (small, large)


# --------------------------------------------------------------------------- 4. faults


def _nan_chunking(chunking: Chunking) -> Chunking:
    """The same document with one segment vector replaced by NaN (a failed encoding)."""
    seg = chunking.segments[-1]
    broken = Segment(seg.id, seg.doc_id, seg.index, seg.start, seg.end, seg.text, seg.token_count,
                     seg.sentence_start, seg.sentence_end, np.full_like(seg.embedding, np.nan))
    last = chunking.clusters[-1]
    clusters = (*chunking.clusters[:-1],
                Cluster(last.id, last.doc_id, last.index, last.start, last.end, last.text, last.token_count,
                        (*last.segments[:-1], broken), last.embedding))
    return Chunking(chunking.doc_id, chunking.text, (*chunking.segments[:-1], broken), clusters)


def test_a_document_whose_chunking_is_broken_writes_nothing(chunker):
    store = ephemeral_store()
    good = chunker.chunk("First good document. It has two sentences. " * 5, "good")
    bad = _nan_chunking(chunker.chunk("The broken one. Its last vector is NaN. " * 5, "bad"))
    with pytest.raises(ValueError, match="not finite"):
        store.add([good, bad])
    assert store.count() == 0  # all records are built and checked before the first write
    store.add(good)
    before = store.count()
    with pytest.raises(ValueError, match="not finite"):
        store.add(bad)
    assert store.count() == before and store.doc_ids() == ["good"]


def test_documents_are_never_split_across_upsert_calls(chunker, monkeypatch):
    """Crash safety of ``add``: each upsert call holds whole documents, and a document larger than
    one call goes alone with its cluster records (whole parents) first."""
    store = ephemeral_store()
    texts = {f"d{i}": synthetic_book(2_000 + 300 * i, seed=i) for i in range(12)}
    results = chunker.chunk_many(list(texts.values()), list(texts))
    big = chunker.chunk(synthetic_book(20_000, seed=99), "big")
    sizes = {r.doc_id: len(r.segments) + len(r.clusters) for r in (*results, big)}
    limit = max(sizes[d] for d in texts) + 5
    assert sizes["big"] > limit
    calls: list[list[dict]] = []
    real_upsert = store.collection.upsert

    def upsert(**kwargs):
        calls.append(kwargs["metadatas"])
        return real_upsert(**kwargs)

    monkeypatch.setattr(store, "max_batch_size", lambda: limit)
    monkeypatch.setattr(store.collection, "upsert", upsert)
    store.add([*results[:6], big, *results[6:]])
    assert len(calls) > 3 and all(len(c) <= limit for c in calls)
    per_call = [{m["hseg_doc_id"] for m in c} for c in calls]
    for doc_id in texts:  # a small document lies in exactly one call, with all its records
        holding = [i for i, docs in enumerate(per_call) if doc_id in docs]
        assert len(holding) == 1
        assert sum(m["hseg_doc_id"] == doc_id for m in calls[holding[0]]) == sizes[doc_id]
    big_calls = [c for c, docs in zip(calls, per_call) if "big" in docs]
    assert len(big_calls) > 1 and all(docs == {"big"} for docs in per_call if "big" in docs)
    levels = [m["hseg_level"] for c in big_calls for m in c]
    assert levels == sorted(levels)  # every "cluster" record before any "segment" record
    docs = stored_documents(store.collection)
    assert all(document_problems(docs[d], t) == [] for d, t in texts.items())


def test_a_write_lost_mid_add_names_the_server_and_what_was_written(chunker, monkeypatch):
    import httpx

    from hseg.store import connection as store_module

    store = ephemeral_store()
    results = chunker.chunk_many([synthetic_book(2_000, seed=i) for i in range(6)], [f"d{i}" for i in range(6)])
    per_doc = max(len(r.segments) + len(r.clusters) for r in results)
    monkeypatch.setattr(store, "max_batch_size", lambda: 2 * per_doc)  # two documents per call
    real_upsert = store.collection.upsert
    calls = []

    def upsert(**kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise httpx.ConnectError("[Errno 111] Connection refused")
        return real_upsert(**kwargs)

    monkeypatch.setattr(store.collection, "upsert", upsert)
    monkeypatch.setattr(store_module, "server_address", lambda collection: "10.1.2.3:8123")  # as if HTTP
    with pytest.raises(ConnectionError, match=r"Chroma server at 10\.1\.2\.3:8123: writing 6 documents "
                                              r"\(2 written completely before the failure; no document is partly"):
        store.add(results)
    docs = stored_documents(store.collection)
    assert set(docs) == {"d0", "d1"} and all(document_problems(r) == [] for r in docs.values())


def _run_child(script: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def _expected_records(files: dict[str, str]) -> int:
    """Records a clean ``hseg index`` run writes (same chunker settings as the CLI with FAKE_CLI)."""
    chunker = HierarchicalChunker(encoder=HashingEncoder(), segmenter="texttiling")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = chunker.chunk_many(list(files.values()), list(files))
    return sum(len(r.segments) + len(r.clusters) for r in results)


def _unit_index_documents(companion) -> dict[str, set[str]]:
    """``{doc id: segment ids}`` the unit index (companion collection) holds."""
    got = companion.get(include=["metadatas"])
    out: dict[str, set[str]] = {}
    for uid, meta in zip(got["ids"], got["metadatas"]):
        out.setdefault(str(meta["hseg_doc_id"]), set()).add(UnitKey.parse(uid).segment_id)
    return out


def test_kill_9_mid_batch_leaves_complete_documents_and_a_rerun_finishes(tmp_path):
    files = {f"docs/f{i:03d}.md": synthetic_book(1_500 + 37 * i, seed=i) for i in range(60)}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO)))
    args = ["index", "docs", "--db", "db", "--batch-docs", "4", *FAKE_CLI]

    proc = subprocess.Popen([sys.executable, str(script), *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "HSEG_TEST_HOLD_AFTER_ADD": "6"})
    try:
        seen = 0
        deadline = time.monotonic() + 120
        while seen < 6 and time.monotonic() < deadline:  # bounded: at most 15 batches exist
            line = proc.stdout.readline()
            if not line:
                break
            seen += line.startswith("ADD")
        time.sleep(0.003)  # into the 6th write
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
    assert seen == 6, "the indexer did not reach its 6th batch"
    assert proc.returncode == -signal.SIGKILL

    # the store as the crash left it (a copy: opened by this process only)
    shutil.copytree(tmp_path / "db", tmp_path / "crashed")
    crashed_client = chromadb.PersistentClient(path=str(tmp_path / "crashed"))
    crashed = stored_documents(crashed_client.get_collection("hseg"))
    assert 5 * 4 <= len(crashed) <= 6 * 4 < len(files)  # 5 batches done, the 6th all or nothing
    for doc_id, records in crashed.items():
        assert document_problems(records, files[doc_id]) == [], doc_id
    # The kill may land between the 6th batch's records and its unit-index records: those documents
    # are then incomplete (the re-run must redo them), so what is "unchanged" is whatever is complete
    # with its unit-index rows too: the 5 whole batches at least.
    units = _unit_index_documents(crashed_client.get_collection(companion_name("hseg")))
    complete = {d for d, records in crashed.items()
                if units.get(d) == {rid for rid, r in records.items() if r["meta"]["hseg_level"] == "segment"}}
    assert 5 * 4 <= len(complete) <= len(crashed), (len(complete), len(crashed))

    rerun = _run_child(script, args, tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"{len(files) - len(complete)} indexed, {len(complete)} unchanged" in rerun.stdout
    col = chromadb.PersistentClient(path=str(tmp_path / "db")).get_collection("hseg")
    final = stored_documents(col)
    assert set(final) == set(files)
    for doc_id, records in final.items():
        assert document_problems(records, files[doc_id]) == [], doc_id
    assert col.count() == _expected_records(files)  # exactly a clean run's records: no duplicates


def test_a_crash_between_upserts_and_stale_deletes_is_cleaned_by_the_next_add(chunker, monkeypatch):
    """``add`` of a changed document upserts first and deletes the old records its new chunking
    lacks afterwards; when it dies in between, the next ``add`` of that document removes them."""
    store = ephemeral_store()
    old, new = synthetic_book(3_000, seed=1), synthetic_book(2_600, seed=2)
    store.add(chunker.chunk(old, "d"))
    changed = chunker.chunk(new, "d")
    real_delete = store.collection.delete

    def killed(**kwargs):
        raise KeyboardInterrupt  # as if the process died right after the upserts

    monkeypatch.setattr(store.collection, "delete", killed)
    with pytest.raises(KeyboardInterrupt):
        store.add(changed)
    left = stored_documents_of(store, "d")
    assert len(left) > len(changed.segments) + len(changed.clusters)  # both versions are there
    assert document_problems(left, new) != []

    monkeypatch.setattr(store.collection, "delete", real_delete)
    store.add(changed)  # the same chunking again: nothing to upsert that is not there already
    final = stored_documents_of(store, "d")
    assert set(final) == {u.id for u in (*changed.clusters, *changed.segments)}
    assert document_problems(final, new) == []
    assert all(h.text == new[h.start : h.end] for h in store.search("river flood water", k=20, unit="cluster"))


def test_is_complete_refuses_a_document_holding_records_of_two_chunkings():
    """Same text and settings fingerprint but another chunking (e.g. a new hseg version): records
    left over from the older one make the document incomplete, so ``hseg index`` redoes it."""
    from hseg.ingest import is_complete

    text = synthetic_book(3_000, seed=3)
    meta = {"content_sha256": "sha", "chunk_settings": "settings"}
    other = small_chunker(target_tokens=200, max_segment_tokens=32)  # other segments, other clusters
    first = {r.id: r.metadata for r in records_for(small_chunker().chunk(text, "d"), meta)}
    second = {r.id: r.metadata for r in records_for(other.chunk(text, "d"), meta)}
    assert set(first) != set(second)
    assert is_complete(first, "sha", "settings", len(text)) and is_complete(second, "sha", "settings", len(text))
    # what a crash between the upserts of `second` and the deletes of `first` leaves behind
    assert not is_complete({**first, **second}, "sha", "settings", len(text))
    stale_segment = next(rid for rid, m in first.items() if rid not in second and m["hseg_level"] == "segment")
    assert not is_complete({**second, stale_segment: first[stale_segment]}, "sha", "settings", len(text))


KILL_AT_DELETE = r"""
import os, signal, sys
sys.path.insert(0, {repo!r})
from chromadb.api.models.Collection import Collection
from hseg import ingest
from hseg.encoders import factory
from hseg.cli import main
from tests.fakes import HashingEncoder

factory.load_encoder = lambda name=None, backend=None, threads=None: HashingEncoder()
# kill -9 after the upserts of a changed document, before its stale records are deleted
Collection.delete = lambda self, *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
sys.exit(main(sys.argv[1:]))
"""


def test_kill_9_between_upserts_and_stale_deletes_and_a_rerun_cleans_up(tmp_path):
    files = {"docs/a.md": synthetic_book(3_000, seed=11), "docs/b.md": synthetic_book(2_000, seed=12)}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    plain, killer = tmp_path / "child.py", tmp_path / "kill_at_delete.py"
    plain.write_text(CHILD.format(repo=str(REPO)))
    killer.write_text(KILL_AT_DELETE.format(repo=str(REPO)))
    args = ["index", "docs", "--db", "db", *FAKE_CLI]
    assert _run_child(plain, args, tmp_path).returncode == 0

    files["docs/a.md"] = synthetic_book(2_500, seed=13)  # a new version: other spans, other ids
    (tmp_path / "docs/a.md").write_text(files["docs/a.md"], encoding="utf-8")
    crashed = _run_child(killer, args, tmp_path)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    shutil.copytree(tmp_path / "db", tmp_path / "crashed")  # opened by this process only
    left = stored_documents(chromadb.PersistentClient(path=str(tmp_path / "crashed")).get_collection("hseg"))
    assert document_problems(left["docs/a.md"], files["docs/a.md"]) != []  # both versions of a.md
    assert sum(map(len, left.values())) > _expected_records(files)

    rerun = _run_child(plain, args, tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "1 indexed, 1 unchanged" in rerun.stdout  # a.md is not taken for unchanged
    col = chromadb.PersistentClient(path=str(tmp_path / "db")).get_collection("hseg")
    final = stored_documents(col)
    assert all(document_problems(final[d], files[d]) == [] for d in files)
    assert col.count() == _expected_records(files)  # the old version's records are gone


def _ingest_thread(store: HierarchicalStore, chunker: HierarchicalChunker, docs: dict[str, str], errors: list,
                   five_in: threading.Event):
    try:
        for n, (doc_id, text) in enumerate(docs.items(), 1):
            store.add(chunker.chunk(text, doc_id))
            if n == 5:
                five_in.set()
    except Exception as exc:  # pragma: no cover - reported by the test
        errors.append(exc)


def test_chroma_server_going_away_mid_run_is_a_clear_error_and_leaves_no_partial_document(tmp_path, chunker):
    from tests.chroma_server import ChromaServer, chroma_binary

    if chroma_binary() is None:
        pytest.skip("the 'chroma' command is not installed")
    data = tmp_path / "server-data"
    docs = {f"doc{i:02d}": synthetic_book(3_000, seed=100 + i) for i in range(40)}
    server = ChromaServer(data).start()
    try:
        host_port = f"{server.host}:{server.port}"
        store = HierarchicalStore("gone", host=server.host, port=server.port, encoder=HashingEncoder())
        errors: list[Exception] = []
        five_in = threading.Event()
        writer = threading.Thread(target=_ingest_thread, args=(store, chunker, docs, errors, five_in))
        writer.start()
        # a few documents in, then pull the plug while the writer goes on; told by the writer, not
        # polled for a while: on a busy machine a fixed number of polls ran out before 5 were in
        assert five_in.wait(timeout=300), f"the writer did not store 5 documents: {errors}"
        server.proc.send_signal(signal.SIGKILL)  # not a clean shutdown
        server.proc.wait(timeout=30)
        writer.join(timeout=60)
        assert not writer.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], ConnectionError), errors
        message = str(errors[0])
        assert host_port in message and "failed" in message
        with pytest.raises(ConnectionError, match=host_port):
            store.search("anything", k=2, unit="cluster")
        with pytest.raises(ConnectionError, match=f"cannot reach the Chroma server at {host_port}"):
            HierarchicalStore("gone", host=server.host, port=server.port, encoder=HashingEncoder())
    finally:
        server.stop()
    # the same data, a new server: every document there is complete
    with ChromaServer(data) as again:
        after = stored_documents(again.client().get_collection("gone"))
    assert 5 <= len(after) < len(docs)
    for doc_id, records in after.items():
        assert document_problems(records, docs[doc_id]) == [], doc_id


def test_reads_from_a_killed_chroma_server_name_it(tmp_path, chunker):
    """Every read of the store turns a gone server into a ``ConnectionError`` naming host:port."""
    from tests.chroma_server import ChromaServer, chroma_binary

    if chroma_binary() is None:
        pytest.skip("the 'chroma' command is not installed")
    server = ChromaServer(tmp_path / "server-data").start()
    try:
        store = HierarchicalStore("reads", host=server.host, port=server.port, encoder=HashingEncoder())
        store.add(chunker.chunk(synthetic_book(1_500, seed=7), "d"))
        assert store.doc_ids() == ["d"] and store.get_records("d")
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(timeout=30)
        reads = {"listing the documents": store.doc_ids, "reading document 'd'": lambda: store.get_records("d"),
                 "count": store.count, "search": lambda: store.search("river", k=2, unit="cluster")}
        for action, read in reads.items():
            with pytest.raises(ConnectionError, match=re.escape(f"Chroma server at {server.host}:{server.port}: "
                                                                f"{action} failed")):
                read()
    finally:
        server.stop()


def test_cli_index_server_going_away_names_it_and_a_rerun_completes(tmp_path, monkeypatch, capsys):
    from tests.chroma_server import ChromaServer, chroma_binary

    if chroma_binary() is None:
        pytest.skip("the 'chroma' command is not installed")
    main = _cli(monkeypatch)
    monkeypatch.chdir(tmp_path)
    files = {f"docs/f{i:02d}.md": synthetic_book(1_200 + 50 * i, seed=200 + i) for i in range(12)}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    server = ChromaServer(tmp_path / "server-data").start()
    real_add = HierarchicalStore.add
    calls = []

    def add_then_die(self, chunkings, metadatas=None, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # the server dies before the third batch
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(timeout=30)
        return real_add(self, chunkings, metadatas, **kwargs)

    monkeypatch.setattr(HierarchicalStore, "add", add_then_die)
    try:
        args = ["index", "docs", "--host", server.host, "--port", str(server.port), "--batch-docs", "2", *FAKE_CLI]
        assert main(args) == 1
        err = capsys.readouterr().err
        assert f"{server.host}:{server.port}" in err and "Traceback" not in err
        assert "re-run" in err or "again" in err
    finally:
        server.stop()
    monkeypatch.setattr(HierarchicalStore, "add", real_add)
    with ChromaServer(tmp_path / "server-data") as again:
        args = ["index", "docs", "--host", again.host, "--port", str(again.port), "--batch-docs", "2", *FAKE_CLI]
        assert main(args) == 0
        assert "8 indexed, 4 unchanged" in capsys.readouterr().out
        col = again.client().get_collection("hseg")
        final = stored_documents(col)
        absolute = {(tmp_path / d).as_posix(): d for d in files}  # with --host, ids are absolute paths
        assert set(final) == set(absolute)
        assert all(document_problems(final[a], files[d]) == [] for a, d in absolute.items())
        assert col.count() == _expected_records(files)


def test_a_newer_schema_is_refused_with_a_clear_message(tmp_path, chunker, monkeypatch, capsys):
    client = chromadb.PersistentClient(path=str(tmp_path / "db"))
    store = HierarchicalStore("hseg", client=client, encoder=HashingEncoder())
    store.add(chunker.chunk("Some stored text. Two sentences.", "d"))
    meta = {k: v for k, v in (store.collection.metadata or {}).items() if not k.startswith("hnsw:")}
    store.collection.modify(metadata={**meta, "hseg_schema": SCHEMA_VERSION + 1})
    newer = f"hseg schema {SCHEMA_VERSION + 1}, newer"
    with pytest.raises(ValueError, match=f"{newer}.*upgrade hseg"):
        HierarchicalStore("hseg", client=client, encoder=HashingEncoder())
    with pytest.raises(ValueError, match=newer):
        HierarchicalStore.from_collection(client.get_collection("hseg"), encoder=HashingEncoder())
    store.collection.modify(metadata={**meta, "hseg_schema": "two"})
    with pytest.raises(ValueError, match="unreadable hseg_schema"):
        HierarchicalStore("hseg", client=client, encoder=HashingEncoder())
    store.collection.modify(metadata={**meta, "hseg_schema": SCHEMA_VERSION + 1})
    main = _cli(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.md").write_text("More text to index. Into a newer collection.")
    for argv in (["query", "stored text", "--db", "db"], ["stats", "--db", "db"],
                 ["index", "a.md", "--db", "db", *FAKE_CLI]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert newer in err and "Traceback" not in err, argv


# --------------------------------------------------------------------------- 5. concurrency


def test_eight_readers_and_one_writer_on_one_persistent_store(tmp_path):
    chunker = small_chunker()
    texts = {f"doc{i:02d}": synthetic_book(2_500, seed=300 + i) for i in range(36)}
    path = str(tmp_path / "db")
    writer_store = HierarchicalStore("conc", path=path, encoder=HashingEncoder())
    first = list(texts)[:8]
    writer_store.add(chunker.chunk_many([texts[d] for d in first], first))
    reader = HierarchicalStore("conc", path=path, encoder=HashingEncoder())
    queries = ["river delta flood water", "engine piston torque", "court appeal verdict", "orbit planet comet",
               "bread flour yeast oven", "vaccine immune dose", "market price trade", "glacier ice summit"]
    errors: list[BaseException] = []
    answers = [0]
    lock = threading.Lock()

    def read(worker: int) -> None:
        rnd = random.Random(worker)
        try:
            for i in range(30):  # bounded
                q = rnd.choice(queries)
                unit = ("cluster", "segment", "auto")[i % 3]
                hits = reader.search(q, k=4, unit=unit) if i % 2 else reader.search(q, budget_tokens=600, unit=unit)
                got = reader.collection.get(ids=list({h.cluster_id for h in hits}), include=["documents", "metadatas"])
                parents = dict(zip(got["ids"], got["documents"]))
                for h in hits:
                    source = texts[h.doc_id]
                    assert h.text == source[h.start : h.end]  # the returned text is exact
                    assert h.cluster_id in parents  # its parent exists ...
                    parent = parents[h.cluster_id]
                    m = got["metadatas"][got["ids"].index(h.cluster_id)]
                    assert parent == source[m["hseg_start"] : m["hseg_end"]]  # ... with its full text
                    if unit == "cluster":
                        assert h.text == parent
                    elif unit == "segment":
                        assert h.text in parent
                    else:  # an auto passage starts in its parent and may go on past it (rule 5)
                        assert m["hseg_start"] <= h.start < m["hseg_end"] and h.end > h.start
                with lock:
                    answers[0] += 1
        except BaseException as exc:
            errors.append(exc)

    def write() -> None:
        try:
            for d in list(texts)[8:]:
                writer_store.add(chunker.chunk(texts[d], d))
            writer_store.add(chunker.chunk(texts[first[0]], first[0]))  # idempotent re-add while read
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(w,)) for w in range(8)] + [threading.Thread(target=write)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(1.0, 180 - (time.monotonic() - start)))
    assert not any(t.is_alive() for t in threads), "a thread did not finish within 180 s"
    # whole tracebacks: a rare Chroma error here must say which read raised it
    assert errors == [], "\n".join("".join(traceback.format_exception(e)) for e in errors[:3])
    assert answers[0] == 8 * 30
    final = stored_documents(writer_store.collection)
    assert set(final) == set(texts)
    assert all(document_problems(final[d], texts[d]) == [] for d in texts)


# --------------------------------------------------------------------------- 6. the lexical index (issue 26)


def lexical_disagreement(db: Path, collection: str = "hseg") -> list[str]:
    """How the lexical index of an embedded store differs from its collection's segments, read from
    both files as they are (nothing repaired): pending documents, missing, extra or stale rows."""
    import sqlite3

    from hseg.store.lexical import FOLDER

    con = sqlite3.connect(str(db / FOLDER / f"{collection}.sqlite"))
    try:
        rows = dict(con.execute("SELECT s.id, f.text FROM segments s JOIN fts f ON f.rowid = s.rowid"))
        pending = [d for (d,) in con.execute("SELECT doc_id FROM pending")]
    finally:
        con.close()
    got = chromadb.PersistentClient(path=str(db)).get_collection(collection).get(
        where={"hseg_level": "segment"}, include=["documents"])
    segments = dict(zip(got["ids"], got["documents"]))
    problems = [f"pending: {pending}"] if pending else []
    problems += [f"missing row {s}" for s in sorted(set(segments) - set(rows))]
    problems += [f"extra row {s}" for s in sorted(set(rows) - set(segments))]
    problems += [f"stale text {s}" for s in sorted(set(rows) & set(segments)) if rows[s] != segments[s]]
    return problems


KILL_AT_LEXICAL = r"""
import os, signal, sys
sys.path.insert(0, {repo!r})
from chromadb.api.models.Collection import Collection
from hseg.encoders import factory
from hseg.cli import main
from hseg.store.lexical import LexicalIndex
from tests.fakes import HashingEncoder

factory.load_encoder = lambda name=None, backend=None, threads=None: HashingEncoder()
if {at!r} == "rows":
    # kill -9 on the 2nd batch after Chroma's records and the unit index, before the lexical rows
    calls = []
    real_write = LexicalIndex.write

    def write(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_write(self, *args, **kwargs)

    LexicalIndex.write = write
else:
    # kill -9 at the first Chroma delete: a pruned document's rows are gone, its records not
    Collection.delete = lambda self, *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
sys.exit(main(sys.argv[1:]))
"""


def _write_files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def test_kill_9_between_chroma_and_the_lexical_rows_is_repaired_on_the_next_open(tmp_path):
    files = {f"docs/f{i:02d}.md": synthetic_book(1_500 + 41 * i, seed=400 + i) for i in range(8)}
    _write_files(tmp_path, files)
    killer = tmp_path / "kill_at_lexical.py"
    killer.write_text(KILL_AT_LEXICAL.format(repo=str(REPO), at="rows"))
    args = ["index", "docs", "--db", "db", "--batch-docs", "2", *FAKE_CLI]
    crashed = _run_child(killer, args, tmp_path)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    left = lexical_disagreement(tmp_path / "db")
    assert left and left[0].startswith("pending") and any(p.startswith("missing row") for p in left)

    # the next open that checks the index (here a hybrid search) re-reads the pending documents
    store = HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=HashingEncoder())
    hits = store.search("river delta flood", budget_tokens=600, unit="auto", lexical_weight=0.3)
    assert hits and all(h.text == files[h.doc_id][h.start:h.end] for h in hits)
    assert lexical_disagreement(tmp_path / "db") == []
    del store
    # and hseg index finishes the run, taking the repaired documents for complete
    plain = tmp_path / "child.py"
    plain.write_text(CHILD.format(repo=str(REPO)))
    rerun = _run_child(plain, args, tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "4 indexed, 4 unchanged" in rerun.stdout, rerun.stdout
    assert lexical_disagreement(tmp_path / "db") == []


def test_kill_9_between_the_lexical_delete_and_chromas_is_repaired_and_the_prune_finishes(tmp_path):
    files = {f"docs/f{i}.md": synthetic_book(1_800, seed=500 + i) for i in range(4)}
    _write_files(tmp_path, files)
    plain, killer = tmp_path / "child.py", tmp_path / "kill_at_delete.py"
    plain.write_text(CHILD.format(repo=str(REPO)))
    killer.write_text(KILL_AT_LEXICAL.format(repo=str(REPO), at="delete"))
    args = ["index", "docs", "--db", "db", "--prune", *FAKE_CLI]
    assert _run_child(plain, args, tmp_path).returncode == 0
    (tmp_path / "docs/f1.md").unlink()
    crashed = _run_child(killer, args, tmp_path)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    left = lexical_disagreement(tmp_path / "db")
    assert left and any(p.startswith("missing row") for p in left)  # the rows went first

    rerun = _run_child(plain, args, tmp_path)  # opens, repairs f1's rows, then prunes it for good
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert lexical_disagreement(tmp_path / "db") == []
    store = HierarchicalStore("hseg", path=str(tmp_path / "db"), encoder=HashingEncoder())
    assert store.doc_ids() == ["docs/f0.md", "docs/f2.md", "docs/f3.md"]


def test_a_reindex_after_edits_and_deletions_keeps_both_sides_equal(tmp_path, monkeypatch, capsys):
    main = _cli(monkeypatch)
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


def test_two_writers_on_one_embedded_store_leave_the_lexical_index_whole(tmp_path):
    """Two ``hseg index`` processes at once (they take turns on the writer lock) and, in one process,
    two threads adding through two store objects (they take turns on the lexical index's lock)."""
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO)))
    files = {f"{part}/f{i}.md": synthetic_book(3_000 + 53 * i, seed=700 + 10 * ord(part) + i)
             for part in ("a", "b") for i in range(6)}
    _write_files(tmp_path, files)
    procs = [subprocess.Popen([sys.executable, str(script), "index", part, "--db", "db", "--batch-docs", "2",
                               *FAKE_CLI], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"}) for part in ("a", "b")]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and "6 indexed" in out, err[-2000:]
    assert lexical_disagreement(tmp_path / "db") == []

    chunker = small_chunker()
    path = str(tmp_path / "db2")
    stores = [HierarchicalStore("hseg", path=path, encoder=HashingEncoder()) for _ in range(2)]
    errors: list[Exception] = []
    texts = {f"t{w}-{i}": synthetic_book(1_500, seed=800 + 10 * w + i) for w in range(2) for i in range(5)}

    def write(w: int) -> None:
        try:
            for i in range(5):
                stores[w].add(chunker.chunk(texts[f"t{w}-{i}"], f"t{w}-{i}"))
                stores[w].search("glacier ice", k=2, unit="auto", lexical_weight=0.5)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and not any(t.is_alive() for t in threads)
    assert lexical_disagreement(tmp_path / "db2") == []


def test_a_server_restart_and_a_write_it_cut_short_leave_every_clients_index_equal_to_chroma(
        tmp_path, chunker, monkeypatch):
    from tests.chroma_server import ChromaServer, chroma_binary

    if chroma_binary() is None:
        pytest.skip("the 'chroma' command is not installed")

    def cache_agrees(store: HierarchicalStore) -> bool:
        store.lexical_index.ensure_fresh()
        rows = dict(store.lexical_index.db.rows("SELECT s.id, f.text FROM segments s JOIN fts f ON f.rowid = s.rowid"))
        got = store.collection.get(where={"hseg_level": "segment"}, include=["documents"])
        return rows == dict(zip(got["ids"], got["documents"]))

    docs = {f"d{i}": synthetic_book(2_000, seed=900 + i) for i in range(12)}
    server = ChromaServer(tmp_path / "server-data").start()
    port = server.port
    monkeypatch.setenv("HSEG_CACHE", str(tmp_path / "reader-cache"))
    reader = HierarchicalStore("restart", host=server.host, port=port, encoder=HashingEncoder())
    monkeypatch.setenv("HSEG_CACHE", str(tmp_path / "writer-cache"))
    writer = HierarchicalStore("restart", host=server.host, port=port, encoder=HashingEncoder())
    try:
        for d in list(docs)[:4]:
            writer.add(chunker.chunk(docs[d], d))
        assert cache_agrees(reader)
        # the server is killed while a write is under way: the write's journal record stays open
        real_upsert = writer.collection.upsert

        def upsert_then_die(**kwargs):
            real_upsert(**kwargs)
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(timeout=30)

        monkeypatch.setattr(writer.collection, "upsert", upsert_then_die)
        with pytest.raises(ConnectionError):
            writer.add(chunker.chunk_many([docs["d0"][:1_500], docs["d4"]], ["d0", "d4"]))
        monkeypatch.undo()
    finally:
        server.stop()
    # the same data and port, a new server process; the clients keep their objects and caches
    monkeypatch.setattr("tests.chroma_server.free_port", lambda host="127.0.0.1": port)
    with ChromaServer(tmp_path / "server-data") as again:
        assert again.port == port
        # the open write names d0 and d4; once older than OPEN_STALE_S (here at once) it is taken for a
        # dead writer's and its documents are re-read from what the server kept
        monkeypatch.setattr("hseg.store.lexical.follow.OPEN_STALE_S", 0.0)
        assert cache_agrees(reader)
        fresh = HierarchicalStore("restart", host=again.host, port=port, encoder=HashingEncoder())
        for d in list(docs)[4:]:
            fresh.add(chunker.chunk(docs[d], d))
        assert cache_agrees(reader) and cache_agrees(writer) and cache_agrees(fresh)
        hits = reader.search("glacier ice summit", budget_tokens=500, unit="auto", lexical_weight=0.5)
        assert hits and all(h.text in docs[h.doc_id] for h in hits)
