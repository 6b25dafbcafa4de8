"""Which BM25 engine backs hseg's lexical index: SQLite FTS5, bm25s or tantivy, measured in one process.

    python benchmarks/lexical_engines.py [--records 40000] [--queries 300] [--out results/lexical_engines.md]

The units are ~400-character pieces of the 22 OpenStax training books (sentences packed in order,
about the size of an hseg segment), ``--records`` of them; the textbook_qa corpora are among them
(their books are), so the "What is T?" questions (``questions_term.csv``) have their reference
sentence in the index. For each engine:

* build: every unit indexed and persisted to a fresh folder (seconds, and bytes on disk);
* query: the top 100 units with their BM25 scores for each question (p50 / p95 ms), the same
  question text for every engine (words of ``\\w+``, English stop words removed: see below);
* update: one document's 20 units replaced (deleted and re-added) and made visible to readers, the
  write ``store.add`` of one document would do (ms);
* quality: hit@10 on the term questions, a unit among the first 10 containing the middle of the
  reference sentence (a check that tokenisation and stemming work on English, not a benchmark).

FTS5 is also timed on the full question (stop words kept), which is what a query pays without the
stop-word list. tantivy is imported from ``--tantivy-path`` when given (it is not a dependency).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hseg.retrieval.lexical_query import ENGLISH_STOP_WORDS, fts5_match, query_terms  # noqa: E402

DATA = Path("/work/shared/data")


def load_units(books: Path, n: int, size: int = 400) -> list[tuple[str, str]]:
    """``(document id, text)`` pieces: each book module's sentences (one a line, Wiki-727K format,
    section headers left out) packed into ~``size`` characters."""
    out: list[tuple[str, str]] = []
    for path in sorted(books.glob("*/*.txt")):
        doc = f"{path.parent.name}/{path.stem}"
        piece = ""
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("========") or not line.strip():
                continue
            piece = f"{piece} {line}" if piece else line
            if len(piece) >= size:
                out.append((doc, piece))
                piece = ""
        if piece:
            out.append((doc, piece))
    # interleave the books so that any prefix holds all of them (and the textbook_qa books)
    by_book: dict[str, list[tuple[str, str]]] = {}
    for unit in out:
        by_book.setdefault(unit[0].split("/")[0], []).append(unit)
    mixed: list[tuple[str, str]] = []
    queues = [list(reversed(v)) for v in by_book.values()]
    while len(mixed) < n and any(queues):
        mixed += [q.pop() for q in queues if q]
    return mixed[:n]


def load_questions(limit: int) -> list[tuple[str, str]]:
    """``(question, reference sentence)`` of textbook_qa's "What is T?" set."""
    with open(DATA / "textbook_qa" / "questions_term.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [(r["question"], json.loads(r["references"])[0]["content"]) for r in rows[:limit]]


# --------------------------------------------------------------------------- engines


class Fts5:
    name = "SQLite FTS5 (porter unicode61 remove_diacritics 2)"

    def __init__(self, folder: Path) -> None:
        self.path = folder / "lexical.sqlite"
        self.db = sqlite3.connect(self.path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE VIRTUAL TABLE t USING fts5(text, doc UNINDEXED, "
                        "tokenize='porter unicode61 remove_diacritics 2')")

    def build(self, units: list[tuple[str, str]]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO t(rowid, text, doc) VALUES (?, ?, ?)",
                            ((i, text, doc) for i, (doc, text) in enumerate(units)))
        self.db.execute("COMMIT")
        self.db.execute("INSERT INTO t(t) VALUES ('optimize')")
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def query(self, terms: list[str], n: int) -> list[tuple[int, float]]:
        if not terms:
            return []
        rows = self.db.execute("SELECT rowid, -bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?",
                               (fts5_match(terms), n)).fetchall()
        return [(int(r), float(s)) for r, s in rows]

    def replace(self, rowids: list[int], units: list[tuple[str, str]]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("DELETE FROM t WHERE rowid = ?", ((r,) for r in rowids))
        self.db.executemany("INSERT INTO t(rowid, text, doc) VALUES (?, ?, ?)",
                            ((r, text, doc) for r, (doc, text) in zip(rowids, units)))
        self.db.execute("COMMIT")

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.path.parent.iterdir())


class Bm25s:
    name = "bm25s (PyStemmer english, lucene)"

    def __init__(self, folder: Path) -> None:
        import Stemmer

        self.folder = folder
        self.stemmer = Stemmer.Stemmer("english")
        self.units: list[tuple[str, str]] = []

    def build(self, units: list[tuple[str, str]]) -> None:
        import bm25s

        self.units = list(units)
        tokens = bm25s.tokenize([t for _, t in self.units], stopwords="en", stemmer=self.stemmer, show_progress=False)
        self.index = bm25s.BM25()
        self.index.index(tokens, show_progress=False)
        self.index.save(str(self.folder / "bm25s"))

    def query(self, terms: list[str], n: int) -> list[tuple[int, float]]:
        import bm25s

        if not terms:
            return []
        q = bm25s.tokenize([" ".join(terms)], stopwords="en", stemmer=self.stemmer, show_progress=False)
        if not q.ids[0]:
            return []
        docs, scores = self.index.retrieve(q, k=min(n, len(self.units)), show_progress=False, n_threads=1)
        return [(int(d), float(s)) for d, s in zip(docs[0], scores[0]) if s > 0]

    def replace(self, rowids: list[int], units: list[tuple[str, str]]) -> None:
        for r, unit in zip(rowids, units):  # no incremental update: the whole index is rebuilt
            self.units[r] = unit
        self.build(self.units)

    def size(self) -> int:
        return sum(p.stat().st_size for p in (self.folder / "bm25s").iterdir())


class Tantivy:
    name = "tantivy (en_stem)"

    def __init__(self, folder: Path) -> None:
        import tantivy

        self.tantivy = tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("rowid", stored=True, indexed=True, fast=True)
        builder.add_text_field("text", stored=False, tokenizer_name="en_stem")
        self.schema = builder.build()
        self.folder = folder / "tantivy"
        self.folder.mkdir()
        self.index = tantivy.Index(self.schema, path=str(self.folder))

    def build(self, units: list[tuple[str, str]]) -> None:
        writer = self.index.writer(heap_size=128_000_000, num_threads=1)
        for i, (_, text) in enumerate(units):
            writer.add_document(self.tantivy.Document(rowid=i, text=text))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()

    def query(self, terms: list[str], n: int) -> list[tuple[int, float]]:
        if not terms:
            return []
        q = self.index.parse_query(" ".join(terms), ["text"])
        hits = self.searcher.search(q, n).hits
        return [(int(self.searcher.doc(addr)["rowid"][0]), float(score)) for score, addr in hits]

    def replace(self, rowids: list[int], units: list[tuple[str, str]]) -> None:
        writer = self.index.writer(heap_size=32_000_000, num_threads=1)
        for r, (_, text) in zip(rowids, units):
            writer.delete_documents("rowid", r)
            writer.add_document(self.tantivy.Document(rowid=r, text=text))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.folder.iterdir() if p.is_file())


# --------------------------------------------------------------------------- measuring


def report(lines: list[str], out: str | None) -> None:
    """Print the report's lines, and write them to ``out`` too when given."""
    text = "\n".join(lines)
    print(text)
    if out:
        Path(out).write_text(text + "\n", encoding="utf-8")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1] if len(xs) > 1 else xs[0]


def measure(engine_cls: Any, units: list[tuple[str, str]], questions: list[tuple[str, str]],
            stop: frozenset[str], rounds: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="lexeng-"))
    try:
        engine = engine_cls(folder)
        build_s, _ = timed(lambda: engine.build(units))
        row: dict[str, Any] = {"engine": engine.name, "build_s": build_s, "size_mb": engine.size() / 1e6}
        terms = [query_terms(q, stop) for q, _ in questions]
        times: list[float] = []
        for _ in range(rounds):
            for t in terms:
                t0 = time.perf_counter()
                engine.query(t, 100)
                times.append((time.perf_counter() - t0) * 1000)
        row["query_p50_ms"], row["query_p95_ms"] = pct(times, 50), pct(times, 95)
        if isinstance(engine, Fts5):
            full = [query_terms(q, frozenset()) for q, _ in questions]
            ftimes = []
            for t in full:
                t0 = time.perf_counter()
                engine.query(t, 100)
                ftimes.append((time.perf_counter() - t0) * 1000)
            row["fts5_all_words_p50_ms"], row["fts5_all_words_p95_ms"] = pct(ftimes, 50), pct(ftimes, 95)
        hits = 0
        for t, (_, ref) in zip(terms, questions):
            mid = ref[len(ref) // 2 - 20 : len(ref) // 2 + 20]
            hits += any(mid in units[r][1] for r, _ in engine.query(t, 10))
        row["hit@10"] = 100 * hits / len(questions)
        doc = units[len(units) // 2][0]
        rowids = [i for i, (d, _) in enumerate(units) if d == doc][:20]
        edited = [(d, text + " edited") for d, text in (units[r] for r in rowids)]
        updates = [timed(lambda: engine.replace(rowids, edited))[0] * 1000 for _ in range(3)]
        row["update_ms"] = min(updates)
        return row
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tantivy-path", default=None, help="folder holding the tantivy package (pip --target)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.tantivy_path:
        sys.path.insert(0, args.tantivy_path)

    units = load_units(DATA / "segmentation" / "train_openstax", args.records)
    questions = load_questions(args.queries)
    print(f"{len(units)} units ({sum(len(t) for _, t in units) / 1e6:.1f} M characters), {len(questions)} questions")
    engines: list[Any] = [Fts5, Bm25s]
    try:
        import tantivy  # noqa: F401

        engines.append(Tantivy)
    except ImportError:
        print("tantivy not importable: left out (pip install --target DIR tantivy; --tantivy-path DIR)")
    rows = [measure(e, units, questions, ENGLISH_STOP_WORDS, args.rounds) for e in engines]
    cols = ["engine", "build_s", "size_mb", "query_p50_ms", "query_p95_ms", "update_ms", "hit@10"]
    lines = [f"{len(units)} units, {len(questions)} questions (textbook_qa 'What is T?'), top 100 per query", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")
    fts = rows[0]
    lines += ["", f"FTS5 with stop words kept in the query: p50 {fts['fts5_all_words_p50_ms']:.2f} ms, "
                  f"p95 {fts['fts5_all_words_p95_ms']:.2f} ms"]
    report(lines, args.out)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
