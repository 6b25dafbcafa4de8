"""``HierarchicalChunker``: text → sentences → segments → clusters, the one entry point.

How and why: docs/design.md, ``hseg.chunking.chunker``.
"""

from __future__ import annotations

import bisect
import logging
import time
import warnings
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from hseg.chunking.chunks import Chunking, Cluster, Segment, chunk_id, default_doc_id
from hseg.chunking.clustering import ClusterPlan, cluster_segments, mean_vector, search_k, split_over_cap
from hseg.chunking.config import ChunkerConfig
from hseg.chunking.records import check_unicode
from hseg.encoders import CachingEncoder, Encoder, as_encoder
from hseg.progress import Progress
from hseg.segmentation.cohesion import adjacent_similarity
from hseg.segmentation.segmenters import Segmenter, enforce_length_limits, get_segmenter
from hseg.text.binary import check_not_binary
from hseg.text.provenance import SourceMap
from hseg.text.sentences import split_sentences
from hseg.text.spans import Span
from hseg.text.structure import Heading, cluster_breaks, common_prefix, find_headings, path_at, reads_markdown
from hseg.text.tokens import TokenCounter, as_token_counter, count_many

logger = logging.getLogger(__name__)

class HierarchicalChunker:
    """Hierarchical segmentation chunker (Nguyen et al. 2025).

    Args:
        config: a :class:`hseg.chunking.config.ChunkerConfig`; or give its fields as keyword arguments
            (``encoder``, ``segmenter``, ``k``, ``target_tokens``, ``max_cluster_tokens``,
            ``min_segment_tokens``, ``max_segment_tokens``, ``tokenizer``, ``segment_vector``,
            ``segment_context``, ``cluster_vector``, ``clique_method``, ``structure``, ``cache``,
            ``show_progress``, ``backend``, ``device``, ``batch_size``; meanings and defaults there).
        **settings: those fields as keywords; given with a config, they replace its fields.

    Raises:
        ValueError: a setting out of range or of the wrong type (naming it), or a segmenter asked for by
            name or instance that was trained on another encoder.

    Example:
        >>> chunker = HierarchicalChunker(target_tokens=256)  # doctest: +SKIP
        >>> result = chunker.chunk(open("report.md").read(), doc_id="report")  # doctest: +SKIP
        >>> [(c.start, c.end, c.token_count) for c in result.clusters][:2]  # doctest: +SKIP
        [(0, 1210, 251), (1210, 2410, 262)]
        >>> result.clusters[1].heading_path  # doctest: +SKIP
        ('Quarterly report', 'Revenue')
    """

    def __init__(self, config: ChunkerConfig | None = None, **settings: Any) -> None:
        config = ChunkerConfig.resolve(config, **settings)
        self.config = config
        self.k = config.k
        self.target_tokens = config.effective_target_tokens
        self.max_cluster_tokens = config.effective_max_cluster_tokens
        self.min_segment_tokens = int(config.min_segment_tokens)
        self.max_segment_tokens = config.effective_max_segment_tokens
        self.segment_vector = config.segment_vector
        self.clique_method = config.clique_method
        self.structure = config.structure
        self.show_progress = config.show_progress
        base = as_encoder(config.encoder, backend=config.backend, device=config.device, batch_size=config.batch_size)
        self.encoder: Encoder = CachingEncoder(base) if config.cache and not isinstance(base, CachingEncoder) else base
        self.segmenter: Segmenter = self._resolve_segmenter(config.segmenter)
        self.count_tokens: TokenCounter = as_token_counter(config.tokenizer)
        #: seconds per pipeline stage of the last ``chunk``/``chunk_many`` call (for profiling)
        self.last_timings: dict[str, float] = {}

    def _resolve_segmenter(self, segmenter: str | Segmenter | None) -> Segmenter:
        """The segmenter, checked against the encoder when it was trained on one (the BiLSTM).

        The default falls back to TextTiling for another encoder (trained weights expect the
        embeddings they were trained on); a segmenter asked for by name or instance is refused
        with the mismatch error instead.
        """
        return get_segmenter(segmenter, encoder_name=self.encoder.name, device=self.config.device)

    # ------------------------------------------------------------------ public API
    def chunk(self, text: str, doc_id: str | None = None, *, source: str | None = None,
              source_map: SourceMap | None = None) -> Chunking:
        """Chunk one document. ``doc_id`` defaults to a hash of the text.

        ``source`` names where the text came from (a file name, path or URL); with
        ``structure="auto"`` a ``.txt`` source is read as plain text. Without it, ``doc_id`` is the name.
        ``source_map`` says which page (slide) each character of ``text`` is on
        (:meth:`hseg.text.provenance.SourceMap.from_pages`); every chunk then carries its pages.

        Args:
            text: the document.
            doc_id: its id (default: a hash of the text).
            source: where it came from (a file name, path or URL).
            source_map: the page (slide) of each character, or ``None``.

        Returns:
            The chunking: segments and clusters with exact spans (``text[c.start:c.end] == c.text``).

        Raises:
            ValueError: as :meth:`chunk_many` says, for this one text.
        """
        return self.chunk_many([text], [doc_id] if doc_id is not None else None,
                               sources=None if source is None else [source],
                               source_maps=None if source_map is None else [source_map])[0]

    def chunk_many(self, texts: Sequence[str], doc_ids: Sequence[str | None] | None = None, *,
                   sources: Sequence[str | None] | None = None,
                   source_maps: Sequence[SourceMap | None] | None = None) -> list[Chunking]:
        """Chunk many documents, encoding their sentences in shared batches.

        ``sources`` (one per text, or ``None``) are the names :meth:`chunk` takes as ``source``,
        ``source_maps`` (one per text, or ``None``) its ``source_map``. A text that is not valid
        Unicode (a lone surrogate, e.g. from ``errors="surrogateescape"``) raises ``ValueError`` naming
        its index, its document id and the offset, before any work; so does a source map of another
        length than its text, and a text that looks like a file's raw bytes
        (:class:`~hseg.errors.UnreadableDocumentError`, :func:`hseg.text.binary.binary_reason`).

        Args:
            texts: the documents.
            doc_ids: one id per text, or ``None`` for hashes of the texts.
            sources: one name per text (or ``None``), as :meth:`chunk`'s ``source``.
            source_maps: one page map per text (or ``None``), as :meth:`chunk`'s ``source_map``.

        Returns:
            One chunking per text, in order.

        Raises:
            ValueError: a text that is not a string or not valid Unicode, looks like raw bytes
                (:class:`~hseg.errors.UnreadableDocumentError`); ids that are not one non-empty, unique
                string per text; sources or source maps that are not one per text, or a source map of
                another length than its text. Raised before any work.
        """
        texts = list(texts)
        ids = self._doc_ids(texts, doc_ids)
        names = self._sources(texts, doc_ids, sources)
        maps = self._source_maps(texts, ids, source_maps)
        self.last_timings = defaultdict(float)
        progress = Progress()  # lines on hseg.progress every few seconds of long work (hseg.progress)
        with self._stage("sentences"):
            outlines = [find_headings(t) if reads_markdown(self.structure, name) else []
                        for t, name in zip(texts, names)]
            sentences: list[list[Span]] = []
            for t, hs in zip(texts, outlines):
                sentences.append(self._sentences(t, hs))
                progress.note("sentences split: %d of %d documents", len(sentences), len(texts))
            flat = [s.of(t) for t, spans in zip(texts, sentences) for s in spans]
        with self._stage("encode"):
            vectors = self._encode(flat, progress)
        out, offset = [], 0
        for text, doc_id, spans, hs, source_map in self._progress(list(zip(texts, ids, sentences, outlines, maps)),
                                                                  "clustering"):
            out.append(self._chunk_one(text, doc_id, spans, vectors[offset : offset + len(spans)], hs, progress,
                                       source_map))
            offset += len(spans)
        progress.note("chunked: %d documents, %d sentences, %d segments, %d clusters", len(out), len(flat),
                      sum(len(r.segments) for r in out), sum(len(r.clusters) for r in out))
        self.last_timings = dict(self.last_timings)
        return out

    @contextmanager
    def _stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.last_timings[name] = self.last_timings.get(name, 0.0) + time.perf_counter() - start

    # ------------------------------------------------------------------ steps
    def _doc_ids(self, texts: list[str], doc_ids: Sequence[str | None] | None) -> list[str]:
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise ValueError(f"texts[{i}] must be str, got {type(t).__name__}")
        if doc_ids is None:
            doc_ids = [None] * len(texts)
        if len(doc_ids) != len(texts):
            raise ValueError(f"doc_ids has {len(doc_ids)} items for {len(texts)} texts")
        ids = [d if d is not None else default_doc_id(t) for d, t in zip(doc_ids, texts)]
        seen: dict[str, str] = {}
        for d, t in zip(ids, texts):
            if not isinstance(d, str) or not d:
                raise ValueError(f"doc_ids: ids must be non-empty strings, got {d!r}")
            if not d.isascii():
                try:
                    d.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError(f"doc_ids: {d!r} is not valid Unicode (a lone surrogate)") from None
            if d in seen and seen[d] != t:
                raise ValueError(f"doc_ids: duplicate id {d!r} for two different texts")
            seen[d] = t
        for i, (d, t) in enumerate(zip(ids, texts)):
            # checked here, before any work: the model's tokenizer fails on a lone surrogate with a bare
            # TypeError that names no document, and Chroma could not store the text either
            check_unicode(f"texts[{i}] (document {d!r})", t, why="encoders and Chroma take valid Unicode only")
            # a file's raw bytes (a PDF a loader did not convert) would be stored as pages of noise
            check_not_binary(f"texts[{i}] (document {d!r})", t)
        return ids

    @staticmethod
    def _sources(texts: list[str], doc_ids: Sequence[str | None] | None,
                 sources: Sequence[str | None] | None) -> list[str | None]:
        """The name each document is known by: its source, else the id it was given (not a hash)."""
        given: list[str | None] = list(doc_ids) if doc_ids is not None else [None] * len(texts)
        if sources is None:
            return given
        if isinstance(sources, str) or len(sources) != len(texts):
            raise ValueError(f"sources must be a sequence of one name (or None) per text, got {sources!r:.80}")
        for s in sources:
            if s is not None and not isinstance(s, str):
                raise ValueError(f"sources: names must be str or None, got {type(s).__name__}")
        return [s if s is not None else d for s, d in zip(sources, given)]

    @staticmethod
    def _source_maps(texts: list[str], ids: list[str],
                     source_maps: Sequence[SourceMap | None] | None) -> list[SourceMap | None]:
        """One source map (or ``None``) per text, each of its text's length."""
        if source_maps is None:
            return [None] * len(texts)
        if isinstance(source_maps, SourceMap) or len(source_maps) != len(texts):
            raise ValueError(f"source_maps must be a sequence of one SourceMap (or None) per text, got "
                             f"{source_maps!r:.80}")
        for i, (m, t, d) in enumerate(zip(source_maps, texts, ids)):
            if m is not None and not isinstance(m, SourceMap):
                raise ValueError(f"source_maps[{i}] must be an hseg.text.provenance.SourceMap or None, got "
                                 f"{type(m).__name__}")
            if m is not None and m.length != len(t):
                raise ValueError(f"source_maps[{i}] maps {m.length} characters but texts[{i}] (document {d!r}) "
                                 f"has {len(t)}; build the map from this text (SourceMap.from_pages)")
        return list(source_maps)

    def _sentences(self, text: str, headings: Sequence[Heading] = ()) -> list[Span]:
        enc_cap = getattr(self.encoder, "max_seq_length", None)
        enc_count = getattr(self.encoder, "count_tokens", None)
        spans = split_sentences(text, max_tokens=enc_cap, count_tokens=enc_count) if enc_cap and enc_count \
            else split_sentences(text)
        # a unit must also fit a segment (in reader tokens); re-split the rare one that does not
        out: list[Span] = []
        for span in spans:
            piece = span.of(text)
            if len(piece) > self.max_segment_tokens and self.count_tokens(piece) > self.max_segment_tokens:
                sub = split_sentences(piece, max_tokens=self.max_segment_tokens, count_tokens=self.count_tokens)
                out += [Span(span.start + s.start, span.start + s.end) for s in sub]
            else:
                out.append(span)
        return _split_at(text, out, [h.start for h in headings]) if headings else out

    def _encode(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        # batches of 1024: a progress line every few seconds on a CPU (the model's own batches are smaller)
        batch = 1024
        parts = []
        for i in self._progress(range(0, len(texts), batch), "encoding"):
            parts.append(self.encoder.encode(texts[i : i + batch]))
            if progress is not None:
                progress.note("sentences encoded: %d of %d", min(i + batch, len(texts)), len(texts))
        return np.vstack(parts)

    def _segment_ends(self, sentences: list[str], vectors: np.ndarray, tokens: list[int],
                      sections: Sequence[int] = (), titles: Collection[int] = ()) -> tuple[list[int], np.ndarray]:
        """Segment ends; ``sections`` are sentence indices that must start a segment (headings),
        ``titles`` those of heading lines. A heading belongs with the text after it: no segment ends
        with a heading line that text follows, so a heading with no text under it opens the segment
        of the next heading's section, and the gap after a heading line is never cut (a segment
        can exceed ``max_segment_tokens`` by its heading)."""
        ends = self.segmenter.boundaries(sentences, vectors)
        gap_scores = getattr(self.segmenter, "gap_scores", None)
        strength = np.asarray(gap_scores(sentences, vectors) if gap_scores else 1.0 - adjacent_similarity(vectors))
        starts = sorted({int(s) for s in sections if int(s) - 1 not in titles} - {0})
        glued = sorted(t for t in titles if t < len(sentences) - 1)
        ends = sorted(int(e) for e in ends)
        out: list[int] = []
        # length limits per section, so that merging a short segment never crosses a heading
        for a, b in zip([0, *starts], [*starts, len(sentences)]):
            inner = [e - a for e in ends[bisect.bisect_left(ends, a) : bisect.bisect_left(ends, b - 1)]]
            keep = [g - a for g in glued[bisect.bisect_left(glued, a) : bisect.bisect_left(glued, b - 1)]]
            out += [a + e for e in enforce_length_limits(inner, tokens[a:b], strength[a : b - 1],
                                                         min_tokens=self.min_segment_tokens,
                                                         max_tokens=self.max_segment_tokens, glued=keep)]
        return out, np.asarray(strength, dtype=np.float32)

    def _plan(self, vectors: np.ndarray, tokens: list[int], breaks: Sequence[int] = ()) -> ClusterPlan:
        if self.k is not None:
            return cluster_segments(vectors, self.k, tokens=tokens, max_cluster_tokens=self.max_cluster_tokens,
                                    method=self.clique_method, breaks=breaks)
        assert self.target_tokens is not None  # ChunkerConfig: without k the target defaults to 512
        return search_k(vectors, tokens, self.target_tokens, max_cluster_tokens=self.max_cluster_tokens,
                        method=self.clique_method, breaks=breaks)

    def _chunk_one(self, text: str, doc_id: str, spans: list[Span], sent_vectors: np.ndarray,
                   headings: Sequence[Heading] = (), progress: Progress | None = None,
                   source_map: SourceMap | None = None) -> Chunking:
        progress = progress if progress is not None else Progress()
        if not spans:
            if text:
                warnings.warn(f"document {doc_id!r} is blank: no chunks", stacklevel=3)
            return Chunking(doc_id, text, (), (), None, {"empty": True, "sentences": 0}, source_map=source_map)
        sentences = [s.of(text) for s in spans]
        with self._stage("tokens"):
            tokens = self._with_gaps(text, spans, count_many(self.count_tokens, sentences))
        first_sentence = {s.start: i for i, s in enumerate(spans)}
        titles = _heading_lines(spans, headings, first_sentence)
        with self._stage("segmenter"):
            ends, strength = self._segment_ends(sentences, sent_vectors, tokens,
                                                [first_sentence[h.start] for h in headings], titles)
        with self._stage("segments"):
            segments, seg_vectors = self._segments(text, doc_id, spans, ends, sent_vectors, strength, tokens, headings,
                                                   titles)
        progress.note("%s: %d sentences segmented into %d segments", doc_id, len(spans), len(segments))
        breaks = cluster_breaks(headings, [spans[s.sentence_start].start for s in segments],
                                [s.token_count for s in segments], self.min_segment_tokens) if headings else []
        with self._stage("clustering"):
            plan = self._plan(seg_vectors, [s.token_count for s in segments], breaks)
        with self._stage("clusters"):
            clusters = self._clusters(text, doc_id, segments, seg_vectors, plan)
        progress.note("%s: %d segments clustered into %d clusters", doc_id, len(segments), len(clusters))
        # the store refuses a chunking of another encoder than its collection's (records carry vectors only)
        # graph_joined: segments relatedness put in a cluster (0: parents from neighbour-joining and the cap)
        info = {"sentences": len(spans), "tau": plan.tau, "graph_joined": plan.joined,
                "segmenter": getattr(self.segmenter, "name", "custom"),
                "encoder": str(self.encoder.name), "dimension": int(seg_vectors.shape[1])}
        return Chunking(doc_id, text, tuple(segments), tuple(clusters), plan.k, info, tuple(headings), source_map)

    def _segments(
        self, text: str, doc_id: str, spans: list[Span], ends: list[int], vectors: np.ndarray, strength: np.ndarray,
        tokens: list[int], headings: Sequence[Heading] = (), titles: Collection[int] = (),
    ) -> tuple[list[Segment], np.ndarray]:
        """The segments and their vectors, one row per segment (each segment's ``embedding``).
        A segment's heading path is that of its first sentence that is not a heading line
        (``titles``): a run of headings opening it ends with the one its text lies under."""
        firsts = [0] + [e + 1 for e in ends[:-1]]
        bounds = [0] + [spans[f].start for f in firsts[1:]] + [len(text)]
        texts = [text[a:b] for a, b in zip(bounds, bounds[1:])]
        paths = [path_at(headings, spans[next((j for j in range(f, e + 1) if j not in titles), f)].start)
                 for f, e in zip(firsts, ends)]
        # segment_context="heading": what is embedded includes the heading path; the text stays as it is
        context = [" > ".join(p) if self.config.segment_context == "heading" else "" for p in paths]
        if self.segment_vector == "encode":
            seg_vecs = self.encoder.encode([(c + "\n\n" if c else "") + text[spans[f].start : spans[e].end]
                                            for c, f, e in zip(context, firsts, ends)])
        else:
            distinct = sorted(set(context) - {""})
            path_vecs = dict(zip(distinct, self.encoder.encode(distinct))) if distinct else {}
            path_tokens = dict(zip(distinct, count_many(self.count_tokens, distinct)))
            # the path as one more sentence of the segment's token-weighted mean
            seg_vecs = np.stack([
                mean_vector(np.vstack([vectors[f : e + 1], path_vecs[c][None]]), [*tokens[f : e + 1], path_tokens[c]])
                if c else mean_vector(vectors[f : e + 1], tokens[f : e + 1])
                for c, f, e in zip(context, firsts, ends)])
        token_counts = count_many(self.count_tokens, texts)
        cuts = self._cuts(text, spans, bounds, firsts, ends, titles)
        segments = [
            Segment(
                id=chunk_id(doc_id, "segment", a, b),
                doc_id=doc_id,
                index=i,
                start=a,
                end=b,
                text=t,
                token_count=int(n),
                sentence_start=f,
                sentence_end=e + 1,
                embedding=seg_vecs[i],
                boundary_prob=float(strength[e]) if e < len(strength) else 1.0,
                heading_path=p,
                cuts=c,
            )
            for i, (a, b, t, f, e, n, c, p) in enumerate(zip(bounds, bounds[1:], texts, firsts, ends, token_counts,
                                                              cuts, paths))
        ]
        return segments, seg_vecs

    def _cuts(self, text: str, spans: list[Span], bounds: list[int], firsts: list[int],
              ends: list[int], titles: Collection[int] = ()) -> list[tuple[tuple[int, int], ...]]:
        """Each segment's :attr:`Segment.cuts`: the end of each sentence inside it, with the exact
        size of the prefix up to there. Counted on the prefix itself, not summed per sentence (a
        seam can merge tokens), so a passage cut there is never larger than it says. None after a
        heading line (``titles``): a passage cut there would end on a heading without its text."""
        where = [(i, spans[j].end) for i, (b, f, e) in enumerate(zip(bounds[1:], firsts, ends))
                 for j in range(f, e + 1) if spans[j].end < b and j not in titles]
        sizes = count_many(self.count_tokens, [text[bounds[i]:at] for i, at in where])
        out: list[list[tuple[int, int]]] = [[] for _ in firsts]
        for (i, at), n in zip(where, sizes):
            out[i].append((at - bounds[i], int(n)))
        return [tuple(c) for c in out]

    def _clusters(self, text: str, doc_id: str, segments: list[Segment], vecs: np.ndarray,
                  plan: ClusterPlan) -> list[Cluster]:
        ranges, flags = list(plan.ranges), list(plan.split_by_cap)
        seg_tokens = np.array([s.token_count for s in segments])
        adjacent = adjacent_similarity(vecs)
        # the plan used summed segment tokens; the exact count of a joined text can differ by a token or
        # two at each seam, so re-check the cap on the real text and cut again where needed
        for _ in range(len(segments)):
            counts = self._cluster_tokens(text, segments, ranges)
            over = [i for i, (r, c) in enumerate(zip(ranges, counts)) if c > self.max_cluster_tokens and len(r) > 1]
            if not over:
                break
            for i in reversed(over):
                budget = int(seg_tokens[ranges[i].start : ranges[i].stop].sum()) - 1
                pieces, _ = split_over_cap([ranges[i]], seg_tokens, adjacent, budget)
                ranges[i : i + 1] = pieces
                flags[i : i + 1] = [True] * len(pieces)
        counts = self._cluster_tokens(text, segments, ranges)
        for c in counts:
            if c > self.max_cluster_tokens:
                logger.warning("doc %s: a single segment of %d tokens exceeds max_cluster_tokens=%d", doc_id, c,
                               self.max_cluster_tokens)
        if self.config.cluster_vector == "encode":
            vectors = list(self.encoder.encode([text[segments[r.start].start : segments[r.stop - 1].end].strip()
                                                for r in ranges]))
        else:
            vectors = [mean_vector(vecs[r.start : r.stop], seg_tokens[r.start : r.stop]) for r in ranges]
        out = []
        for i, (r, flag, n, vector) in enumerate(zip(ranges, flags, counts, vectors)):
            segs = tuple(segments[r.start : r.stop])
            a, b = segs[0].start, segs[-1].end
            out.append(
                Cluster(
                    id=chunk_id(doc_id, "cluster", a, b),
                    doc_id=doc_id,
                    index=i,
                    start=a,
                    end=b,
                    text=text[a:b],
                    token_count=int(n),
                    segments=segs,
                    embedding=vector,
                    split_by_cap=flag,
                    heading_path=common_prefix(s.heading_path for s in segs),
                )
            )
        return out

    def _with_gaps(self, text: str, spans: list[Span], tokens: list[int]) -> list[int]:
        """Unit sizes plus what long whitespace runs around them add to a segment's size.

        Whitespace between units belongs to the segments but to no unit. A space or a newline merges
        into the next token of the joined text, so a gap of one token adds nothing (every gap of
        ordinary prose); a longer run (``"\\t \\r\\n \\n\\n \\t"``) counts, else a whitespace-heavy text
        made segments of several times ``max_segment_tokens`` and clusters over their cap."""
        bounds = [(0, spans[0].start, 0)] + [(a.end, b.start, i) for i, (a, b) in enumerate(zip(spans, spans[1:]))]
        bounds.append((spans[-1].end, len(text), len(spans) - 1))
        gaps = [(a, b, i) for a, b, i in bounds if b - a > 1]
        if not gaps:
            return tokens
        out = list(tokens)
        for (_, _, i), n in zip(gaps, count_many(self.count_tokens, [text[a:b] for a, b, _ in gaps])):
            out[i] += max(0, int(n) - 1)
        return out

    def _cluster_tokens(self, text: str, segments: list[Segment], ranges: list[range]) -> list[int]:
        return count_many(self.count_tokens, [text[segments[r.start].start : segments[r.stop - 1].end] for r in ranges])

    def _progress(self, items: Any, desc: str) -> Any:
        if not self.show_progress:
            return items
        from tqdm.auto import tqdm

        # disable=None: a bar only when stderr is a terminal (no carriage-return noise in a pipe or log);
        # without one, the lines of hseg.progress tell how far long work is
        return tqdm(items, desc=desc, leave=False, disable=None)


def _heading_lines(spans: list[Span], headings: Sequence[Heading], first: Mapping[int, int]) -> frozenset[int]:
    """Indices of the sentence units that are heading markup (each heading starts one, ``first``
    maps a unit's start to its index; a Setext heading's title and underline are two or more)."""
    out = set()
    for h in headings:
        i = first[h.start]
        while i < len(spans) and spans[i].end <= h.end:
            out.add(i)
            i += 1
    return frozenset(out)


def _split_at(text: str, spans: list[Span], cuts: Sequence[int]) -> list[Span]:
    """``spans`` with every span that holds a cut position after its start cut there.

    A heading must start a unit, and the sentence splitter can join a Setext heading's first line
    to the line above it (a short underline reads as text to it); a cut is never at whitespace
    (headings start at their first non-blank character), so both pieces stay tight and non-empty.
    """
    out: list[Span] = []
    at = sorted(set(cuts))
    j = 0
    for span in spans:
        while j < len(at) and at[j] <= span.start:
            j += 1
        start = span.start
        while j < len(at) and at[j] < span.end:
            out.append(Span(start, start + len(text[start : at[j]].rstrip())))
            start = at[j]
            j += 1
        out.append(Span(start, span.end))
    return out
