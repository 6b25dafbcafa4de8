"""The ONNX backend's int8 variant, for measurement only (hseg does not offer it).

Dynamic quantisation of the exported graph's weight matrices (per channel; activations quantised at
run time; the attention products of two activations stay fp32), written as a copy of the model's
cache folder in a temporary cache root, so :class:`hseg.encoders.OnnxEncoder` loads it
unchanged. Measured (benchmarks/RESULTS.md, "Encoder backends"): ~1.7x the fp32 speed on 2 CPU
cores, but mean cosine 0.992 to the torch vectors and hseg's retrieval rows move by up to 2.5
recall points pooled (7.9 on one corpus), against issue 13's bound of 0.2, hence not offered.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any


def int8_encoder(model: str | None = None, *, device: str = "cpu") -> Any:
    """An :class:`~hseg.encoders.OnnxEncoder` running the int8 variant of ``model``'s export."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from hseg.encoders import GRAPH_NAME, OnnxEncoder

    fp32 = OnnxEncoder(model, device=device)  # exports once into the user's cache when needed
    root = Path(tempfile.mkdtemp(prefix="hseg-int8-"))
    folder = root / fp32.folder.name
    shutil.copytree(fp32.folder, folder, ignore=shutil.ignore_patterns(GRAPH_NAME))
    quantize_dynamic(str(fp32.folder / GRAPH_NAME), str(folder / GRAPH_NAME), weight_type=QuantType.QInt8,
                     per_channel=True, op_types_to_quantize=["MatMul"], extra_options={"MatMulConstBOnly": True})
    return OnnxEncoder(model, device=device, cache_dir=root)
