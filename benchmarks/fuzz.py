"""Bounded-time fuzzing of the whole chunking and storage path (not part of the default test run).

    python -m benchmarks.fuzz --seconds 120

Repeats hypothesis runs of four properties until the time is up, each run drawing fresh examples:

- ``chunk_store``: arbitrary unicode and markdown/CJK/Arabic/emoji word salad (``hseg_testing.checks.TEXTS``,
  up to a few thousand characters) through ``HierarchicalChunker`` and ``HierarchicalStore.add``:
  spans exact, coverage complete, every stored document complete (its records read back tile the text);
- ``configs``: the same with random chunker settings (explicit ``k`` or ``target_tokens``, segment
  limits, ``segment_vector="encode"``);
- ``search``: after adding a few documents, any query string gives hits whose text is exactly
  ``source[start:end]`` and whose parent record exists, for every ``unit`` and ``budget_tokens``;
- ``metadata``: arbitrary nested metadata (None, NaN, infinities, huge ints, lone surrogates, ``$``
  keys, lists, dicts) is either stored and read back as flattened, or refused with ``ValueError``;
  never another exception (no Chroma stack trace).

The encoder is the deterministic ``HashingEncoder`` (no model), with TextTiling. A failure prints
hypothesis's shrunk falsifying example and exits 1.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import uuid
import warnings
from collections import Counter


def build(examples_per_run: int):
    import chromadb
    import numpy as np
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from hseg.chunking.chunker import HierarchicalChunker
    from hseg.store import HierarchicalStore, flatten_metadata
    from hseg.text.binary import binary_reason
    from hseg_testing.checks import TEXTS, WORDS, check_chunking, check_store_round_trip
    from hseg_testing.chunkers import small_chunker
    from hseg_testing.fakes import HashingEncoder

    counts: Counter[str] = Counter()
    client = chromadb.EphemeralClient()
    cfg = settings(max_examples=examples_per_run, deadline=None, database=None,
                   suppress_health_check=list(HealthCheck))
    long_texts = st.one_of(TEXTS, st.lists(WORDS, min_size=200, max_size=1500).map(" ".join),
                           st.text(min_size=500, max_size=3000).filter(lambda t: binary_reason(t) is None))
    chunker = small_chunker()

    def new_store() -> HierarchicalStore:
        return HierarchicalStore(f"fuzz-{uuid.uuid4().hex}", client=client, encoder=HashingEncoder())

    @cfg
    @given(long_texts)
    def chunk_store(text: str) -> None:
        counts["chunk_store"] += 1
        result = chunker.chunk(text, f"d-{uuid.uuid4().hex[:8]}")
        check_chunking(result, text)
        check_store_round_trip(STATE["store"], result, text)

    @cfg
    @given(TEXTS, st.one_of(st.builds(dict, k=st.floats(-2, 4)),
                            st.builds(dict, target_tokens=st.integers(16, 400))),
           st.integers(1, 16), st.integers(16, 96), st.sampled_from(["mean", "encode"]))
    def configs(text: str, size: dict, min_seg: int, max_seg: int, vector: str) -> None:
        counts["configs"] += 1
        if "target_tokens" in size:
            size["target_tokens"] = max(size["target_tokens"], min_seg)
        ch = HierarchicalChunker(encoder=HashingEncoder(), segmenter="texttiling", min_segment_tokens=min_seg,
                                 max_segment_tokens=max_seg, segment_vector=vector,
                                 max_cluster_tokens=max(max_seg, 2 * size.get("target_tokens", max_seg)), **size)
        result = ch.chunk(text, f"c-{uuid.uuid4().hex[:8]}")
        check_chunking(result, text)
        for c in result.clusters:
            assert c.token_count <= ch.max_cluster_tokens or len(c.segments) == 1
        check_store_round_trip(STATE["store"], result, text)

    @cfg
    @given(st.lists(TEXTS, min_size=1, max_size=4), TEXTS, st.sampled_from(["cluster", "segment", "auto"]),
           st.one_of(st.integers(1, 6).map(lambda k: {"k": k}),
                     st.integers(1, 800).map(lambda b: {"budget_tokens": b})))
    def search(texts: list[str], query: str, unit: str, amount: dict) -> None:
        counts["search"] += 1
        store = new_store()
        sources = {f"s{i}": t for i, t in enumerate(texts)}
        store.add(chunker.chunk_many(list(sources.values()), list(sources)))
        vec = HashingEncoder().encode_query(query)
        hits = store.search(vec, unit=unit, **amount)
        if store.count() == 0:
            assert hits == []
        for h in hits:
            assert h.text == sources[h.doc_id][h.start : h.end]
            parent = store.collection.get(ids=[h.cluster_id], include=["documents"])["documents"]
            assert parent and h.text in parent[0]
        if "k" in amount and unit == "cluster":
            assert len(hits) <= amount["k"]
        store.drop()

    odd_text = st.text(alphabet=st.characters(exclude_categories=()), max_size=8)  # lone surrogates too
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                        odd_text, st.sampled_from([np.int64(3), np.float32(0.5), np.bool_(True)]))
    values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(odd_text, inner, max_size=3)),
                          max_leaves=8)
    keys = st.one_of(odd_text, st.sampled_from(["$k", "#k", "hseg_x", "a.b", ""]))

    @cfg
    @given(st.dictionaries(keys, values, max_size=4))
    def metadata(md: dict) -> None:
        counts["metadata"] += 1
        store = STATE["store"]
        doc_id = f"m-{uuid.uuid4().hex[:8]}"
        result = chunker.chunk("Metadata fuzz text. Second sentence.", doc_id)
        try:
            flat = flatten_metadata(md)
        except ValueError:
            flat = None
        try:
            store.add(result, md)
        except ValueError:
            counts["metadata_refused"] += 1
            assert flat is None or flat != flat  # refused by flattening, the only reason here
            assert store.collection.get(where={"hseg_doc_id": doc_id}, include=[])["ids"] == []
            return
        assert flat is not None
        got = store.collection.get(where={"hseg_doc_id": doc_id}, include=["metadatas"])["metadatas"]
        for meta in got:
            for k, v in flat.items():
                assert meta[k] == v or (isinstance(v, float) and math.isclose(meta[k], v, rel_tol=1e-6)), (k, v)

    STATE: dict = {"store": new_store()}

    def reset() -> None:
        client.delete_collection(STATE["store"].collection.name)
        STATE["store"] = new_store()

    return [chunk_store, configs, search, metadata], counts, reset


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120.0, help="time budget (default 120)")
    parser.add_argument("--examples-per-run", type=int, default=20, help="hypothesis examples per property run")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=r"document .* is blank")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import logging

    logging.getLogger("hseg").setLevel(logging.ERROR)  # per-document size warnings are expected here
    properties, counts, reset = build(args.examples_per_run)
    start = time.monotonic()
    deadline = start + args.seconds
    rounds = 0
    while time.monotonic() < deadline:
        for prop in properties:
            if time.monotonic() >= deadline:
                break
            try:
                prop()
            except Exception:
                print(f"FAIL in {prop.__name__} after {time.monotonic() - start:.0f} s", file=sys.stderr)
                raise
        rounds += 1
        reset()  # keep the collection small
    total = sum(v for k, v in counts.items() if k != "metadata_refused")
    print(f"fuzz: {time.monotonic() - start:.0f} s, {rounds} rounds, {total} examples "
          f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}), no failure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
