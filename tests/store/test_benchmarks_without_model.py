"""The benchmark harness without the model: the peers and ``--questions`` run in-process on tiny
generated data, a hashing encoder in the model's place, and the lexical switches of
``benchmarks/hseg_methods.py`` score as RESULTS.md says. The smoke runs of the real commands are
``tests/e2e/test_benchmarks_smoke.py``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import REPO

PEERS = ["chroma_cluster_200", "bm25_recursive_200", "hybrid_recursive_200", "li_bm25_recursive_200",
         "li_fusion_recursive_200"]


def tiny_eval(root: Path) -> Path:
    """Two generated corpora, ``questions.csv`` (2 queries each) and ``other.csv`` (3 each), in the
    harness's format; returns ``other.csv``."""
    import csv
    import json

    from tests.support.fakes import synthetic_book

    (root / "corpora").mkdir(parents=True)
    files: dict[str, list[dict[str, str]]] = {"questions.csv": [], "other.csv": []}
    for seed, cid in enumerate(["alpha", "beta"]):
        text = synthetic_book(4000, seed)
        (root / "corpora" / f"{cid}.md").write_text(text, encoding="utf-8")
        for i, m in enumerate(list(re.finditer(r"[A-Z][^.?!\n]*[.?!]", text))[1:6]):
            ref = {"content": m.group(), "start_index": m.start(), "end_index": m.end()}
            files["questions.csv" if i < 2 else "other.csv"].append(
                {"question": "What about " + " ".join(m.group().split()[:6]) + "?",
                 "references": json.dumps([ref]), "corpus_id": cid})
    for name, rows in files.items():
        with open(root / name, "w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=["question", "references", "corpus_id"])
            writer.writeheader()
            writer.writerows(rows)
    return root / "other.csv"


@pytest.fixture
def benchmarks_without_model(monkeypatch):
    """``retrieval`` and ``paired`` imported in-process, their encoder a hashing encoder."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from tests.support.fakes import HashingEncoder, fake_encoder_factory

    fake_encoder_factory(monkeypatch, HashingEncoder)
    import paired
    import retrieval

    return retrieval, paired


def test_peers_and_questions_option_without_the_model(benchmarks_without_model, tmp_path, capsys):
    retrieval, paired = benchmarks_without_model
    other = tiny_eval(tmp_path / "data")
    data = str(tmp_path / "data")
    methods = [*PEERS, "lc_recursive_200_0"]
    rows = retrieval.main(["--data", data, "--questions", str(other), "--methods", *methods, "--budgets", "1024",
                           "--out", str(tmp_path / "out")])
    assert [r["method"] for r in rows if r["corpus"] == "pooled" and r["setting"] == "k=5"] == methods
    assert len(rows) == len(methods) * 3 * 2  # (alpha, beta, pooled) x (k=5, B=1024)
    assert {r["queries"] for r in rows if r["corpus"] == "pooled"} == {6}  # other.csv, not questions.csv
    assert all(0 <= r["recall"] <= 100 and r["starved"] == 0 for r in rows)
    default = retrieval.main(["--data", data, "--methods", "bm25_recursive_200", "--budgets", "1024",
                              "--out", str(tmp_path / "out2")])
    assert {r["queries"] for r in default if r["corpus"] == "pooled"} == {4}  # questions.csv

    assert paired.main(["hybrid_recursive_200", "bm25_recursive_200", "--data", data, "--questions", str(other),
                        "--budgets", "1024", "--ks", "5"]) == 0
    assert "6 queries" in capsys.readouterr().out


def test_peers_rank_the_whole_small_index_deterministically(benchmarks_without_model, tmp_path):
    """Each peer's list is DEPTH long or the whole index; equal BM25 scores keep index order."""
    retrieval, _ = benchmarks_without_model
    import evaluation

    from hseg.encoders import CachingEncoder
    from tests.support.fakes import HashingEncoder

    corpora, queries = evaluation.load_eval(tmp_path / "data", tiny_eval(tmp_path / "data"))
    nothing = evaluation.Query("zzzz qqqq", "alpha", [(0, 1)])  # no word of the corpora: all BM25 scores 0
    encoder = CachingEncoder(HashingEncoder())
    for name in PEERS:
        fn = retrieval.resolve_method(name)
        first, again = fn(corpora, [*queries, nothing], encoder), fn(corpora, [*queries, nothing], encoder)
        assert first.ranked == again.ranked, name
        assert all(len(r) == min(retrieval.DEPTH, len(first.units)) for r in first.ranked), name
        retrieval.check_ranked(name, corpora, queries, first.ranked[:-1])
        if "bm25" in name:
            assert first.ranked[-1] == first.units[: retrieval.DEPTH], name


def test_hseg_method_names_and_flavours_without_the_model(benchmarks_without_model, tmp_path, capsys):
    """``<method>~<flavour>+lex<W>@<segmenter>`` names resolve (and nothing else does); the paper's
    parents are asked for as parents at a budget; a flavoured method runs in ``paired.py --per-corpus``."""
    retrieval, paired = benchmarks_without_model
    import hseg_methods

    for name in ("hseg_auto_256~ctxenc", "hseg_auto_256~seg96+lex0", "hseg_sc_256+lex0.2", "hseg_seg_256@texttiling",
                 "hseg_auto_256~enc+lex0.3@texttiling", "hseg_auto_256+lex0.2+nb0.4"):
        assert retrieval.resolve_method(name) is not None, name
    for name in ("hseg_auto_256~nope", "hseg_auto_256+lexx", "hseg_auto_256+nbx", "hseg_default~enc",
                 "lc_recursive_200_0~enc", "hseg_auto_256@"):
        assert retrieval.resolve_method(name) is None, name
    assert hseg_methods.SPECS["hseg_sc_256"][2]["unit"] == "cluster" == hseg_methods.SPECS["hseg_c_256"][2]["unit"]
    data = tmp_path / "data"
    tiny_eval(data)
    assert paired.main(["hseg_auto_256~ctxmean", "hseg_auto_256", "--data", str(data), "--budgets", "1024",
                        "--ks", "5", "--per-corpus"]) == 0
    out = capsys.readouterr().out
    assert "| B=1024 alpha |" in out and "| B=1024 beta |" in out


def lexical_index_and_question(tmp_path):
    """The lexical index of two small synthetic books (hashing encoder, TextTiling) and a question of
    eight of their words, for the switches that rescore the lexical side."""
    from hseg.store import HierarchicalStore
    from tests.support.chunkers import small_chunker
    from tests.support.fakes import HashingEncoder, synthetic_book

    chunker = small_chunker()
    store = HierarchicalStore("lexical", path=str(tmp_path / "db"), encoder=HashingEncoder())
    store.add([chunker.chunk(synthetic_book(1500, seed=s), doc_id=f"d{s}") for s in range(2)])
    index = store.lexical_index
    words = sorted({w.lower() for (t,) in index.db.rows("SELECT text FROM fts") for w in re.findall(r"\w+", t)})
    return index, " ".join(words[3:60:7])


def test_lexical_neighbours_switch_scores_what_results_md_says(benchmarks_without_model, tmp_path):
    """``hseg_default_lexnb`` (round 17): inside the switch a segment's lexical score is its BM25 plus
    0.2 × the mean of its document neighbours' (its own when it has none), over the query's best;
    outside it, the plain BM25 again."""
    import hseg_methods

    from hseg.retrieval.lexical_query import lexical_query

    index, question = lexical_index_and_question(tmp_path)
    rows = index.db.rows("SELECT id, doc_id, position FROM segments")
    plain = lexical_query(index, question, 0.2)
    ids = [sid for sid, _, _ in rows]
    raw = dict(zip(ids, plain.scores(ids) * plain.best))
    at = {(d, p): sid for sid, d, p in rows}
    expected = {}
    for sid, d, p in rows:
        around = [raw[at[n]] for n in ((d, p - 1), (d, p + 1)) if n in at]
        expected[sid] = raw[sid] + 0.2 * (sum(around) / len(around) if around else raw[sid])
    best = max(expected.values())
    with hseg_methods.lexical_neighbours():
        smoothed = lexical_query(index, question, 0.2)
        got = smoothed.scores(ids)
        page = smoothed.page(5)
    assert got == pytest.approx([expected[sid] / best for sid in ids], abs=1e-12)
    assert any(raw[sid] == 0 < expected[sid] for sid in ids)  # a neighbour's words lift a segment without them
    assert page.ids == sorted(ids, key=lambda s: -expected[s])[:5]
    assert lexical_query(index, question, 0.2).scores(ids).tolist() == plain.scores(ids).tolist()


def test_lexical_ranks_switch_scores_by_position(benchmarks_without_model, tmp_path):
    """``hseg_default_lexrank`` (round 18): inside the switch a segment's lexical score is
    ``c / (c + r)``, ``r`` the number of matches scoring more BM25 (1 for the best, 0 without a
    query word); pages keep their order; outside it, BM25 over the best again."""
    import hseg_methods

    from hseg.retrieval.lexical_query import lexical_query

    index, question = lexical_index_and_question(tmp_path)
    ids = [sid for (sid,) in index.db.rows("SELECT id FROM segments")]
    plain = lexical_query(index, question, 0.2)
    raw = plain.scores(ids) * plain.best
    c = hseg_methods.rrf_c()
    expected = [c / (c + sum(r > x for r in raw)) if x > 0 else 0.0 for x in raw]
    with hseg_methods.lexical_ranks():
        ranked = lexical_query(index, question, 0.2)
        got = ranked.scores(ids)
        page = ranked.page(5)
    assert got.tolist() == pytest.approx(expected, abs=1e-12)
    assert max(got) == 1.0 and 0 < min(x for x in got if x > 0) < 1 and 0.0 in got.tolist()
    assert page.ids == plain.page(5).ids  # the same order: the score is monotone in BM25
    assert lexical_query(index, question, 0.2).scores(ids).tolist() == plain.scores(ids).tolist()
