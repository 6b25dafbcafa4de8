"""hseg's benchmarks: the runs a maintainer repeats, on the harness they share.

Every run is a module, started from the repository root as ``python -m benchmarks.<run>``
(``--help`` lists its options); the current numbers, with the command and commit of each, are in
``benchmarks/RESULTS.md`` and each run's raw output in ``benchmarks/results/``. The layout
(docs/architecture.md, "Benchmarks"):

- :mod:`benchmarks.harness`: the evaluation, baselines, peers, hseg's methods, the paired
  statistics, the latency runs' stores and timing;
- retrieval quality: :mod:`~benchmarks.retrieval` (every registered method, Chroma's token-level
  protocol) and :mod:`~benchmarks.paired` (two methods question by question);
- query latency: :mod:`~benchmarks.query_latency` (every unit and path against a plain query),
  :mod:`~benchmarks.lexical_cache` (the default search, first asked and asked again),
  :mod:`~benchmarks.query_cold_start` (``hseg query`` in a fresh process);
- ingestion: :mod:`~benchmarks.ingest_speed` (against the peers) and :mod:`~benchmarks.ingest_scale`
  (Ray Data workers);
- stores that grow and share: :mod:`~benchmarks.server_writes` (a reader while another process
  writes) and :mod:`~benchmarks.scale` (up to a million records);
- segmentation: :mod:`~benchmarks.segmenter_vs_texttiling`;
- reliability (docs/reliability.md): :mod:`~benchmarks.fuzz`, :mod:`~benchmarks.crash_loop`,
  :mod:`~benchmarks.large_input`.

A run measures the library through its public options only; experiments that answered a question
once are not kept here: their answer, command and commit are in docs/decisions.md.
"""

import os

# nothing a benchmark runs may reach a model hub or send telemetry
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
