"""End-to-end ingestion speed: chunk + embed + write to Chroma, hseg against its peers.

    python benchmarks/ingest_speed.py [--data ../shared/data/chroma_eval] [--methods NAME...]

Every method ingests the same corpora with the same encoder (all-MiniLM-L6-v2, no cache shared
between methods) into its own in-memory Chroma collection. The floor is
RecursiveCharacterTextSplitter 200/0 + embedding: every token encoded once. Prints seconds,
tokens/s and the ratio to the floor. The model is loaded and warmed up before timing; with
``--repeat N`` the methods run in N interleaved rounds and the fastest round of each counts, so
load from other processes on a shared machine hits every method alike.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from baselines import BASELINES, counter  # noqa: E402
from evaluation import load_eval  # noqa: E402

FLOOR = "lc_recursive_200_0"
PEERS = [FLOOR, "lc_token_250_125", "lc_semantic", "li_sentence_512", "li_semantic"]


def _collection() -> Any:
    import chromadb

    client = chromadb.EphemeralClient()
    return client.create_collection(f"speed-{uuid.uuid4().hex[:10]}", configuration={"hnsw": {"space": "cosine"}},
                                    embedding_function=None)


def ingest_peer(name: str, corpora: dict[str, str], encoder: Any) -> int:
    """Chunk with a peer splitter, embed every chunk, write them (batched) to Chroma."""
    chunks = [c for cid, text in corpora.items() for c in BASELINES[name](cid, text, encoder)]
    vectors = encoder.encode([c.text for c in chunks])
    col = _collection()
    step = col._client.get_max_batch_size() if hasattr(col, "_client") else 5000
    for i in range(0, len(chunks), step):
        part = chunks[i : i + step]
        col.add(ids=[f"{c.corpus_id}:{c.start}:{c.end}" for c in part], embeddings=vectors[i : i + step],
                documents=[c.text for c in part], metadatas=[{"source": c.corpus_id, "start": c.start} for c in part])
    return col.count()


def ingest_hseg(corpora: dict[str, str], encoder: Any, **chunker_kwargs: Any) -> int:
    import chromadb

    from hseg.chunker import HierarchicalChunker
    from hseg.store import HierarchicalStore

    chunker = HierarchicalChunker(encoder=encoder, **chunker_kwargs)
    chunkings = chunker.chunk_many(list(corpora.values()), list(corpora.keys()))
    store = HierarchicalStore(f"speed-{uuid.uuid4().hex[:10]}", client=chromadb.EphemeralClient(), encoder=encoder)
    store.add(chunkings, [{"source": c} for c in corpora])
    return store.count()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data/chroma_eval")
    p.add_argument("--methods", nargs="+", default=None, help=f"default: hseg, hseg_encode and {PEERS}")
    p.add_argument("--corpora", nargs="+", default=None)
    p.add_argument("--repeat", type=int, default=1, help="interleaved rounds; the fastest of each method counts")
    args = p.parse_args(argv)
    corpora, _ = load_eval(args.data)
    if args.corpora:
        corpora = {c: corpora[c] for c in args.corpora}
    methods = args.methods or ["hseg", "hseg_encode", *PEERS]
    if FLOOR not in methods:
        methods.insert(0, FLOOR)

    from hseg.encoders import SentenceTransformerEncoder

    encoder = SentenceTransformerEncoder(device="cpu")
    encoder.encode(["warm up the model"] * 8)
    tokens = sum(counter()(t) for t in corpora.values())
    best: dict[str, tuple[float, int]] = {}
    for _ in range(max(1, args.repeat)):
        for name in methods:
            t0 = time.perf_counter()
            if name == "hseg":
                records = ingest_hseg(corpora, encoder, target_tokens=512, cache=False)
            elif name == "hseg_encode":
                records = ingest_hseg(corpora, encoder, target_tokens=512, cache=False, segment_vector="encode")
            else:
                records = ingest_peer(name, corpora, encoder)
            sec = time.perf_counter() - t0
            if name not in best or sec < best[name][0]:
                best[name] = (sec, records)
            print(f"[{name}] {sec:.1f}s", file=sys.stderr, flush=True)
    rows = [(name, *best[name]) for name in methods]
    floor = next(sec for name, sec, _ in rows if name == FLOOR)
    print(f"corpora: {', '.join(corpora)}; {tokens:,} cl100k tokens\n")
    print("| method | seconds | tokens/s | × floor | records |")
    print("|---|---|---|---|---|")
    for name, sec, records in rows:
        print(f"| {name} | {sec:.1f} | {tokens / sec:,.0f} | {sec / floor:.2f} | {records} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
