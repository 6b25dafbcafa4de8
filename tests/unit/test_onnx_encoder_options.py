"""The ONNX Runtime backend (issue 13) before any model loads: the backend setting, the encoder's
arguments, the export manifest and the cache folders. Its vectors, export and query path are
``tests/e2e/test_onnx_encoder.py``."""

from __future__ import annotations

import json

import pytest

from hseg.chunking.config import ChunkerConfig
from hseg.encoders import (
    BACKENDS,
    OnnxEncoder,
    OnnxManifest,
    as_encoder,
    model_cache_folder,
)
from hseg.encoders.onnx_model import MANIFEST_NAME


def test_backend_is_validated_everywhere_by_one_rule():
    assert BACKENDS == ("onnx", "torch")
    with pytest.raises(ValueError, match="backend must be one of"):
        ChunkerConfig(backend="tensorflow")
    with pytest.raises(ValueError, match="backend must be one of"):
        as_encoder(None, backend="tensorflow")


def test_onnx_encoder_rejects_bad_arguments_before_loading(tmp_path):
    with pytest.raises(ValueError, match="batch_size"):
        OnnxEncoder(batch_size=0, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="device"):
        OnnxEncoder(device="mps", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="threads"):
        OnnxEncoder(threads=0, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="threads applies to a model name on backend='onnx'"):
        as_encoder(None, backend="torch", threads=1)  # torch's threads are per process, not per encoder
    assert not any(tmp_path.iterdir()), "nothing may be exported for a refused argument"


def test_manifest_of_another_format_is_not_read(tmp_path):
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({"format": -1, "model": "m"}))
    assert OnnxManifest.read(tmp_path) is None
    (tmp_path / MANIFEST_NAME).write_text("{not json")
    assert OnnxManifest.read(tmp_path) is None


def test_cache_folders_of_different_names_differ(tmp_path):
    a = model_cache_folder("org/model-a", tmp_path)
    b = model_cache_folder("org/model_a", tmp_path)  # same slug, other name
    assert a != b and a.parent == b.parent == tmp_path
    # one model installed twice (two virtual environments): two exports, not one re-made in turn
    first = model_cache_folder("org/model-a", tmp_path, "/venv1/model.safetensors")
    second = model_cache_folder("org/model-a", tmp_path, "/venv2/model.safetensors")
    assert len({a, first, second}) == 3
