"""Segmentation, the paper's step 1: which sentences end a segment (the BiLSTM and TextTiling
segmenters, their cohesion scores, training, the Wiki-727K reader and the Pk/WindowDiff metrics)."""

#: no names of its own: a stage folder whose modules are imported by their own names
#: (the chunker resolves a segmenter through :func:`~hseg.segmentation.segmenters.get_segmenter`)
__all__: list[str] = []
