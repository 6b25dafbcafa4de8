"""Chunking, the paper's step 2: the chunker's settings, segments and clusters with exact spans,
clique clustering, the metadata schema of a chunk's records, and the HTML viewer of a chunking."""
