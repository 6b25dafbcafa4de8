"""Segmenters: which sentences end a segment.

The interface is one method, ``boundaries(sentences, embeddings) -> list[int]``: the sorted indices
of the sentences that *end* a segment (the last sentence, ``n - 1``, is always one). A segmenter may
also offer ``gap_scores(sentences, embeddings) -> np.ndarray`` of shape ``(n - 1,)``: how strongly
the gap after each sentence looks like a boundary (a probability for a trained model). The chunker
uses those scores to cut over-long segments at their strongest gap and to merge short ones across
their weakest, and the HTML viewer shows them.

How and why: docs/design.md, ``hseg.segmentation.segmenters``.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from hseg.segmentation.bilstm_core import DEFAULT_WEIGHTS, ArraysSegmenter
from hseg.segmentation.cohesion import depth_scores, window_similarity

logger = logging.getLogger(__name__)


@runtime_checkable
class Segmenter(Protocol):
    """Predicts segment ends from sentences and their (L2-normalised) embeddings."""

    name: str

    def boundaries(self, sentences: Sequence[str], embeddings: np.ndarray) -> list[int]: ...


@dataclass
class TextTilingSegmenter:
    """Unsupervised segmenter: TextTiling depth scores over sentence-embedding windows.

    A gap becomes a boundary when its depth score is a local maximum and exceeds
    ``mean(depth) + threshold_std * std(depth)`` over the document (Hearst's relative cutoff,
    so it adapts to how cohesive each document is), and when at least ``min_sentences`` sentences
    separate it from the previous boundary.

    Args:
        window: sentences on each side of a gap whose mean embeddings are compared.
        threshold_std: the cutoff in standard deviations of the depth scores.
        min_sentences: the fewest sentences a segment may have.

    The defaults were tuned with all-MiniLM-L6-v2 on ``wiki_dev`` and Choi subset 1 (mean
    per-document Pk / WindowDiff, segeval's k) over window 2..12, threshold_std -0.5..2 and
    min_sentences 2..8:

    ==================  ================  ================
    window/std/min      wiki_dev          choi/1
    ==================  ================  ================
    3 / 0.0 / 2 (old)   0.538 / 0.768     0.135 / 0.160
    6 / 1.0 / 3 (now)   0.400 / 0.443     0.129 / 0.129
    4 / 0.5 / 3         0.498 / 0.606     0.072 / 0.075
    ==================  ================  ================

    Choi alone prefers the short window, which over-segments real documents: their sections are
    longer and less contrasted than Choi's concatenated excerpts.

    Example:
        >>> import numpy as np
        >>> emb = np.repeat(np.eye(3, dtype=np.float32), 4, axis=0)  # three topics, 4 sentences each
        >>> TextTilingSegmenter(window=2).boundaries(["s"] * 12, emb)
        [3, 7, 11]
    """

    window: int = 6
    threshold_std: float = 1.0
    min_sentences: int = 3
    name: str = "texttiling"

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window!r}")
        if self.min_sentences < 1:
            raise ValueError(f"min_sentences must be >= 1, got {self.min_sentences!r}")

    def gap_scores(self, sentences: Sequence[str], embeddings: np.ndarray) -> np.ndarray:
        """Depth score of each gap, scaled to [0, 1] by the document's largest depth."""
        depth = depth_scores(window_similarity(embeddings, self.window))
        top = depth.max() if len(depth) else 0.0
        return (depth / top if top > 0 else depth).astype(np.float32)

    def boundaries(self, sentences: Sequence[str], embeddings: np.ndarray) -> list[int]:
        n = len(sentences)
        if len(embeddings) != n:
            raise ValueError(f"embeddings has {len(embeddings)} rows for {n} sentences")
        if n == 0:
            return []
        depth = self.gap_scores(sentences, embeddings)
        if len(depth) == 0:
            return [n - 1]
        cutoff = depth.mean() + self.threshold_std * depth.std()
        padded = np.concatenate([[-np.inf], depth, [-np.inf]])
        peaks = (depth >= padded[:-2]) & (depth > padded[2:]) & (depth > cutoff) & (depth > 0)
        # strongest peaks first so the min_sentences spacing keeps the best of two close candidates;
        # ``chosen`` stays sorted, so the spacing test looks at the two nearest gaps only (linear in
        # practice: a scan of every chosen gap was quadratic on books with 50k+ sentences)
        chosen: list[int] = []
        for gap in sorted(np.flatnonzero(peaks).tolist(), key=lambda g: -depth[g]):
            if gap + 1 < self.min_sentences or n - (gap + 1) < self.min_sentences:
                continue
            j = bisect.bisect_left(chosen, gap)
            if (j == len(chosen) or chosen[j] - gap >= self.min_sentences) and \
                    (j == 0 or gap - chosen[j - 1] >= self.min_sentences):
                chosen.insert(j, gap)
        return chosen + [n - 1]


def enforce_length_limits(
    ends: Sequence[int],
    token_counts: Sequence[int],
    gap_strength: np.ndarray,
    *,
    min_tokens: int,
    max_tokens: int,
    glued: Collection[int] = (),
) -> list[int]:
    """Apply segment length limits, in tokens, to segmenter output.

    A segment over ``max_tokens`` is cut at its strongest inner gap, recursively, until every
    piece fits or is a single sentence. Then a segment under ``min_tokens`` merges with the
    neighbour across its weaker boundary, preferring a merge that stays within ``max_tokens``.

    Args:
        ends: sorted segment end indices (last sentence of each segment).
        token_counts: tokens per sentence.
        gap_strength: ``(n - 1,)`` boundary strength of the gap after each sentence.
        glued: sentences the next one is glued to (a markdown heading and the text under it): the
            gap after them is never a boundary, neither from ``ends`` nor cut for ``max_tokens``,
            so a piece that cannot be cut elsewhere stays over it.
    """
    n = len(token_counts)
    if n == 0:
        return []
    if min_tokens < 0 or max_tokens <= 0 or min_tokens > max_tokens:
        raise ValueError(f"need 0 <= min_tokens <= max_tokens and max_tokens > 0, got {min_tokens}, {max_tokens}")
    csum = np.concatenate([[0], np.cumsum(token_counts)])
    strength = np.asarray(gap_strength, dtype=np.float64)

    def size(a: int, b: int) -> int:  # sentences a..b inclusive
        return int(csum[b + 1] - csum[a])

    keep = {int(g) for g in glued if 0 <= int(g) < n - 1}
    cuttable = strength
    if keep:
        cuttable = strength.copy()
        cuttable[sorted(keep)] = -np.inf
    cut: list[int] = []
    start = 0
    for end in _normalised_ends([e for e in ends if int(e) not in keep], n):
        cut.extend(_split_long(start, end, size, cuttable, max_tokens))
        start = end + 1
    return _merge_short(cut, size, strength, min_tokens, max_tokens)


def _normalised_ends(ends: Sequence[int], n: int) -> list[int]:
    out = sorted({int(e) for e in ends if 0 <= int(e) < n - 1})
    return out + [n - 1]


def _split_long(a: int, b: int, size, strength: np.ndarray, max_tokens: int) -> list[int]:
    stack, out = [(a, b)], []
    while stack:
        lo, hi = stack.pop()
        if hi == lo or size(lo, hi) <= max_tokens:
            out.append(hi)
            continue
        gap = lo + int(np.argmax(strength[lo:hi]))  # strongest gap among lo..hi-1
        if strength[gap] == -np.inf:  # every gap is glued (enforce_length_limits): no cut
            out.append(hi)
            continue
        stack.append((gap + 1, hi))
        stack.append((lo, gap))
    return sorted(out)


def _merge_short(ends: list[int], size, strength: np.ndarray, min_tokens: int, max_tokens: int) -> list[int]:
    ends = list(ends)
    changed = True
    while changed and len(ends) > 1:
        changed = False
        i = 0
        while i < len(ends) and len(ends) > 1:
            start = ends[i - 1] + 1 if i else 0
            if size(start, ends[i]) >= min_tokens:
                i += 1
                continue
            options = []
            if i > 0:  # merge with previous: drop boundary ends[i-1]
                prev_start = ends[i - 2] + 1 if i > 1 else 0
                options.append((size(prev_start, ends[i]) > max_tokens, strength[ends[i - 1]], i - 1))
            if i < len(ends) - 1:  # merge with next: drop boundary ends[i]
                options.append((size(start, ends[i + 1]) > max_tokens, strength[ends[i]], i))
            over, _, drop = min(options)
            if over:  # every merge would break the cap: leave the short segment alone
                i += 1
                continue
            del ends[drop]
            changed = True
    return ends


def _bilstm(device: str | None = None) -> Segmenter:
    # the shipped weights load only when someone asks for this segmenter, and run in numpy (their
    # arrays, hseg/segmentation/bilstm_core.py) unless a device is named: the torch model is imported
    # on use, so the default imports no torch. The weights expect all-MiniLM-L6-v2 embeddings; with another encoder's
    # dimension it falls back to TextTiling (with a warning) so the default keeps working for every encoder.
    if device is not None and device != "cpu":
        from hseg.segmentation.bilstm import BiLSTMSegmenter

        return BiLSTMSegmenter.load(device=device, fallback=TextTilingSegmenter())
    return ArraysSegmenter.load(fallback=TextTilingSegmenter())


def _texttiling(device: str | None = None) -> Segmenter:
    return TextTilingSegmenter()  # numpy on the CPU wherever the encoder runs


#: name -> factory taking the ``device`` a model may run on (``None``: the CPU, in numpy); heavier
#: segmenters register lazily-importing factories here.
SEGMENTERS = {"texttiling": _texttiling, "bilstm": _bilstm}

#: what ``HierarchicalChunker(segmenter=None)`` uses: the shipped BiLSTM, which beats TextTiling on
#: wiki_dev, Choi 1-2 and held-out OpenStax books (Pk and WindowDiff, see hseg/models/README.md).
DEFAULT_SEGMENTER = "bilstm"

#: the suffix of BiLSTM weights written by ``BiLSTMSegmenter.save`` / ``hseg train-segmenter``
WEIGHTS_SUFFIX = ".pt"


def weights_file(segmenter: str | os.PathLike[str] | None) -> Path | None:
    """The weights file a segmenter given by name or path (``None``: the default) is read from, without
    reading it: the shipped one for the BiLSTM, the file of a path; ``None`` for TextTiling.

    Example:
        >>> weights_file("texttiling") is None, weights_file(None) == DEFAULT_WEIGHTS
        (True, True)
    """
    spec = segmenter_spec(DEFAULT_SEGMENTER if segmenter is None else segmenter)
    if isinstance(spec, Path):
        return spec
    return DEFAULT_WEIGHTS if spec == "bilstm" else None


def segmenter_spec(spec: str | os.PathLike[str]) -> str | Path:
    """What a segmenter string names: a registered name (returned as is) or a weights file (its ``Path``).

    Loads nothing, so settings can be validated before any model is read. A registered name wins
    over a file of the same name in the working directory. ``ValueError`` naming ``segmenter`` when
    ``spec`` is neither a name nor an existing file (a ``.pt`` path that does not exist included).

    Example:
        >>> segmenter_spec("texttiling")
        'texttiling'
        >>> segmenter_spec("my_segmenter.pt")  # doctest: +SKIP
        PosixPath('my_segmenter.pt')
    """
    if isinstance(spec, str) and spec in SEGMENTERS:
        return spec
    path = Path(spec)
    if path.is_file():
        return path
    if path.suffix == WEIGHTS_SUFFIX:
        raise ValueError(f"segmenter: no weights file at {str(spec)!r}")
    raise ValueError(f"segmenter: unknown name {str(spec)!r}; choose one of {sorted(SEGMENTERS)} or give the path "
                     f"of weights saved by 'hseg train-segmenter' (a {WEIGHTS_SUFFIX} file)")


def get_segmenter(segmenter: str | os.PathLike[str] | Segmenter | None = None, *,
                  encoder_name: str | None = None, device: str | None = None) -> Segmenter:
    """Resolve a segmenter: a registered name, the path of saved BiLSTM weights, or an instance.

    ``None`` is the default segmenter. With ``encoder_name`` (the sentence encoder the segmenter
    will see), a segmenter trained on another encoder is refused with ``ValueError``, except the
    default, which falls back to TextTiling (trained weights expect the embeddings they were
    trained on, and the default must work with every encoder). ``device`` (``"cuda"``, ...) runs the
    BiLSTM on torch there; without one the shipped BiLSTM runs in numpy on the CPU, and weights
    given by path on torch's best device.

    Example:
        >>> get_segmenter("texttiling").name
        'texttiling'
        >>> get_segmenter(None, encoder_name="BAAI/bge-small-en-v1.5").name  # doctest: +SKIP
        'texttiling'
        >>> get_segmenter("my_segmenter.pt", encoder_name="all-MiniLM-L6-v2")  # doctest: +SKIP
        <hseg.segmentation.bilstm.BiLSTMSegmenter object at ...>
        >>> get_segmenter("bilstm").name  # the shipped weights, run in numpy  # doctest: +SKIP
        'bilstm'
    """
    resolved = _build(DEFAULT_SEGMENTER if segmenter is None else segmenter, device)
    check = getattr(resolved, "check_encoder", None)
    if encoder_name is None or check is None:
        return resolved
    try:
        check(encoder_name=encoder_name)
    except ValueError:
        if segmenter is not None:
            raise
        logger.info("default segmenter expects another encoder than %s: using texttiling", encoder_name)
        return TextTilingSegmenter()
    return resolved


def _build(segmenter: str | os.PathLike[str] | Segmenter, device: str | None = None) -> Segmenter:
    if isinstance(segmenter, (str, os.PathLike)):
        spec = segmenter_spec(segmenter)
        if isinstance(spec, str):
            return SEGMENTERS[spec](device=device)
        from hseg.segmentation.bilstm import BiLSTMSegmenter

        # no fallback: weights asked for by path are refused with another encoder, not replaced
        return BiLSTMSegmenter.load(spec, device=device)
    if not hasattr(segmenter, "boundaries"):
        raise ValueError(f"segmenter: {segmenter!r} has no boundaries() method")
    return segmenter
