"""The settings fingerprint every record carries (``chunk_settings``): hseg version, encoder,
tokenizer, segmenter and its configuration, sizes. A document stored with the same text and
fingerprint is skipped by ``hseg index``; another fingerprint re-chunks it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only
    from hseg.chunking.chunker import HierarchicalChunker
    from hseg.chunking.config import ChunkerConfig


@runtime_checkable
class Fingerprinted(Protocol):
    """A chunker that knows its own settings fingerprint (:class:`~hseg.ingest.lazy.LazyChunker`:
    without building the chunker when it can); :func:`chunk_settings` asks it rather than reading it."""

    def fingerprint(self) -> str: ...


def chunk_settings(chunker: HierarchicalChunker | Fingerprinted) -> str:
    """A fingerprint of what decides the chunks: changing any of it re-chunks stored documents.

    Deterministic JSON of the hseg version (an upgraded algorithm re-chunks), the encoder, the
    token counter, the segmenter's configuration (see :func:`segmenter_config`) and the sizes. A
    :class:`Fingerprinted` chunker gives its own.

    Args:
        chunker: the chunker whose chunks are fingerprinted.

    Returns:
        The fingerprint, a JSON string every record of a document chunked with it carries.

    Raises:
        Nothing of its own: it reads what the chunker already resolved.
    """
    import hseg

    if isinstance(chunker, Fingerprinted):
        return str(chunker.fingerprint())

    parts = {
        **chunker.config.to_dict(runtime=False),
        "hseg": hseg.__version__,
        # what the settings resolved to: the encoder's canonical name, the counter, the weights
        "encoder": getattr(chunker.encoder, "name", "?"),
        "tokenizer": token_counter_name(getattr(chunker, "count_tokens", None)),
        "segmenter": segmenter_config(chunker.segmenter),
    }
    return json.dumps(parts, sort_keys=True, separators=(",", ":"))


def settings_key(config: ChunkerConfig, encoder_name: str) -> str | None:
    """What decides :func:`chunk_settings` of a chunker built from ``config`` with the encoder
    ``encoder_name``, read without building it (no model, no torch): the settings, the hseg version and
    the SHA-256 of the segmenter's weights file. Equal keys give equal fingerprints, so a store can
    remember the fingerprint of a key and a run that chunks nothing need not build the chunker
    (:class:`~hseg.ingest.lazy.LazyChunker`). ``None`` when objects decide it (a segmenter or
    tokenizer instance).

    Example:
        >>> from hseg.chunking.config import ChunkerConfig
        >>> settings_key(ChunkerConfig(segmenter="texttiling"), "all-MiniLM-L6-v2") is not None
        True
    """
    import hseg
    from hseg.segmentation.segmenters import weights_file

    segmenter, tokenizer = config.segmenter, config.tokenizer
    if (segmenter is not None and not isinstance(segmenter, (str, os.PathLike))) or \
            (tokenizer is not None and not isinstance(tokenizer, str)):
        return None
    weights = weights_file(segmenter)
    parts = {**config.replace(encoder=None).to_dict(runtime=False), "encoder": encoder_name, "hseg": hseg.__version__,
             "weights_sha256": None if weights is None else hashlib.sha256(weights.read_bytes()).hexdigest()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()


def token_counter_name(counter: Any) -> str | None:
    """What a chunker measures sizes in, by name.

    Args:
        counter: a token counter (a chunker's ``count_tokens``), or ``None``.

    Returns:
        ``tiktoken:<encoding>``, the counter's ``name``, or the callable's qualified name (the best a
        plain function offers); ``None`` for no counter.

    Raises:
        Nothing of its own.
    """
    if counter is None:
        return None
    encoding = getattr(counter, "encoding", None)
    if isinstance(encoding, str):
        return f"tiktoken:{encoding}"
    name = getattr(counter, "name", None)
    if isinstance(name, str):
        return name
    target = counter if hasattr(counter, "__qualname__") else type(counter)
    return f"{getattr(target, '__module__', '?')}.{target.__qualname__}"


#: segmenter attributes read when present (TextTiling's and the BiLSTM's). Device, threads and the
#: like are left out on purpose: they change speed, not boundaries.
_SEGMENTER_PARAMS = ("threshold", "threshold_std", "window", "overlap", "min_sentences")


def segmenter_config(segmenter: Any) -> dict[str, Any]:
    """A segmenter's name and the settings that change its boundaries, as JSON-ready values.

    Read from public attributes (a segmenter need not describe itself): the init fields of a
    dataclass segmenter, the known parameters in ``_SEGMENTER_PARAMS``, ``weights_sha256`` of a
    trained ``model`` (its state dict, so the same weights from another path compare equal), and the
    ``fallback`` segmenter's own configuration.

    Args:
        segmenter: any segmenter (a ``boundaries`` method; see :mod:`hseg.segmentation.segmenters`).

    Returns:
        ``{"name": ..., setting: value, ...}``, JSON-ready.

    Raises:
        Nothing of its own: attributes that are not JSON scalars are left out.
    """
    config: dict[str, Any] = {"name": getattr(segmenter, "name", type(segmenter).__name__)}
    fields = [f.name for f in dataclasses.fields(segmenter) if f.init and not f.name.startswith("_")] \
        if dataclasses.is_dataclass(segmenter) else []
    for attr in (*fields, *_SEGMENTER_PARAMS):
        value = _json_scalar(getattr(segmenter, attr, None))
        if value is not None:
            config[attr] = value
    weights = _weights_sha256(getattr(segmenter, "model", None))
    if weights is not None:
        config["weights_sha256"] = weights
    fallback = getattr(segmenter, "fallback", None)
    if fallback is not None:
        config["fallback"] = segmenter_config(fallback)
    return config


def _json_scalar(value: Any) -> bool | int | float | str | None:
    """``value`` as a JSON scalar, or ``None`` for anything else (objects, tensors, callables)."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # a numpy/torch scalar
        return _json_scalar(value.item())
    return None


def _weights_sha256(model: Any) -> str | None:
    """SHA-256 over a torch module's state dict (names, dtypes, shapes and values), or ``None``."""
    state_dict = getattr(model, "state_dict", None)
    if not callable(state_dict):
        return None
    digest = hashlib.sha256()
    for key, tensor in sorted(state_dict().items()):
        tensor = tensor.detach().cpu().contiguous()
        try:
            array = tensor.numpy()
        except TypeError:  # a dtype numpy lacks (bfloat16): hash its float32 values
            array = tensor.float().numpy()
        digest.update(f"{key}|{array.dtype}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()
