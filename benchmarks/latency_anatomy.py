"""Where a default search's time goes on a small store, and what a record's metadata costs a ``get``.

Six measurements on a store built with ``hseg index`` (``--db``), each interleaved with a plain
``collection.query(n_results=5)`` on the same query vectors:

1. **Searches by the reads they make.** The default search (hybrid ``unit="auto"``,
   ``budget_tokens=--budget``) of every question, timed, with the Chroma reads it made (the unit
   index's kNN, the unit vectors of lexical-only candidates, the passages' ``get``): the share of
   searches per read pattern, their p50, and the p50 of all, each × the plain query's p50.
2. **A ``get``'s cost against the keys of its records' metadata.** Chroma keeps one row per
   metadata key, so a ``get`` of segment records costs per key. The store is copied four times (its
   collection written anew each time, :func:`slim_copy`): as stored; with ``chunk_settings``,
   ``content_sha256`` and ``hseg_schema`` left on the cluster records only; the same and
   ``hseg_encoder``; and also without ``hseg_prev_id``, ``hseg_next_id`` and ``hseg_cluster_index``
   on segments. Each round gets the same ``--records`` random segment ids from each copy (metadatas
   and documents, the passages' read), and runs a plain query on each. The slimmer copies are
   hypothetical schemas, measured to size the option: hseg reads these keys (``is_complete`` needs
   the hash and settings on every record, a search checks each hit's encoder).
3. **The default search on whole copies of the store** with those schemas: the store's directory
   copied, its collection written anew with the slimmer segment records (the unit index and the
   lexical index as they are), then table 1's search on every copy, interleaved, each against a
   plain query on its own collection and on the copy as stored, and the hits compared.
4. **The passages' texts from a slim unit index** (a design, not hseg's): unit-index records that
   carry their segment's text and only the keys a search reads (:data:`UNIT_TEXT_KEYS` and the
   user's), so that the public schema of the collection's records stays as it is. Each default
   search's passages ``get`` (as table 1 makes it) is replayed on the collection as stored and, with
   a cluster taken whole read as all of its segments (its text is theirs joined), on two such
   unit indexes: the text as the record's document, and as one more metadata key (no full-text
   index for Chroma to keep). Paired per search, × the plain query's p50; then the time to write
   each unit index for all of the store's segments against the unit index as hseg writes it.
5. **The default search on a unit index of layout 2** (hseg's since table 4, whose records hold
   their segment's text, :mod:`hseg.retrieval.unit_vectors`): the store copied with its unit index
   written anew in layout 2 from the same vectors (:func:`layout2_copy`; ``sync_unit_index()`` would
   fuse them again from the vectors Chroma returns, a few float32 ulps off), then table 3's
   interleaved searches on the store as it is and on the copy, hits compared. On a store whose unit
   index is already of layout 2 both read the unit index. (Since round 16 neither does: tables 4 and
   5 size what round 14 chose, and table 4 replays the collection reads a search makes without the
   lexical table.)
6. **The passages' records from the lexical table** (hseg's since round 16,
   ``LexicalIndex.records``): each default search's table read replayed on the table, as a ``get``
   of the same segments' unit records (round 14's read; their texts only where the unit index is of
   layout 2) and as a ``get`` of the collection's records, paired per search; then the default
   search as shipped against the same search reading the collection instead (what it does when the
   table lags a write), interleaved, hits compared.

Usage:
    python benchmarks/latency_anatomy.py --db /tmp/bench/tbdb \
        --questions ../shared/data/textbook_qa/questions_term.csv --budget 4096
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import chromadb  # noqa: E402
from query_latency import questions, rotated, store_questions_options  # noqa: E402

import hseg.retrieval.passages.indexed as indexed  # noqa: E402
import hseg.retrieval.plans as plans  # noqa: E402
from hseg.chunking.records import listed_segment_ids  # noqa: E402
from hseg.retrieval.unit_vectors import UnitKey, companion_name, unit_metadata  # noqa: E402
from hseg.store import HierarchicalStore  # noqa: E402
from hseg.store.connection import DEFAULT_HNSW  # noqa: E402
from hseg.store.lexical import LexicalIndex  # noqa: E402

table_read = indexed._from_table

#: bookkeeping of a whole document that a cluster record could carry for its segments
BOOKKEEPING = ("chunk_settings", "content_sha256", "hseg_schema")
DOCUMENT_KEYS = BOOKKEEPING + ("hseg_encoder",)
DERIVABLE_KEYS = ("hseg_prev_id", "hseg_next_id", "hseg_cluster_index")
#: the copies measured: the keys each leaves on cluster records only
VARIANTS: dict[str, tuple[str, ...]] = {
    "as stored": (),
    f"without {len(BOOKKEEPING)} bookkeeping keys on segments": BOOKKEEPING,
    f"without {len(DOCUMENT_KEYS)} document-level keys on segments": DOCUMENT_KEYS,
    f"and without {len(DERIVABLE_KEYS)} derivable keys": DOCUMENT_KEYS + DERIVABLE_KEYS,
}


def p50_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1e3


def read_patterns(store: HierarchicalStore, texts: list[str], vectors: np.ndarray, budget: int,
                  weight: float, rounds: int) -> str:
    """Table 1: the default search's p50 per pattern of Chroma reads, against a plain query."""
    made: list[str] = []
    answer = plans._answer

    def logged(reads: list[plans.Read]) -> list[dict[str, list[Any]]]:
        first = reads[0]
        side = "unit index" if first.collection.name.endswith("_hseg_units") else "collection"
        what = "kNN" if isinstance(first, plans.Knn) else ("vectors" if "embeddings" in first.include else "records")
        made.append(f"{what} ({side})")
        return answer(reads)

    plans._answer = logged
    try:
        for text, q in zip(texts[:10], vectors[:10]):  # warm-up
            store.search(q, query_text=text, budget_tokens=budget, lexical_weight=weight)
        plain: list[float] = []
        by_pattern: dict[str, list[float]] = defaultdict(list)
        every: list[float] = []
        for _ in range(rounds):
            for text, q in zip(texts, vectors):
                t0 = time.perf_counter()
                store.collection.query(query_embeddings=[q], n_results=5)
                plain.append(time.perf_counter() - t0)
                made.clear()
                t0 = time.perf_counter()
                store.search(q, query_text=text, budget_tokens=budget, lexical_weight=weight)
                dt = time.perf_counter() - t0
                by_pattern[" → ".join(made)].append(dt)
                every.append(dt)
    finally:
        plans._answer = answer
    base = p50_ms(plain)
    lines = [f"plain query p50 {base:.2f} ms; default search (λ {weight}), budget {budget}, "
             f"{len(texts)} questions × {rounds} rounds", "",
             "| Chroma reads | share | p50 ms | × plain |", "|---|---|---|---|"]
    for pattern, ts in sorted(by_pattern.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"| {pattern} | {len(ts) / len(every):.0%} | {p50_ms(ts):.2f} | {p50_ms(ts) / base:.2f} |")
    lines.append(f"| all | 100% | {p50_ms(every):.2f} | **{p50_ms(every) / base:.2f}** |")
    return "\n".join(lines) + "\n"


#: what a search reads of a segment record (passages, rules 5 and 6, the encoder check), beside the user's keys
UNIT_TEXT_KEYS = ("hseg_doc_id", "hseg_cluster_id", "hseg_start", "hseg_end", "hseg_tokens", "hseg_heading_path",
                  "hseg_cuts", "hseg_encoder")
#: what a unit record's id (its cluster and tokens) and text (its end: start + length) already say
DERIVED_KEYS = ("hseg_cluster_id", "hseg_tokens", "hseg_end")
#: the metadata key of table 4's variant that keeps the text out of Chroma's full-text index
TEXT_KEY = "hseg_text"


def slimmed(metas: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """``metas`` with ``keys`` left on cluster records only."""
    return [m if m.get("hseg_level") == "cluster" else {k: v for k, v in m.items() if k not in keys}
            for m in metas]


def metadata_rows(stores: dict[str, HierarchicalStore], n_records: int, rounds: int, seed: int) -> str:
    """Table 2: a ``get`` of ``n_records`` segment records and a plain query on each copy of the store
    (:func:`slim_copy`, one per :data:`VARIANTS`), the same records from each, in rotated order."""
    labels = list(stores)
    stored = stores[labels[0]].collection.get(where={"hseg_level": "segment"}, include=["metadatas"])
    segments = list(stored["ids"])
    keys = Counter(len(m or {}) for m in stored["metadatas"])
    rng, pick = np.random.default_rng(seed), random.Random(seed)
    dim = len(stores[labels[0]].collection.get(ids=segments[:1], include=["embeddings"])["embeddings"][0])
    gets: dict[str, list[float]] = defaultdict(list)
    queries: dict[str, list[float]] = defaultdict(list)
    for r in range(rounds):
        wanted = pick.sample(segments, n_records)
        q = np.asarray(rng.standard_normal(dim), dtype=np.float32)
        for label in rotated(labels, r):
            collection = stores[label].collection
            t0 = time.perf_counter()
            collection.get(ids=wanted, include=["metadatas", "documents"])
            gets[label].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            collection.query(query_embeddings=[q], n_results=5)
            queries[label].append(time.perf_counter() - t0)
    first = labels[0]
    lines = [f"{len(segments):,} segment records, {keys.most_common(1)[0][0]} metadata keys each as stored "
             f"(and the document); {rounds} rounds", "",
             f"| copy | get of {n_records} segment records, p50 ms | × as stored | plain query p50 ms |",
             "|---|---|---|---|"]
    for label in labels:
        lines.append(f"| {label} | {p50_ms(gets[label]):.2f} | {p50_ms(gets[label]) / p50_ms(gets[first]):.2f} | "
                     f"{p50_ms(queries[label]):.2f} |")
    return "\n".join(lines) + "\n"


def slim_copy(db: str, name: str, keys: tuple[str, ...], to: Path) -> Path:
    """A copy of the store directory ``db`` whose collection ``name`` is written anew with ``keys`` on
    cluster records only; its unit index and lexical index are copied as they are (the same ids,
    vectors and texts, so a search reads the same records)."""
    shutil.copytree(db, to)
    client: Any = chromadb.PersistentClient(str(to))
    old = client.get_collection(name)
    got = old.get(include=["documents", "metadatas", "embeddings"])
    metas = slimmed([dict(m or {}) for m in got["metadatas"]], keys)
    meta = old.metadata
    client.delete_collection(name)
    new = client.create_collection(name, configuration={"hnsw": dict(DEFAULT_HNSW)}, metadata=meta)
    for s in range(0, len(got["ids"]), 1000):
        new.add(ids=got["ids"][s:s + 1000], embeddings=got["embeddings"][s:s + 1000],
                documents=got["documents"][s:s + 1000], metadatas=metas[s:s + 1000])
    return to


def slim_searches(stores: dict[str, HierarchicalStore], texts: list[str], vectors: np.ndarray, budget: int,
                  weight: float, rounds: int) -> str:
    """Table 3: the default search on whole copies of the store (:func:`slim_copy`), interleaved, each
    against a plain query on its own collection and on the copy as stored; answers compared."""
    for store in stores.values():
        for text, q in zip(texts[:10], vectors[:10]):  # warm-up, and each index's first check
            store.search(q, query_text=text, budget_tokens=budget, lexical_weight=weight)
    plain: dict[str, list[float]] = defaultdict(list)
    searches: dict[str, list[float]] = defaultdict(list)
    differ, worst = 0, 0.0
    scores: list[list[float]] = []
    labels = list(stores)
    for r in range(rounds):
        for i, (text, q) in enumerate(zip(texts, vectors)):
            answers = set()
            for label in rotated(labels, i + r):
                store = stores[label]
                t0 = time.perf_counter()
                store.collection.query(query_embeddings=[q], n_results=5)
                plain[label].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                hits = store.search(q, query_text=text, budget_tokens=budget, lexical_weight=weight)
                searches[label].append(time.perf_counter() - t0)
                answers.add(tuple((h.doc_id, h.start, h.end, h.text, tuple(h.segment_ids)) for h in hits))
                scores.append([h.score for h in hits])
            differ += len(answers) > 1
            if len(answers) == 1:  # Chroma renormalises a vector written again: scores a few float32 ulps off
                worst = max([worst, *(abs(a - b) for other in scores[1:] for a, b in zip(scores[0], other))])
            scores.clear()
    base = p50_ms(plain[labels[0]])
    lines = [f"default search (λ {weight}), budget {budget}, on whole copies of the store; {len(texts)} questions × "
             f"{rounds} rounds, interleaved; questions whose hits (texts, spans, segments) differ between copies: "
             f"{differ}, largest score difference otherwise {worst:.1e}", "",
             "| copy | search p50 ms | plain query p50 ms | × its plain query | × the plain query as stored |",
             "|---|---|---|---|---|"]
    for label in labels:
        p = p50_ms(searches[label])
        lines.append(f"| {label} | {p:.2f} | {p50_ms(plain[label]):.2f} | {p / p50_ms(plain[label]):.2f} | "
                     f"{p / base:.2f} |")
    return "\n".join(lines) + "\n"


def unit_text_forms(segments: dict[str, Any]) -> dict[str, tuple[list[dict[str, Any]], list[str] | None]]:
    """Table 4's unit-index records of ``segments`` (a ``get`` of the collection's segment records with
    metadatas and documents): ``{form: (metadatas, documents or None)}``, as hseg writes them first."""
    user = [{k: v for k, v in (m or {}).items() if not k.startswith("hseg_") and k not in BOOKKEEPING}
            for m in segments["metadatas"]]
    slim = [{**u, **{k: m[k] for k in UNIT_TEXT_KEYS if k in m}} for u, m in zip(user, segments["metadatas"])]
    slimmer = [{k: v for k, v in m.items() if k not in DERIVED_KEYS} for m in slim]
    return {"as hseg writes it (all keys, no text)": ([dict(m or {}) for m in segments["metadatas"]], None),
            "slim, text as document": (slim, list(segments["documents"])),
            f"slim, text as {TEXT_KEY}": ([{**m, TEXT_KEY: d} for m, d in zip(slim, segments["documents"])], None),
            f"slim without {len(DERIVED_KEYS)} derivable keys, text as {TEXT_KEY}":
                ([{**m, TEXT_KEY: d} for m, d in zip(slimmer, segments["documents"])], None)}


def write_unit_forms(client: Any, unit_ids: list[str], vectors: list[Any],
                     forms: dict[str, tuple[list[dict[str, Any]], list[str] | None]], rounds: int) -> dict[str, Any]:
    """Each form of :func:`unit_text_forms` written into a new collection, ``rounds`` times in rotated
    order: ``{form: (the collection of the last round, write times)}``."""
    made: dict[str, Any] = {}
    times: dict[str, list[float]] = defaultdict(list)
    for r in range(rounds):
        for label in rotated(list(forms), r):
            name = f"units-form{list(forms).index(label)}-{r}"
            collection = client.create_collection(name, configuration={"hnsw": dict(DEFAULT_HNSW)})
            metas, docs = forms[label]
            t0 = time.perf_counter()
            for s in range(0, len(unit_ids), 1000):
                collection.add(ids=unit_ids[s:s + 1000], embeddings=vectors[s:s + 1000], metadatas=metas[s:s + 1000],
                               **({"documents": docs[s:s + 1000]} if docs is not None else {}))
            times[label].append(time.perf_counter() - t0)
            made[label] = collection
    return {label: (made[label], times[label]) for label in forms}


def unit_texts(store: HierarchicalStore, texts: list[str], vectors: np.ndarray, budget: int, weight: float,
               rounds: int, tmp: Path) -> str:
    """Table 4: each default search's passages ``get`` replayed on the collection as stored and on
    unit indexes that hold the texts (:func:`unit_text_forms`), paired per search; and their write times."""
    made: list[tuple[str, ...]] = []
    answer = plans._answer

    def logged(reads: list[plans.Read]) -> list[dict[str, list[Any]]]:
        first = reads[0]
        if isinstance(first, plans.Get) and "documents" in first.include and first.collection is store.collection:
            made.append(first.ids)
        return answer(reads)

    plans._answer = logged
    from_table = indexed._from_table
    indexed._from_table = lambda *args: None  # the collection's get, as a search made it before round 16
    try:
        gets = []
        for text, q in zip(texts, vectors):
            made.clear()
            store.search(q, query_text=text, budget_tokens=budget, lexical_weight=weight)
            gets.append(made[0] if made else ())
    finally:
        plans._answer = answer
        indexed._from_table = from_table
    collection = store.collection
    segments = collection.get(where={"hseg_level": "segment"}, include=["metadatas", "documents", "embeddings"])
    if store.unit_index is None or store.unit_index.existing is None:
        raise ValueError(f"--db: collection {collection.name!r} has no unit index")
    unit_of = {UnitKey.parse(u).segment_id: u for u in store.unit_index.existing.get(include=[])["ids"]}
    clusters = collection.get(where={"hseg_level": "cluster"}, include=["metadatas"])
    listed = {cid: listed_segment_ids(m) for cid, m in zip(clusters["ids"], clusters["metadatas"])}
    order = [sid for sid in segments["ids"] if sid in unit_of]
    at = {sid: i for i, sid in enumerate(segments["ids"])}
    picked = {f: [segments[f][at[sid]] for sid in order] for f in ("metadatas", "documents", "embeddings")}
    forms = unit_text_forms(picked)
    client: Any = chromadb.PersistentClient(str(tmp / "unit-forms"))
    written = write_unit_forms(client, [unit_of[s] for s in order], picked["embeddings"], forms, 2)
    slim = [label for label in forms if "slim" in label]
    as_stored: list[float] = []
    plain: list[float] = []
    replayed: dict[str, list[float]] = defaultdict(list)
    whole = read = 0
    for r in range(rounds):
        for i, (ids, q) in enumerate(zip(gets, vectors)):
            if not ids:
                continue
            units = list(dict.fromkeys(unit_of[s] for rid in ids for s in (listed[rid] if rid in listed else [rid])))
            whole += sum(rid in listed for rid in ids) if r == 0 else 0
            read += len(units) if r == 0 else 0
            for label in rotated(["as stored", "plain", *slim], i + r):
                t0 = time.perf_counter()
                if label == "as stored":
                    collection.get(ids=list(ids), include=["metadatas", "documents"])
                elif label == "plain":
                    collection.query(query_embeddings=[q], n_results=5)
                else:
                    include = ["metadatas", "documents"] if "document" in label else ["metadatas"]
                    written[label][0].get(ids=units, include=include)
                dt = time.perf_counter() - t0
                (as_stored if label == "as stored" else plain if label == "plain" else replayed[label]).append(dt)
    n = sum(1 for ids in gets if ids)
    if not n:
        raise ValueError("table 4 replays the collection's passages gets: it needs a store whose unit index is of "
                         "layout 1 (its searches read the texts from the collection)")
    base = p50_ms(plain)
    lines = [f"the passages' get of {n} default searches (λ {weight}, budget {budget}) replayed × {rounds} rounds, "
             f"interleaved with a plain query (p50 {base:.2f} ms); per search on average "
             f"{sum(len(ids) for ids in gets) / n:.1f} records as made ({whole / n:.1f} of them whole clusters), "
             f"{read / n:.1f} unit records with each whole cluster read as its segments", "",
             "| read from | p50 ms | paired median saving per search, ms | × plain query |", "|---|---|---|---|",
             f"| the collection as stored | {p50_ms(as_stored):.2f} | | |"]
    for label in slim:
        saving = statistics.median(a - b for a, b in zip(as_stored, replayed[label]))
        lines.append(f"| unit index {label} | {p50_ms(replayed[label]):.2f} | {saving * 1e3:.2f} | "
                     f"{saving * 1e3 / base:.2f} |")
    lines += ["", f"writing a unit index of {len(order):,} segments (2 rounds, rotated order; seconds, fastest):", "",
              "| unit index | write s |", "|---|---|"]
    lines += [f"| {label} | {min(times):.2f} |" for label, (_, times) in written.items()]
    return "\n".join(lines) + "\n"


def table_reads(store: HierarchicalStore, texts: list[str], vectors: np.ndarray, budget: int, weight: float,
                rounds: int) -> str:
    """Table 6: each default search's read of its passages from the lexical table, replayed on the
    table, the unit index and the collection (paired per search); then whole searches as shipped
    against the same searches reading the collection instead, interleaved, hits compared."""
    if store.unit_index is None or store.unit_index.existing is None or store.lexical_index is None:
        raise ValueError(f"--db: collection {store.collection.name!r} has no unit index or lexical index")
    asked: list[list[str]] = []
    real = LexicalIndex.records

    def logged(self: LexicalIndex, segment_ids: Any) -> dict[str, tuple[dict[str, Any], str]]:
        ids = list(segment_ids)
        asked.append(ids)
        return real(self, ids)

    LexicalIndex.records = logged  # type: ignore[method-assign,assignment]
    try:
        reads = []
        for text, q in zip(texts, vectors):
            asked.clear()
            store.search(q, query_text=text, budget_tokens=budget, lexical_weight=weight)
            reads.append(list(asked[0]) if asked else [])
    finally:
        LexicalIndex.records = real  # type: ignore[method-assign]
    units = store.unit_index.existing
    unit_of = {UnitKey.parse(u).segment_id: u for u in units.get(include=[])["ids"]}
    lexical, collection = store.lexical_index, store.collection
    timed: dict[str, list[float]] = defaultdict(list)
    for r in range(rounds):
        for i, (ids, q) in enumerate(zip(reads, vectors)):
            if not ids:
                continue
            for label in rotated(["table", "unit index", "collection", "plain"], i + r):
                t0 = time.perf_counter()
                if label == "table":
                    lexical.records(ids)
                elif label == "unit index":
                    units.get(ids=[unit_of[s] for s in ids if s in unit_of], include=["metadatas"])
                elif label == "collection":
                    collection.get(ids=ids, include=["metadatas", "documents"])
                else:
                    collection.query(query_embeddings=[q], n_results=5)
                timed[label].append(time.perf_counter() - t0)
    n = sum(1 for ids in reads if ids)
    base = p50_ms(timed["plain"])
    layout = store.unit_index.layout
    lines = [f"the passages' records of {n} default searches (λ {weight}, budget {budget}), "
             f"{sum(map(len, reads)) / max(n, 1):.1f} segments each on average, read × {rounds} rounds, interleaved "
             f"with a plain query (p50 {base:.2f} ms); unit index of layout {layout}", "",
             "| read from | p50 ms | × plain query | paired median saving against the table's read, ms |",
             "|---|---|---|---|"]
    for label in ("table", "unit index", "collection"):
        saving = "" if label == "table" else \
            f"{statistics.median(b - a for a, b in zip(timed['table'], timed[label])) * 1e3:.2f}"
        lines.append(f"| {label} | {p50_ms(timed[label]):.2f} | {p50_ms(timed[label]) / base:.2f} | {saving} |")

    def collection_read(*args: Any) -> None:
        return None

    searched: dict[str, list[float]] = defaultdict(list)
    differ = 0
    for r in range(rounds):
        for i, (text, q) in enumerate(zip(texts, vectors)):
            found = {}
            for label in rotated(["shipped", "collection", "plain"], i + r):
                if label == "plain":
                    t0 = time.perf_counter()
                    collection.query(query_embeddings=[q], n_results=5)
                    searched[label].append(time.perf_counter() - t0)
                    continue
                if label == "collection":
                    indexed._from_table = collection_read  # type: ignore[assignment]
                try:
                    t0 = time.perf_counter()
                    hits = store.search(q, query_text=text, budget_tokens=budget, lexical_weight=weight)
                    searched[label].append(time.perf_counter() - t0)
                finally:
                    indexed._from_table = table_read
                found[label] = [(h.text, h.start, h.end, h.segment_ids, h.score) for h in hits]
            differ += found["shipped"] != found["collection"]
    base = p50_ms(searched["plain"])
    lines += ["", f"the default search, {len(texts)} questions × {rounds} rounds, interleaved with a plain query "
              f"(p50 {base:.2f} ms); hits differ on {differ} searches", "",
              "| passages read from | p50 ms | × plain query |", "|---|---|---|"]
    shown = {"shipped": "the lexical table (as shipped)", "collection": "collection"}
    lines += [f"| {shown[label]} | {p50_ms(searched[label]):.2f} | **{p50_ms(searched[label]) / base:.2f}** |"
              for label in shown]
    return "\n".join(lines) + "\n"


def layout2_copy(db: str, name: str, to: Path) -> Path:
    """A copy of the store directory ``db`` whose unit index is written anew in layout 2 with the
    same ids and vectors (the lexical index and the collection copied as they are)."""
    shutil.copytree(db, to)
    client: Any = chromadb.PersistentClient(str(to))
    units = client.get_collection(companion_name(name))
    got = units.get(include=["embeddings", "metadatas"])
    texts = client.get_collection(name).get(ids=[UnitKey.parse(u).segment_id for u in got["ids"]],
                                            include=["documents"])
    text_of = dict(zip(texts["ids"], texts["documents"]))
    metas = [unit_metadata(dict(m or {}), text_of[UnitKey.parse(u).segment_id], 2)
             for u, m in zip(got["ids"], got["metadatas"])]
    meta = {k: v for k, v in (units.metadata or {}).items() if not k.startswith("hnsw:")}
    client.delete_collection(units.name)
    new = client.create_collection(units.name, configuration={"hnsw": dict(DEFAULT_HNSW)},
                                   metadata={**meta, "hseg_unit_layout": 2})
    for s in range(0, len(got["ids"]), 1000):
        new.add(ids=got["ids"][s:s + 1000], embeddings=got["embeddings"][s:s + 1000], metadatas=metas[s:s + 1000])
    return to


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    store_questions_options(ap)
    ap.add_argument("--lexical-weight", type=float, default=0.2)
    ap.add_argument("--records", type=int, default=44, help="segment records per get in table 2")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over the questions in table 1")
    ap.add_argument("--get-rounds", type=int, default=800)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tables", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6],
                    choices=[1, 2, 3, 4, 5, 6])
    ap.add_argument("--out", default=None, help="append the markdown tables to this file")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        # copied before anything opens the store in this process
        copies = {label: HierarchicalStore(args.collection, path=str(slim_copy(args.db, args.collection, keys,
                                                                                   Path(tmp) / str(i))))
                  for i, (label, keys) in enumerate(VARIANTS.items())} if {2, 3} & set(args.tables) else {}
        layouts = {"as stored": HierarchicalStore(args.collection, path=str(shutil.copytree(args.db, Path(tmp) / "s"))),
                   "unit index in layout 2": HierarchicalStore(args.collection, path=str(
                       layout2_copy(args.db, args.collection, Path(tmp) / "layout2")))} if 5 in args.tables else {}
        store = HierarchicalStore(args.collection, path=args.db)
        texts = questions(args.questions, args.queries)
        vectors = np.asarray(store.encoder.encode(texts), dtype=np.float32)
        tables = []
        if 1 in args.tables:
            tables.append(read_patterns(store, texts, vectors, args.budget, args.lexical_weight, args.rounds))
        if 2 in args.tables:
            tables.append(metadata_rows(copies, args.records, args.get_rounds, args.seed))
        if 3 in args.tables:
            tables.append(slim_searches(copies, texts, vectors, args.budget, args.lexical_weight, args.rounds))
        if 4 in args.tables:
            tables.append(unit_texts(store, texts, vectors, args.budget, args.lexical_weight, args.rounds, Path(tmp)))
        if 5 in args.tables:
            tables.append(slim_searches(layouts, texts, vectors, args.budget, args.lexical_weight, args.rounds))
        if 6 in args.tables:
            tables.append(table_reads(store, texts, vectors, args.budget, args.lexical_weight, args.rounds))
    print("\n".join(tables))
    if args.out:
        with Path(args.out).open("a", encoding="utf-8") as out:
            out.write("\n".join(tables) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
