"""The torch backend: a sentence-transformers model behind the :class:`~hseg.encoders.base.Encoder` protocol.

torch and sentence-transformers are imported when a model loads, never at import time.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from hseg.encoders.base import _empty, l2_normalize
from hseg.encoders.identity import DEFAULT_MODEL, canonical_model_name, offline_model_path

logger = logging.getLogger(__name__)


def auto_device() -> str:
    """The best torch device available: cuda, then mps, then cpu."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


class SentenceTransformerEncoder:
    """A sentence-transformers model behind the :class:`Encoder` protocol.

    Args:
        model: a model name (default ``sentence-transformers/all-MiniLM-L6-v2``, served from the
            bundled offline package when installed) or a loaded ``SentenceTransformer``.
        device: ``"cpu"``, ``"cuda"``, ... ; ``None`` picks the best available.
        batch_size: texts per forward pass (32: sentences are short, and on CPU 32 measured faster
            than 64, ``docs/decisions.md``; raise it on a GPU).
        show_progress: show sentence-transformers' progress bar on long inputs.

    Example:
        >>> enc = SentenceTransformerEncoder()  # doctest: +SKIP
        >>> enc.encode(["a cat", "a dog"]).shape  # doctest: +SKIP
        (2, 384)
    """

    backend = "torch"

    def __init__(
        self,
        model: str | Any = DEFAULT_MODEL,
        *,
        device: str | None = None,
        batch_size: int = 32,
        show_progress: bool = False,
    ) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size!r}")
        self.batch_size = batch_size
        self.show_progress = show_progress
        if isinstance(model, str):
            self._name = canonical_model_name(model)
            self._model = self._load(model, device)
        else:
            if not hasattr(model, "encode"):
                raise ValueError(f"model must be a name or a SentenceTransformer, got {model!r}")
            self._model = model
            self._name = canonical_model_name(_model_name(model))
        _silence_length_warning(self._model)

    @staticmethod
    def _load(name: str, device: str | None) -> Any:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise ImportError("sentence-transformers is required: pip install sentence-transformers") from exc
        path = offline_model_path(name)
        device = device or auto_device()
        logger.info("loading encoder %s from %s on %s", name, path or "the model hub/cache", device)
        return SentenceTransformer(path or name, device=device)

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> Any:
        """The wrapped ``SentenceTransformer``."""
        return self._model

    @property
    def dimension(self) -> int:
        return sentence_embedding_dimension(self._model)

    @property
    def max_seq_length(self) -> int:
        """Longest input, in the model's own tokens, that the model reads without truncation."""
        return int(getattr(self._model, "max_seq_length", 512) or 512)

    def count_tokens(self, text: str) -> int:
        """Length of ``text`` in the model's own tokenizer, special tokens included."""
        return len(self._model.tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return _empty(self.dimension)
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=self.show_progress,
        )
        return l2_normalize(vectors)

    def encode_query(self, text: str) -> np.ndarray:
        encode_query = getattr(self._model, "encode_query", None)
        if encode_query is None:
            return self.encode([text])[0]
        vec = encode_query([text], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return l2_normalize(vec)[0]


def sentence_embedding_dimension(model: Any) -> int:
    """The output dimension of a ``SentenceTransformer`` (the method was renamed in version 6)."""
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


def _silence_length_warning(model: Any) -> None:
    """Mark transformers' one-time "Token indices sequence length is longer than the specified
    maximum sequence length ... will result in indexing errors" warning as already given.

    :meth:`SentenceTransformerEncoder.count_tokens` measures long sentences without truncation on
    purpose (the sentence splitter cuts what exceeds the window before anything is encoded), so
    the warning only alarms users; nothing longer than the window reaches the model.
    """
    tokenizer = getattr(model, "tokenizer", None)
    flags = getattr(tokenizer, "deprecation_warnings", None)
    if isinstance(flags, dict):
        flags["sequence-length-is-longer-than-the-specified-maximum"] = True


def _model_name(model: Any) -> str:
    card = getattr(model, "model_card_data", None)
    name = getattr(card, "base_model", None) or getattr(model, "name_or_path", None)
    if not name:
        path = getattr(getattr(model, "tokenizer", None), "name_or_path", None)
        name = path or type(model).__name__
    return str(name)
