"""Reliability (issue 7), bad and odd input: blank, odd and invalid text, ids, metadata and arguments
through the chunker, in-memory stores and ``hseg chunk``/``hseg index`` (in-process, embedded store).

Every test uses the bag-of-words ``HashingEncoder`` (no model) and TextTiling. The other parts of the
reliability suite: ``tests/store/test_fuzz.py``, ``tests/unit/test_large_input.py``, the faults
(``tests/store/test_faults.py``, ``tests/stress/test_faults_kill_9.py``, ``tests/e2e/test_faults_server.py``),
``tests/stress/test_concurrency.py`` and the lexical index's (``tests/store/test_lexical_reindex.py``,
``tests/stress/test_lexical_kill_9.py``, ``tests/e2e/test_lexical_server_restart.py``); the checks they
share are ``hseg_testing/checks.py``. See ``docs/reliability.md``.
"""

from __future__ import annotations

import json
import random
import time
import unicodedata
import uuid
from pathlib import Path

import chromadb
import numpy as np
import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.errors import EncoderMismatchError
from hseg.store import HierarchicalStore, flatten_metadata
from hseg.text.sentences import split_sentences
from hseg_testing.checks import check_chunking, check_store_round_trip, document_problems, stored_documents
from hseg_testing.chunkers import hashing_chunker, small_chunker
from hseg_testing.fakes import FAKE_CLI, HashingEncoder, ephemeral_store, fake_cli


@pytest.fixture(scope="module")
def chunker():
    return small_chunker()



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
    chunker = hashing_chunker(segmenter="texttiling")  # default sizes
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
    # tests/e2e/test_unicode_input.py) ...
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
        assert type(err.value) is EncoderMismatchError  # hseg's own ValueError, not Chroma's
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
        hashing_chunker(**kwargs)


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


def _bad_files(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "good.md").write_text("# Tides\n\nThe moon pulls the sea. Tides rise and fall twice a day.\n" * 5)
    (folder / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (folder / "latin1.txt").write_bytes("caf\xe9 au lait, cr\xe8me br\xfbl\xe9e".encode("latin-1"))
    (folder / "blank.md").write_text("  \n\n\t\n")
    (folder / "zero.txt").write_bytes(b"")


def test_cli_chunk_reports_undecodable_files_and_continues(tmp_path, monkeypatch, capsys):
    main = fake_cli(monkeypatch)
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
    main = fake_cli(monkeypatch)
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
