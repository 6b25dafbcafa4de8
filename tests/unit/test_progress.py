"""Progress of long work as log lines (issue 47 item 11): the chunker and ``hseg.ingest`` log on
``hseg.progress`` every few seconds and never print; tqdm bars only on a terminal. The CLI with its
stderr a pipe is ``tests/e2e/test_cli_progress_processes.py``; in-process CLI runs are
``tests/store/test_cli_progress.py``."""

from __future__ import annotations

import logging

import pytest

import hseg.progress
from hseg.progress import Progress
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import synthetic_book


class Lines(logging.Handler):
    """The messages logged on one logger, whatever its propagation (a CLI run in this process turns it off)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def progress_lines():
    log = logging.getLogger("hseg.progress")
    lines, level = Lines(), log.level
    log.addHandler(lines)
    log.setLevel(logging.INFO)  # (not the attribute: the logger caches what its level lets through)
    yield lines
    log.removeHandler(lines)
    log.setLevel(level)


def test_chunking_logs_how_far_it_is_and_prints_nothing(monkeypatch, capsys, progress_lines):
    # issue 47 item 11: the only progress were tqdm bars, drawn to stderr whatever it was (a pipe: a line
    # of carriage returns), and nothing told how far one large document was
    monkeypatch.setattr(hseg.progress, "INTERVAL_S", 0.0)  # every line, for the test
    text = synthetic_book(60_000)
    result = small_chunker(show_progress=True).chunk(text, "big.md")
    out, err = capsys.readouterr()
    assert out == "" and err == ""  # library code logs, never prints; no bar without a terminal
    lines = progress_lines.messages
    n = result.sentence_count
    assert "sentences split: 1 of 1 documents" in lines
    assert f"sentences encoded: {n} of {n}" in lines
    assert f"big.md: {n} sentences segmented into {len(result.segments)} segments" in lines
    assert f"big.md: {len(result.segments)} segments clustered into {len(result.clusters)} clusters" in lines


def test_short_work_logs_nothing_and_long_work_a_line_every_interval(progress_lines):
    now = [0.0]
    progress = Progress(interval_s=5.0, clock=lambda: now[0])
    for t in range(0, 23):  # a note every second for 22 seconds
        now[0] = float(t)
        progress.note("step %d", t)
    assert progress_lines.messages == ["step 5", "step 10", "step 15", "step 20"]
    quiet = Progress(interval_s=5.0, clock=lambda: 3.0)
    quiet.note("done")  # work shorter than the interval: nothing
    assert progress_lines.messages[-1] == "step 20"


def test_a_ray_job_logs_how_far_it_is_from_the_driver(monkeypatch, progress_lines):
    # the workers' progress lines stay in their processes and Ray Data draws bars only on a terminal,
    # so a job run with its output in a file showed nothing until it ended
    import dataclasses
    import json

    from hseg.ingest.ray import _add_up
    from hseg.ingest.run import IngestSummary

    monkeypatch.setattr(hseg.progress, "INTERVAL_S", 0.0)  # every line, for the test

    def row(**counts):
        return {"summary": json.dumps(dataclasses.asdict(IngestSummary(**counts))), "error": "",
                "started": 0.0, "finished": 1.0}

    total = _add_up([row(documents=3), row(documents=1, unchanged=2, failed=[("b.md", "empty")])], None, None)
    assert (total.documents, total.unchanged, len(total.failed)) == (4, 2, 1)
    assert progress_lines.messages == ["documents: 3 written, 0 unchanged, 0 failed, by 1 batches",
                                       "documents: 4 written, 2 unchanged, 1 failed, by 2 batches"]


def test_rebuilding_a_stores_indexes_logs_how_far_it_is(monkeypatch, progress_lines):
    # a lexical index rebuilt from the collection (a server client's first search, `hseg repair`) and
    # a unit index synced took minutes at a million records without a line
    import uuid

    import chromadb

    from hseg.store import HierarchicalStore
    from hseg_testing.fakes import HashingEncoder

    monkeypatch.setattr(hseg.progress, "INTERVAL_S", 0.0)  # every line, for the test
    chunkings = [small_chunker().chunk(synthetic_book(800, seed=i), f"book{i}.md") for i in range(2)]
    name = f"progress-{uuid.uuid4().hex[:8]}"
    store = HierarchicalStore(name, client=chromadb.EphemeralClient(), encoder=HashingEncoder(64))
    store.add(chunkings)
    segments = sum(len(ch.segments) for ch in chunkings)
    progress_lines.messages.clear()
    assert store.sync_lexical_index() == segments
    assert store.sync_unit_index() == segments
    lines = progress_lines.messages
    assert f"lexical index of {name!r}: {segments} segments indexed, merging their terms" in lines
    assert f"unit index of {name!r}: 2 of 2 documents, {segments} unit records written" in lines
