"""Smoke runs of the benchmark commands: one corpus, one budget; the table's shape, not its numbers.

The runs of the real commands load the real model (marked ``model``); the peers and ``--questions``
are run in-process on tiny generated data with a hashing encoder in the model's place."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(args: list[str], tmp_path: Path) -> str:
    out = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=900,
                         env={**__import__("os").environ, "HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg"})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def table_rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| method")]


@pytest.mark.model
def test_retrieval_benchmark_smoke(shared_dir, tmp_path):
    data = shared_dir / "data" / "chroma_eval"
    stdout = run(["benchmarks/retrieval.py", "--data", str(data), "--corpora", "chatlogs", "--budgets", "1024",
                  "--methods", "lc_recursive_200_0", "hseg_sc_512", "hseg_auto_512", "hseg_auto_512_hybrid",
                  "--out", str(tmp_path)], tmp_path)
    pooled = stdout.split("## chatlogs")[0]
    rows = table_rows(pooled)
    assert [r[0] for r in rows] == ["lc_recursive_200_0", "hseg_sc_512", "hseg_auto_512", "hseg_auto_512_hybrid"]
    assert all(len(r) == 4 + 3 * 2 for r in rows)  # method, chunks, tokens, PΩ, then R/IoU/P at k=5 and B=1024
    for r in rows:
        assert 0 <= float(r[4]) <= 100 and 0 <= float(r[7]) <= 100
    csv = (tmp_path / "retrieval.csv").read_text().splitlines()
    assert len(csv) == 1 + 4 * 2 * 2  # header + methods x (chatlogs, pooled) x (k=5, B=1024)
    assert sorted(p.name for p in (tmp_path / "methods").iterdir()) == [
        "hseg_auto_512.md", "hseg_auto_512_hybrid.md", "hseg_sc_512.md", "lc_recursive_200_0.md"]
    assert (tmp_path / "retrieval.png").stat().st_size > 1000


@pytest.mark.model
def test_ingest_speed_benchmark_smoke(shared_dir, tmp_path):
    data = shared_dir / "data" / "chroma_eval"
    stdout = run(["benchmarks/ingest_speed.py", "--data", str(data), "--corpora", "chatlogs",
                  "--methods", "lc_recursive_200_0", "hseg", "--backends", "onnx", "torch"], tmp_path)
    rows = table_rows(stdout)
    assert [(r[0], r[1]) for r in rows] == [("lc_recursive_200_0", "onnx"), ("lc_recursive_200_0", "torch"),
                                          ("hseg", "onnx"), ("hseg", "torch")]
    assert float(rows[1][4]) == 1.0  # the floor (torch) is its own unit
    assert all(float(r[2]) > 0 and float(r[5].replace(",", "")) > 100 and int(r[6]) > 0 for r in rows)
    assert rows[0][6] == rows[1][6] and rows[2][6] == rows[3][6]  # the backends make the same records
    assert "hseg: onnx" in stdout and "the speed of torch" in stdout


@pytest.mark.model
def test_paired_comparison_smoke(shared_dir, tmp_path):
    data = shared_dir / "data" / "chroma_eval"
    stdout = run(["benchmarks/paired.py", "hseg_sc_256", "hseg_c_256", "--data", str(data), "--corpora", "chatlogs",
                  "--budgets", "1024", "--ks", "5"], tmp_path)
    rows = [r for r in table_rows(stdout) if not r[0].startswith("setting")]
    assert [r[0] for r in rows] == ["k=5", "B=1024"]
    for r in rows:
        a, b, diff = float(r[1]), float(r[2]), float(r[3])
        assert abs((a - b) - diff) <= 0.1 + 1e-9  # A − B of the means, each rounded to 0.1
        wins, losses = map(int, r[4].split("/"))
        assert wins + losses <= 45 and 0 <= float(r[5]) <= 1  # chatlogs has 45 queries


@pytest.mark.model
def test_paired_compares_one_method_under_two_segmenters(shared_dir, tmp_path):
    data = shared_dir / "data" / "chroma_eval"
    stdout = run(["benchmarks/paired.py", "hseg_seg_256", "hseg_seg_256@bilstm", "--pairs", "hseg_seg_256",
                  "hseg_seg_256@texttiling", "--data", str(data), "--corpora", "chatlogs", "--budgets", "1024",
                  "--ks", "5"], tmp_path)
    same, other = stdout.split("### ")[1:]
    assert "hseg_seg_256@bilstm (B)" in same and "hseg_seg_256@texttiling (B)" in other
    for r in (r for r in table_rows(same) if not r[0].startswith("setting")):
        assert float(r[3]) == 0 and r[4] == "0/0"  # "@bilstm" is the default segmenter: the same answers
    texttiling = [r for r in table_rows(other) if not r[0].startswith("setting")]
    assert [r[0] for r in texttiling] == ["k=5", "B=1024"]
    bad = subprocess.run([sys.executable, "benchmarks/paired.py", "hseg_seg_256", "lc_recursive_200_0@bilstm"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "unknown methods" in bad.stderr  # only hseg methods take a segmenter


@pytest.mark.model
def test_query_cold_start_smoke(tmp_path):
    report = tmp_path / "cold.md"
    stdout = run(["benchmarks/query_cold_start.py", "--db", str(tmp_path / "db"), "--runs", "1",
                  "--import-runs", "1", "--out", str(report)], tmp_path)
    assert "median" in stdout and report.read_text(encoding="utf-8") in stdout
    rows = table_rows(stdout)
    assert [r[0] for r in rows][1:] == ["`torch`", "`sentence_transformers`", "`onnxruntime`", "`tokenizers`",
                                        "`chromadb`", "`hseg.cli`"]
    assert "--backend onnx` cold start" in stdout and "--backend torch` cold start" in stdout
    assert all(re.fullmatch(r"-?\d+\.\d\d", r[1]) for r in rows[1:]), rows  # seconds, two decimals


def indexed_tiny_eval(tmp_path: Path) -> Path:
    """:func:`tiny_eval`'s corpora indexed by ``hseg index`` into ``tmp_path / "db"``; returns its questions."""
    questions = tiny_eval(tmp_path / "eval")
    (tmp_path / "docs").mkdir()
    for md in (tmp_path / "eval" / "corpora").glob("*.md"):
        (tmp_path / "docs" / md.name).write_text(md.read_text(encoding="utf-8"), encoding="utf-8")
    run(["-m", "hseg.cli", "index", str(tmp_path / "docs"), "--db", str(tmp_path / "db"), "--quiet"], tmp_path)
    return questions


@pytest.mark.model
def test_lexical_cache_smoke(tmp_path):
    """The three ways of scoring the lexical side give the same hits, and the table has its four rows."""
    questions = indexed_tiny_eval(tmp_path)
    stdout = run(["benchmarks/lexical_cache.py", "--db", str(tmp_path / "db"), "--questions", str(questions),
                  "--queries", "4", "--warmup", "2", "--rounds", "2", "--budget", "1024"], tmp_path)
    assert "hits differ between the three searches on 0 calls" in stdout
    rows = [r for r in table_rows(stdout) if r[0] != "call"]
    assert [r[0] for r in rows] == ["plain", "word cache", "one statement", "no reuse"]
    assert all(re.fullmatch(r"\d+\.\d\d", x) for r in rows for x in r[1:]), rows


@pytest.mark.model
def test_latency_anatomy_table_6_smoke(tmp_path):
    """Table 6: the passages read from the lexical table and from the collection give the same hits;
    the replayed reads and the searches each have their rows."""
    questions = indexed_tiny_eval(tmp_path)
    stdout = run(["benchmarks/latency_anatomy.py", "--db", str(tmp_path / "db"), "--questions", str(questions),
                  "--queries", "4", "--rounds", "1", "--budget", "1024", "--tables", "6"], tmp_path)
    assert "hits differ on 0 searches" in stdout
    rows = [r for r in table_rows(stdout) if r[0] not in ("read from", "passages read from")]
    assert [r[0] for r in rows] == ["table", "unit index", "collection", "the lexical table (as shipped)",
                                    "collection"]
    assert all(re.fullmatch(r"\*{0,2}\d+\.\d\d\*{0,2}", x) for r in rows for x in r[1:3]), rows


# --------------------------------------------------------------------------- peers and --questions, no model

PEERS = ["chroma_cluster_200", "bm25_recursive_200", "hybrid_recursive_200", "li_bm25_recursive_200",
         "li_fusion_recursive_200"]


def tiny_eval(root: Path) -> Path:
    """Two generated corpora, ``questions.csv`` (2 queries each) and ``other.csv`` (3 each), in the
    harness's format; returns ``other.csv``."""
    import csv
    import json

    from tests.fakes import synthetic_book

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
    from tests.fakes import HashingEncoder, fake_encoder_factory

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
    from tests.fakes import HashingEncoder

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


def test_fts5_word_costs_smoke(shared_dir, tmp_path):
    """Each way of reading a word's rows has its row, and the per-row costs are positive numbers."""
    stdout = run(["benchmarks/fts5_word_costs.py", "--data", str(shared_dir / "data"), "--records", "300",
                  "--queries", "6", "--rounds", "1"], tmp_path)
    rows = [r for r in table_rows(stdout) if r[0] != "way"]
    assert [r[0] for r in rows] == ["bm25 rows", "bm25 in C", "rowids", "count", "vocab tf"]
    assert float(rows[0][5]) == 1.0 and all(float(r[2]) > 0 for r in rows)
    assert "fts_docsize" in stdout


def lexical_index_and_question(tmp_path):
    """The lexical index of two small synthetic books (hashing encoder, TextTiling) and a question of
    eight of their words, for the switches that rescore the lexical side."""
    from hseg.chunking.chunker import HierarchicalChunker
    from hseg.store import HierarchicalStore
    from tests.fakes import HashingEncoder, synthetic_book

    chunker = HierarchicalChunker(encoder=HashingEncoder(), segmenter="texttiling", target_tokens=64,
                                  min_segment_tokens=8, max_segment_tokens=48)
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
