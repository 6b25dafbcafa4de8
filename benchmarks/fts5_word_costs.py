"""What one word of a question costs FTS5 when no earlier question asked it (issue 27, round 17).

    python benchmarks/fts5_word_costs.py [--records 40000] [--queries 200] [--data ../shared/data] [--out FILE]

A process's first long question on a 40k store costs ~4× a plain query (``RESULTS.md``, "The
default search"): the lexical side reads each word's BM25 terms (``hseg.store.lexical.database._term_scores``),
and the common words are held by thousands of rows. This asks where that time goes, and what an
engine built on FTS5's raw counts could save, on the units of ``benchmarks/lexical_engines.py``
(``--records`` ~400-character pieces of the OpenStax training books, one FTS5 table with hseg's
tokenizer) and the words of textbook_qa's "Which term means: …?" questions (``query_terms``: stop
words out, as a search sends them). Per word, in one process, the ways rotated word by word:

* ``bm25 rows``: what hseg runs, ``SELECT rowid, -bm25(fts)`` of the one-word query, fetched;
* ``bm25 in C``: the same scores summed inside SQLite (no Python rows): FTS5's own cost;
* ``rowids``: the matching rowids only, fetched (no scoring);
* ``count``: ``count(*)`` of the matches (the doclist walk alone);
* ``vocab tf``: each row's count of the word from an ``fts5vocab`` ``instance`` table (``GROUP BY
  doc``), what BM25 computed outside FTS5 would read instead of ``bm25()``; it would also need
  every row's length (``fts_docsize``, read once per change of the file: timed once).

Per question: the sum over its words, i.e. its lexical side with nothing kept.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from lexical_engines import DATA, load_units, report  # noqa: E402

from hseg.retrieval.lexical_query import fts5_match, query_terms  # noqa: E402
from hseg.store.lexical import TOKENIZER  # noqa: E402

WAYS = {
    "bm25 rows": "SELECT rowid, -bm25(fts) FROM fts WHERE fts MATCH ?",
    # a LIMIT keeps SQLite from flattening the subquery (bm25() is refused inside an aggregate)
    "bm25 in C": "SELECT sum(s) FROM (SELECT bm25(fts) AS s FROM fts WHERE fts MATCH ? LIMIT -1)",
    "rowids": "SELECT rowid FROM fts WHERE fts MATCH ?",
    "count": "SELECT count(*) FROM fts WHERE fts MATCH ?",
    "vocab tf": "SELECT doc, count(*) FROM vocab WHERE term = ? GROUP BY doc",
}


def stored_term(conn: sqlite3.Connection, word: str) -> str | None:
    """The token FTS5 stores for ``word`` (its tokenizer's output), or None when it makes 0 or 2+ tokens."""
    conn.execute("DELETE FROM temp.probe")
    conn.execute("INSERT INTO temp.probe(t) VALUES (?)", (word,))
    got = [r[0] for r in conn.execute("SELECT term FROM temp.probe_vocab")]
    return got[0] if len(got) == 1 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data folder (train_openstax, textbook_qa)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    units = load_units(args.data / "segmentation" / "train_openstax", args.records)
    with open(args.data / "textbook_qa" / "questions.csv", encoding="utf-8") as f:
        questions = [query_terms(r["question"]) for r in list(csv.DictReader(f))[:args.queries]]
    folder = Path(tempfile.mkdtemp(prefix="fts5words-"))
    try:
        conn = sqlite3.connect(folder / "lexical.sqlite", isolation_level=None)
        conn.execute(f"CREATE VIRTUAL TABLE fts USING fts5(text, tokenize='{TOKENIZER}')")
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO fts(rowid, text) VALUES (?, ?)", ((i + 1, t) for i, (_, t) in enumerate(units)))
        conn.execute("COMMIT")
        conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, fts, instance)")
        conn.execute(f"CREATE VIRTUAL TABLE temp.probe USING fts5(t, tokenize='{TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE temp.probe_vocab USING fts5vocab(temp, probe, row)")
        words = list(dict.fromkeys(w for q in questions for w in q))
        terms = {w: stored_term(conn, w) for w in words}
        words = [w for w in words if terms[w] is not None]
        rows = {w: conn.execute(WAYS["count"], (fts5_match([w]),)).fetchone()[0] for w in words}
        ms: dict[str, dict[str, float]] = {way: {} for way in WAYS}
        for r in range(args.rounds):
            for i, w in enumerate(words):
                order = list(WAYS)
                order = order[(i + r) % len(order):] + order[:(i + r) % len(order)]
                for way in order:
                    arg = terms[w] if way == "vocab tf" else fts5_match([w])
                    t0 = time.perf_counter()
                    conn.execute(WAYS[way], (arg,)).fetchall()
                    dt = (time.perf_counter() - t0) * 1000
                    ms[way][w] = min(ms[way].get(w, dt), dt)  # the fastest round: the least noise
        t0 = time.perf_counter()
        conn.execute("SELECT id, sz FROM fts_docsize").fetchall()
        docsize_ms = (time.perf_counter() - t0) * 1000
        conn.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    asked = [[w for w in q if w in rows] for q in questions]
    lines = [f"{len(units):,} units, {len(words)} distinct words of {len(questions)} 'Which term means' questions "
             f"(stop words out; {len(questions) - sum(1 for q in asked if q)} with none), {sum(rows.values()):,} "
             f"matching rows in all, the fastest of {args.rounds} rounds per word", "",
             "| way | ms per word (mean) | µs per matching row | ms per question, p50 | p95 | × bm25 rows |",
             "|---|---|---|---|---|---|"]
    base = sum(ms["bm25 rows"].values())
    for way in WAYS:
        per_q = [sum(ms[way][w] for w in q) for q in asked if q]
        total = sum(ms[way].values())
        lines.append(f"| {way} | {statistics.mean(ms[way].values()):.3f} | {1000 * total / sum(rows.values()):.2f} | "
                     f"{statistics.median(per_q):.1f} | {statistics.quantiles(per_q, n=20)[-1]:.1f} | "
                     f"{total / base:.2f} |")
    lines += ["", f"Every row's length (`fts_docsize`, what BM25 outside FTS5 needs once per change of the file): "
                  f"{docsize_ms:.1f} ms"]
    report(lines, args.out)


if __name__ == "__main__":
    main()
