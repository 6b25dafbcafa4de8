"""Chunking, the paper's step 2: the chunker's settings, segments and clusters with exact spans,
clique clustering, the metadata schema of a chunk's records, and the HTML viewer of a chunking."""

#: no names of its own: a stage folder whose modules are imported by their own names
#: (users reach the chunker and its results from :mod:`hseg`)
__all__: list[str] = []
