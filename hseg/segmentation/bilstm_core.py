"""The BiLSTM segmenter without torch: its input features, the windows a long document is read in,
scores to boundaries, and the forward pass of trained weights in numpy.

How and why: docs/design.md, ``hseg.segmentation.bilstm_core``.

Example:
    >>> seg = ArraysSegmenter.load()  # the shipped weights  # doctest: +SKIP
    >>> seg.boundaries(sentences, encoder.encode(sentences))  # doctest: +SKIP
    [7, 19, 30]
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hseg.segmentation.cohesion import depth_scores, window_similarity

logger = logging.getLogger(__name__)

#: the TextTiling windows (sentences a side) whose gap signals a new model is trained on. The long
#: ones carry what tuned TextTiling finds on textbooks and Wikipedia (its best window on both
#: development sets is 16, benchmarks/segmenter_vs_texttiling.py); a model card records its own set.
GAP_WINDOWS = (1, 2, 3, 5, 8, 12, 16, 24)
#: the set of models whose card names none (the first shipped weights)
LEGACY_GAP_WINDOWS = (1, 2, 3, 5, 8)
#: windows per forward pass in ``gap_scores``: bounds memory on long documents (a document of up to
#: WINDOW_BATCH windows, ~6000 sentences, still goes in one pass)
WINDOW_BATCH = 64
#: the shipped BiLSTM weights, the torch file (the model card is the ``.json`` next to it); named here,
#: in the torch-free half, so that the registry (:mod:`hseg.segmentation.segmenters`) and the torch
#: model (:mod:`hseg.segmentation.bilstm`) both read it from below them
DEFAULT_WEIGHTS = Path(__file__).parents[1] / "models" / "bilstm_segmenter.pt"
#: the shipped weights as numpy arrays (beside the torch file; the model card is the same ``.json``)
DEFAULT_ARRAYS = DEFAULT_WEIGHTS.with_suffix(".npz")


def gap_feature_count(windows: Sequence[int] = GAP_WINDOWS) -> int:
    """Gap signals per sentence for a window set: similarity, its z-score, depth, scaled depth."""
    return 4 * len(windows)


def sentence_features(embeddings: np.ndarray, windows: Sequence[int] = GAP_WINDOWS) -> np.ndarray:
    """Per-sentence model input ``(n, d + gap_feature_count(windows))`` float32: the embedding, then
    the TextTiling signals of the gap *after* the sentence at each window (the last sentence gets
    neutral values).

    Example:
        >>> sentence_features(np.eye(4, dtype=np.float32), windows=(1, 2, 3, 5, 8)).shape
        (4, 24)
    """
    e = np.asarray(embeddings, dtype=np.float32)
    if e.ndim != 2:
        raise ValueError(f"embeddings must be 2-D (n, d), got shape {e.shape}")
    n = len(e)
    gap = np.zeros((n, gap_feature_count(windows)), dtype=np.float32)
    if n >= 2:
        cols = []
        for w in windows:
            sim = window_similarity(e, w)
            z = (sim - sim.mean()) / (sim.std() + 1e-6)  # relative to the document's own cohesion
            depth = depth_scores(sim)
            top = depth.max()
            cols += [sim, z, depth, depth / top if top > 0 else depth]
        gap[:-1] = np.stack(cols, axis=1)
        gap[-1, 0::4] = 1.0  # "no gap": as similar as can be, no depth
    return np.concatenate([e, gap], axis=1)


def window_starts(n: int, window: int, overlap: int) -> list[int]:
    """Start offsets of windows of ``window`` sentences overlapping by ``overlap`` covering ``0..n-1``.

    Example:
        >>> window_starts(10, 4, 1)
        [0, 3, 6]
    """
    if n <= window:
        return [0]
    step = max(1, window - overlap)
    starts = list(range(0, n - window, step))
    return starts + [n - window]


def boundaries_from_scores(scores: np.ndarray, threshold: float) -> list[int]:
    """Gaps whose probability reaches ``threshold`` and is a local maximum (so one boundary, not
    two adjacent ones, per uncertain transition). Returns sentence indices ending a segment.

    Example:
        >>> boundaries_from_scores(np.array([0.1, 0.7, 0.6, 0.2, 0.9]), 0.5)
        [1, 4]
    """
    p = np.asarray(scores, dtype=np.float64)
    if len(p) == 0:
        return []
    padded = np.concatenate([[-np.inf], p, [-np.inf]])
    keep = (p >= threshold) & (p >= padded[:-2]) & (p > padded[2:])
    return [int(i) for i in np.flatnonzero(keep)]


def _short(name: str) -> str:
    # "sentence-transformers/all-MiniLM-L6-v2" and "all-MiniLM-L6-v2" are the same model
    return name.rstrip("/").split("/")[-1].lower()


class WindowedSegmenter:
    """A trained sequence model behind the :class:`hseg.segmentation.segmenters.Segmenter` protocol:
    the model card, the threshold, the windows a long document is read in; a subclass gives the
    forward pass (:meth:`_forward`: windows of features in, boundary probabilities out).

    Args:
        card: the model card (``encoder`` name and ``dimension``, ``threshold``, ``window``, ...).
        threshold: boundary probability cutoff; defaults to the card's (chosen on dev data).
        window, overlap: long documents are read in windows of ``window`` sentences (default: the
            card's, else 128) overlapping by ``overlap`` (default a quarter window); each sentence
            takes its probability from the window where it lies farthest from an edge.
        fallback: a segmenter used (with a warning) for embeddings whose dimension differs from the
            card's, instead of raising. The registry's ``"bilstm"`` (the package default) sets
            TextTiling here, so a chunker with another encoder still segments; without a fallback,
            a mismatch raises ``ValueError``.
    """

    name = "bilstm"

    def __init__(self, card: Mapping[str, Any], *, threshold: float | None = None, window: int | None = None,
                 overlap: int | None = None, fallback: Any = None) -> None:
        window = int(window or card.get("window", 128))
        overlap = window // 4 if overlap is None else int(overlap)
        if window < 2 or not 0 <= overlap < window:
            raise ValueError(f"window/overlap: need window >= 2 and 0 <= overlap < window, got {window}, {overlap}")
        self.card = dict(card)
        self.threshold = float(self.card.get("threshold", 0.5) if threshold is None else threshold)
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must lie in (0, 1), got {self.threshold}")
        self.window, self.overlap = window, overlap
        self.gap_windows = tuple(int(w) for w in self.card.get("gap_windows", LEGACY_GAP_WINDOWS))
        self.fallback = fallback

    @property
    def dimension(self) -> int:
        return int(self.card["encoder"]["dimension"])

    def check_encoder(self, encoder_name: str | None = None, dimension: int | None = None) -> None:
        """Raise ``ValueError`` unless the encoder matches the one the model was trained on."""
        want = self.card["encoder"]
        if dimension is not None and int(dimension) != int(want["dimension"]):
            raise ValueError(f"encoder: embeddings have dimension {dimension}, but this segmenter was trained on "
                             f"{want['name']!r} ({want['dimension']}-d); use that encoder or retrain")
        if encoder_name is not None and _short(encoder_name) != _short(want["name"]):
            raise ValueError(f"encoder: {encoder_name!r} differs from {want['name']!r}, the encoder this segmenter "
                             "was trained on; use that encoder or retrain")

    def gap_scores(self, sentences: Sequence[str], embeddings: np.ndarray) -> np.ndarray:
        """Probability that each sentence but the last ends a segment, shape ``(n - 1,)``."""
        n = len(sentences)
        if len(embeddings) != n:
            raise ValueError(f"embeddings has {len(embeddings)} rows for {n} sentences")
        if n < 2:
            return np.zeros(0, dtype=np.float32)
        if self._use_fallback(embeddings):
            return np.asarray(self.fallback.gap_scores(sentences, embeddings), dtype=np.float32)
        self.check_encoder(dimension=np.asarray(embeddings).shape[1])
        feats = sentence_features(embeddings, self.gap_windows)
        starts = window_starts(n, self.window, self.overlap)
        size = min(n, self.window)
        # windows go through the model WINDOW_BATCH at a time: one batch of every window of a book
        # (600+ windows for 60k sentences) held ~1.4 GB of LSTM activations
        probs = np.concatenate([
            self._forward(np.stack([feats[s:s + size] for s in starts[i:i + WINDOW_BATCH]]))
            for i in range(0, len(starts), WINDOW_BATCH)
        ])
        out = np.zeros(n, dtype=np.float32)
        best = np.full(n, -1)
        for row, s in enumerate(starts):  # keep each sentence's prediction with the most context
            margin = np.minimum(np.arange(size), size - 1 - np.arange(size))
            better = margin > best[s:s + size]
            out[s:s + size][better] = probs[row][better]
            best[s:s + size][better] = margin[better]
        return out[:-1]

    def _forward(self, batch: np.ndarray) -> np.ndarray:
        """``(windows, size, features)`` float32 in, each sentence's boundary probability ``(windows, size)`` out."""
        raise NotImplementedError

    def _use_fallback(self, embeddings: np.ndarray) -> bool:
        e = np.asarray(embeddings)
        if self.fallback is None or e.ndim != 2 or e.shape[1] == self.dimension:
            return False
        logger.warning("bilstm segmenter: %d-d embeddings, trained on %s (%d-d); using %s instead", e.shape[1],
                       self.card["encoder"]["name"], self.dimension, getattr(self.fallback, "name", "the fallback"))
        return True

    def boundaries(self, sentences: Sequence[str], embeddings: np.ndarray) -> list[int]:
        n = len(sentences)
        if n == 0:
            if len(embeddings):
                raise ValueError(f"embeddings has {len(embeddings)} rows for 0 sentences")
            return []
        if self._use_fallback(embeddings):
            return list(self.fallback.boundaries(sentences, embeddings))
        return boundaries_from_scores(self.gap_scores(sentences, embeddings), self.threshold) + [n - 1]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow for large |x|


class NumpyBiLSTM:
    """The forward pass of a trained :class:`hseg.segmentation.bilstm.BiLSTMModel` from its state
    dict's arrays (``lstm.weight_ih_l0``, ``..._reverse``, ``out.1.weight``, ...), float32.

    Example:
        >>> model = NumpyBiLSTM(dict(np.load(DEFAULT_ARRAYS)), layers=2)  # doctest: +SKIP
        >>> model(np.zeros((1, 5, 416), np.float32)).shape  # doctest: +SKIP
        (1, 5)
    """

    def __init__(self, state: Mapping[str, np.ndarray], layers: int) -> None:
        def get(key: str) -> np.ndarray:
            if key not in state:
                raise ValueError(f"state: no array {key!r} (a BiLSTM of {layers} layers has one)")
            return np.asarray(state[key], dtype=np.float32)

        # per layer, per direction: input weights, recurrent weights, both biases summed
        self.layers = [[(get(f"lstm.weight_ih_l{k}{d}"), get(f"lstm.weight_hh_l{k}{d}"),
                         get(f"lstm.bias_ih_l{k}{d}") + get(f"lstm.bias_hh_l{k}{d}"))
                        for d in ("", "_reverse")] for k in range(layers)]
        self.out_w, self.out_b = get("out.1.weight"), get("out.1.bias")

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x`` ``(batch, steps, features)``: each step's boundary probability ``(batch, steps)``."""
        h = np.asarray(x, dtype=np.float32)
        for directions in self.layers:
            h = np.concatenate([self._direction(h, *weights, reverse=d == 1)
                                for d, weights in enumerate(directions)], axis=-1)
        logits = h @ self.out_w.T + self.out_b
        return _sigmoid(logits[..., 1] - logits[..., 0]).astype(np.float32)  # softmax's second entry

    @staticmethod
    def _direction(x: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, bias: np.ndarray, *, reverse: bool
                   ) -> np.ndarray:
        batch, steps, _ = x.shape
        hidden = w_hh.shape[1]
        projected = x @ w_ih.T + bias  # every step's input part at once
        h = np.zeros((batch, hidden), dtype=np.float32)
        c = np.zeros((batch, hidden), dtype=np.float32)
        out = np.empty((batch, steps, hidden), dtype=np.float32)
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            g = projected[:, t] + h @ w_hh.T
            i, f = _sigmoid(g[:, :hidden]), _sigmoid(g[:, hidden:2 * hidden])
            cell, o = np.tanh(g[:, 2 * hidden:3 * hidden]), _sigmoid(g[:, 3 * hidden:])
            c = f * c + i * cell
            h = o * np.tanh(c)
            out[:, t] = h
        return out


class ArraysSegmenter(WindowedSegmenter):
    """The BiLSTM segmenter run in numpy from weights saved as arrays (:data:`DEFAULT_ARRAYS`, the
    shipped model): the same probabilities as :class:`hseg.segmentation.bilstm.BiLSTMSegmenter` on
    the torch file, without torch.

    Example:
        >>> ArraysSegmenter.load().card["encoder"]["name"]  # doctest: +SKIP
        'sentence-transformers/all-MiniLM-L6-v2'
    """

    def __init__(self, model: NumpyBiLSTM, card: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(card, **kwargs)
        self.model = model

    def _forward(self, batch: np.ndarray) -> np.ndarray:
        return self.model(batch)

    @classmethod
    def load(cls, path: str | Path | None = None, **kwargs: Any) -> ArraysSegmenter:
        """The arrays at ``path`` (default: the shipped ones) with the model card beside them (``.json``)."""
        path = Path(path) if path is not None else DEFAULT_ARRAYS
        card_path = path.with_suffix(".json")
        if not path.is_file() or not card_path.is_file():
            raise ValueError(f"path: no segmenter arrays and model card at {str(path)!r} (and {card_path.name})")
        card = json.loads(card_path.read_text(encoding="utf-8"))
        with np.load(path) as arrays:
            model = NumpyBiLSTM({k: arrays[k] for k in arrays.files}, layers=int(card["model"]["layers"]))
        return cls(model, card, **kwargs)
