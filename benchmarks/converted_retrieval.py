"""Retrieval from documents that arrive as PDF, DOCX or HTML against their markdown original, in one process.

    python -m benchmarks.converted_retrieval [--data ../shared/data/textbook_qa] [--corpora C ...]
        [--chars 120000] [--budgets 1024 4096] [--sides md pdf docx html pypdfloader llamaindex recursive]

A prefix of each textbook_qa corpus (whole paragraphs, ``--chars`` characters) is rendered from its
markdown into three files by :func:`benchmarks.harness.documents.write` (the renderer of
:mod:`benchmarks.pdf_pages`, whose outline and running head it reuses): a PDF (fpdf2: headings as
larger bold lines, Latin-1 text, running head and "Page N" foot, a new page before each level-1
heading and wherever a page fills), a DOCX (python-docx ``Heading N`` styles, a page break before
each level-1 heading) and an HTML page (``<h1>``..``<h3>``, with a ``<nav>``, ``<script>`` and
``<style>`` to drop). Headings deeper than 3 are rendered at level 3. Each file is read back by
:func:`hseg.ingest.read_source` (hseg's converters) and chunked with its page map by the default
:class:`hseg.HierarchicalChunker`; every side pools its corpora in one in-memory store and asks the
questions whose references lie in the prefixes with the default search and each token budget.

Sides: ``md`` (the markdown prefix itself), ``pdf``, ``docx``, ``html`` (hseg's conversion),
``pypdfloader`` (LangChain's ``PyPDFLoader`` page Documents of the same PDF through
``HierarchicalSegmentTextSplitter.add_to_vectorstore``), ``llamaindex`` (the page Documents
LlamaIndex's ``PDFReader`` makes, one per page with ``file_path``/``file_name``/``page_label``,
through ``HierarchicalSegmentNodeParser`` and ``HierarchicalSegmentVectorStore``) and ``recursive``
(LangChain's ``RecursiveCharacterTextSplitter`` 200/0 over the PyPDFLoader pages, exact cosine, the
first misfit ends the budget, as :func:`benchmarks.pdf_pages.recursive_recalls`).

The converted texts are not the markdown's (markup gone, Latin-1 in the PDF, lines re-wrapped), so
a question's recall is the share of its reference's word 4-grams found in the text retrieved for it,
words being the lower-case ASCII letter and digit runs of the text (:func:`words`), the same
on every side, the markdown included. A reference is *mapped* when its whole word sequence occurs in
the side's text (reported per side). A segment's heading path is *right* when it equals (titles
compared as words) the path the markdown gives at the place the segment's first words come from
(:func:`heading_agreement`). Per budget: each side's mean recall, and paired mean differences with
95% bootstrap intervals (:mod:`benchmarks.harness.stats`): each converted side - md, the adapters -
pdf, and each PDF side - recursive.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import json
import re
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
from benchmarks.pdf_pages import RUNNING, outline, questions

SIDES = ("md", "pdf", "docx", "html", "pypdfloader", "llamaindex", "recursive")
#: the sides read from the PDF, compared with the peer
PDF_SIDES = ("pdf", "pypdfloader", "llamaindex")
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """The words every side is scored on: its lower-case ASCII letter and digit runs (the same in the
    Latin-1 spelling of a text: what it changes, dashes, quotes and ellipses, holds none)."""
    return _WORD.findall(text.lower())


def shingles(text: str, n: int = 4) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i:i + n]) for i in range(max(1, len(w) - n + 1))}


def recall(refs: Sequence[str], retrieved: Sequence[str]) -> float:
    want = set().union(*(shingles(r) for r in refs))
    got = set().union(*(shingles(t) for t in retrieved)) if retrieved else set()
    return len(want & got) / len(want)


def unicode_outline(markdown: str) -> list[Block]:
    """:func:`benchmarks.pdf_pages.outline` with the text kept as it is (DOCX and HTML draw any character)."""
    texts = [" ".join(p.split()) for p in markdown.split("\n\n") if p.strip()]
    return [dataclasses.replace(b, text=t.lstrip("#").strip() if b.level else t)
            for b, t in zip(outline(markdown), texts, strict=True)]


def paged(blocks: list[Block]) -> list[Block]:
    """A page break before every level-1 heading but the first block."""
    return [dataclasses.replace(b, new_page=b.level == 1 and i > 0) for i, b in enumerate(blocks)]


class Located:
    """A text's words (:func:`words`) with their character offsets, to find a word sequence and say where it lies."""

    def __init__(self, text: str) -> None:
        spans = [(m.start(), m.group()) for m in _WORD.finditer(text.lower())]
        self.starts = [s for s, _ in spans]
        self.joined = " " + " ".join(w for _, w in spans) + " "
        #: where word i begins in ``joined`` (less its leading space)
        self._index = list(np.cumsum([0] + [len(w) + 1 for _, w in spans]))

    def find(self, seq: Sequence[str], after: int = 0) -> int | None:
        """The character offset of the first occurrence of the word sequence at or after word ``after``."""
        if not seq:
            return None
        at = self.joined.find(" " + " ".join(seq) + " ", self._index[min(after, len(self._index) - 1)])
        return None if at < 0 else self.starts[bisect.bisect_left(self._index, at)]

    def word_at(self, offset: int) -> int:
        return bisect.bisect_left(self.starts, offset)


def heading_agreement(source: str, segments: Sequence[Any], probe: int = 8,
                      misses: list[dict[str, Any]] | None = None) -> tuple[int, int, int]:
    """(segments placed in the source, of them with the source's heading path, segments): each segment's
    first ``probe`` words are looked for in the source after the previous segment's place. Each placed
    segment whose path differs is appended to ``misses`` when given."""
    from hseg.text.structure import find_headings, path_at

    located = Located(source)
    heads = find_headings(source)
    placed = right = 0
    cursor = 0
    for seg in segments:
        first = words(seg.text)[:probe]
        at = located.find(first, cursor)
        if at is None:
            continue
        placed += 1
        cursor = located.word_at(at)
        want = tuple(" ".join(words(t)) for t in path_at(heads, at))
        got = tuple(" ".join(words(t)) for t in seg.heading_path)
        right += want == got
        if want != got and misses is not None:
            misses.append({"text": seg.text[:200], "path": got, "source_path": want, "at": at})
    return placed, right, len(segments)


def mapped(refs: Sequence[str], text: Located) -> int:
    return sum(text.find(words(r)) is not None for r in refs)


def pdf_page_documents(pdf: Path, kind: str) -> list[Any]:
    """The PDF's pages as the loaders hand them over: LangChain's ``PyPDFLoader`` itself, or the Documents
    LlamaIndex's ``PDFReader`` makes (pypdf's page text, ``page_label``, ``file_name``; its
    ``llama-index-readers-file`` package is not installed here, so its output is made the same way)."""
    if kind == "pypdfloader":
        from langchain_community.document_loaders import PyPDFLoader

        return list(PyPDFLoader(str(pdf)).load())
    from llama_index.core import Document as LlamaDocument
    from pypdf import PdfReader

    reader = PdfReader(pdf)
    return [LlamaDocument(text=page.extract_text(), metadata={"page_label": reader.page_labels[i],
                                                              "file_name": pdf.name, "file_path": str(pdf)})
            for i, page in enumerate(reader.pages)]


def ranked_recursive(documents: Sequence[Any], questions_: Sequence[str], encoder: Any) -> list[list[Chunk]]:
    """The peer's ranked chunks per question: ``RecursiveCharacterTextSplitter`` 200/0 over the page
    Documents (the report's separators, cl100k tokens), ranked by exact cosine."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(separators=REPORT_SEPARATORS, chunk_size=200, chunk_overlap=0,
                                              length_function=counter())
    chunks = [Chunk(str(d.metadata.get("source")), 0, len(d.page_content), d.page_content)
              for d in splitter.split_documents(documents)]
    vectors = np.asarray(encoder.encode([c.text for c in chunks]), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out = []
    for question in questions_:
        q = np.asarray(encoder.encode_query(question), dtype=np.float32).reshape(-1)
        out.append([chunks[i] for i in np.argsort(-(vectors @ (q / np.linalg.norm(q))), kind="stable")])
    return out


def paired(name: str, diff: np.ndarray) -> str:
    low, high = bootstrap_interval(diff)
    wins, losses = int((diff > 0).sum()), int((diff < 0).sum())
    return (f"{name}: {100 * diff.mean():+.2f} [{100 * low:+.2f}, {100 * high:+.2f}] points, wins {wins} / "
            f"losses {losses}, sign test p = {sign_test(wins, losses):.3f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data/textbook_qa")
    parser.add_argument("--corpora", nargs="+", default=["introduction-anthropology", "psychology-2e",
                                                          "anatomy-and-physiology-2e"])
    parser.add_argument("--chars", type=int, default=120_000)
    parser.add_argument("--budgets", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--sides", nargs="+", default=list(SIDES), choices=SIDES)
    parser.add_argument("--out", default="/tmp/hseg-converted-retrieval")
    parser.add_argument("--model", default=None, help="the sentence encoder (default: hseg's)")
    parser.add_argument("--dump", default=None, help="a JSON file for each side's retrieved texts per question "
                        "and its segments whose heading path differs from the source's (to read examples)")
    args = parser.parse_args(argv)

    import chromadb

    from hseg import HierarchicalChunker
    from hseg.encoders import CachingEncoder, SentenceTransformerEncoder
    from hseg.ingest import read_source
    from hseg.store import HierarchicalStore

    data = Path(args.data)
    if not (data / "corpora").is_dir():
        print(f"no data at {data}: give --data (textbook_qa)", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    encoder = CachingEncoder(SentenceTransformerEncoder(*([args.model] if args.model else []), device="cpu"))
    chunker = HierarchicalChunker(encoder=encoder)
    asked: list[tuple[str, list[str]]] = []
    prefixes: dict[str, str] = {}
    files: dict[tuple[str, str], Path] = {}
    for cid in args.corpora:
        corpus = (data / "corpora" / f"{cid}.md").read_text(encoding="utf-8")
        prefixes[cid] = prefix = corpus[:corpus.rfind("\n\n", 0, args.chars)]
        mine = questions(data, cid, len(prefix))
        asked += mine
        files[(cid, "pdf")] = write(out / f"{cid}.pdf", paged(outline(prefix)), bookmarks=False, running=RUNNING)
        files[(cid, "docx")] = write(out / f"{cid}.docx", paged(unicode_outline(prefix)))
        files[(cid, "html")] = write(out / f"{cid}.html", unicode_outline(prefix))
        print(f"{cid}: {len(prefix):,} characters, {len(mine)} questions")
    refs_total = sum(len(r) for _, r in asked)
    texts = [q for q, _ in asked]

    recalls: dict[tuple[str, int], np.ndarray] = {}
    dump: dict[str, Any] = {"questions": [{"question": q, "refs": r} for q, r in asked], "sides": {}}
    lines = ["| side | conversion s | references mapped | segments placed | heading path = source's |",
             "|---|---:|---:|---:|---:|"]
    for side in args.sides:
        store = HierarchicalStore(f"conv-{side}", client=chromadb.EphemeralClient(), encoder=encoder)
        began = time.perf_counter()
        seconds = 0.0
        side_texts: list[str] = []
        placed = right = segs = 0
        misses: list[dict[str, Any]] = []
        retrieved: dict[int, list[list[str]]] = {}
        if side in ("md", "pdf", "docx", "html"):
            for cid, prefix in prefixes.items():
                t0 = time.perf_counter()
                doc = read_source(files[(cid, side)]) if side != "md" else None
                seconds += time.perf_counter() - t0
                text, pages = (doc.text, doc.pages) if doc else (prefix, None)
                side_texts.append(text)
                chunking = chunker.chunk(text, cid, source=f"{cid}.{side}", source_map=pages)
                store.add(chunking)
                p, r, n = heading_agreement(prefix, chunking.segments, misses=misses)
                placed, right, segs = placed + p, right + r, segs + n
        elif side in ("pypdfloader", "llamaindex"):
            from hseg.chunking.schema import heading_path
            docs = [d for cid in prefixes for d in pdf_page_documents(files[(cid, "pdf")], side)]
            if side == "pypdfloader":
                from langchain_hseg import HierarchicalSegmentTextSplitter

                HierarchicalSegmentTextSplitter(encoder=encoder).add_to_vectorstore(store, docs)
                side_texts = [d.page_content for d in docs]
            else:
                from llama_index_hseg import HierarchicalSegmentNodeParser, HierarchicalSegmentVectorStore

                nodes = HierarchicalSegmentNodeParser.from_defaults(encoder=encoder).get_nodes_from_documents(docs)
                HierarchicalSegmentVectorStore(store).add(nodes)
                side_texts = [d.text for d in docs]
            for cid, prefix in prefixes.items():  # the segments hseg stored from each PDF
                src = str(files[(cid, "pdf")])
                metas = [(m, t) for m, t in _segments(store) if src in (m.get("source"), m.get("file_path"))]
                segs_ = [_Seg(t, heading_path(m)) for m, t in metas]
                p, r, n = heading_agreement(prefix, segs_, misses=misses)
                placed, right, segs = placed + p, right + r, segs + n
        store.sync_unit_index()
        if side == "recursive":
            docs = [d for cid in prefixes for d in pdf_page_documents(files[(cid, "pdf")], "pypdfloader")]
            side_texts = [d.page_content for d in docs]
            ranked = ranked_recursive(docs, texts, encoder)
            count = counter()
            sizes = {c.text: count(c.text) for r in ranked for c in r[:100]}
            for b in args.budgets:
                retrieved[b] = [[c.text for c in fill_budget(r[:100], b, [sizes[c.text] for c in r[:100]])]
                                for r in ranked]
        else:
            for b in args.budgets:
                retrieved[b] = [[h.text for h in store.search(q, budget_tokens=b)] for q in texts]
        for b in args.budgets:
            recalls[(side, b)] = np.asarray([recall(refs, got) for (_, refs), got in zip(asked, retrieved[b])])
        dump["sides"][side] = {"retrieved": {str(b): v for b, v in retrieved.items()}, "heading_misses": misses}
        located = Located("\n\n".join(side_texts))
        n_mapped = sum(mapped(refs, located) for _, refs in asked)
        share = f"{right}/{placed} ({right / placed:.1%})" if placed else "-"
        lines.append(f"| {side} | {seconds:.2f} | {n_mapped}/{refs_total} | {placed}/{segs} | {share} |")
        print(f"  {side}: done in {time.perf_counter() - began:.0f} s", flush=True)

    if args.dump:
        Path(args.dump).write_text(json.dumps(dump, indent=1), encoding="utf-8")
    print(f"\n{len(asked)} questions, {refs_total} references; conversion s: hseg's converters over all files")
    print("\n".join(lines))
    print("\n| budget | " + " | ".join(args.sides) + " |")
    print("|---|" + "---:|" * len(args.sides))
    for b in args.budgets:
        print(f"| {b} | " + " | ".join(f"{100 * recalls[(s, b)].mean():.1f}" for s in args.sides) + " |")
    pairs = [(s, "md") for s in ("pdf", "docx", "html", "pypdfloader", "llamaindex")]
    pairs += [(s, "pdf") for s in ("pypdfloader", "llamaindex")]
    pairs += [(s, "recursive") for s in PDF_SIDES]
    for a, b_ in pairs:
        if a in args.sides and b_ in args.sides:
            for b in args.budgets:
                print(paired(f"{a} - {b_} at {b}", recalls[(a, b)] - recalls[(b_, b)]))
    return 0


@dataclasses.dataclass(frozen=True)
class _Seg:
    text: str
    heading_path: tuple[str, ...]


def _segments(store: Any) -> list[tuple[dict[str, Any], str]]:
    """(metadata, text) of the store's segment records, in document order."""
    from hseg.chunking.schema import LEVEL_KEY, START_KEY

    got = store.collection.get(where={LEVEL_KEY: "segment"}, include=["metadatas", "documents"])
    rows = list(zip(got["metadatas"], got["documents"]))
    return sorted(rows, key=lambda r: (str(r[0].get("hseg_doc_id")), int(r[0][START_KEY])))


if __name__ == "__main__":
    sys.exit(main())
