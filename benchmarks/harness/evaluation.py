"""Chroma's token-level retrieval evaluation (Smith & Troynikov 2024), as a small library.

Data: ``<data>/corpora/*.md`` and ``<data>/questions.csv`` or another questions file (``question``,
``references`` = JSON list of ``{content, start_index, end_index}`` character offsets into the
corpus file, ``corpus_id`` = file stem). All corpora are pooled in ONE index, as in the report: a
query ranks the chunks of every corpus together.

Metric (report, "Metrics", and its code ``BaseEvaluation._scores_from_dataset_and_retrievals``):
for a query, E = union of its reference spans, R = union of the retrieved chunk spans that lie in
the query's own corpus (a chunk of another corpus can never intersect E), and

    recall    = |E ∩ R| / |E|
    precision = |E ∩ R| / Σ |retrieved chunk|
    IoU       = |E ∩ R| / (|E| + Σ |retrieved chunk| − |E ∩ R|)

The denominators follow the report's code: Σ|retrieved chunk| is a plain SUM of the lengths of ALL
retrieved chunks (``sum_of_ranges`` over the retrieved metadatas, no union), so overlapping or
duplicated chunks are counted every time they are retrieved, and chunks from other corpora count
too; the numerator is a union (each relevant character counted once). The report's IoU denominator
is ``Σ|chunk| + |E \\ R|``, which equals the formula above. Its recall denominator sums the
reference lengths; no query of this data set has overlapping references, so that equals |E|.
Lengths are in characters (the report's "tokens" are character offsets in its code).
Scores are means over queries, reported ×100.

Selection: ``top_k`` (the report's k = 5) and ``budget`` (cl100k-token budget B: chunks in rank
order while the running total stays ≤ B, stopping at the first chunk that does not fit; always at
least one chunk).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

DEFAULT_K = 5
DEFAULT_BUDGETS = (1024, 2048, 4096)
DEFAULT_DEPTH = 100  # ranked-list length: a 4096-token budget of ~40-token chunks


class Query(NamedTuple):
    question: str
    corpus_id: str
    refs: list[tuple[int, int]]  # half-open character spans into corpora[corpus_id]


class Chunk(NamedTuple):
    """A retrievable unit with an exact span: ``corpora[corpus_id][start:end] == text``."""

    corpus_id: str
    start: int
    end: int
    text: str


# --------------------------------------------------------------------------- data


def load_eval(data_dir: str | Path, questions: str | Path | None = None) -> tuple[dict[str, str], list[Query]]:
    """Corpora (UTF-8, keyed by file stem) and the queries, references checked against the text.

    ``questions`` is the questions file (same columns as ``questions.csv``); default
    ``<data_dir>/questions.csv``. A data set may ship several question sets over one set of corpora
    (``textbook_qa/questions_term.csv``)."""
    data_dir = Path(data_dir)
    corpora = {p.stem: p.read_text(encoding="utf-8") for p in sorted((data_dir / "corpora").glob("*.md"))}
    queries = []
    with open(Path(questions) if questions else data_dir / "questions.csv", encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            corpus = corpora[row["corpus_id"]]
            refs = []
            for ref in json.loads(row["references"]):
                start, end = int(ref["start_index"]), int(ref["end_index"])
                if corpus[start:end] != ref["content"]:
                    raise ValueError(f"reference does not match corpus {row['corpus_id']} at {start}:{end}")
                refs.append((start, end))
            queries.append(Query(row["question"], row["corpus_id"], refs))
    return corpora, queries


#: alignments kept per chunk by :func:`recover_spans` (and copies tried inside one predecessor)
SPAN_BEAM = 16


def _non_space(text: str) -> int:
    return len("".join(text.split()))


def recover_spans(corpus_id: str, corpus: str, texts: Iterable[str]) -> list[Chunk]:
    """Exact spans for splitter outputs that are substrings of ``corpus``, in document order.

    Needed for LangChain's ``split_text``, which returns bare strings. Its ``add_start_index``
    is not usable with overlap: it restarts the search at ``previous start + previous length -
    chunk_overlap`` with ``chunk_overlap`` in *length_function* units (tokens here), not
    characters, so it can skip past the true start and land on a later copy or on -1.

    A split's chunks start in non-decreasing order and may overlap; between them only dropped
    separators or stripped whitespace are missing. A text that occurs more than once (a repeated
    footer line, or a short piece of one) can sit at several places in that order, and its first
    copy after the previous chunk's start may lie inside the previous chunk although the splitter
    took a later one. So the sequence is aligned as a whole, by a beam search over placements
    ranked by: fewest non-whitespace characters left uncovered between consecutive chunks and at
    both ends of the corpus (a dropped separator costs its length, whitespace nothing), then
    fewest chunks ending no later than their predecessor (a repeated chunk goes to the next copy,
    not back onto the one just covered), then the earliest starts. Each chunk is tried at the
    copies starting inside or at the end of its predecessor (overlap, adjacency; at most
    :data:`SPAN_BEAM`) and at the first copy after it (a gap). Whenever the true placement is among
    those tried, the chosen alignment leaves no more of the corpus uncovered than the split did.

    Never fails on a split whose starts are non-decreasing: a backward pass bounds each chunk by
    the latest start from which the rest can still be placed, and a placement within that bound
    always has a successor (the first copy of the next text at or after it), so the beam never
    empties. Raises ``ValueError`` only for impossible input: a chunk that does not occur at or
    after the earliest possible start of its predecessor.
    """
    texts = [t for t in texts if t]
    if not texts:
        return []
    lo = 0
    for text in texts:
        start = corpus.find(text, lo)
        if start < 0:
            raise ValueError(f"{corpus_id}: chunk not found at or after offset {lo}: {text[:60]!r}")
        lo = start
    latest = [0] * len(texts)
    bound = len(corpus)
    for i in range(len(texts) - 1, -1, -1):
        # the last copy starting at or before the next chunk's latest start (found: the forward
        # pass placed every chunk at or before the next one)
        bound = latest[i] = corpus.rfind(texts[i], 0, bound + len(texts[i]))

    # a state: (cost, start, end, previous state); the start of the corpus is an empty predecessor
    beam: list[tuple[tuple[int, int, int], int, int, Any]] = [((0, 0, 0), 0, 0, None)]
    for text, last in zip(texts, latest):
        n = len(text)
        best: dict[int, tuple[tuple[int, int, int], int, int, Any]] = {}
        for state in beam:
            cost, q, q_end, _ = state
            starts: list[int] = []
            p = corpus.find(text, q, min(q_end, last) + n)
            while p >= 0 and len(starts) < SPAN_BEAM:
                starts.append(p)
                p = corpus.find(text, p + 1, min(q_end, last) + n)
            p = corpus.find(text, q_end + 1, last + n)
            if p >= 0:
                starts.append(p)
            for p in starts:
                step = (cost[0] + (_non_space(corpus[q_end:p]) if p > q_end else 0),
                        cost[1] + (p + n <= q_end), cost[2] + p)
                if p not in best or step < best[p][0]:
                    best[p] = (step, p, p + n, state)
        beam = sorted(best.values(), key=lambda s: (s[0], s[1]))[:SPAN_BEAM]

    state = min(beam, key=lambda s: ((s[0][0] + _non_space(corpus[s[2]:]), *s[0][1:]), s[1]))
    chunks: list[Chunk] = []
    for text in reversed(texts):
        _, start, end, state = state
        chunks.append(Chunk(corpus_id, start, end, text))
    return chunks[::-1]


# --------------------------------------------------------------------------- metric


def union(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, merged half-open spans (empty spans dropped)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def overlap_length(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """|A ∩ B| for two merged span lists (two-pointer sweep)."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def score(query: Query, retrieved: Sequence[Chunk]) -> tuple[float, float, float]:
    """(recall, precision, IoU) of one query's retrieved chunks, as fractions."""
    relevant = union(query.refs)
    e = sum(end - start for start, end in relevant)
    r = union((c.start, c.end) for c in retrieved if c.corpus_id == query.corpus_id)
    hit = overlap_length(relevant, r)
    retrieved_len = sum(c.end - c.start for c in retrieved)  # a sum, as in the report's code
    recall = hit / e if e else 0.0
    precision = hit / retrieved_len if retrieved_len else 0.0
    iou_den = e + retrieved_len - hit
    return recall, precision, (hit / iou_den if iou_den else 0.0)


def precision_omega(query: Query, units: Sequence[Chunk]) -> float:
    """The report's Precision_Ω: precision when every chunk touching a reference is retrieved,
    |E ∩ C| / |C ∪ E| with C = those chunks. Depends on the chunking only, not on retrieval.
    As in the report's code, a chunk that merely touches a reference (end == ref start) counts."""
    refs = union(query.refs)
    touching = union((c.start, c.end) for c in units if c.corpus_id == query.corpus_id
                     and any(max(c.start, s) <= min(c.end, e) for s, e in refs))
    covered = sum(e - s for s, e in union(touching + refs))
    return overlap_length(refs, touching) / covered if covered else 0.0


# --------------------------------------------------------------------------- selection


def top_k(ranked: Sequence[Chunk], k: int = DEFAULT_K) -> list[Chunk]:
    return list(ranked[:k])


def budget(ranked: Sequence[Chunk], limit: int, token_counts: Sequence[int]) -> list[Chunk]:
    """Chunks in rank order while the running token total stays ≤ ``limit``.

    Stops at the first chunk that does not fit (no skipping ahead to smaller ones), but always
    returns at least the top chunk. ``token_counts[i]`` is the size of ``ranked[i]``.
    """
    out: list[Chunk] = []
    total = 0
    for chunk, n in zip(ranked, token_counts):
        if out and total + n > limit:
            break
        out.append(chunk)
        total += n
    return out


# --------------------------------------------------------------------------- evaluation

POOLED = "pooled"


def chunk_sizes(count: Callable[[str], int]) -> Callable[[Chunk], int]:
    """``count`` of a chunk's text, memoised by text (ranked lists repeat the same chunks)."""
    sizes: dict[str, int] = {}

    def size(chunk: Chunk) -> int:
        if chunk.text not in sizes:
            sizes[chunk.text] = count(chunk.text)
        return sizes[chunk.text]

    return size


def evaluate(
    method_name: str,
    queries: Sequence[Query],
    ranked_per_query: Sequence[Sequence[Chunk]],
    count: Callable[[str], int],
    *,
    k: int = DEFAULT_K,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    units: Sequence[Chunk] | None = None,
    per_setting: Mapping[str, Sequence[Sequence[Chunk]]] | None = None,
) -> list[dict[str, Any]]:
    """Metric rows for settings ``k=<k>`` and ``B=<b>``, per corpus then pooled.

    ``ranked_per_query[i]`` is the ranked list for ``queries[i]`` (best first, no duplicates).
    ``count`` gives cl100k tokens of a text. ``units`` (optional) is the method's whole index,
    for the index statistics ``index_chunks``/``index_tokens`` (mean tokens per unit) and
    ``p_omega`` (the report's Precision_Ω, ×100).
    Row keys: method, corpus, setting, queries, recall, precision, iou (×100), chunks (mean
    retrieved per query), tokens (mean retrieved tokens per query), chunk_tokens (mean tokens per
    retrieved chunk), ``per_setting`` (optional) maps a setting name (``"k=5"``, ``"B=1024"``) to
    ranked lists made for that setting by a budget-aware method, starved (queries whose ranked
    list ran out before k or the budget was reached: make the lists longer), index_chunks,
    index_tokens, p_omega.
    """
    if len(ranked_per_query) != len(queries):
        raise ValueError(f"{len(ranked_per_query)} ranked lists for {len(queries)} queries")
    size = chunk_sizes(count)
    def within(limit: int) -> Callable[[Sequence[Chunk]], list[Chunk]]:
        return lambda r: budget(r, limit, [size(c) for c in r])

    selectors: list[tuple[str, Callable[[Sequence[Chunk]], list[Chunk]]]] = [(f"k={k}", lambda r: top_k(r, k))]
    selectors += [(f"B={b}", within(b)) for b in budgets]
    omega = [precision_omega(q, units) for q in queries] if units else [float("nan")] * len(queries)

    corpus_ids = sorted({q.corpus_id for q in queries})
    index_stats = {}
    for cid in [*corpus_ids, POOLED]:
        indexed = [u for u in (units or []) if cid in (POOLED, u.corpus_id)]
        index_stats[cid] = (len(indexed), float(np.mean([size(u) for u in indexed])) if indexed else float("nan"))

    rows = []
    for setting, select in selectors:
        per_query = []
        # a budget-aware method answers each setting itself (its lists already fit; the cut is a no-op)
        lists = per_setting[setting] if per_setting and setting in per_setting else ranked_per_query
        for query, ranked, om in zip(queries, lists, omega):
            got = select(ranked)
            toks = [size(c) for c in got]
            own = bool(per_setting and setting in per_setting)  # the method filled this setting itself
            full = not own and (len(got) < k if setting.startswith("k=") else len(got) == len(ranked))
            per_query.append((query.corpus_id, *score(query, got), len(got), sum(toks), full, om))
        for cid in [*corpus_ids, POOLED]:
            sel = [p for p in per_query if cid in (POOLED, p[0])]
            arr = np.array([p[1:] for p in sel], dtype=float)
            n_chunks, n_tokens = arr[:, 3].sum(), arr[:, 4].sum()
            rows.append({
                "method": method_name, "corpus": cid, "setting": setting, "queries": len(sel),
                "recall": 100 * arr[:, 0].mean(), "precision": 100 * arr[:, 1].mean(),
                "iou": 100 * arr[:, 2].mean(), "chunks": n_chunks / len(sel), "tokens": n_tokens / len(sel),
                "chunk_tokens": n_tokens / n_chunks if n_chunks else float("nan"),
                "starved": int(arr[:, 5].sum()), "index_chunks": index_stats[cid][0],
                "index_tokens": index_stats[cid][1], "p_omega": 100 * arr[:, 6].mean(),
            })
    return rows


# --------------------------------------------------------------------------- retrieval

_QUERY_VECTORS: dict[tuple[int, str], np.ndarray] = {}


def query_vectors(encoder: Any, queries: Sequence[Query]) -> np.ndarray:
    """Query embeddings (n, d), each question encoded once per encoder per run."""
    missing = [q.question for q in queries if (id(encoder), q.question) not in _QUERY_VECTORS]
    for question in dict.fromkeys(missing):
        _QUERY_VECTORS[(id(encoder), question)] = np.asarray(encoder.encode_query(question), dtype=np.float32)
    return np.stack([_QUERY_VECTORS[(id(encoder), q.question)] for q in queries])


def rank_by_similarity(
    chunks: Sequence[Chunk], queries: Sequence[Query], encoder: Any, depth: int = DEFAULT_DEPTH
) -> list[list[Chunk]]:
    """Flat dense retrieval over the pooled index: exact cosine ranking (dot products of
    L2-normalised vectors, what a Chroma cosine collection returns, without HNSW approximation).
    Ties keep index order. Each chunk text is embedded once (pass a caching encoder to share
    vectors across methods)."""
    if not chunks:
        return [[] for _ in queries]
    vectors = np.asarray(encoder.encode([c.text for c in chunks]), dtype=np.float32)
    scores = query_vectors(encoder, queries) @ vectors.T
    depth = min(depth, len(chunks))
    order = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
    return [[chunks[i] for i in row] for row in order]
