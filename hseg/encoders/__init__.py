"""Sentence encoders: model identity and offline lookup, the torch and ONNX Runtime backends, the
encoder protocol, and the one factory (:func:`as_encoder`).

Arrows point one way: ``identity`` ← ``base`` (protocol) ← ``torch_backend`` / ``onnx_model`` ←
``onnx_export`` ← ``onnx_runtime`` ← ``factory``.
"""

from hseg.encoders.base import (
    BACKENDS,
    DEFAULT_BACKEND,
    CachingEncoder,
    CallableEncoder,
    Encoder,
    check_backend,
    l2_normalize,
)
from hseg.encoders.factory import EncoderLoadError, LazyEncoder, as_encoder, load_encoder
from hseg.encoders.identity import (
    DEFAULT_MODEL,
    canonical_model_name,
    model_folder,
    offline_model_path,
    source_identity,
    weights_path,
)
from hseg.encoders.onnx_model import GRAPH_NAME, ExportedModel, OnnxManifest, model_cache_folder, onnx_cache_dir
from hseg.encoders.onnx_runtime import OnnxEncoder
from hseg.encoders.torch_backend import SentenceTransformerEncoder, auto_device, sentence_embedding_dimension

__all__ = [
    "BACKENDS", "DEFAULT_BACKEND", "EncoderLoadError", "DEFAULT_MODEL", "GRAPH_NAME", "CachingEncoder",
    "CallableEncoder", "Encoder",
    "ExportedModel", "LazyEncoder", "OnnxEncoder", "OnnxManifest", "SentenceTransformerEncoder", "as_encoder",
    "auto_device", "canonical_model_name", "check_backend", "l2_normalize", "load_encoder", "model_cache_folder",
    "model_folder", "offline_model_path", "onnx_cache_dir", "sentence_embedding_dimension", "source_identity",
    "weights_path",
]
