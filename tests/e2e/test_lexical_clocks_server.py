"""A ``chroma run`` server's clients whose clocks disagree (issue 54 finding 11): the write log's times
are the server's (its heartbeat), so a writer whose clock is 10 minutes slow is followed by every
reader's lexical cache. Was: its entries were stamped 10 minutes in the past, before any reader's
window, and no reader, nor a new process on the same cache, ever saw its documents lexically."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hseg.store import HierarchicalStore
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder
from tests.store.test_lexical_index import book, in_step
from tests.support import REPO

#: a writer process whose wall clock is ``sys.argv[4]`` seconds behind (every ``time.time`` of the process)
SKEWED_WRITER = r"""
import sys, time
real = time.time
time.time = lambda: real() - float(sys.argv[4])
sys.path.insert(0, {repo!r})
import chromadb
from hseg.store import HierarchicalStore
from hseg_testing.chunkers import small_chunker
from hseg_testing.fakes import HashingEncoder

client = chromadb.HttpClient(host=sys.argv[1], port=int(sys.argv[2]))
store = HierarchicalStore(sys.argv[3], client=client, encoder=HashingEncoder())
store.add(small_chunker().chunk("Zyzzogeton beetles live in the forests of Peru. " * 30, doc_id="late"))
print("written", store.count(), flush=True)
"""


@pytest.mark.integration
def test_a_writer_whose_clock_is_ten_minutes_slow_is_followed_by_every_reader(
        chroma_server, chroma_collection_name, tmp_path, monkeypatch):
    chunker = small_chunker()
    monkeypatch.setenv("HSEG_CACHE", str(tmp_path / "reader"))
    reader = HierarchicalStore(chroma_collection_name, client=chroma_server.client(), encoder=HashingEncoder())
    reader.add(chunker.chunk(book(1), doc_id="a"))
    assert in_step(reader)  # the reader's cache is built and follows the log from now on
    script = tmp_path / "writer.py"
    script.write_text(SKEWED_WRITER.format(repo=str(REPO)))
    done = subprocess.run([sys.executable, str(script), chroma_server.host, str(chroma_server.port),
                           chroma_collection_name, "600"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "HSEG_CACHE": str(tmp_path / "writer")})
    assert done.returncode == 0 and done.stdout.startswith("written"), done.stderr[-3000:]
    assert in_step(reader)  # the reader's next check applies the slow writer's entry
    assert reader._parts.lexical.follower.rebuilds == 1
    again = HierarchicalStore(chroma_collection_name, client=chroma_server.client(), encoder=HashingEncoder())
    assert in_step(again)  # a new store on the same cache file
    hits = reader.search("Zyzzogeton", k=1, lexical_weight=1.0)
    assert hits and hits[0].doc_id == "late"
