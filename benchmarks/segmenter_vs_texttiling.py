"""Supervised segmenters against TextTiling tuned on each evaluation set itself, per domain.

    python -m benchmarks.segmenter_vs_texttiling [--segmenter bilstm PATH.pt ...] [--data DIR]
        [--set NAME=FOLDER ...] [--limit N] [--true-count]

For each set (default: ``wiki_dev``, ``choi/1/3-11`` and the OpenStax books held out of training,
pooled; ``--set`` adds or replaces one), the documents are embedded once (hseg's disk cache) and
scored with mean per-document Pk / WindowDiff (segeval's k):

- every ``--segmenter`` (``bilstm`` is the shipped model; a path is a ``hseg train-segmenter`` file);
- TextTiling with its defaults;
- TextTiling **tuned on that set**: the best Pk over window 2..16, threshold_std -0.5..3 and
  min_sentences 2..16 (an optimistic baseline: it sees the answers of the set it is scored on).

With ``--true-count`` each segmenter is also scored when told how many boundaries each document
has (its K strongest local maxima of gap scores, K from the reference): a ceiling for any decoder
that estimates the count, which separates "the scores rank gaps badly" from "the threshold is off".

Issue 14 asks the segmenter to beat the tuned TextTiling by at least 0.03 Pk on the OpenStax books
and ``wiki_dev``. Prints one markdown table.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: the OpenStax books kept out of the shipped model's training (hseg/models/README.md)
OPENSTAX_DEV = ("business-ethics", "introduction-political-science", "chemistry-atoms-first-2e")

WINDOWS = range(2, 17)
THRESHOLDS = (-0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)
MIN_SENTENCES = (2, 3, 4, 6, 8, 10, 12, 16)


def default_sets(data: Path) -> dict[str, list[Path]]:
    return {"wiki_dev": [data / "wiki_dev"], "choi/1/3-11": [data / "choi" / "1" / "3-11"],
            "openstax dev books": [data / "train_openstax" / book for book in OPENSTAX_DEV]}


def tuned_texttiling(docs: list, embeddings: list) -> tuple[dict, tuple[int, float, int]]:
    """The best TextTiling on these documents (by mean Pk) and its parameters."""
    from hseg.segmentation.segmenters import TextTilingSegmenter
    from hseg.segmentation.training import evaluate_segmenter

    gaps: dict[tuple[int, int], object] = {}  # (document, window) -> gap scores: the costly part

    class Memo(TextTilingSegmenter):
        def gap_scores(self, sentences, embeddings):
            key = (id(embeddings), self.window)
            if key not in gaps:
                gaps[key] = super().gap_scores(sentences, embeddings)
            return gaps[key]

    best: tuple[dict, tuple[int, float, int]] | None = None
    for window, std, least in itertools.product(WINDOWS, THRESHOLDS, MIN_SENTENCES):
        score = evaluate_segmenter(Memo(window=window, threshold_std=std, min_sentences=least), docs, embeddings)
        if best is None or score["pk"] < best[0]["pk"]:
            best = (score, (window, std, least))
    assert best is not None
    return best


def strongest_peaks(scores: np.ndarray, count: int) -> list[int]:
    """The ``count`` highest local maxima of ``scores`` (gap indices, ascending).

    Example:
        >>> strongest_peaks(np.array([0.1, 0.9, 0.2, 0.5, 0.4, 0.8]), 2)
        [1, 5]
    """
    padded = np.concatenate([[-np.inf], scores, [-np.inf]])
    peaks = np.flatnonzero((scores >= padded[:-2]) & (scores > padded[2:]))
    return sorted(int(g) for g in peaks[np.argsort(-scores[peaks], kind="stable")][:count])


def true_count_pk(segmenter, docs: list, embeddings: list) -> float:
    """Mean Pk of ``segmenter``'s gap scores decoded with each document's true boundary count."""
    from hseg.segmentation.metrics import ends_to_masses, pk

    scores = []
    for d, e in zip(docs, embeddings):
        n = len(d.sentences)
        ends = strongest_peaks(np.asarray(segmenter.gap_scores(d.sentences, e), dtype=np.float64), len(d.masses) - 1)
        scores.append(pk(d.masses, ends_to_masses(ends + [n - 1], n)))
    return float(np.mean(scores))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT / ".." / "shared" / "data" / "segmentation")
    ap.add_argument("--segmenter", nargs="+", default=["bilstm"], help="bilstm and/or .pt paths")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=FOLDER[,FOLDER]",
                    help="an evaluation set (repeatable); replaces a default set of the same name")
    ap.add_argument("--only", nargs="+", default=None, help="evaluate these set names only")
    ap.add_argument("--limit", type=int, default=None, help="first N documents of each folder")
    ap.add_argument("--true-count", action="store_true",
                    help="also score each segmenter given every document's true boundary count")
    ap.add_argument("--cache-dir", type=Path, default=None, help="embedding cache (default ~/.cache/hseg/embeddings)")
    args = ap.parse_args(argv)

    from hseg.encoders import as_encoder
    from hseg.segmentation.segmenters import TextTilingSegmenter, get_segmenter
    from hseg.segmentation.training import embed_documents, evaluate_segmenter
    from hseg.segmentation.wiki727k import read_wiki727k

    sets = default_sets(args.data)
    for spec in args.set:
        name, _, folders = spec.partition("=")
        if not folders:
            ap.error(f"--set: expected NAME=FOLDER[,FOLDER], got {spec!r}")
        sets[name] = [Path(f) for f in folders.split(",")]
    if args.only:
        sets = {name: sets[name] for name in args.only}
    encoder = as_encoder(None, backend="onnx", device="cpu")
    segmenters = {s: get_segmenter(s, encoder_name=encoder.name) for s in args.segmenter}
    head = ["set", "documents"] + [f"{s} Pk / WD" for s in segmenters] + \
        ["TextTiling default Pk / WD", "TextTiling tuned Pk / WD", "tuned (window/std/min)"] + \
        [f"{s} - tuned Pk" for s in segmenters] + \
        ([f"{s} Pk, true count" for s in segmenters] + ["TextTiling tuned Pk, true count"]) * args.true_count
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head), flush=True)
    for name, folders in sets.items():
        docs = [d for f in folders for d in read_wiki727k(f, limit=args.limit)]
        vectors = embed_documents(docs, encoder, cache_dir=args.cache_dir, quiet=True)
        scores = {s: evaluate_segmenter(seg, docs, vectors) for s, seg in segmenters.items()}
        default = evaluate_segmenter(TextTilingSegmenter(), docs, vectors)
        tuned, params = tuned_texttiling(docs, vectors)
        cells = [name, str(len(docs))] + [f"{r['pk']:.4f} / {r['windowdiff']:.4f}" for r in scores.values()] + \
            [f"{default['pk']:.4f} / {default['windowdiff']:.4f}", f"{tuned['pk']:.4f} / {tuned['windowdiff']:.4f}",
             "{} / {:g} / {}".format(*params)] + [f"{r['pk'] - tuned['pk']:+.4f}" for r in scores.values()]
        if args.true_count:
            window, std, least = params
            counted = [*segmenters.values(), TextTilingSegmenter(window=window, threshold_std=std, min_sentences=least)]
            cells += [f"{true_count_pk(seg, docs, vectors):.4f}" for seg in counted]
        print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
