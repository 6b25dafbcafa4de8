"""The supervised segmenter: a BiLSTM over frozen sentence embeddings (after Koshorek et al. 2018).

Each sentence is represented by its frozen sentence-transformer embedding (the one the pipeline
computes anyway, instead of the paper's word-level BiLSTM) concatenated with the cohesion signals
TextTiling uses, so the model can at least learn that rule: the cosine of the windows before and
after the following gap at several window sizes, those cosines z-scored within the document (the
relative cutoff that makes TextTiling adapt to each document), and Hearst depth scores. A 2-layer
bidirectional LSTM (hidden 256) reads the sequence and predicts per sentence whether it ends a
segment (2-way softmax, cross-entropy).

Long documents are read in overlapping windows of ``window`` sentences; each sentence takes its
probability from the window where it lies farthest from an edge.

Example:
    >>> seg = BiLSTMSegmenter.load()  # the shipped weights  # doctest: +SKIP
    >>> seg.boundaries(sentences, encoder.encode(sentences))  # doctest: +SKIP
    [7, 19, 30]
"""

from __future__ import annotations

import json
import logging
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from hseg.segmentation.cohesion import depth_scores, window_similarity
from hseg.segmentation.segmenters import DEFAULT_WEIGHTS  # the shipped weights (torch file; card: .json beside)

__all__ = ["sentence_features", "BiLSTMModel", "BiLSTMSegmenter", "DEFAULT_WEIGHTS", "GAP_WINDOWS",
           "LEGACY_GAP_WINDOWS", "gap_feature_count"]

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


class BiLSTMModel(nn.Module):
    """2-layer BiLSTM over per-sentence features, 2-way output per sentence."""

    def __init__(self, input_dim: int, hidden: int = 256, layers: int = 2, dropout: float = 0.3) -> None:
        super().__init__()
        self.config = {"input_dim": input_dim, "hidden": hidden, "layers": layers, "dropout": dropout}
        self.input_dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(input_dim, hidden, num_layers=layers, bidirectional=True, batch_first=True,
                            dropout=dropout if layers > 1 else 0.0)
        self.out = nn.Sequential(nn.Dropout(dropout), nn.Linear(2 * hidden, 2))

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """``x``: ``(batch, seq, input_dim)``; returns logits ``(batch, seq, 2)``."""
        x = self.input_dropout(x)
        if lengths is not None:
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            h, _ = self.lstm(packed)
            h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])
        else:
            h, _ = self.lstm(x)
        return self.out(h)


def window_starts(n: int, window: int, overlap: int) -> list[int]:
    """Start offsets of windows of ``window`` sentences overlapping by ``overlap`` covering ``0..n-1``."""
    if n <= window:
        return [0]
    step = max(1, window - overlap)
    starts = list(range(0, n - window, step))
    return starts + [n - window]


class BiLSTMSegmenter:
    """The trained segmenter behind the :class:`hseg.segmentation.segmenters.Segmenter` protocol.

    Args:
        model: a trained :class:`BiLSTMModel`.
        card: the model card (``encoder`` name and ``dimension``, ``threshold``, metrics, ...).
        threshold: boundary probability cutoff; defaults to the card's (chosen on dev data).
        window, overlap: long documents are read in windows of ``window`` sentences (default: the
            card's, else 128) overlapping by ``overlap`` (default a quarter window).
        device: ``"cpu"``, ``"cuda"``; default CUDA when available.
        cpu_threads: torch threads for the forward pass on CPU (restored afterwards); ``None`` keeps
            torch's setting. One is fastest: the LSTM's per-step products are too small to split,
            and on a busy machine extra threads only spin (measured 0.9 % of the encoding time with
            one thread, 6.4 % with two on a loaded 2-core machine).
        fallback: a segmenter used (with a warning) for embeddings whose dimension differs from the
            card's, instead of raising. The registry's ``"bilstm"`` (the package default) sets
            TextTiling here, so a chunker with another encoder still segments; without a fallback,
            a mismatch raises ``ValueError``.
    """

    name = "bilstm"

    def __init__(self, model: BiLSTMModel, card: dict[str, Any], *, threshold: float | None = None,
                 window: int | None = None, overlap: int | None = None, device: str | None = None,
                 cpu_threads: int | None = 1, fallback: Any = None) -> None:
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
        if cpu_threads is not None and cpu_threads < 1:
            raise ValueError(f"cpu_threads must be >= 1 or None, got {cpu_threads!r}")
        self.cpu_threads = cpu_threads
        self.fallback = fallback
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model = model.to(self.device).float().eval()

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

    @torch.no_grad()
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
        feats = torch.from_numpy(sentence_features(embeddings, self.gap_windows))
        starts = window_starts(n, self.window, self.overlap)
        size = min(n, self.window)
        # windows go through the model WINDOW_BATCH at a time: one batch of every window of a book
        # (600+ windows for 60k sentences) held ~1.4 GB of LSTM activations
        probs = np.concatenate([
            self._forward(torch.stack([feats[s:s + size] for s in starts[i:i + WINDOW_BATCH]]).to(self.device))
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

    def _use_fallback(self, embeddings: np.ndarray) -> bool:
        e = np.asarray(embeddings)
        if self.fallback is None or e.ndim != 2 or e.shape[1] == self.dimension:
            return False
        logger.warning("bilstm segmenter: %d-d embeddings, trained on %s (%d-d); using %s instead", e.shape[1],
                       self.card["encoder"]["name"], self.dimension, getattr(self.fallback, "name", "the fallback"))
        return True

    def _forward(self, batch: torch.Tensor) -> np.ndarray:
        threads = torch.get_num_threads()
        limit = self.cpu_threads if self.device.type == "cpu" and self.cpu_threads != threads else None
        if limit is not None:
            torch.set_num_threads(limit)
        try:
            return torch.softmax(self.model(batch), dim=-1)[..., 1].float().cpu().numpy()
        finally:
            if limit is not None:
                torch.set_num_threads(threads)

    def boundaries(self, sentences: Sequence[str], embeddings: np.ndarray) -> list[int]:
        n = len(sentences)
        if n == 0:
            if len(embeddings):
                raise ValueError(f"embeddings has {len(embeddings)} rows for 0 sentences")
            return []
        if self._use_fallback(embeddings):
            return list(self.fallback.boundaries(sentences, embeddings))
        return boundaries_from_scores(self.gap_scores(sentences, embeddings), self.threshold) + [n - 1]

    # --- persistence -------------------------------------------------------------------------

    def save(self, path: str | Path, *, half: bool = True) -> Path:
        """Write the weights (float16 by default: half the size, same predictions to ~1e-3) and the
        model card as ``<path>.json``. Returns the weights path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {k: (v.half() if half and v.is_floating_point() else v).cpu()
                 for k, v in self.model.state_dict().items()}
        card = dict(self.card, threshold=self.threshold, window=self.window, model=self.model.config,
                    gap_windows=list(self.gap_windows))
        torch.save({"state_dict": state, "card": card}, path)
        path.with_suffix(".json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path | None = None, *, encoder: Any = None, device: str | None = None,
             **kwargs: Any) -> BiLSTMSegmenter:
        """Load saved weights (default: the shipped ones). With ``encoder``, refuse one whose name or
        dimension differs from the model card's (``ValueError``, as for a file that holds no saved
        segmenter).

        Example:
            >>> seg = BiLSTMSegmenter.load("my_segmenter.pt", encoder=encoder)  # doctest: +SKIP
            >>> seg.card["encoder"]  # doctest: +SKIP
            {'name': 'sentence-transformers/all-MiniLM-L6-v2', 'dimension': 384}
        """
        path = Path(path) if path is not None else DEFAULT_WEIGHTS
        if not path.is_file():
            raise ValueError(f"path: no segmenter weights at {str(path)!r}")
        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
            card = blob["card"]
            model = BiLSTMModel(**card["model"])
            model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in blob["state_dict"].items()})
        # torch reports a file that is not a saved segmenter with whatever its unpickler hit first
        except (pickle.UnpicklingError, EOFError, KeyError, TypeError, AttributeError, RuntimeError) as exc:
            raise ValueError(f"path: {str(path)!r} holds no segmenter saved by BiLSTMSegmenter.save "
                             f"({type(exc).__name__}: {exc})") from exc
        seg = cls(model, card, device=device, **kwargs)
        if encoder is not None:
            dim = getattr(encoder, "dimension", None)
            seg.check_encoder(getattr(encoder, "name", None), dim)
        return seg


def _short(name: str) -> str:
    # "sentence-transformers/all-MiniLM-L6-v2" and "all-MiniLM-L6-v2" are the same model
    return name.rstrip("/").split("/")[-1].lower()


def boundaries_from_scores(scores: np.ndarray, threshold: float) -> list[int]:
    """Gaps whose probability reaches ``threshold`` and is a local maximum (so one boundary, not
    two adjacent ones, per uncertain transition). Returns sentence indices ending a segment."""
    p = np.asarray(scores, dtype=np.float64)
    if len(p) == 0:
        return []
    padded = np.concatenate([[-np.inf], p, [-np.inf]])
    keep = (p >= threshold) & (p >= padded[:-2]) & (p > padded[2:])
    return [int(i) for i in np.flatnonzero(keep)]
