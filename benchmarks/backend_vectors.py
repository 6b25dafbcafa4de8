"""Do the encoder backends give the same vectors, and how fast? One run, every backend, the same sentences.

    python benchmarks/backend_vectors.py [--data ../shared/data/chroma_eval] [--int8] [--bf16] [--one-thread]
        [--repeat 2]

Splits the chroma_eval corpora into sentences (hseg's splitter, as ingestion does) and encodes them
all with the torch backend, the ONNX backend (and its int8 variant with ``--int8``, which hseg
does not offer: benchmarks/int8.py says why). Prints the worst and mean cosine of each against
torch (issue 13: ONNX fp32 ≥ 0.9999 on every sentence) and the encode time of each, fastest of
``--repeat`` interleaved rounds, as a ratio to torch.

What else could be faster than fp32, measured and not offered: ``--bf16`` adds the torch model
under ``torch.autocast("cpu", torch.bfloat16)``; ``--one-thread`` adds the ONNX session with one
intra-op thread, to show what the second core already gives.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def sentences(data: str) -> list[str]:
    from evaluation import load_eval

    from hseg.text.sentences import split_sentences

    corpora, _ = load_eval(data)
    return [text[s.start:s.end] for text in corpora.values() for s in split_sentences(text)]


class Bf16Encoder:
    """The torch encoder with its forward passes under bfloat16 autocast (not an hseg backend)."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder

    def encode(self, texts: list[str]) -> np.ndarray:
        import torch

        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.encoder.encode(texts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT / ".." / "shared" / "data" / "chroma_eval"))
    ap.add_argument("--int8", action="store_true", help="also the onnx backend's int8 variant")
    ap.add_argument("--bf16", action="store_true", help="also the torch model under bfloat16 autocast")
    ap.add_argument("--one-thread", action="store_true", help="also the onnx backend with one intra-op thread")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)

    from hseg.encoders import OnnxEncoder, SentenceTransformerEncoder

    texts = sentences(args.data)
    encoders: dict[str, Any] = {"torch": SentenceTransformerEncoder(device="cpu"), "onnx": OnnxEncoder(device="cpu")}
    if args.int8:
        from int8 import int8_encoder

        encoders["onnx int8"] = int8_encoder()
    if args.bf16:
        encoders["torch bf16 autocast"] = Bf16Encoder(encoders["torch"])
    if args.one_thread:
        encoders["onnx, 1 thread"] = OnnxEncoder(device="cpu", threads=1)
    for enc in encoders.values():
        enc.encode(["warm up"] * 8)
    best: dict[str, float] = {}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(max(1, args.repeat)):
        for name, enc in encoders.items():
            t0 = time.perf_counter()
            vectors[name] = enc.encode(texts)
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - t0)
    tokens = sum(encoders["onnx"].count_tokens(t) for t in texts)
    print(f"{len(texts):,} sentences of {args.data}, {tokens:,} model tokens; fastest of {args.repeat} rounds\n")
    print("| backend | seconds | sentences/s | speed vs torch | min cosine vs torch | mean cosine |")
    print("|---|---|---|---|---|---|")
    for name in encoders:
        cos = np.sum(vectors[name] * vectors["torch"], axis=1)
        print(f"| {name} | {best[name]:.1f} | {len(texts) / best[name]:,.0f} | {best['torch'] / best[name]:.2f}x "
              f"| {cos.min():.6f} | {cos.mean():.6f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
