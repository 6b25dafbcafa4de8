"""The HTML chunk viewer: ``hseg.chunking.viewer.render_html`` and ``hseg show``.

The headless-Chromium test writes its page, DOM dump and screenshot to ``test-artifacts/viewer/``
(git-ignored) and is skipped when no ``chromium``/``chromium-browser`` binary is installed.
"""

from __future__ import annotations

import doctest
import math
import os
import re
import shutil
import struct
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hseg.chunking.chunks import Chunking, Cluster, Segment
from hseg.chunking.viewer import render_html
from tests.fakes import HashingEncoder

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "data" / "example.md"
ARTIFACTS = REPO / "test-artifacts" / "viewer"
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


@pytest.fixture(scope="module")
def chunking() -> Chunking:
    from hseg.chunking.chunker import HierarchicalChunker

    chunker = HierarchicalChunker(encoder=HashingEncoder(), target_tokens=64, min_segment_tokens=8,
                                  max_segment_tokens=48)
    result = chunker.chunk(synthetic_text(), "viewer <test> & doc")
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


# ----------------------------------------------------------------------------------- render_html


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


# ----------------------------------------------------------------------------------- headless Chromium


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def run_chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
           *args]
    # bytes, decoded without newline translation: the DOM dump must keep the document's CRs
    # a bound against a hang only, so generous: a busy machine stretches a headless browser's start
    done = subprocess.run(cmd, capture_output=True, timeout=600, check=False)
    return subprocess.CompletedProcess(cmd, done.returncode, done.stdout.decode("utf-8"),
                                       done.stderr.decode("utf-8", "replace"))


def console_lines(stderr: str) -> list[str]:
    """Console messages (errors, uncaught exceptions, CSP violations) that Chromium logs to stderr."""
    return [line for line in stderr.splitlines() if re.search(r":CONSOLE\b|Uncaught", line)]


def test_chromium_renders_without_console_errors(chunking, tmp_path):
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no chromium binary on PATH (install it with: apt-get install -y chromium)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page_path = ARTIFACTS / "synthetic.html"
    page_path.write_text(render_html(chunking), encoding="utf-8")
    logging = ("--enable-logging=stderr", "--v=0")

    # control: the console capture must see errors on a broken page, or the check below proves nothing
    bad = tmp_path / "broken.html"
    bad.write_text("<!DOCTYPE html><html><body><script>console.error('viewer-test'); missingFn();</script>"
                   "</body></html>", encoding="utf-8")
    control = run_chromium(binary, tmp_path / "profile-control", *logging, "--dump-dom", bad.as_uri())
    assert control.returncode == 0, control.stderr[-2000:]
    assert any("Uncaught" in line for line in console_lines(control.stderr)), (
        "this Chromium does not log console messages to stderr; the console-error check cannot work")

    dumped = run_chromium(binary, tmp_path / "profile-dom", *logging, "--dump-dom", page_path.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    assert console_lines(dumped.stderr) == []
    (ARTIFACTS / "synthetic.dom.html").write_bytes(dumped.stdout.encode("utf-8"))
    dom = parse(dumped.stdout)
    assert dom.html_attrs.get("data-viewer") == "ready"  # the inline script ran to its end
    assert dom.scripts == 1  # the document's <script> text did not become an element
    check_structure(dom, chunking)

    shot = ARTIFACTS / "synthetic.png"
    shot.unlink(missing_ok=True)
    done = run_chromium(binary, tmp_path / "profile-shot", "--hide-scrollbars", f"--screenshot={shot}",
                        "--window-size=1200,1600", page_path.as_uri())
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 1000 and height >= 1000 and len(data) > 20_000  # a real, non-blank page


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


@pytest.mark.model
def test_show_cli_end_to_end(tmp_path):
    out = tmp_path / "example.html"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "hseg.cli", "show", str(EXAMPLE), "--html", str(out), "--target-tokens", "256",
         "--quiet"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == ""
    html = out.read_text(encoding="utf-8")
    page = parse(html)
    text = EXAMPLE.read_text(encoding="utf-8")
    assert "".join(page.texts) == text
    assert 1 < len(page.clusters) < len(page.segments)
    probs = [float(s["data-prob"]) for s in page.segments]
    assert all(0.0 <= p <= 1.0 for p in probs) and probs[-1] == 1.0
    assert all(int(s["data-tokens"]) > 0 for s in page.segments)
    assert all(int(c["data-tokens"]) > 0 for c in page.clusters)
    assert f"<dt>clusters</dt><dd>{len(page.clusters)}</dd>" in html
