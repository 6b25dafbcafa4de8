"""The HTML chunk viewer's page as the tests read it: its cluster sections and segment spans, and the
check that they are exactly a chunking's (``tests/unit/test_viewer.py``, ``tests/unit/test_structure.py``,
``tests/e2e/test_viewer_browser.py``)."""

from __future__ import annotations

import math
from html.parser import HTMLParser

import pytest

from hseg.chunking.chunks import Chunking
from hseg_testing.chunkers import SMALL, hashing_chunker
from tests.support import REPO

EXAMPLE = REPO / "examples" / "data" / "example.md"
INJECTION = 'Notes on <script>alert("pwned")</script> & <b>bold</b> "quotes"'


class PageParser(HTMLParser):
    """Collects the cluster sections and segment spans (with their exact text) of a viewer page."""

    def __init__(self) -> None:
        super().__init__()  # convert_charrefs=True: text comes back unescaped
        self.clusters: list[dict[str, str]] = []
        self.segments: list[dict[str, str]] = []
        self.texts: list[str] = []
        self.cluster_of_segment: list[int] = []
        self.scripts = 0
        self.html_attrs: dict[str, str] = {}
        self._depth = 0  # > 0 while inside a segment span (counts nested spans)

    def handle_starttag(self, tag, attrs):
        a = {k: (v or "") for k, v in attrs}
        classes = a.get("class", "").split()
        if tag == "html":
            self.html_attrs = a
        if tag == "script":
            self.scripts += 1
        if tag == "section" and "cluster" in classes:
            self.clusters.append(a)
        if self._depth:
            self._depth += 1
        elif tag == "span" and "segment" in classes:
            self.segments.append(a)
            self.texts.append("")
            self.cluster_of_segment.append(len(self.clusters) - 1)
            self._depth = 1

    def handle_endtag(self, tag):
        if self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if self._depth:
            self.texts[-1] += data


def parse(page: str) -> PageParser:
    parser = PageParser()
    parser.feed(page)
    parser.close()
    return parser


def synthetic_text() -> str:
    body = EXAMPLE.read_text(encoding="utf-8")[:5000]
    return f"{INJECTION}\n\n{body}\r\nA closing line with a\ttab & an <em>inline</em> tag.\n"


def viewer_chunking() -> Chunking:
    """The hashing chunker's small chunking of :func:`synthetic_text` (markup, CRLF, a tab), several clusters."""
    result = hashing_chunker(**SMALL).chunk(synthetic_text(), "viewer <test> & doc")
    assert len(result.clusters) >= 3 and len(result.segments) > len(result.clusters)
    return result


def check_structure(page: PageParser, result: Chunking) -> None:
    assert len(page.clusters) == len(result.clusters)
    assert len(page.segments) == len(result.segments)
    assert "".join(page.texts) == result.text
    for attrs, cl in zip(page.clusters, result.clusters):
        assert (int(attrs["data-cluster-index"]), int(attrs["data-start"]), int(attrs["data-end"]),
                int(attrs["data-tokens"])) == (cl.index, cl.start, cl.end, cl.token_count)
    for attrs, text, ci, seg in zip(page.segments, page.texts, page.cluster_of_segment, result.segments):
        assert (int(attrs["data-start"]), int(attrs["data-end"]), int(attrs["data-tokens"])) == (
            seg.start, seg.end, seg.token_count)
        assert text == seg.text
        p = float(attrs["data-prob"])
        assert (math.isnan(p) and math.isnan(seg.boundary_prob)) or p == pytest.approx(seg.boundary_prob, rel=1e-5)
        assert any(s is seg for s in result.clusters[ci].segments)
