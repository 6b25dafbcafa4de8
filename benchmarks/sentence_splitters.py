"""Compare sentence splitters: boundary F1 on gold sentence data, throughput on the Chroma corpora.

Usage (from the repository root)::

    python benchmarks/sentence_splitters.py [--data ../shared/data] [--openstax-docs 300]

Accuracy: each document of the Wiki-727K-format folders (``segmentation/wiki_dev``, seeded
samples of ``segmentation/train_openstax`` and ``train_synth``, ``segmentation/choi``) is re-joined with single
spaces; a boundary is the character offset where a gold sentence (other than a document's
first) starts. A splitter's boundaries are the offsets where its sentences start, leading
whitespace skipped. Precision/recall/F1 are micro-averaged over the folder's documents.
Note: the wiki, OpenStax and synth gold sentences were themselves produced with pysbd 0.3.4 (see
the data README), so on those folders F1 measures *agreement with pysbd*; Choi (Brown corpus
sentences, tokenised) is the only gold that is independent of every candidate.

Speed: MB/s (UTF-8 bytes of input per second of wall time) on the three markdown corpora of
``chroma_eval/corpora`` together, single thread, best of ``--rounds`` round-robin repetitions
(round-robin so that load from other processes affects all candidates alike).

Candidates that are not installed are skipped (they are not dependencies of hseg).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

SpanList = list[tuple[int, int]]
Splitter = Callable[[str], SpanList]

_HEADER = re.compile(r"^========,\d+,.*\.$")


# --------------------------------------------------------------------------- data


def read_sentences(path: Path) -> list[str]:
    """Gold sentences of one Wiki-727K-format document (section headers dropped)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not _HEADER.match(line):
            out.append(line)
    return out


def gold_doc(sentences: list[str]) -> tuple[str, set[int]]:
    """Join sentences with single spaces; return the text and the gold boundary offsets."""
    starts, pos = [], 0
    for s in sentences:
        starts.append(pos)
        pos += len(s) + 1
    return " ".join(sentences), set(starts[1:])


def load_folder(folder: Path, limit: int | None, seed: int = 0) -> list[tuple[str, set[int]]]:
    files = sorted(folder.rglob("*.txt"))
    if limit is not None and len(files) > limit:
        files = sorted(random.Random(seed).sample(files, limit))
    docs = []
    for f in files:
        sents = read_sentences(f)
        if len(sents) >= 2:
            docs.append(gold_doc(sents))
    return docs


# --------------------------------------------------------------------------- metrics


def predicted_boundaries(text: str, spans: Iterable[tuple[int, int]]) -> set[int]:
    starts = set()
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        if a < b:
            starts.add(a)
    # The document's first sentence start is not a boundary.
    first = len(text) - len(text.lstrip())
    starts.discard(first)
    return starts


def boundary_prf(split: Splitter, docs: list[tuple[str, set[int]]]) -> tuple[float, float, float]:
    tp = fp = fn = 0
    for text, gold in docs:
        pred = predicted_boundaries(text, split(text))
        tp += len(pred & gold)
        fp += len(pred - gold)
        fn += len(gold - pred)
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def throughputs(splitters: dict[str, Splitter], texts: list[str], rounds: int = 5) -> dict[str, float]:
    """Best-of-``rounds`` MB/s per splitter, measured round-robin so that load from other
    processes on the machine affects all candidates alike."""
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    best = {name: float("inf") for name in splitters}
    for _ in range(rounds):
        for name, split in splitters.items():
            t0 = time.perf_counter()
            for t in texts:
                split(t)
            best[name] = min(best[name], time.perf_counter() - t0)
    return {name: nbytes / dt / 1e6 for name, dt in best.items()}


# --------------------------------------------------------------------------- candidates


def make_candidates() -> dict[str, Splitter]:
    cands: dict[str, Splitter] = {}

    try:
        from hseg.text.sentences import _regex_sentence_spans, split_sentences

        cands["hseg rules alone (one line)"] = lambda t: _regex_sentence_spans(t, 0, len(t))
        cands["hseg split_sentences (rules + markdown/lines)"] = lambda t: [
            (s.start, s.end) for s in split_sentences(t)
        ]
    except ImportError as exc:  # the module under development may not exist yet
        print(f"# skipping hseg: {exc}", file=sys.stderr)

    try:
        import blingfire

        def bf(t: str) -> SpanList:
            if not t.strip():
                return []
            return list(blingfire.text_to_sentences_and_offsets(t)[1])

        cands["blingfire"] = bf
    except (ImportError, OSError):  # OSError: its native library does not load on this platform
        print("# skipping blingfire (not installed or not loadable)", file=sys.stderr)

    try:
        import sentencex

        def sx(t: str) -> SpanList:
            return [(d["start_index"], d["end_index"]) for d in sentencex.get_sentence_boundaries("en", t)]

        cands["sentencex"] = sx
    except ImportError:
        print("# skipping sentencex (not installed)", file=sys.stderr)

    try:
        from nltk.tokenize.punkt import PunktSentenceTokenizer

        punkt = PunktSentenceTokenizer()  # untrained: no punkt model data can be downloaded here
        cands["nltk punkt (untrained)"] = lambda t: list(punkt.span_tokenize(t))
    except ImportError:
        print("# skipping nltk (not installed)", file=sys.stderr)

    try:
        from syntok import segmenter

        def sy(t: str) -> SpanList:
            out = []
            for para in segmenter.analyze(t):
                for sent in para:
                    out.append((sent[0].offset, sent[-1].offset + len(sent[-1].value)))
            return out

        cands["syntok"] = sy
    except ImportError:
        print("# skipping syntok (not installed)", file=sys.stderr)

    try:
        import pysbd

        seg = pysbd.Segmenter(language="en", clean=False, char_span=True)
        cands["pysbd"] = lambda t: [(s.start, s.end) for s in seg.segment(t)]
    except ImportError:
        print("# skipping pysbd (not installed)", file=sys.stderr)

    return cands


# --------------------------------------------------------------------------- newline policy


def hard_wrap(text: str, width: int = 80) -> str:
    """Replace the space before any word that would pass ``width`` by a newline (same length)."""
    chars, line_len = list(text), 0
    for i, ch in enumerate(chars):
        if ch == " ":
            nxt = text.find(" ", i + 1)
            word_len = (len(text) if nxt < 0 else nxt) - i - 1
            if line_len + 1 + word_len > width:
                chars[i], line_len = "\n", 0
                continue
        line_len += 1
    return "".join(chars)


def newline_policy_rows(datasets: dict[str, list[tuple[str, set[int]]]]) -> list[str]:
    """F1 of the line-break policies on sentence-per-line text and on text hard-wrapped at 80."""
    from hseg.text.sentences import _split

    rows = []
    for policy in ("always", "continuation", "never", "auto"):
        split = lambda t, p=policy: [(s.start, s.end) for s in _split(t, None, None, newline_policy=p)]  # noqa: E731
        cells = []
        for docs in datasets.values():
            per_line = [(_join_lines(t, g), g) for t, g in docs]
            wrapped = [(hard_wrap(t), g) for t, g in docs]
            cells.append(f"{100 * boundary_prf(split, per_line)[2]:.1f} / {100 * boundary_prf(split, wrapped)[2]:.1f}")
        rows.append(f"| {policy} | " + " | ".join(cells) + " |")
    return rows


def _join_lines(text: str, gold: set[int]) -> str:
    """The same document with one sentence per line (the space before each gold start -> newline)."""
    chars = list(text)
    for b in gold:
        chars[b - 1] = "\n"
    return "".join(chars)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=REPO_ROOT.parent / "shared" / "data",
                    help="shared data folder (default: ../shared/data relative to the repository root)")
    ap.add_argument("--openstax-docs", type=int, default=300, help="seeded sample size of train_openstax")
    ap.add_argument("--synth-docs", type=int, default=400, help="seeded sample size of train_synth")
    ap.add_argument("--only", nargs="*", help="substrings of candidate names to run")
    ap.add_argument("--rounds", type=int, default=5, help="round-robin timing rounds (best of)")
    ap.add_argument("--no-newlines", dest="newlines", action="store_false",
                    help="skip the line-break policy table")
    args = ap.parse_args(argv)

    seg = args.data / "segmentation"
    datasets = {
        "wiki_dev": load_folder(seg / "wiki_dev", None),
        "openstax": load_folder(seg / "train_openstax", args.openstax_docs),
        "choi": load_folder(seg / "choi", None),
        "synth": load_folder(seg / "train_synth", args.synth_docs, seed=5),
    }
    corpora = [p.read_text(encoding="utf-8") for p in sorted((args.data / "chroma_eval" / "corpora").glob("*.md"))]
    for name, docs in datasets.items():
        print(f"# {name}: {len(docs)} docs, {sum(len(g) for _, g in docs)} gold boundaries", file=sys.stderr)

    cands = make_candidates()
    if args.only:
        cands = {k: v for k, v in cands.items() if any(o in k for o in args.only)}

    header = "| splitter | " + " | ".join(f"F1 {d}" for d in datasets) + " | MB/s (chroma corpora) |"
    print(header)
    print("|" + "---|" * (len(datasets) + 2))
    speed = throughputs(cands, corpora, rounds=args.rounds)
    for name, split in cands.items():
        cells = []
        for docs in datasets.values():
            p, r, f = boundary_prf(split, docs)
            cells.append(f"{100 * f:.1f} (P {100 * p:.1f} / R {100 * r:.1f})")
        print(f"| {name} | " + " | ".join(cells) + f" | {speed[name]:.2f} |", flush=True)

    if args.newlines:
        print("\nLine-break policy inside paragraphs, F1 one-sentence-per-line / hard-wrapped at 80 columns:\n")
        print("| policy | " + " | ".join(datasets) + " |")
        print("|" + "---|" * (len(datasets) + 1))
        for row in newline_policy_rows(datasets):
            print(row, flush=True)


if __name__ == "__main__":
    main()
