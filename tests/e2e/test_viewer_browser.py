"""The HTML chunk viewer end to end: its page in a headless Chromium, and ``hseg show`` run as a command
with the real model (the page itself: ``tests/unit/test_viewer.py``).

The headless-Chromium test writes its page, DOM dump and screenshot to ``test-artifacts/viewer/``
(git-ignored) and is skipped when no ``chromium``/``chromium-browser`` binary is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from hseg.chunking.chunks import Chunking
from hseg.chunking.viewer import render_html
from tests.support import REPO
from tests.support.pages import EXAMPLE, check_structure, parse, viewer_chunking

ARTIFACTS = REPO / "test-artifacts" / "viewer"


@pytest.fixture(scope="module")
def chunking() -> Chunking:
    return viewer_chunking()


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
