"""The HTML chunk viewer: ``hseg.chunking.viewer.render_html`` and ``hseg show``'s errors, in-process.

The page in a headless Chromium and ``hseg show`` run as a command are ``tests/e2e/test_viewer_browser.py``.
"""

from __future__ import annotations

import doctest
import re

import pytest

from hseg.chunking.chunks import Chunking, Cluster, Segment
from hseg.chunking.viewer import render_html
from tests.support.pages import EXAMPLE, check_structure, parse, viewer_chunking


@pytest.fixture(scope="module")
def chunking() -> Chunking:
    return viewer_chunking()


def test_render_html_structure_escaping_and_exact_text(chunking):
    html = render_html(chunking)
    check_structure(parse(html), chunking)
    # the document's markup is shown as text, never parsed: the only <script> is the viewer's own
    assert html.count("<script") == 1 and "<b>bold</b>" not in html and "<em>" not in html
    assert '&lt;script&gt;alert("pwned")&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;' in html
    assert parse(html).scripts == 1
    # the summary header: escaped doc id, counts, mean cluster tokens, k
    mean = sum(c.token_count for c in chunking.clusters) / len(chunking.clusters)
    assert "viewer &lt;test&gt; &amp; doc" in html and "viewer <test>" not in html
    assert f"<dt>segments</dt><dd>{len(chunking.segments)}</dd>" in html
    assert f"<dt>clusters</dt><dd>{len(chunking.clusters)}</dd>" in html
    assert f"<dd>{mean:.1f}</dd>" in html and f"<dd>{chunking.k:.3f}</dd>" in html
    assert "white-space: pre-wrap" in html
    # self-contained: no external resources (only in-page anchors and data: URLs)
    assert not re.search(r"""\b(?:src|href)\s*=\s*["'](?!#|data:)""", html)
    assert "@import" not in html and "url(" not in html
    assert render_html(chunking) == html  # pure


def test_render_html_title_nan_probabilities_and_empty_document():
    text = "Intro <i>one</i>.\nSecond part.\n"
    a = Segment("s0", "d", 0, 0, 18, text[:18], 4, 0, 1, boundary_prob=float("nan"))
    b = Segment("s1", "d", 1, 18, len(text), text[18:], 3, 1, 2, boundary_prob=1.0)
    result = Chunking("d", text, (a, b), (Cluster("c0", "d", 0, 0, len(text), text, 7, (a, b), split_by_cap=True),))
    html = render_html(result, title="My <title>")
    page = parse(html)
    check_structure(page, result)
    assert [s["data-prob"] for s in page.segments] == ["NaN", "1"]
    assert page.clusters[0]["data-split-by-cap"] == "true"
    assert "<title>My &lt;title&gt;</title>" in html

    empty = render_html(Chunking("blank", "  \n", (), ()))
    page = parse(empty)
    assert page.clusters == [] and page.segments == [] and 'class="empty"' in empty


def test_viewer_docstring_example():
    import hseg.chunking.viewer

    assert doctest.testmod(hseg.chunking.viewer).failed == 0


# ----------------------------------------------------------------------------------- the CLI


def test_show_missing_file_is_a_one_line_error(tmp_path, capsys):
    from hseg.cli import main

    out = tmp_path / "out.html"
    assert main(["show", str(tmp_path / "missing.md"), "--html", str(out)]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing.md" in err and "no such file" in err
    assert not out.exists()

    assert main(["show", str(EXAMPLE), "--html", str(tmp_path / "no" / "dir" / "out.html")]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err

    with pytest.raises(SystemExit) as exc:
        main(["show", str(EXAMPLE)])  # --html is required
    assert exc.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_render_html_says_when_the_graph_has_no_edge():
    import numpy as np

    text = "One part.\nAnother part.\nA third.\n"
    vecs = [np.array([1.0, 0.0]), np.array([0.6, 0.8]), np.array([0.0, 1.0])]
    cuts = [0, 10, 24, len(text)]
    segs = tuple(Segment(f"s{i}", "d", i, a, b, text[a:b], 3, i, i + 1, embedding=v.astype(np.float32))
                 for i, (a, b, v) in enumerate(zip(cuts, cuts[1:], vecs)))
    clusters = (Cluster("c0", "d", 0, 0, len(text), text, 9, segs),)
    label = "<dt>adjacent segments related (cosine above tau)</dt>"
    no_edge = render_html(Chunking("d", text, segs, clusters, k=6.0, info={"tau": 1.2}))
    assert f"{label}<dd>0 of 2: no edge, clusters come from joining neighbours and the cap</dd>" in no_edge
    edges = render_html(Chunking("d", text, segs, clusters, k=0.0, info={"tau": 0.5}))
    assert f"{label}<dd>2 of 2</dd>" in edges
    assert label not in render_html(Chunking("d", text, segs, clusters, k=None, info={"tau": None}))


def test_a_paged_document_shows_the_pages_its_chunks_are_stored_with():
    """Each cluster's label and each segment's title cite its pages (``cite_pages``, as ``hseg query``
    does), and their ``data-page-start``/``data-page-end`` are the page keys its stored records carry;
    a document without a page map shows none."""
    from hseg.chunking.records import records_for
    from hseg.chunking.schema import page_range
    from hseg.text.provenance import SourceMap, cite_pages
    from hseg_testing.chunkers import small_chunker

    pages = [" ".join(f"Page {p} sentence {i} tells how the tide of day {p} rose at the harbour wall."
                      for i in range(9)) for p in range(1, 5)]
    text, source_map = SourceMap.from_pages(pages, [11, 12, 13, 14])
    chunking = small_chunker(target_tokens=400).chunk(text, "report.pdf", source_map=source_map)
    html = render_html(chunking)
    stored = {r.id: page_range(r.metadata) for r in records_for(chunking)}
    shown = 0
    for kind, index, first, last, label in re.findall(
            r'<(section|span) class="(?:cluster|segment)[^"]*" id="(?:cluster|segment)-(\d+)"[^>]*?'
            r'data-page-start="(\d+)" data-page-end="(\d+)"[^>]*?(?:data-label|title)="([^"]*)"', html):
        chunk = (chunking.clusters if kind == "section" else chunking.segments)[int(index)]
        assert stored[chunk.id] == (int(first), int(last))
        assert cite_pages((int(first), int(last))) in label
        shown += 1
    assert shown == len(chunking.clusters) + len(chunking.segments)
    assert "<dt>pages</dt><dd>p. 11–14</dd>" in html
    assert any(pages[0] != pages[1] for pages in stored.values() if pages)  # a cluster crosses a page break
    plain = render_html(small_chunker().chunk(text, "report.txt"))
    assert "data-page-start" not in plain and "p. 1" not in plain
