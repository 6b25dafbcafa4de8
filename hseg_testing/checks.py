"""Checks of what a store holds, shared by the tests of every lane and by ``benchmarks/fuzz.py``
and ``benchmarks/crash_loop.py``: a chunking's exact spans, a stored document's completeness, the
lexical index against its collection, and the hypothesis strategies of arbitrary text."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import chromadb
import numpy as np
from hypothesis import strategies as st

from hseg.chunking.chunks import Chunking, Cluster, Segment
from hseg.store import HierarchicalStore
from hseg.text.binary import binary_reason
from hseg_testing.chunkers import hashing_chunker


def check_chunking(result: Chunking, text: str) -> None:
    """Exact spans and complete coverage: the contract every adapter relies on."""
    if not text.strip():
        assert result.segments == () and result.clusters == ()
        return
    assert "".join(c.text for c in result.clusters) == text
    assert "".join(s.text for s in result.segments) == text
    units: tuple[Segment | Cluster, ...] = (*result.segments, *result.clusters)
    for unit in units:
        assert text[unit.start : unit.end] == unit.text
        assert unit.embedding is not None and np.isfinite(unit.embedding).all()


def check_chunk_invariants(result: Chunking, text: str, chunker) -> None:
    """What every chunking of ``text`` by ``chunker`` holds: exact spans, clusters that tile the text in
    order, each segment's cuts, the cluster cap and unit cluster vectors."""
    assert "".join(c.text for c in result.clusters) == text or not text.strip()
    units: tuple[Segment | Cluster, ...] = (*result.segments, *result.clusters)
    for unit in units:
        assert text[unit.start : unit.end] == unit.text
    for a, b in zip(result.clusters, result.clusters[1:]):
        assert a.end == b.start and a.index + 1 == b.index
    for s in result.segments:  # a cut after each of its sentences that ends before it does, sized exactly,
        # but none after a heading line (issue 47 item 10)
        n = s.sentence_end - s.sentence_start
        assert len(s.cuts) in (n - 1, n) if not result.headings else len(s.cuts) <= n
        assert not [c for c, _ in s.cuts if any(h.start < s.start + c <= h.end for h in result.headings)]
        for offset, tokens in s.cuts:
            assert 0 < offset < len(s.text) and not s.text[offset - 1].isspace()
            assert tokens == chunker.count_tokens(s.text[:offset])
    for c in result.clusters:
        assert c.token_count <= chunker.max_cluster_tokens or len(c.segments) == 1
        assert c.embedding is not None and abs(np.linalg.norm(c.embedding) - 1) < 1e-4


def stored_documents(collection) -> dict[str, dict[str, dict]]:
    """``{doc_id: {record id: {"meta": ..., "doc": ...}}}`` of every hseg record in a collection."""
    got = collection.get(include=["metadatas", "documents"])
    out: dict[str, dict[str, dict]] = {}
    for rid, meta, doc in zip(got["ids"], got["metadatas"], got["documents"]):
        out.setdefault(str(meta["hseg_doc_id"]), {})[rid] = {"meta": meta, "doc": doc}
    return out


def document_problems(records: dict[str, dict], text: str | None = None) -> list[str]:
    """Why a stored document is not complete and consistent (empty list: it is).

    Complete: its cluster records tile the text in order, each lists ``hseg_n_segments`` segment ids
    that are all present (and no other segment records exist), and the segments tile the cluster."""
    problems = []
    clusters = sorted((r for r in records.values() if r["meta"]["hseg_level"] == "cluster"),
                      key=lambda r: r["meta"]["hseg_cluster_index"])
    segments = {rid: r for rid, r in records.items() if r["meta"]["hseg_level"] == "segment"}
    listed: set[str] = set()
    pos = 0
    for i, c in enumerate(clusters):
        m = c["meta"]
        ids = json.loads(m["hseg_segment_ids"])
        listed.update(ids)
        if m["hseg_cluster_index"] != i or m["hseg_start"] != pos or len(ids) != m["hseg_n_segments"]:
            problems.append(f"cluster {i}: bad index/start/n_segments")
        missing = [s for s in ids if s not in segments]
        if missing:
            problems.append(f"cluster {i}: {len(missing)} of {len(ids)} segment records missing")
        elif "".join(segments[s]["doc"] for s in ids) != c["doc"]:
            problems.append(f"cluster {i}: segments do not tile the parent text")
        if text is not None and text[m["hseg_start"] : m["hseg_end"]] != c["doc"]:
            problems.append(f"cluster {i}: text is not source[start:end]")
        pos = m["hseg_end"]
    if set(segments) - listed:
        problems.append(f"{len(set(segments) - listed)} segment records without their cluster record")
    if text is not None and pos != len(text):
        problems.append(f"clusters end at {pos}, the text at {len(text)}")
    return problems


def check_store_round_trip(store: HierarchicalStore, result: Chunking, text: str) -> None:
    store.add(result)
    docs = stored_documents_of(store, result.doc_id)
    if not text.strip():
        assert docs == {}
        return
    assert document_problems(docs, text) == []
    assert len(docs) == len(result.segments) + len(result.clusters)


def stored_documents_of(store: HierarchicalStore, doc_id: str) -> dict[str, dict]:
    got = store.collection.get(where={"hseg_doc_id": doc_id}, include=["metadatas", "documents"])
    return {rid: {"meta": m, "doc": d} for rid, m, d in zip(got["ids"], got["metadatas"], got["documents"])}


WORDS = st.sampled_from(
    "the cat sat on a mat . , ; Dr. e.g. 3.5 ! ? … 東京 は 。 「 」 مرحبا ، ؟ 😀 👨\u200d👩\u200d👧 🇫🇷 e\u0301 \u200f "
    "# ## - * | |---| ``` ~~~ > 1. \\n \t \n \n\n \r\n  http://x.io/a.b".split(" ")
)
#: arbitrary unicode that reads as text (hypothesis leaves out lone surrogates: the store refuses them,
#: see test_text_that_is_not_valid_unicode_is_refused_by_the_store; a NUL or many control characters
#: make it binary data, refused before chunking: test_fuzz_binary_looking_text_is_refused)
ARBITRARY = st.text(max_size=500).filter(lambda t: binary_reason(t) is None)
#: ... and word salad with markdown, CJK, Arabic, emoji and odd whitespace
TEXTS = st.one_of(ARBITRARY, st.lists(WORDS, max_size=300).map(" ".join),
                  st.lists(WORDS, max_size=300).map("".join))


def expected_records(files: dict[str, str]) -> int:
    """Records a clean ``hseg index`` run writes (same chunker settings as the CLI with FAKE_CLI)."""
    chunker = hashing_chunker(segmenter="texttiling")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = chunker.chunk_many(list(files.values()), list(files))
    return sum(len(r.segments) + len(r.clusters) for r in results)


def lexical_disagreement(db: Path, collection: str = "hseg") -> list[str]:
    """How the lexical index of an embedded store differs from its collection's segments, read from
    both files as they are (nothing repaired): pending documents, missing, extra or stale rows."""
    import sqlite3

    from hseg.store.lexical import FOLDER

    con = sqlite3.connect(str(db / FOLDER / f"{collection}.sqlite"))
    try:
        rows = dict(con.execute("SELECT s.id, f.text FROM segments s JOIN fts f ON f.rowid = s.rowid"))
        pending = [d for (d,) in con.execute("SELECT doc_id FROM pending")]
    finally:
        con.close()
    got = chromadb.PersistentClient(path=str(db)).get_collection(collection).get(
        where={"hseg_level": "segment"}, include=["documents"])
    assert got["documents"] is not None
    segments = dict(zip(got["ids"], got["documents"]))
    problems = [f"pending: {pending}"] if pending else []
    problems += [f"missing row {s}" for s in sorted(set(segments) - set(rows))]
    problems += [f"extra row {s}" for s in sorted(set(rows) - set(segments))]
    problems += [f"stale text {s}" for s in sorted(set(rows) & set(segments)) if rows[s] != segments[s]]
    return problems
