"""End-to-end ingestion speed: chunk + embed + write to Chroma, hseg against its peers, per encoder backend.

    python -m benchmarks.ingest_speed [--data ../shared/data/chroma_eval] [--methods NAME...]
        [--backends onnx torch] [--repeat N]

Every method ingests the same corpora with the same encoder (all-MiniLM-L6-v2, no cache shared
between methods) into its own in-memory Chroma collection, once per backend (``onnx``: ONNX
Runtime, ``torch``: sentence-transformers). The floor is RecursiveCharacterTextSplitter 200/0 +
embedding on torch: every token encoded once by the PyTorch forward pass every peer pays. Prints
seconds, tokens/s, the ratio to the floor and the peak RSS.

``hseg_encode`` is ``hseg`` with ``segment_vector="encode"`` (each segment's text encoded again
instead of the mean of its sentence vectors); ``hseg_ctx`` and ``hseg_ctxenc`` add the heading path
to a segment's vector (``segment_context="heading"``: one more sentence of the mean, or encoded in
front of the text), what a contextual vector costs on text with headings (``--data
../shared/data/textbook_qa``).

Each (method, backend) runs in its own child process, so its peak RSS is its own; the models are
loaded (the encoder warmed up) there before the clock starts: the encoder for every method, and
hseg's segmenter, whose load is printed apart. With ``--repeat N`` everything runs in N
interleaved rounds and the fastest round of each counts, so load from other processes on a
shared machine hits every method alike.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import uuid
from typing import Any

from .harness.baselines import BASELINES, counter
from .harness.evaluation import load_eval

FLOOR = "lc_recursive_200_0"
PEERS = [FLOOR, "lc_token_250_125", "lc_semantic", "li_sentence_512", "li_semantic"]


def _collection() -> tuple[Any, int]:
    """A new in-memory collection and the most records its client takes in one call."""
    import chromadb

    client = chromadb.EphemeralClient()
    return client.create_collection(f"speed-{uuid.uuid4().hex[:10]}", configuration={"hnsw": {"space": "cosine"}},
                                    embedding_function=None), client.get_max_batch_size()


def ingest_peer(name: str, corpora: dict[str, str], encoder: Any) -> int:
    """Chunk with a peer splitter, embed every chunk, write them (batched) to Chroma."""
    chunks = [c for cid, text in corpora.items() for c in BASELINES[name](cid, text, encoder)]
    vectors = encoder.encode([c.text for c in chunks])
    col, step = _collection()
    for i in range(0, len(chunks), step):
        part = chunks[i : i + step]
        col.add(ids=[f"{c.corpus_id}:{c.start}:{c.end}" for c in part], embeddings=vectors[i : i + step],
                documents=[c.text for c in part], metadatas=[{"source": c.corpus_id, "start": c.start} for c in part])
    return col.count()


def ingest_hseg(corpora: dict[str, str], chunker: Any) -> int:
    import chromadb

    from hseg.store import HierarchicalStore

    chunkings = chunker.chunk_many(list(corpora.values()), list(corpora.keys()))
    store = HierarchicalStore(f"speed-{uuid.uuid4().hex[:10]}", client=chromadb.EphemeralClient(),
                              encoder=chunker.encoder)
    store.add(chunkings, [{"source": c} for c in corpora])
    return store.count()


#: hseg's methods here: name -> chunker options beside the defaults
HSEG_METHODS: dict[str, dict[str, Any]] = {
    "hseg": {},
    "hseg_encode": {"segment_vector": "encode"},
    "hseg_ctx": {"segment_context": "heading"},
    "hseg_ctxenc": {"segment_context": "heading", "segment_vector": "encode"},
}


def measure(name: str, backend: str, data: str, corpora_names: list[str] | None) -> dict[str, Any]:
    """One ingestion, timed after the models are loaded and warm (the encoder, and for hseg its
    segmenter, whose load is reported apart as ``load_s``); run in a child process."""
    from hseg.encoders import as_encoder

    corpora, _ = load_eval(data)
    if corpora_names:
        corpora = {c: corpora[c] for c in corpora_names}
    encoder = as_encoder(None, backend=backend, device="cpu")
    encoder.encode(["warm up the model"] * 8)
    load = 0.0
    if name in HSEG_METHODS:
        from hseg.chunking.chunker import HierarchicalChunker

        t0 = time.perf_counter()
        chunker = HierarchicalChunker(encoder=encoder, target_tokens=512, cache=False, **HSEG_METHODS[name])
        load = time.perf_counter() - t0
    t0 = time.perf_counter()
    records = ingest_hseg(corpora, chunker) if name in HSEG_METHODS else ingest_peer(name, corpora, encoder)
    sec = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": sec, "records": records, "rss_mb": rss, "load_s": load}


def _child(name: str, backend: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.ingest_speed", "--one", name, "--backends", backend, "--data", args.data]
    if args.corpora:
        cmd += ["--corpora", *args.corpora]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data/chroma_eval")
    p.add_argument("--methods", nargs="+", default=None, help=f"default: hseg, hseg_encode and {PEERS}")
    p.add_argument("--backends", nargs="+", default=["onnx", "torch"], choices=["onnx", "torch"])
    p.add_argument("--corpora", nargs="+", default=None)
    p.add_argument("--repeat", type=int, default=1, help="interleaved rounds; the fastest of each method counts")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # the child: one method, one backend
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.backends[0], args.data, args.corpora)))
        return 0
    corpora, _ = load_eval(args.data)
    if args.corpora:
        corpora = {c: corpora[c] for c in args.corpora}
    methods = args.methods or ["hseg", "hseg_encode", *PEERS]
    if FLOOR not in methods:
        methods.insert(0, FLOOR)
    runs = [(m, b) for m in methods for b in args.backends]
    if (FLOOR, "torch") not in runs:
        runs.insert(0, (FLOOR, "torch"))
    tokens = sum(counter()(t) for t in corpora.values())
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for _ in range(max(1, args.repeat)):
        for run in runs:
            result = _child(*run, args)
            if run not in best or result["seconds"] < best[run]["seconds"]:
                best[run] = result
            print(f"[{run[0]} {run[1]}] {result['seconds']:.1f}s", file=sys.stderr, flush=True)
    floor = best[(FLOOR, "torch")]["seconds"]
    print(f"corpora: {', '.join(corpora)}; {tokens:,} cl100k tokens; floor: {FLOOR} on torch\n")
    print("| method | backend | seconds | tokens/s | × floor | peak RSS MB | records | segmenter load, s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, backend in runs:
        r = best[(name, backend)]
        load = f"{r['load_s']:.1f}" if name in HSEG_METHODS else "—"
        print(f"| {name} | {backend} | {r['seconds']:.1f} | {tokens / r['seconds']:,.0f} | {r['seconds'] / floor:.2f} "
              f"| {r['rss_mb']:,.0f} | {r['records']} | {load} |")
    for name in methods:
        if all((name, b) in best for b in ("onnx", "torch")):
            ratio = best[(name, "torch")]["seconds"] / best[(name, "onnx")]["seconds"]
            print(f"\n{name}: onnx {ratio:.2f}x the speed of torch", end="")
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
