"""The benchmark harness without the model: the peers, hseg's method names and ``--questions`` run
in-process on tiny generated data, a hashing encoder in the model's place. The smoke runs of the
real commands are ``tests/e2e/test_benchmarks_smoke.py``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PEERS = ["chroma_cluster_200", "bm25_recursive_200", "hybrid_recursive_200", "li_bm25_recursive_200",
         "li_fusion_recursive_200"]


def tiny_eval(root: Path) -> Path:
    """Two generated corpora, ``questions.csv`` (2 queries each) and ``other.csv`` (3 each), in the
    harness's format; returns ``other.csv``."""
    import csv
    import json

    from hseg_testing.fakes import synthetic_book

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
    """``benchmarks.retrieval`` and ``benchmarks.paired`` in-process, their encoder a hashing encoder."""
    from benchmarks import paired, retrieval
    from hseg_testing.fakes import HashingEncoder, fake_encoder_factory

    fake_encoder_factory(monkeypatch, HashingEncoder)
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
    from benchmarks.harness import evaluation
    from hseg.encoders import CachingEncoder
    from hseg_testing.fakes import HashingEncoder

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
    from benchmarks.harness import hseg_methods

    for name in ("hseg_auto_256~enc", "hseg_auto_256~seg96+lex0", "hseg_sc_256+lex0.2", "hseg_seg_256@texttiling",
                 "hseg_auto_256~enc+lex0.3@texttiling", "hseg_auto_256+lex0.2+nb0.4", "hseg_auto_256~ctxenc",
                 "hseg_default~enc", "hseg_default~lexcov", "hseg_default~t1024~seg128~discussion",
                 "hseg_default~t256~wcm3~wcs0.25"):
        assert retrieval.resolve_method(name) is not None, name
    for name in ("hseg_auto_256~nope", "hseg_auto_256~ctxmean", "hseg_auto_256+lexx", "hseg_auto_256+nbx",
                 "hseg_default~nope", "hseg_default_walk", "lc_recursive_200_0~enc", "hseg_auto_256@",
                 "hseg_default~wcmx", "hseg_default~wcs"):
        assert retrieval.resolve_method(name) is None, name
    assert hseg_methods.SPECS["hseg_sc_256"][2]["unit"] == "cluster" == hseg_methods.SPECS["hseg_c_256"][2]["unit"]
    assert hseg_methods.search_flavour("wcm2") == {"whole_cluster_min": 2}
    assert hseg_methods.search_flavour("wcs0.5") == {"whole_cluster_share": 0.5}
    data = tmp_path / "data"
    tiny_eval(data)
    assert paired.main(["hseg_auto_256~seg64", "hseg_auto_256", "--data", str(data), "--budgets", "1024",
                        "--ks", "5", "--per-corpus"]) == 0
    out = capsys.readouterr().out
    assert "| B=1024 alpha |" in out and "| B=1024 beta |" in out


def test_same_text_lookup_runs_both_sides_and_they_agree(tmp_path):
    """``benchmarks.same_text_lookup`` at two tiny sizes: both sides of every look-up give the same
    answer (it exits otherwise), every row of its report is there, and a second run resumes the store."""
    from benchmarks import same_text_lookup

    out = tmp_path / "report.md"
    args = ["--path", str(tmp_path / "db"), "--sizes", "100", "300", "--lookups", "6", "--adds", "2",
            "--out", str(out)]
    assert same_text_lookup.main(args) == 0
    assert same_text_lookup.main(args) == 0  # grown already: nothing written twice, the answers still agree
    report = out.read_text(encoding="utf-8")
    for side in ("chroma get(where)", "lexical index", "add, chroma get(where)", "add, lexical index"):
        assert report.count(f"| {side} | ") == 4, (side, report)
    assert report.count("growth, p50 at 300 / at 100") == 2
