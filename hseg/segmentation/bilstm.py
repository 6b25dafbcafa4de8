"""The supervised segmenter: a BiLSTM over frozen sentence embeddings (after Koshorek et al. 2018).

How and why: docs/design.md, ``hseg.segmentation.bilstm``.

Example:
    >>> seg = BiLSTMSegmenter.load()  # the shipped weights  # doctest: +SKIP
    >>> seg.boundaries(sentences, encoder.encode(sentences))  # doctest: +SKIP
    [7, 19, 30]
"""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from hseg.segmentation.bilstm_core import (  # noqa: F401 (the torch-free half, named here too for deep imports)
    DEFAULT_ARRAYS,
    DEFAULT_WEIGHTS,
    GAP_WINDOWS,
    LEGACY_GAP_WINDOWS,
    WINDOW_BATCH,
    WindowedSegmenter,
    boundaries_from_scores,
    gap_feature_count,
    sentence_features,
    window_starts,
)

logger = logging.getLogger(__name__)


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


class BiLSTMSegmenter(WindowedSegmenter):
    """The trained segmenter on torch (:class:`~hseg.segmentation.bilstm_core.WindowedSegmenter` with a
    :class:`BiLSTMModel`): what training makes and saves, and what a weights file loads into. The
    shipped model runs without torch as :class:`~hseg.segmentation.bilstm_core.ArraysSegmenter`.

    Args:
        model: a trained :class:`BiLSTMModel`.
        card, threshold, window, overlap, fallback: as for
            :class:`~hseg.segmentation.bilstm_core.WindowedSegmenter`.
        device: ``"cpu"``, ``"cuda"``; default CUDA when available.
        cpu_threads: torch threads for the forward pass on CPU (restored afterwards); ``None`` keeps
            torch's setting. One is fastest: the LSTM's per-step products are too small to split,
            and on a busy machine extra threads only spin (measured 0.9 % of the encoding time with
            one thread, 6.4 % with two on a loaded 2-core machine).
    """

    def __init__(self, model: BiLSTMModel, card: dict[str, Any], *, threshold: float | None = None,
                 window: int | None = None, overlap: int | None = None, device: str | None = None,
                 cpu_threads: int | None = 1, fallback: Any = None) -> None:
        super().__init__(card, threshold=threshold, window=window, overlap=overlap, fallback=fallback)
        if cpu_threads is not None and cpu_threads < 1:
            raise ValueError(f"cpu_threads must be >= 1 or None, got {cpu_threads!r}")
        self.cpu_threads = cpu_threads
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model = model.to(self.device).float().eval()

    @torch.no_grad()
    def _forward(self, batch: np.ndarray) -> np.ndarray:
        threads = torch.get_num_threads()
        limit = self.cpu_threads if self.device.type == "cpu" and self.cpu_threads != threads else None
        if limit is not None:
            torch.set_num_threads(limit)
        try:
            logits = self.model(torch.from_numpy(np.ascontiguousarray(batch)).to(self.device))
            return torch.softmax(logits, dim=-1)[..., 1].float().cpu().numpy()
        finally:
            if limit is not None:
                torch.set_num_threads(threads)

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

    def save_arrays(self, path: str | Path = DEFAULT_ARRAYS, *, half: bool = True) -> Path:
        """Write the weights as numpy arrays (``.npz``; float16 by default, as :meth:`save` writes them)
        for :class:`~hseg.segmentation.bilstm_core.ArraysSegmenter`, which runs them without torch; the
        model card is the ``.json`` beside, as for :meth:`save`. Returns the path.

        Example:
            >>> BiLSTMSegmenter.load().save_arrays()  # the shipped arrays, from the shipped weights  # doctest: +SKIP
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {k: (v.half() if half and v.is_floating_point() else v).cpu().numpy()
                  for k, v in self.model.state_dict().items()}
        with path.open("wb") as f:
            np.savez(f, **arrays)
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
