"""On a terminal, each stage's bar of ``hseg index`` stops when its stage is done (issue 57 item 5): the
reading bar, closed only at the end of the run, showed the run's minutes for a phase that took under a
second. The order of the bars' updates and closes is recorded; stderr poses as a terminal."""

from __future__ import annotations

import io
import sys

import tqdm.auto

from hseg import ingest
from hseg_testing.chunkers import hashing_chunker
from hseg_testing.fakes import ephemeral_store, synthetic_book


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_with_bars(monkeypatch, files, store) -> list[tuple[str, str, int]]:
    events: list[tuple[str, str, int]] = []

    class Recorded(tqdm.std.tqdm):
        def update(self, n=1):
            events.append(("update", str(self.desc).strip(), n))
            return super().update(n)

        def close(self):
            if not self.disable:  # tqdm's own close of a closed bar does nothing
                events.append(("close", str(self.desc).strip(), self.n))
            super().close()

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorded)
    monkeypatch.setattr(sys, "stderr", Terminal())
    ingest.ingest(files, hashing_chunker(), store, progress=True)
    return events


def test_each_bar_closes_when_its_stage_is_done(tmp_path, monkeypatch):
    for i in range(3):
        (tmp_path / f"ch{i}.md").write_text(synthetic_book(1_500, seed=i), encoding="utf-8")
    files = ingest.find([tmp_path], anchor=tmp_path).files
    store = ephemeral_store()
    events = run_with_bars(monkeypatch, files, store)
    first_chunked = next(i for i, e in enumerate(events) if e[:2] == ("update", "chunking") and e[2])
    assert events.index(("close", "reading", 3)) < first_chunked  # closed as soon as all was read
    assert events.index(("close", "chunking", 3)) < events.index(("close", "writing", 3))
    # a re-run finds everything unchanged: the skipped documents carry the later bars to their ends
    again = run_with_bars(monkeypatch, files, store)
    assert [e for e in again if e[0] == "close"] == [("close", "reading", 3), ("close", "chunking", 3),
                                                     ("close", "writing", 3)]
