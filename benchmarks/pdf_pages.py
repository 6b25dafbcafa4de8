"""Page Documents joined or chunked one by one: retrieval from a PDF's pages, both sides in one process.

    python -m benchmarks.pdf_pages [--data ../shared/data/textbook_qa] [--corpus introduction-anthropology]
        [--chars 120000] [--budgets 1024 4096] [--modes separate clean exact]

A prefix of a textbook_qa corpus (whole paragraphs, ``--chars`` characters) is rendered into a PDF
(:func:`benchmarks.harness.documents.write`: headings as larger bold lines, a running head and a
"Page N" foot on every page, pages broken where they fill, so sentences run over page breaks), read
back one Document per page as LangChain's ``PyPDFLoader`` does (pypdf), and chunked by the LangChain
splitter under each ``pages`` mode (:data:`hseg.text.pages.PAGE_MODES`): ``separate`` (each page
alone: what hseg did before), ``clean`` (pages joined, head and foot dropped, hyphenation rejoined)
and ``exact`` (pages joined as they are). Each mode has its own in-memory store; the questions whose
reference lies in the prefix are asked with ``unit="auto"`` and each token budget. The mode
``recursive`` is the peer: LangChain's ``RecursiveCharacterTextSplitter`` (200 cl100k tokens, no
overlap, the report's separators, as ``lc_recursive_200_0``) over the same page Documents, its chunks
embedded by the same model, ranked by exact cosine and taken in rank order while they fit the budget
(the first that does not fit ends the list, :func:`benchmarks.harness.evaluation.budget`).

The PDF's text is not the markdown's (the renderer's font is Latin-1, pypdf re-wraps lines), so the
references cannot be mapped by offset; a question's recall here is the share of its reference's
word 4-grams (whitespace and case aside) found in the text retrieved for it. Per budget: each mode's
mean recall, and per mode against ``separate`` the paired mean difference with its 95% bootstrap
interval and wins/losses (:mod:`benchmarks.harness.stats`). Also: the share of results whose first
and last words are on the pages their ``hseg_page_start``/``hseg_page_end`` name (pypdf's page texts the
truth), and the share of results that span a page break.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.baselines import REPORT_SEPARATORS, counter
from benchmarks.harness.documents import Block, write
from benchmarks.harness.evaluation import Chunk
from benchmarks.harness.evaluation import budget as fill_budget
from benchmarks.harness.stats import bootstrap_interval, sign_test

RUNNING = "Open textbook - development edition"
#: what the renderer's Latin-1 font cannot draw, spelt as it can
_LATIN1 = str.maketrans({"\u2014": "--", "\u2013": "-", "\u2018": "'", "\u2019": "'", "\u201c": '"',
                         "\u201d": '"', "\u2026": "...", "\u2212": "-", "\u00a0": " "})


def latin1(text: str) -> str:
    return text.translate(_LATIN1).encode("latin-1", "replace").decode("latin-1")


def words(text: str) -> list[str]:
    return text.lower().split()


def shingles(text: str, n: int = 4) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i:i + n]) for i in range(max(1, len(w) - n + 1))}


def outline(markdown: str) -> list[Block]:
    blocks = []
    for para in markdown.split("\n\n"):
        para = para.strip()
        if not para:
            continue
        level = len(para) - len(para.lstrip("#"))
        if level and para[level:level + 1] == " ":
            blocks.append(Block(latin1(para[level:].strip()), min(level, 3)))
        else:
            blocks.append(Block(latin1(" ".join(para.split()))))
    return blocks


def questions(data: Path, corpus_id: str, limit: int) -> list[tuple[str, list[str]]]:
    """The questions on ``corpus_id`` whose references end before ``limit``: (question, reference texts)."""
    out = []
    with open(data / "questions.csv", encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            refs = json.loads(row["references"])
            if row["corpus_id"] == corpus_id and all(r["end_index"] <= limit for r in refs):
                out.append((row["question"], [latin1(r["content"]) for r in refs]))
    return out


def recall(refs: Sequence[str], retrieved: Sequence[str]) -> float:
    want = set().union(*(shingles(r) for r in refs))
    got = set().union(*(shingles(t) for t in retrieved)) if retrieved else set()
    return len(want & got) / len(want)


def page_right(text: str, meta: dict[str, Any], pages: Sequence[str]) -> bool:
    """Whether the start of the text's first line is on its first page and the end of its last line on
    its last page (a page break always falls between lines, so neither can straddle one)."""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    first, last = meta["hseg_page_start"], meta["hseg_page_end"]
    return lines[0][:24] in " ".join(pages[first - 1].split()) and lines[-1][-24:] in " ".join(pages[last - 1].split())


def recursive_recalls(documents: Sequence[Any], asked: Sequence[tuple[str, list[str]]], encoder: Any,
                      budgets: Sequence[int]) -> dict[int, np.ndarray]:
    """The peer: ``RecursiveCharacterTextSplitter`` 200/0 over the page Documents, exact cosine ranking."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(separators=REPORT_SEPARATORS, chunk_size=200, chunk_overlap=0,
                                              length_function=counter())
    chunks = [Chunk("pdf", 0, len(d.page_content), d.page_content) for d in splitter.split_documents(documents)]
    vectors = np.asarray(encoder.encode([c.text for c in chunks]), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    sizes = [counter()(c.text) for c in chunks]
    out: dict[int, list[float]] = {b: [] for b in budgets}
    for question, refs in asked:
        q = np.asarray(encoder.encode_query(question), dtype=np.float32).reshape(-1)
        order = np.argsort(-(vectors @ (q / np.linalg.norm(q))), kind="stable")
        for b in budgets:
            taken = fill_budget([chunks[i] for i in order], b, [sizes[i] for i in order])
            out[b].append(recall(refs, [c.text for c in taken]))
    print(f"  recursive {len(chunks)} chunks of RecursiveCharacterTextSplitter 200/0 over the pages")
    return {b: np.asarray(v) for b, v in out.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data/textbook_qa")
    parser.add_argument("--corpus", default="introduction-anthropology")
    parser.add_argument("--chars", type=int, default=120_000)
    parser.add_argument("--budgets", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--modes", nargs="+", default=["separate", "clean", "exact", "recursive"])
    parser.add_argument("--out", default="/tmp/hseg-pdf-pages")
    args = parser.parse_args(argv)

    import chromadb
    from langchain_core.documents import Document
    from pypdf import PdfReader

    from hseg.encoders import CachingEncoder, SentenceTransformerEncoder
    from hseg.store import HierarchicalStore
    from langchain_hseg import HierarchicalSegmentTextSplitter

    data = Path(args.data)
    if not (data / "corpora").is_dir():
        print(f"no data at {data}: give --data (textbook_qa)", file=sys.stderr)
        return 2
    corpus = (data / "corpora" / f"{args.corpus}.md").read_text(encoding="utf-8")
    prefix = corpus[:corpus.rfind("\n\n", 0, args.chars)]
    asked = questions(data, args.corpus, len(prefix))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pdf = write(out / f"{args.corpus}.pdf", outline(prefix), bookmarks=False, running=RUNNING)
    pages = [p.extract_text() for p in PdfReader(pdf).pages]
    # one Document per page with PyPDFLoader's metadata (source, 0-based page)
    documents = [Document(page_content=t, metadata={"source": str(pdf), "page": i, "total_pages": len(pages)})
                 for i, t in enumerate(pages)]
    print(f"{args.corpus}: {len(prefix):,} characters, {len(pages)} PDF pages, {len(asked)} questions")

    encoder = CachingEncoder(SentenceTransformerEncoder(device="cpu"))
    recalls: dict[tuple[str, int], np.ndarray] = {}
    for mode in args.modes:
        if mode == "recursive":
            for b, got in recursive_recalls(documents, asked, encoder, args.budgets).items():
                recalls[(mode, b)] = got
            continue
        splitter = HierarchicalSegmentTextSplitter(encoder=encoder, pages=mode)
        store = HierarchicalStore(f"pages-{mode}", client=chromadb.EphemeralClient(), encoder=encoder)
        began = time.perf_counter()
        splitter.add_to_vectorstore(store, documents)
        store.sync_unit_index()
        chunked = time.perf_counter() - began
        right = total = crossing = 0
        for budget in args.budgets:
            per = []
            for question, refs in asked:
                hits = store.search(question, unit="auto", budget_tokens=budget)
                per.append(recall(refs, [h.text for h in hits]))
                for h in hits:
                    meta = {"hseg_page_start": h.pages[0], "hseg_page_end": h.pages[1]} if h.pages else None
                    total += 1
                    right += meta is not None and page_right(h.text, meta, pages)
                    crossing += meta is not None and meta["hseg_page_start"] != meta["hseg_page_end"]
            recalls[(mode, budget)] = np.asarray(per)
        print(f"  {mode:9s} chunked and stored in {chunked:5.1f} s (encoder cache shared: not a speed figure); "
              f"results on the pages they name {right}/{total} ({right / max(total, 1):.1%}), "
              f"across a page break {crossing / max(total, 1):.1%}")
    print()
    print("| budget | " + " | ".join(args.modes) + " |")
    print("|---|" + "---:|" * len(args.modes))
    for budget in args.budgets:
        print(f"| {budget} | " + " | ".join(f"{recalls[(m, budget)].mean():.1%}" for m in args.modes) + " |")
    base = args.modes[0]
    pairs = [(mode, base) for mode in args.modes[1:] if mode != "recursive"]
    pairs += [(mode, "recursive") for mode in args.modes if mode != "recursive" and "recursive" in args.modes]
    for mode, other in pairs:
        for budget in args.budgets:
            diff = recalls[(mode, budget)] - recalls[(other, budget)]
            low, high = bootstrap_interval(diff)
            wins, losses = int((diff > 0).sum()), int((diff < 0).sum())
            print(f"{mode} - {other} at {budget}: {diff.mean():+.2%} [{low:+.2%}, {high:+.2%}], wins {wins} / "
                  f"losses {losses}, sign test p = {sign_test(wins, losses):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
