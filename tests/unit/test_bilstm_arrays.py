"""The shipped BiLSTM run in numpy (``hseg.segmentation.bilstm_core``): the arrays are the torch
file's weights, the forward pass is torch's, and the default segmenter imports no torch. With the
real encoder on real documents: ``tests/e2e/test_bilstm_model.py``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from hseg.segmentation.bilstm_core import DEFAULT_ARRAYS, ArraysSegmenter, NumpyBiLSTM
from tests.support import REPO

torch = pytest.importorskip("torch")

from hseg.segmentation.bilstm import BiLSTMModel, BiLSTMSegmenter  # noqa: E402


def test_the_shipped_arrays_are_the_shipped_weights():
    # the arrays are written from the torch file (BiLSTMSegmenter.save_arrays): new weights need both
    blob = torch.load(DEFAULT_ARRAYS.with_suffix(".pt"), map_location="cpu", weights_only=True)
    with np.load(DEFAULT_ARRAYS) as arrays:
        assert sorted(arrays.files) == sorted(blob["state_dict"])
        for key, value in blob["state_dict"].items():
            assert np.array_equal(arrays[key], value.numpy()), key
    assert ArraysSegmenter.load().card == BiLSTMSegmenter.load().card


@pytest.mark.parametrize("layers", [1, 2])
def test_the_numpy_forward_pass_is_torchs(layers):
    torch.manual_seed(layers)
    model = BiLSTMModel(24, hidden=16, layers=layers).eval()
    x = np.random.default_rng(layers).standard_normal((3, 40, 24)).astype(np.float32)
    with torch.no_grad():
        want = torch.softmax(model(torch.from_numpy(x)), dim=-1)[..., 1].numpy()
    got = NumpyBiLSTM({k: v.numpy() for k, v in model.state_dict().items()}, layers=layers)(x)
    assert got.shape == (3, 40) and np.abs(got - want).max() < 1e-5


def test_the_shipped_model_scores_alike_in_numpy_and_torch():
    rng = np.random.default_rng(3)
    sentences = [f"s{i}" for i in range(300)]  # three windows and their overlaps
    vectors = rng.standard_normal((300, 384)).astype(np.float32)
    vectors[150:] += 2.0 * rng.standard_normal(384).astype(np.float32)  # a change of topic
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    arrays, weights = ArraysSegmenter.load(), BiLSTMSegmenter.load(device="cpu")
    assert np.abs(arrays.gap_scores(sentences, vectors) - weights.gap_scores(sentences, vectors)).max() < 1e-5
    assert arrays.boundaries(sentences, vectors) == weights.boundaries(sentences, vectors)


def test_the_default_segmenter_imports_no_torch():
    code = ("import sys, numpy as np\n"
            "from hseg.segmentation.segmenters import get_segmenter\n"
            "seg = get_segmenter(None, encoder_name='sentence-transformers/all-MiniLM-L6-v2')\n"
            "v = np.random.default_rng(0).standard_normal((20, 384)).astype(np.float32)\n"
            "ends = seg.boundaries([str(i) for i in range(20)], v)\n"
            "print(type(seg).__name__, ends[-1] == 19, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["ArraysSegmenter", "True", "False"]


def test_arrays_that_are_not_there_are_named(tmp_path):
    with pytest.raises(ValueError, match="no segmenter arrays"):
        ArraysSegmenter.load(tmp_path / "missing.npz")
    with pytest.raises(ValueError, match="no array .lstm.weight_hh_l0. .a BiLSTM of 2 layers"):
        NumpyBiLSTM({"lstm.weight_ih_l0": np.zeros((4, 2))}, layers=2)


def test_a_device_runs_the_shipped_model_on_torch_there_and_none_in_numpy():
    from hseg.segmentation.segmenters import get_segmenter

    assert isinstance(get_segmenter("bilstm"), ArraysSegmenter)
    assert isinstance(get_segmenter(None, device="cpu"), ArraysSegmenter)
    on_device = get_segmenter("bilstm", device="meta")  # torch's device without memory: no GPU needed here
    assert isinstance(on_device, BiLSTMSegmenter) and on_device.device.type == "meta"
    assert get_segmenter("texttiling", device="meta").name == "texttiling"  # numpy wherever the encoder runs
