"""Segmentation, the paper's step 1: which sentences end a segment (the BiLSTM and TextTiling
segmenters, their cohesion scores, training, the Wiki-727K reader and the Pk/WindowDiff metrics)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hseg.faces import lazy_names

if TYPE_CHECKING:  # the names of _HOME, for type checkers
    from hseg.segmentation.bilstm import BiLSTMSegmenter  # noqa: F401
    from hseg.segmentation.bilstm_core import ArraysSegmenter  # noqa: F401
    from hseg.segmentation.metrics import pk, windowdiff  # noqa: F401
    from hseg.segmentation.segmenters import (  # noqa: F401
        DEFAULT_SEGMENTER,
        SEGMENTERS,
        Segmenter,
        TextTilingSegmenter,
        get_segmenter,
    )
    from hseg.segmentation.training import TrainConfig, TrainResult, evaluate_segmenter, train_segmenter  # noqa: F401
    from hseg.segmentation.wiki727k import markdown_to_documents, read_wiki727k  # noqa: F401

#: each public name and the module that holds it, imported on first use
#: (the BiLSTM needs torch, training needs more)
_HOME = {
    "Segmenter": "hseg.segmentation.segmenters", "TextTilingSegmenter": "hseg.segmentation.segmenters",
    "get_segmenter": "hseg.segmentation.segmenters", "SEGMENTERS": "hseg.segmentation.segmenters",
    "DEFAULT_SEGMENTER": "hseg.segmentation.segmenters", "ArraysSegmenter": "hseg.segmentation.bilstm_core",
    "BiLSTMSegmenter": "hseg.segmentation.bilstm", "pk": "hseg.segmentation.metrics",
    "windowdiff": "hseg.segmentation.metrics", "TrainConfig": "hseg.segmentation.training",
    "TrainResult": "hseg.segmentation.training", "train_segmenter": "hseg.segmentation.training",
    "evaluate_segmenter": "hseg.segmentation.training", "read_wiki727k": "hseg.segmentation.wiki727k",
    "markdown_to_documents": "hseg.segmentation.wiki727k",
}

__all__ = list(_HOME)

__getattr__ = lazy_names(__name__, _HOME)
