"""The BiLSTM segmenter on vectors of each encoder backend: does ONNX segment like torch?

    python benchmarks/backend_segmentation.py [--data ../shared/data/segmentation] [--limit N]

For each development set (``wiki_dev``, ``choi/1/3-11`` and the three OpenStax books held out of
training, pooled), the documents are embedded by the torch and by the ONNX backend (each through
its own disk cache, see :func:`hseg.segmentation.training.embed_documents`) and the shipped BiLSTM segments them.
Prints mean Pk and WindowDiff per backend, the difference, the worst sentence-vector cosine
between the backends, and the share of documents whose boundaries differ at all. Issue 13's bound:
|ΔPk| ≤ 0.005 on every set.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: the OpenStax books kept out of the shipped model's training (hseg/models/README.md)
OPENSTAX_DEV = ("business-ethics", "introduction-political-science", "chemistry-atoms-first-2e")


def dev_sets(data: Path, limit: int | None) -> dict[str, list]:
    from hseg.segmentation.wiki727k import read_wiki727k

    sets = {"wiki_dev": read_wiki727k(data / "wiki_dev", limit=limit),
            "choi/1/3-11": read_wiki727k(data / "choi" / "1" / "3-11", limit=limit)}
    books = [d for book in OPENSTAX_DEV for d in read_wiki727k(data / "train_openstax" / book, limit=limit)]
    sets["openstax dev books"] = books
    return sets


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT / ".." / "shared" / "data" / "segmentation")
    ap.add_argument("--limit", type=int, default=None, help="first N documents of each folder")
    ap.add_argument("--cache-dir", type=Path, default=None, help="embedding cache (default ~/.cache/hseg/embeddings)")
    args = ap.parse_args(argv)

    from hseg.encoders import BACKENDS, as_encoder
    from hseg.segmentation.segmenters import get_segmenter
    from hseg.segmentation.training import embed_documents, evaluate_segmenter

    encoders = {b: as_encoder(None, backend=b, device="cpu") for b in BACKENDS}
    segmenter = get_segmenter("bilstm", encoder_name=encoders["torch"].name)
    print("| set | documents | sentences | torch Pk / WD | onnx Pk / WD | ΔPk | ΔWD | min cosine | docs differing |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for name, docs in dev_sets(args.data, args.limit).items():
        vectors = {b: embed_documents(docs, enc, cache_dir=args.cache_dir, quiet=True) for b, enc in encoders.items()}
        scores = {b: evaluate_segmenter(segmenter, docs, vectors[b]) for b in BACKENDS}
        cosine = min(float(np.min(np.sum(a.astype(np.float32) * b.astype(np.float32), axis=1)))
                     for a, b in zip(vectors["torch"], vectors["onnx"]))
        differing = sum(segmenter.boundaries(d.sentences, a) != segmenter.boundaries(d.sentences, b)
                        for d, a, b in zip(docs, vectors["torch"], vectors["onnx"]))
        t, o = scores["torch"], scores["onnx"]
        d_pk, d_wd = o["pk"] - t["pk"], o["windowdiff"] - t["windowdiff"]
        worst = max(worst, abs(d_pk))
        print(f"| {name} | {len(docs)} | {sum(len(d.sentences) for d in docs):,} | {t['pk']:.4f} / "
              f"{t['windowdiff']:.4f} | {o['pk']:.4f} / {o['windowdiff']:.4f} | {d_pk:+.4f} | {d_wd:+.4f} | "
              f"{cosine:.5f} | {differing} |", flush=True)
    print(f"\nlargest |ΔPk|: {worst:.4f} (bound 0.005); vectors are cached as float16, so cosines include "
          "that rounding")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
