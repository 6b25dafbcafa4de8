"""Segmentation, the paper's step 1: which sentences end a segment (the BiLSTM and TextTiling
segmenters, their cohesion scores, training, the Wiki-727K reader and the Pk/WindowDiff metrics)."""
