"""Markdown structure (issue 14): headings start segments (a heading with no text under it opens the
next one's, and no segment or passage ends on a heading line: issue 47 item 10), section headings
bound clusters, heading paths travel with every chunk; plain text chunks as before.

Property tests generate markdown outlines (ATX and Setext headings at random levels, paragraphs,
fenced code blocks full of heading-like lines) and compare the chunker with the outline the
generator wrote. The hashing encoder and TextTiling; the real MiniLM through both adapters and an
on-disk Chroma store is ``tests/e2e/test_structure_model.py``.
"""

from __future__ import annotations

import argparse
import bisect
import json
import uuid
from dataclasses import dataclass, field

import chromadb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hseg.chunking.chunks import Chunking, Cluster, Segment
from hseg.chunking.clustering import cluster_segments
from hseg.chunking.config import RUNTIME_FIELDS, ChunkerConfig
from hseg.chunking.records import (
    ENCODER_KEY,
    HEADING_PATH_KEY,
    chunk_metadata,
    heading_path,
    metadata_keys,
    records_for,
)
from hseg.cli.options import add_chunker_options
from hseg.text.structure import Heading, cluster_breaks, find_headings, reads_markdown, section_level, source_name
from hseg_testing import chunkers
from hseg_testing.checks import check_chunk_invariants
from hseg_testing.chunkers import hashing_chunker, small_chunker
from hseg_testing.fakes import HashingEncoder, ephemeral_store

#: the settings of :func:`~hseg_testing.chunkers.small_chunker`, for the adapters too
SMALL = {**chunkers.SMALL, "segmenter": "texttiling"}

# --------------------------------------------------------------------------- a markdown generator

WORDS = ("orbit planet comet moon tide river delta court judge bread yeast engine piston glacier ice "
         "market price vaccine cell #3 x=1 Kepler's 2.1 (see) a the of and").split()
TITLE_WORDS = "Chapter Orbits Kepler Tides Delta Court Bread 2.1 Intro Notes *bold* `code` Über 東京".split()
CODE_LINES = ("# not a heading", "## nor this", "Fake title", "---", "===", "x = 1  # comment",
              "#!/bin/sh", "    # indented", "Title", "-")


@dataclass
class Doc:
    """A generated document and the outline it was written with."""

    text: str = ""
    #: (start, end, level, title, path) of each heading, as CommonMark reads it
    headings: list[tuple[int, int, int, str, tuple[str, ...]]] = field(default_factory=list)
    stack: list[tuple[int, str]] = field(default_factory=list)

    def add_heading(self, start: int, end: int, level: int, title: str) -> None:
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, title))
        self.headings.append((start, end, level, title, tuple(t for _, t in self.stack)))


words = st.lists(st.sampled_from(WORDS), min_size=3, max_size=14).map(" ".join)
titles = st.lists(st.sampled_from(TITLE_WORDS), min_size=1, max_size=4).map(" ".join)
sentence = words.map(lambda w: w[0].upper() + w[1:] + ".")
paragraph = st.lists(st.lists(sentence, min_size=1, max_size=4).map(" ".join), min_size=1, max_size=3) \
    .map("\n".join)  # lines of one paragraph
atx = st.tuples(st.just("atx"), st.integers(1, 6), titles, st.booleans(), st.integers(0, 3))
setext = st.tuples(st.just("setext"), st.integers(1, 2), st.lists(titles, min_size=1, max_size=2),
                   st.integers(1, 8), st.integers(0, 3))
code = st.tuples(st.just("code"), st.sampled_from(["```", "~~~", "````", "```python"]),
                 st.lists(st.sampled_from(CODE_LINES), min_size=1, max_size=5))
para = st.tuples(st.just("para"), paragraph)
BLOCKS = st.lists(st.one_of(atx, setext, code, para, para), min_size=1, max_size=14)


def build(blocks, glue: list[bool]) -> Doc:
    """Markdown text from blocks; ``glue[i]`` puts one newline instead of a blank line after block i
    where CommonMark reads both the same (after a heading or a code block)."""
    doc = Doc()
    for i, block in enumerate(blocks):
        kind = block[0]
        if doc.text:
            tight = glue[i % len(glue)] and blocks[i - 1][0] in ("atx", "code")
            doc.text += "\n" if tight else "\n\n"
        if kind == "atx":
            _, level, title, closing, indent = block
            line = " " * indent + "#" * level + " " + title + (" " + "#" * (level + 1) if closing else "")
            start = len(doc.text) + indent
            doc.text += line
            doc.add_heading(start, len(doc.text), level, title)
        elif kind == "setext":
            _, level, lines, width, indent = block
            start = len(doc.text) + indent
            doc.text += " " * indent + "\n".join(lines) + "\n" + ("=" if level == 1 else "-") * width
            doc.add_heading(start, len(doc.text), level, " ".join(lines))
        elif kind == "code":
            _, fence, lines = block
            closing = fence.rstrip("abcdefghijklmnopqrstuvwxyz")  # the fence without its info string
            doc.text += fence + "\n" + "\n".join(lines) + "\n" + closing
        else:
            doc.text += block[1]
    doc.text += "\n"
    return doc


DOCS = st.builds(build, BLOCKS, st.lists(st.booleans(), min_size=1, max_size=4))


@pytest.fixture(scope="module")
def chunker():
    return small_chunker()


def first_char(unit) -> int:
    return unit.start + len(unit.text) - len(unit.text.lstrip())


def text_after_headings(doc: Doc, position: int, end: int) -> int:
    """The first character in ``[position, end)`` that is neither whitespace nor heading markup (else ``end``)."""
    i = position
    while i < end:
        inside = [h for h in doc.headings if h[0] <= i < h[1]]
        if inside:
            i = inside[0][1]
        elif doc.text[i].isspace():
            i += 1
        else:
            return i
    return end


def expected_path(doc: Doc, position: int) -> tuple[str, ...]:
    before = [h for h in doc.headings if h[0] <= position]
    return before[-1][4] if before else ()


def longest_common_prefix(paths) -> tuple[str, ...]:
    paths = list(paths)
    out = []
    for parts in zip(*paths):
        if len(set(parts)) != 1:
            break
        out.append(parts[0])
    return tuple(out)


# --------------------------------------------------------------------------- properties


@settings(max_examples=150, deadline=None)
@given(DOCS)
def test_headings_are_the_outline_the_document_was_written_with(doc):
    found = find_headings(doc.text)
    assert [(h.start, h.end, h.level, h.title, h.path) for h in found] == doc.headings
    for h in found:
        assert doc.text[h.start : h.end].strip() and not doc.text[h.start].isspace()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(DOCS)
def test_chunks_follow_the_outline(chunker, doc):
    text = doc.text
    result = chunker.chunk(text, "doc")
    starts = [h[0] for h in doc.headings]
    assert [h.start for h in result.headings] == starts
    firsts = [first_char(s) for s in result.segments]
    for unit in (*result.segments, *result.clusters):
        assert text[unit.start : unit.end] == unit.text  # spans stay exact
    # a heading starts a segment or follows a heading of it with nothing between them, so no segment
    # holds a heading after its text; a segment of headings alone ends the document (nothing follows)
    for seg, first in zip(result.segments, firsts):
        assert all(text_after_headings(doc, first, s) == s for s in starts if first <= s < seg.end), seg.text
        body = text_after_headings(doc, first, seg.end)
        assert body < seg.end or seg is result.segments[-1], seg.text
        assert seg.heading_path == expected_path(doc, body if body < seg.end else first)
        # no passage is cut right after a heading line (rule 6 would end it on a heading)
        assert not [c for c, _ in seg.cuts if any(h[0] < seg.start + c <= h[1] for h in doc.headings)], seg.text
    for cluster in result.clusters:
        assert cluster.heading_path == longest_common_prefix(s.heading_path for s in cluster.segments)
    # clusters do not cross a section heading unless a section next to it is below min_segment_tokens
    levels = [h[2] for h in doc.headings]
    repeated = [lv for lv in set(levels) if levels.count(lv) >= 2]
    top = min(repeated) if repeated else max(levels, default=0)
    cluster_starts = {c.segments[0].index for c in result.clusters}
    seg_starts = [s.start for s in result.segments]
    bounds = [0] + sorted({bisect.bisect_right(seg_starts, h[0]) - 1 for h in doc.headings if h[2] <= top} - {0}) \
        + [len(firsts)]
    size = [sum(s.token_count for s in result.segments[a:b]) for a, b in zip(bounds, bounds[1:])]
    for k, b in enumerate(bounds[1:-1]):
        last_small = k + 1 == len(size) - 1 and size[k + 1] < SMALL["min_segment_tokens"]
        assert b in cluster_starts or size[k] < SMALL["min_segment_tokens"] or last_small, (b, size)


# plain text: no word can open a line as a heading or an underline
PLAIN_WORDS = st.sampled_from("the cat sat on a mat . Dr. Smith paid $3.50 ! ? 東京 \n \n\n | #3 x-1 a=b".split(" "))


@pytest.mark.filterwarnings("ignore:document .* is blank")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(PLAIN_WORDS, min_size=1, max_size=200).map(" ".join))
def test_plain_text_chunks_the_same_with_the_switch_on_and_off(chunker, text):
    on = chunker.chunk(text, "plain")
    off = small_chunker(structure="none").chunk(text, "plain")
    assert_same_chunks(on, off)
    assert all(u.heading_path == () for u in (*on.segments, *on.clusters)) and on.headings == ()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(DOCS)
def test_a_txt_source_chunks_markdown_as_plain_text(chunker, doc):
    off = small_chunker(structure="none").chunk(doc.text, "d")
    assert_same_chunks(chunker.chunk(doc.text, "d", source="d.txt"), off)


def assert_same_chunks(a: Chunking, b: Chunking) -> None:
    assert [(s.id, s.start, s.end, s.token_count) for s in a.segments] == \
        [(s.id, s.start, s.end, s.token_count) for s in b.segments]
    assert [(c.id, c.start, c.end, c.split_by_cap) for c in a.clusters] == \
        [(c.id, c.start, c.end, c.split_by_cap) for c in b.clusters]
    for x, y in zip((*a.segments, *a.clusters), (*b.segments, *b.clusters)):
        np.testing.assert_array_equal(x.embedding, y.embedding)
        assert x.heading_path == y.heading_path
    assert a.k == b.k and a.info == b.info


MARKDOWN = """# Orbits of the planets

The planets orbit the sun on ellipses. Kepler found the three laws of planetary motion.

## Kepler's laws

Each planet moves on an ellipse with the sun at one focus. A line from the sun sweeps equal areas
in equal times. The square of the period grows as the cube of the distance.

```python
# a comment, not a heading
period = distance ** 1.5
```

## Tides
Tides rise and fall twice a day. The moon pulls the ocean and the ocean bulges toward it.

Delta plains
------------

Rivers drop their silt where they meet the sea and build a delta of mud and sand.
"""


def test_a_txt_source_is_plain_text_and_a_md_source_markdown():
    make = small_chunker
    off = make(structure="none").chunk(MARKDOWN, "doc")
    as_txt = make().chunk(MARKDOWN, "doc", source="notes/orbits.TXT")
    by_id = make().chunk(MARKDOWN, "notes/orbits.txt")  # the CLI's ids are file paths
    assert_same_chunks(as_txt, off)
    assert_same_chunks(by_id, make(structure="none").chunk(MARKDOWN, "notes/orbits.txt"))
    as_md = make().chunk(MARKDOWN, "doc", source="notes/orbits.md")
    assert [h.title for h in as_md.headings] == ["Orbits of the planets", "Kepler's laws", "Tides", "Delta plains"]
    assert [s.heading_path for s in as_md.segments] != [s.heading_path for s in off.segments]
    forced = make(structure="markdown").chunk(MARKDOWN, "notes/orbits.txt")
    assert [h.title for h in forced.headings] == [h.title for h in as_md.headings]
    with pytest.raises(ValueError, match="sources"):
        make().chunk_many([MARKDOWN], ["a"], sources=["a.md", "b.md"])


def test_the_example_document_keeps_its_sections(chunker, example_text):
    result = chunker.chunk(example_text, "example.md")
    titles = [h.title for h in result.headings]
    assert len(titles) == 18 and titles[0].startswith("The Sky") and "Copernicus" in titles
    assert section_level(result.headings) == 2
    starts = [s.start for s in result.segments]
    for h in result.headings:
        # the segment it opens, or (the title, with no text under it) the one the run of headings opens
        seg = result.segments[bisect.bisect_right(starts, h.start) - 1]
        assert seg.heading_path[:len(h.path)] == h.path and seg.text.lstrip().startswith("#")
    assert [len(s.text.split()) for s in result.segments if s.text.lstrip().startswith("#")][0] > 12
    # no cluster holds text of two chapters (## sections)
    for c in result.clusters:
        chapters = {s.heading_path[1] for s in c.segments if len(s.heading_path) > 1}
        assert len(chapters) <= 1, chapters


# --------------------------------------------------------------------------- the rules, by example


@pytest.mark.parametrize("text, expected", [
    ("# A #\n", [(1, "A")]),
    ("###### six\n####### seven\n#hashtag\n", [(6, "six")]),
    ("## ##\n", [(2, "")]),
    ("# a #b\n# c\\#\n", [(1, "a #b"), (1, "c\\#")]),
    ("    # code by indentation\n", []),
    ("~~~\n# in code\n~~~\n```\nTitle\n---\n```\n", []),
    ("```\n# unclosed fence\n", []),
    ("---\ntitle: front matter\n---\n\n# Real\n", [(1, "Real")]),
    ("Line one\nline two\n===\n", [(1, "Line one line two")]),
    ("- item\ncontinued\n---\n", []),  # a list item's lazy continuation is not a heading
    ("text\n\n---\n", []),  # a thematic break, not an underline
    ("| a | b |\n---\n", []),
    ("# A\nB\n-\n", [(1, "A"), (2, "B")]),
    ("   Indented\n   ---\n", [(2, "Indented")]),
])
def test_heading_rules(text, expected):
    assert [(h.level, h.title) for h in find_headings(text)] == expected


def test_heading_search_is_linear_in_the_lines():
    import time

    # every "=" line could underline the paragraph above; a scan that walks the paragraph up again
    # for each of them takes minutes here
    text = "- item\n" + "lazy continuation\n" * 20000 + "=\n" * 20000 + "\n" + "Title\n-\n" * 20000
    start = time.process_time()  # CPU time: other jobs on a busy machine do not stretch it (~0.7 s here)
    found = find_headings(text)
    assert time.process_time() - start < 10
    assert len(found) == 20000 and {h.title for h in found} == {"Title"}


def test_paths_and_sections():
    text = "# Book\n\n## One\n\n### 1.1\n\ntext\n\n#### deep\n\n## Two\n\n# Appendix\n"
    found = find_headings(text)
    assert [h.path for h in found] == [("Book",), ("Book", "One"), ("Book", "One", "1.1"),
                                       ("Book", "One", "1.1", "deep"), ("Book", "Two"), ("Appendix",)]
    assert section_level(found) == 1  # "#" occurs twice: it is the level that divides this book
    assert section_level(find_headings("# T\n\n### a\n\n## b\n")) == 3  # no level repeats: the deepest
    assert section_level([]) is None


def test_cluster_breaks_let_a_small_section_merge_with_its_neighbour():
    hs = find_headings("# T\n\n## A\n\ntext\n\n## B\n\ntext\n\n## C\n")
    starts = [h.start for h in hs]
    assert cluster_breaks(hs, starts, [60, 60, 60, 60], min_tokens=48) == [1, 2, 3]
    assert cluster_breaks(hs, starts, [2, 60, 60, 60], min_tokens=48) == [2, 3]  # the title joins A
    assert cluster_breaks(hs, starts, [60, 60, 60, 2], min_tokens=48) == [1, 2]  # the last joins B
    assert cluster_breaks(hs, starts, [60, 60, 2, 60], min_tokens=48) == [1, 2]  # B may join C
    with pytest.raises(ValueError, match="unit_starts"):
        cluster_breaks(hs, [0, 1, 2, 3], [60] * 4, min_tokens=48)


@pytest.mark.parametrize("method", ["edges", "cliques"])
def test_clustering_never_crosses_a_break(method):
    rng = np.random.default_rng(3)
    v = np.repeat(np.eye(4, dtype=np.float32), 4, axis=0) + 0.05 * rng.standard_normal((16, 4)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    free = cluster_segments(v, 0.0, method=method)
    assert any(1 in r and 2 in r for r in free.ranges)
    plan = cluster_segments(v, 0.0, method=method, breaks=[2, 7])
    assert all(not (b - 1 in r and b in r) for r in plan.ranges for b in (2, 7))
    assert [list(r) for r in plan.ranges][0] == [0, 1]  # a pair cut off by a break stays a pair
    alone = cluster_segments(v, 0.0, method=method, breaks=[5, 6])
    assert range(5, 6) in alone.ranges  # a singleton between two breaks stays alone
    with pytest.raises(ValueError, match="breaks"):
        cluster_segments(v, 0.0, breaks=[17])


def test_docstring_examples():
    import doctest

    import hseg.chunking.chunks
    import hseg.chunking.records
    import hseg.chunking.schema
    import hseg.text.structure

    for module in (hseg.text.structure, hseg.chunking.chunks, hseg.chunking.records, hseg.chunking.schema):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_reads_markdown_and_source_names():
    assert reads_markdown("auto", "https://x.org/notes.txt?v=2") is False
    assert reads_markdown("auto", "https://x.org/page.html") is True
    assert reads_markdown("auto", "README") is True
    with pytest.raises(ValueError, match="structure"):
        reads_markdown("html", "a.md")
    assert source_name({"file_path": "/d/a.md", "file_name": "a.md"}) == "/d/a.md"
    assert source_name({"source": ""}) is None and source_name(None) is None


# --------------------------------------------------------------------------- the data model


def test_units_validate_their_heading_paths():
    text = "# A\n\nx.\n"
    a = Segment("s0", "d", 0, 0, 5, text[:5], 2, 0, 1, heading_path=("A",))
    b = Segment("s1", "d", 1, 5, len(text), text[5:], 2, 1, 2, heading_path=("A",))
    with pytest.raises(ValueError, match="heading_path"):
        Segment("s0", "d", 0, 0, 5, text[:5], 2, 0, 1, heading_path=["A"])
    with pytest.raises(ValueError, match="heading_path"):
        Segment("s0", "d", 0, 0, 5, text[:5], 2, 0, 1, heading_path=("A", 2))
    with pytest.raises(ValueError, match="common prefix"):
        Cluster("c0", "d", 0, 0, len(text), text, 4, (a, b))  # () is not the prefix ("A",)
    c = Cluster("c0", "d", 0, 0, len(text), text, 4, (a, b), heading_path=("A",))
    heading = find_headings(text)[0]
    assert Chunking("d", text, (a, b), (c,), headings=(heading,)).headings == (heading,)
    with pytest.raises(ValueError, match="does not start a segment"):
        Chunking("d", text, (a, b), (c,), headings=(Heading(1, 3, 1, "A", ("A",)),))
    with pytest.raises(ValueError, match="headings"):
        Chunking("d", text, (a, b), (c,), headings=[heading])


# --------------------------------------------------------------------------- settings everywhere


def test_structure_is_a_setting_of_every_entry_point():
    from langchain_hseg import HierarchicalSegmentTextSplitter
    from llama_index_hseg import HierarchicalSegmentNodeParser

    assert ChunkerConfig.defaults()["structure"] == "auto" and "structure" not in RUNTIME_FIELDS
    assert ChunkerConfig(structure="none").to_dict(runtime=False)["structure"] == "none"
    for build in (ChunkerConfig, HierarchicalSegmentTextSplitter, HierarchicalSegmentNodeParser,
                  lambda **kw: hashing_chunker(dim=8, **kw)):
        with pytest.raises(ValueError, match="structure must be one of"):
            build(structure="html")
    assert HierarchicalSegmentNodeParser(structure="none").chunker_config.structure == "none"
    parser = argparse.ArgumentParser()
    add_chunker_options(parser)
    # not given: the default, or for 'hseg index' what the store remembers (hseg.cli.options.chunk_options)
    assert parser.parse_args([]).structure is None
    assert "(default auto)" in " ".join(parser.format_help().split())
    assert parser.parse_args(["--structure", "none"]).structure == "none"
    assert ChunkerConfig.docs()["structure"] in " ".join(parser.format_help().split())


def test_the_structure_setting_changes_the_index_fingerprint():
    from hseg.ingest import chunk_settings

    def build(**kw):
        return hashing_chunker(segmenter="texttiling", **kw)

    assert chunk_settings(build()) != chunk_settings(build(structure="none"))
    assert chunk_settings(build()) == chunk_settings(build(structure="auto"))


def test_cli_chunk_reads_a_txt_file_as_plain_text(tmp_path, capsys, monkeypatch):
    import hseg.cli.options as options
    from hseg.cli import main

    # the CLI builds its chunker with the default model: give it the hashing encoder instead
    real = options.chunker_from_args
    monkeypatch.setattr("hseg.cli.chunk.chunker_from_args",
                        lambda args, **kw: real(args, encoder=HashingEncoder(), **kw))
    for name in ("notes.md", "notes.txt"):
        (tmp_path / name).write_text(MARKDOWN, encoding="utf-8")
    assert main(["chunk", str(tmp_path / "notes.md"), str(tmp_path / "notes.txt"), "--format", "json", "--quiet",
                 "--segmenter", "texttiling", "--target-tokens", "64"]) == 0
    md, txt = json.loads(capsys.readouterr().out)
    assert len(md["segments"]) > len(txt["segments"])  # every heading starts a segment in the .md file
    assert ["Orbits of the planets", "Tides"] in [s["heading_path"] for s in md["segments"]]
    assert all(u["heading_path"] == [] for u in txt["segments"] + txt["clusters"])
    # the markdown report names each unit's section, for a markdown source only
    assert main(["chunk", str(tmp_path / "notes.md"), str(tmp_path / "notes.txt"), "--quiet",
                 "--segmenter", "texttiling", "--target-tokens", "64"]) == 0
    md_report, txt_report = capsys.readouterr().out.split("## " + str(tmp_path / "notes.txt"))
    assert "| section |" in md_report and "Orbits of the planets › Tides" in md_report
    assert "| section |" not in txt_report


# --------------------------------------------------------------------------- metadata, adapters, store


def test_metadata_carries_the_heading_path(chunker):
    from langchain_core.documents import Document as LCDocument
    from llama_index.core import Document as LIDocument

    from langchain_hseg import HierarchicalSegmentTextSplitter
    from llama_index_hseg import HierarchicalSegmentNodeParser

    assert all(HEADING_PATH_KEY in metadata_keys(kind) for kind in ("cluster", "segment", "result"))
    result = chunker.chunk(MARKDOWN, "orbits")
    records = records_for(result)
    for unit in (*result.segments, *result.clusters):
        assert heading_path(chunk_metadata(result, unit)) == unit.heading_path
    assert any(heading_path(r.metadata) == ("Orbits of the planets", "Delta plains") for r in records)
    assert json.loads(records[0].metadata[HEADING_PATH_KEY]) == ["Orbits of the planets"]

    splitter = HierarchicalSegmentTextSplitter(encoder=HashingEncoder(), **SMALL)
    clusters, segments = splitter.split_documents_hierarchical(
        [LCDocument(MARKDOWN, id="orbits", metadata={"source": "orbits.md"}),
         LCDocument(MARKDOWN, id="plain", metadata={"source": "orbits.txt"})])
    md = [d for d in clusters + segments if d.metadata["hseg_doc_id"] == "orbits"]
    # a Document carries no vector, so no hseg_encoder key either; every other key is the record's
    assert {r.id: {k: v for k, v in r.metadata.items() if k != ENCODER_KEY} for r in records} == \
        {d.id: {k: v for k, v in d.metadata.items() if k != "source"} for d in md}
    assert all(heading_path(d.metadata) == () for d in clusters + segments if d.metadata["hseg_doc_id"] == "plain")

    parser = HierarchicalSegmentNodeParser(encoder=HashingEncoder(), **SMALL)
    nodes = parser.get_nodes_from_documents([LIDocument(text=MARKDOWN, id_="orbits", metadata={"file_name": "o.md"}),
                                             LIDocument(text=MARKDOWN, id_="plain", metadata={"file_name": "o.txt"})])
    by_doc = {d: [n for n in nodes if n.metadata["hseg_doc_id"] == d] for d in ("orbits", "plain")}
    assert [heading_path(n.metadata) for n in by_doc["orbits"]] == [heading_path(r.metadata) for r in records]
    assert all(heading_path(n.metadata) == () for n in by_doc["plain"])
    with pytest.raises(ValueError, match=HEADING_PATH_KEY):
        heading_path({HEADING_PATH_KEY: "Orbits > Tides"})


def test_search_results_carry_the_heading_path_of_their_text(chunker):
    from hseg.retrieval.results import result_for
    from hseg.store import HierarchicalStore

    result = chunker.chunk(MARKDOWN * 3, "orbits")
    store = HierarchicalStore(f"t-{uuid.uuid4().hex}", client=chromadb.EphemeralClient(), encoder=HashingEncoder())
    store.add(result, {"source": "orbits.md"})
    spans = {(s.start, s.end): s.heading_path for s in result.segments}
    for unit, size in [("cluster", {"k": 3}), ("segment", {"k": 4}), ("auto", {"budget_tokens": 150})]:
        hits = store.search("tides moon ocean", unit=unit, **size)
        assert hits
        for hit in hits:
            # the segments its text is made of, one possibly cut short (rule 6 of the auto unit)
            overlapped = [p for (a, b), p in spans.items() if a < hit.end and hit.start < b]
            assert hit.heading_path == longest_common_prefix(overlapped)
            assert heading_path(result_for(hit)[1]) == hit.heading_path
    assert any(h.heading_path for h in store.search("tides moon ocean", unit="segment", k=4))


FAQ = """# Billing FAQ

## Why was I charged twice?

If you see two charges for one order, the first is usually a temporary authorisation hold placed by your \
bank when you checked out. The hold is released automatically within three to five business days, and \
only the second charge is collected. If both charges remain after five business days, contact support \
with your order number and we will refund the duplicate.

## How do I update my card?

Open Settings, choose Billing, then Payment methods. Add the new card and mark it as the default; the \
old card can be removed once no subscription uses it. Changes take effect from the next invoice.

## Can I get a refund?

Refunds are available within 30 days of purchase for annual plans. Monthly plans are not refunded, but \
you can cancel at any time and keep access until the end of the billing period.

## Where can I download invoices?

Every invoice is listed under Settings, Billing, Invoices, where each one can be downloaded as a PDF.
"""

#: a heading over one sentence that fills a segment by itself: the two together are over max_segment_tokens
LONG_SENTENCE = "# Tides\n\n" + " ".join(["the moon pulls the ocean toward it"] * 6) + ".\n\nMore on tides.\n"


def ends_on_a_heading(text: str) -> bool:
    return bool(find_headings(text.rstrip())) and not text.rstrip()[find_headings(text.rstrip())[-1].end:].strip()


@pytest.mark.parametrize("text", [FAQ, LONG_SENTENCE])
def test_a_heading_belongs_with_the_text_after_it(text):
    # issue 47 item 10: '# Billing FAQ' was a 4-token segment of its own (a section with no text), a
    # heading over a long first sentence one too (merging them broke max_segment_tokens), and every
    # segment's first cut came right after its heading, so a passage continued into it (rule 6) ended
    # on the next section's heading ('... ## Why was I charged twice?')
    for chunker in (small_chunker(), hashing_chunker()):
        result = chunker.chunk(text, "faq.md")
        check_chunk_invariants(result, text, chunker)
        assert not [s.text for s in result.segments if ends_on_a_heading(s.text)]
        for s in result.segments:
            assert not [c for c, _ in s.cuts if ends_on_a_heading(s.text[:c])], s.text
        if text is FAQ:
            first = result.segments[0]
            assert first.text.startswith("# Billing FAQ\n\n## Why was I charged twice?\n\nIf you see")
            assert first.heading_path == ("Billing FAQ", "Why was I charged twice?")
    store = ephemeral_store()
    store.add(small_chunker().chunk(text, "faq.md"), {"source": "faq.md"})
    for query in ("billing", "billing faq", "charged twice", "How do I change my card?", "refund", "help", "tides"):
        for budget in (16, 40, 64, 100, 150, 250):
            for hit in store.search(query, unit="auto", budget_tokens=budget):
                assert text[hit.start:hit.end] == hit.text  # spans stay exact
                assert not ends_on_a_heading(hit.text), (query, budget, hit.text)


def test_the_viewer_draws_the_outline(chunker):
    from hseg.chunking.viewer import render_html
    from tests.support.pages import check_structure, parse

    result = chunker.chunk(MARKDOWN, "orbits")
    html = render_html(result)
    page = parse(html)
    check_structure(page, result)  # the page's text is still exactly the document
    assert html.count('<span class="heading" data-level="') == len(result.headings) == 4
    assert '<span class="heading" data-level="2">Delta plains\n------------</span>' in html
    for attrs, cluster in zip(page.clusters, result.clusters):
        assert tuple(json.loads(attrs["data-heading-path"])) == cluster.heading_path
        if cluster.heading_path:
            assert cluster.heading_path[-1] in attrs["data-label"]
    assert [tuple(json.loads(a["data-heading-path"])) for a in page.segments] == \
        [s.heading_path for s in result.segments]
    assert "outline: 4 headings" in html and html.count('<li style="padding-left:') == 4
    assert "<dt>headings</dt><dd>4</dd>" in html
    plain = render_html(small_chunker(structure="none").chunk(MARKDOWN))
    assert '<span class="heading"' not in plain and '<details class="outline"' not in plain
