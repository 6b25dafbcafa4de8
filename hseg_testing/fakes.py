"""Test doubles and helpers that keep tests fast: a deterministic bag-of-words encoder, synthetic books,
small read pages, and ``hseg`` on the fake encoder, in-process or as a child script."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np


class HashingEncoder:
    """Deterministic bag-of-words vectors (hashed words), L2-normalised: fast, no model.

    Related texts share words and so get related vectors, which is enough to exercise the
    segmenter and the clustering on arbitrary input.
    """

    name = "test-hashing-encoder"

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.dimension = dim
        self.calls = 0

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()) or [text]:
            h = int.from_bytes(hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        norm = np.linalg.norm(v)
        if norm == 0:
            v[0] = 1.0
            return v
        return v / norm

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def encode_query(self, text: str) -> np.ndarray:
        return self._vector(text)


_TOPICS = [
    "river delta sediment flood plain water channel silt tide estuary current basin bank",
    "engine piston cylinder fuel valve crank torque exhaust spark gear shaft bearing",
    "court judge appeal verdict statute clause witness trial counsel ruling motion jury",
    "orbit planet comet gravity telescope star galaxy nebula moon eclipse photon light",
    "bread flour yeast oven dough crust bake knead sugar butter salt loaf",
    "vaccine virus immune cell antibody dose trial fever infection protein blood clinic",
    "market price demand supply trade tariff export inflation wage bond equity credit",
    "glacier ice snow moraine crevasse summit ridge valley avalanche slope frost peak",
]
_GLUE = "the a of and in to with for on by from as that this it was is".split()


def synthetic_book(n_chars: int, seed: int = 0) -> str:
    """A long deterministic "book": chapters with headings, paragraphs of sentences drawn from one
    topic vocabulary per section (so topics shift), with numbers so sentences rarely repeat."""
    import random

    rnd = random.Random(seed)
    parts: list[str] = []
    size, chapter = 0, 0
    while size < n_chars:
        chapter += 1
        topic = _TOPICS[rnd.randrange(len(_TOPICS))].split()
        head = f"## Chapter {chapter}: {rnd.choice(topic).title()}\n\n"
        parts.append(head)
        size += len(head)
        for _ in range(rnd.randint(3, 8)):
            sentences = []
            for _ in range(rnd.randint(3, 7)):
                words = [rnd.choice(topic) if rnd.random() < 0.55 else rnd.choice(_GLUE)
                         for _ in range(rnd.randint(8, 20))]
                words.insert(rnd.randrange(len(words)), str(rnd.randint(1, 99999)))
                sentences.append(" ".join(words).capitalize() + rnd.choice(".....?!"))
            para = " ".join(sentences) + "\n\n"
            parts.append(para)
            size += len(para)
    return "".join(parts)[:n_chars]


def fake_encoder_factory(monkeypatch, make) -> None:
    """``hseg.encoders.as_encoder`` returns ``make()`` for the rest of the test. The chunker, which
    binds the factory when first imported, is imported before the patch: imported under it, it
    would keep the fake for the rest of the session."""
    import hseg.chunking.chunker  # noqa: F401
    import hseg.encoders

    monkeypatch.setattr(hseg.encoders, "as_encoder", lambda *args, **kwargs: make())


def read_in_small_pages(monkeypatch) -> None:
    """Every search path that pages asks for 2 records a page, so every widening of its lists and
    every further read runs."""
    import hseg.retrieval.passages.indexed as indexed
    import hseg.retrieval.passages.segments as segments

    for module in (indexed, segments):
        monkeypatch.setattr(module, "first_page", lambda *args: 2)


def siblings_and_neighbours(segs, parent, scores):
    """For brute-force references of the auto unit: ``{cluster id: indices of its segments}`` and, per
    segment, the mean score of its neighbours in its document (its own score without any)."""
    siblings: dict[str, list[int]] = {}
    for i, s in enumerate(segs):
        siblings.setdefault(parent[s.id].id, []).append(i)
    neighbour = []
    for i, s in enumerate(segs):
        near = [scores[j] for j in (i - 1, i + 1) if 0 <= j < len(segs) and segs[j].doc_id == s.doc_id]
        neighbour.append(np.mean(near) if near else scores[i])
    return siblings, neighbour


#: the ``hseg index`` options that pick the hashing encoder (the CLI's encoder factory patched to make
#: it: :func:`fake_cli`, :data:`CLI_CHILD`) and TextTiling, quietly
FAKE_CLI = ["--encoder", HashingEncoder.name, "--segmenter", "texttiling", "--quiet"]


def fake_cli(monkeypatch):
    """``hseg.cli.main`` with the hashing encoder instead of the model (for ``chunk`` and ``index``)."""
    from hseg.chunking import chunker as chunker_module
    from hseg.cli import main
    from hseg.encoders import factory

    real = chunker_module.as_encoder
    monkeypatch.setattr(chunker_module, "as_encoder",
                        lambda enc, **kw: HashingEncoder() if enc is None else real(enc, **kw))
    monkeypatch.setattr(factory, "load_encoder", lambda name=None, backend=None, threads=None: HashingEncoder())
    return main


#: a script that runs ``hseg`` (``sys.argv``) with the hashing encoder, for tests that need ``hseg`` in a
#: process of its own (format it with ``repo=``)
HASHING_CLI_CHILD = r"""
import sys
sys.path.insert(0, {repo!r})
from hseg.cli import main
from hseg.encoders import factory
from hseg_testing.fakes import HashingEncoder

factory.load_encoder = lambda name=None, backend=None, threads=None: HashingEncoder()
sys.exit(main(sys.argv[1:]))
"""

#: a script that runs ``hseg`` (``sys.argv``) with the hashing encoder and says ``ADD`` before each
#: write, for tests that interrupt a CLI run in its own process (format it with ``repo=``)
CLI_CHILD = r"""
import faulthandler, os, signal, sys, time
sys.path.insert(0, {repo!r})
faulthandler.register(signal.SIGUSR1, all_threads=True)  # a test that times out asks for our stacks
# Ctrl-C from a terminal reaches a foreground run, where SIGINT raises KeyboardInterrupt. A suite started
# in the background by a non-interactive shell (`nohup pytest ... &`) has SIGINT ignored (POSIX: without
# job control, asynchronous commands ignore SIGINT and SIGQUIT), every child inherits that, and Python
# then leaves it ignored: the Ctrl-C test hung in such runs (the child's SigIgn held SIGINT). The child
# says what a terminal user has instead of inheriting it.
signal.signal(signal.SIGINT, signal.default_int_handler)
from hseg import ingest
from hseg.encoders import factory
from hseg.cli import main
from hseg.store import HierarchicalStore
from hseg_testing.fakes import HashingEncoder

factory.load_encoder = lambda name=None, backend=None, threads=None: HashingEncoder()
real_add = HierarchicalStore.add
# with HSEG_TEST_HOLD_AFTER_ADD=N the N-th write, once done, waits for the parent's signal: however
# late the parent acts (a busy machine), the signal lands in that write or right after it, never later
hold_after = int(os.environ.get("HSEG_TEST_HOLD_AFTER_ADD", "0"))
adds = 0

def add(self, chunkings, metadatas=None, **kwargs):
    global adds
    print("ADD", flush=True)  # the parent kills us right after this line: mid-write
    done = real_add(self, chunkings, metadatas, **kwargs)
    adds += 1
    if adds == hold_after:
        # not signal.pause(): a signal that lands after the interpreter's last look at its signal flag
        # and before pause() starts is missed, and pause() then waits for ever. A short sleep returns,
        # and the loop's jump runs the handler.
        for _ in range(6000):  # bounded: 5 minutes, then the write returns as if never held
            time.sleep(0.05)
    return done

HierarchicalStore.add = add
sys.exit(main(sys.argv[1:]))
"""


def run_child(script, args: list[str], cwd) -> subprocess.CompletedProcess:
    """``python script *args`` in ``cwd``, offline, its output captured (a bound of 5 minutes)."""
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def stuck_child_report(proc) -> str:
    """What a CLI child (:data:`CLI_CHILD`) that did not exit was doing: its signal masks and every
    thread's stack (the child dumps them on SIGUSR1); kills it."""
    status = ""
    try:
        with open(f"/proc/{proc.pid}/status", encoding="ascii") as fh:
            status = "".join(line for line in fh if line.startswith(("State", "Sig", "Shd", "Threads")))
    except OSError:
        pass
    proc.send_signal(signal.SIGUSR1)
    try:
        _, err = proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=30)
    return f"child {proc.pid} did not exit:\n{status}\n{(err or '')[-6000:]}"


def ephemeral_store(encoder: Any = None) -> Any:
    """A store of a fresh collection in memory, on the hashing encoder unless ``encoder`` is given."""
    import chromadb

    from hseg.store import HierarchicalStore

    return HierarchicalStore(f"rel-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(),
                             encoder=encoder or HashingEncoder())
