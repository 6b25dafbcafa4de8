"""What the runs of :mod:`benchmarks` share.

- :mod:`.evaluation`: Chroma's token-level retrieval evaluation (data, metric, selection rules);
- :mod:`.baselines` and :mod:`.peers`: the peer chunkers and the BM25 / hybrid peers, each through
  the library its users call;
- :mod:`.hseg_methods`: hseg's methods, through the product's own chunker, store and search;
- :mod:`.stats`: the paired statistics (exact sign test, bootstrap interval);
- :mod:`.stores`: the stores the latency runs build (synthetic vectors, OpenStax text);
- :mod:`.timing`: interleaved timing, percentiles and the markdown a run prints and appends.
"""
