"""A self-contained HTML view of one :class:`~hseg.chunking.chunks.Chunking`, for eyeballing a chunker's output.

How and why: docs/design.md, ``hseg.chunking.viewer``.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections.abc import Sequence
from html import escape

import numpy as np

from hseg.chunking.chunks import Chunking, Cluster, Segment
from hseg.chunking.schema import chunk_pages
from hseg.text.provenance import cite_pages
from hseg.text.structure import Heading

#: cluster band colours (strong edge, light fill), cycled; neighbours always differ
_PALETTE = (
    ("#3b78c4", "#e6effa"),
    ("#d98324", "#fcf0e2"),
    ("#3a9a5b", "#e5f4ea"),
    ("#a24fb0", "#f4e8f6"),
    ("#c9463d", "#fbe7e5"),
    ("#2a9d9a", "#e1f4f3"),
    ("#8c7a2c", "#f5f1df"),
    ("#5c62c9", "#eaebfa"),
)

_CSS = """
:root { --ink: #1d2330; --muted: #5b6475; --rule: #d7dbe3; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: var(--ink); background: #f6f7f9; }
header.summary { background: #fff; border-bottom: 1px solid var(--rule);
  padding: 10px 24px 8px; box-shadow: 0 1px 4px rgba(0,0,0,.06); }
header.summary h1 { font-size: 18px; margin: 0 0 4px; word-break: break-all; }
.stats { display: flex; flex-wrap: wrap; gap: 4px 18px; margin: 0; font-size: 13px; color: var(--muted); }
.stats div { display: flex; gap: 5px; }
.stats dt { font-weight: 600; }
.stats dd { margin: 0; color: var(--ink); font-variant-numeric: tabular-nums; }
.legend { display: flex; flex-wrap: wrap; align-items: center; gap: 4px 16px; margin-top: 6px; font-size: 12px;
  color: var(--muted); }
.legend .item { display: inline-flex; align-items: center; gap: 6px; }
.swatch { display: inline-block; width: 26px; height: 12px; border-radius: 2px; border-left: 4px solid; }
.scale { display: inline-block; width: 90px; height: 10px; border-radius: 5px;
  background: linear-gradient(to right, rgba(200,38,38,.08), rgba(200,38,38,.9)); }
.legend label { cursor: pointer; user-select: none; }
nav.overview { display: flex; height: 14px; margin-top: 8px; border-radius: 3px; overflow: hidden;
  border: 1px solid var(--rule); }
nav.overview a { display: block; min-width: 2px; border-right: 1px solid #fff; }
nav.overview a:hover { filter: brightness(.85); }
main { max-width: 980px; margin: 18px auto 64px; padding: 0 24px; }
section.cluster { position: relative; white-space: pre-wrap; overflow-wrap: anywhere; margin: 0 0 10px;
  padding: 22px 14px 8px 16px; border-left: 7px solid var(--edge); background: var(--fill);
  border-radius: 0 6px 6px 0; font-family: Georgia, "DejaVu Serif", serif; font-size: 15.5px; line-height: 1.6;
  cursor: pointer; scroll-margin-top: 8px; }
section.cluster::before { content: attr(data-label); position: absolute; top: 3px; left: 10px;
  font: 600 11px/1.4 system-ui, "DejaVu Sans", sans-serif; color: var(--edge); letter-spacing: .02em;
  white-space: nowrap; }
section.cluster.split-by-cap { border-bottom: 2px dashed var(--edge); }
section.cluster.selected { outline: 3px solid var(--edge); outline-offset: 2px;
  box-shadow: 0 2px 12px rgba(0,0,0,.18); }
main.has-selection section.cluster:not(.selected) { opacity: .45; }
section.cluster::before { max-width: calc(100% - 20px); overflow: hidden; text-overflow: ellipsis; }
span.segment { border-radius: 2px; }
span.heading { font: 700 1.08em/1.5 system-ui, "DejaVu Sans", sans-serif; color: var(--edge); }
span.heading[data-level="1"] { font-size: 1.3em; }
span.heading[data-level="2"] { font-size: 1.18em; }
details.outline { margin-top: 6px; font-size: 12.5px; color: var(--muted); }
details.outline summary { cursor: pointer; user-select: none; }
details.outline ol { list-style: none; margin: 4px 0 0; padding: 0; max-height: 40vh; overflow: auto;
  columns: 2 320px; }
details.outline li { break-inside: avoid; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
details.outline a { color: var(--ink); text-decoration: none; }
details.outline a:hover { text-decoration: underline; }
span.segment:nth-child(even) { background: rgba(0,0,0,.045); }
span.segment:hover { background: rgba(255,214,0,.35); }
span.boundary { white-space: nowrap; }
span.tail { white-space: normal; }
span.boundary::after { content: attr(data-label); display: inline-block; margin: 0 3px; padding: 0 5px;
  border-radius: 8px; font: 600 10.5px/1.5 system-ui, "DejaVu Sans", sans-serif; vertical-align: 1px;
  background: var(--pbg); color: var(--pfg); border: 1px solid rgba(160,30,30,.35); cursor: help; }
span.boundary.unknown::after { border-style: dashed; border-color: #999; }
span.boundary.doc-end::after { border-color: #555; }
body.no-badges span.boundary::after { content: "\\2502"; padding: 0; border: 0; background: none; color: #b33;
  font-size: 13px; margin: 0 1px; }
p.empty { max-width: 980px; margin: 24px auto; padding: 0 24px; color: var(--muted); font-style: italic; }
footer.status { position: fixed; bottom: 0; left: 0; right: 0; z-index: 5; min-height: 28px; padding: 5px 24px;
  background: #1d2330; color: #e8ebf1; font-size: 12.5px; font-variant-numeric: tabular-nums; white-space: nowrap;
  overflow: hidden; text-overflow: ellipsis; }
"""

# Hover details in the status bar and click-to-highlight; must run without errors on any page.
_SCRIPT = """
(function () {
  "use strict";
  var main = document.querySelector("main");
  var status = document.getElementById("status");
  var idle = status ? status.textContent : "";
  var badges = document.getElementById("toggle-badges");
  if (badges) {
    badges.addEventListener("change", function () {
      document.body.classList.toggle("no-badges", !badges.checked);
    });
  }
  if (main && status) {
    main.addEventListener("mouseover", function (ev) {
      var seg = ev.target.closest ? ev.target.closest("span.segment") : null;
      var cl = ev.target.closest ? ev.target.closest("section.cluster") : null;
      var parts = [];
      if (cl) { parts.push(cl.getAttribute("title")); }
      if (seg) { parts.push(seg.getAttribute("title")); }
      status.textContent = parts.length ? parts.join("  |  ") : idle;
    });
    main.addEventListener("mouseleave", function () { status.textContent = idle; });
    main.addEventListener("click", function (ev) {
      var cl = ev.target.closest ? ev.target.closest("section.cluster") : null;
      if (!cl) { return; }
      if (window.getSelection && String(window.getSelection())) { return; }  // selecting text, not clicking
      var was = cl.classList.contains("selected");
      var all = main.querySelectorAll("section.cluster.selected");
      for (var i = 0; i < all.length; i++) { all[i].classList.remove("selected"); }
      if (!was) { cl.classList.add("selected"); }
      main.classList.toggle("has-selection", !was);
    });
  }
  document.documentElement.setAttribute("data-viewer", "ready");
})();
"""


def _attr(value: object) -> str:
    return escape(str(value), quote=True)


def _text(value: str) -> str:
    """Escape document text; a CR becomes a character reference so the parser keeps it verbatim."""
    return escape(value, quote=False).replace("\r", "&#13;")


def _prob_text(p: float) -> str:
    return "NaN" if math.isnan(p) else f"{p:.6g}"


def _badge_colours(p: float) -> tuple[str, str]:
    """Badge background and text colour: deeper red for a stronger boundary."""
    if math.isnan(p):
        return "#eeeeee", "#555555"
    p = min(max(p, 0.0), 1.0)
    return f"rgba(200,38,38,{0.08 + 0.82 * p:.3f})", ("#ffffff" if p >= 0.55 else "#5a1010")


def _split_trailing_space(text: str) -> tuple[str, str]:
    core = text.rstrip()
    return core, text[len(core):]


def _path_text(path: tuple[str, ...]) -> str:
    return " \u203a ".join(t or "(untitled)" for t in path)


def _path_attr(path: tuple[str, ...]) -> str:
    return _attr(json.dumps(list(path), ensure_ascii=False))


def _pages(chunking: Chunking, chunk: Cluster | Segment) -> tuple[str, str]:
    """The chunk's pages as cited (``"p. 12–13"``; ``""`` without a page map) and as data attributes."""
    pages = chunk_pages(chunking, chunk)
    if pages is None or chunking.source_map is None:
        return "", ""
    return (cite_pages(pages, chunking.source_map.unit),
            f' data-page-start="{pages[0]}" data-page-end="{pages[1]}"')


def _core_html(seg: Segment, core: str, headings: Sequence[Heading]) -> str:
    """The segment's text, with the headings it opens (clipped to the segment) drawn as headings."""
    out, at = [], 0
    for heading in headings:
        a = max(at, heading.start - seg.start)
        b = max(a, min(heading.end - seg.start, len(core)))
        out.append(f'{_text(core[at:a])}<span class="heading" data-level="{heading.level}">{_text(core[a:b])}</span>')
        at = b
    return "".join(out) + _text(core[at:])


def _segment_html(seg: Segment, is_last_in_cluster: bool, is_last: bool, headings: Sequence[Heading] = (),
                  pages: tuple[str, str] = ("", "")) -> str:
    p = float(seg.boundary_prob)
    prob = _prob_text(p)
    core, tail = _split_trailing_space(seg.text)
    kind = "document end" if is_last else ("cluster boundary" if is_last_in_cluster else "segment boundary")
    p_desc = "unknown" if math.isnan(p) else f"{p:.3f}"
    seg_title = (f"segment {seg.index}: {seg.token_count} tokens, chars {seg.start}\u2013{seg.end}, "
                 f"sentences {seg.sentence_start}\u2013{seg.sentence_end - 1}; boundary p = {p_desc} ({kind})"
                 + (f"; under {_path_text(seg.heading_path)}" if seg.heading_path else "")
                 + (f"; {pages[0]}" if pages[0] else ""))
    if is_last:
        label = f"{seg.token_count} tok \u00b7 end"
        classes = "boundary doc-end"
    else:
        label = f"{seg.token_count} tok \u00b7 p {'?' if math.isnan(p) else f'{p:.2f}'}"
        classes = "boundary unknown" if math.isnan(p) else "boundary"
    bg, fg = _badge_colours(p)
    # whitespace closing a cluster stays in the DOM but collapses: the band's end already breaks the text
    tail_html = f'<span class="tail">{_text(tail)}</span>' if tail and is_last_in_cluster else _text(tail)
    boundary = (f'<span class="{classes}" data-prob="{prob}" data-label="{_attr(label)}" '
                f'style="--pbg:{bg};--pfg:{fg}" title="boundary after segment {seg.index}: p = {p_desc} ({kind})">'
                f"</span>")
    classes = "segment opens-heading" if headings else "segment"
    return (f'<span class="{classes}" id="segment-{seg.index}" data-index="{seg.index}" data-start="{seg.start}" '
            f'data-end="{seg.end}" data-tokens="{seg.token_count}" data-prob="{prob}"{pages[1]} '
            f'data-heading-path="{_path_attr(seg.heading_path)}" '
            f'title="{_attr(seg_title)}">{_core_html(seg, core, headings)}{boundary}{tail_html}</span>')


def _cluster_html(chunking: Chunking, cl: Cluster, opened: dict[int, list[Heading]]) -> str:
    edge, fill = _PALETTE[cl.index % len(_PALETTE)]
    n, n_segments_total = len(cl.segments), len(chunking.segments)
    cap = " \u00b7 split by cap" if cl.split_by_cap else ""
    path = f" \u00b7 {_path_text(cl.heading_path)}" if cl.heading_path else ""
    cited, page_attrs = _pages(chunking, cl)
    where = f" \u00b7 {cited}" if cited else ""
    label = (f"cluster {cl.index}{where} \u00b7 {cl.token_count} tokens \u00b7 {n} segment{'s' if n != 1 else ''}"
             f"{cap}{path}")
    title = (f"cluster {cl.index}: {cl.token_count} tokens, {n} segments "
             f"({cl.segments[0].index}\u2013{cl.segments[-1].index}), chars {cl.start}\u2013{cl.end}"
             + (f", {cited}" if cited else "")
             + (", cut by the size cap" if cl.split_by_cap else "")
             + (f", under {_path_text(cl.heading_path)}" if cl.heading_path else ""))
    body = "".join(
        _segment_html(s, j == n - 1, s.index == n_segments_total - 1, opened.get(s.index, ()), _pages(chunking, s))
        for j, s in enumerate(cl.segments)
    )
    classes = "cluster split-by-cap" if cl.split_by_cap else "cluster"
    return (f'<section class="{classes}" id="cluster-{cl.index}" data-cluster-index="{cl.index}" '
            f'data-start="{cl.start}" data-end="{cl.end}" data-tokens="{cl.token_count}" '
            f'data-segments="{n}"{page_attrs} '
            f'data-split-by-cap="{str(cl.split_by_cap).lower()}" data-heading-path="{_path_attr(cl.heading_path)}" '
            f'data-label="{_attr(label)}" title="{_attr(title)}" style="--edge:{edge};--fill:{fill}">{body}</section>')


def _opened_headings(chunking: Chunking) -> dict[int, list[Heading]]:
    """``{segment index: the headings it opens}`` (every heading starts a segment, or follows one of
    its segment with no text between them: see hseg.chunking.chunks)."""
    starts = [s.start for s in chunking.segments]
    out: dict[int, list[Heading]] = {}
    for h in chunking.headings:
        i = bisect_left(starts, h.start + 1) - 1  # the segment whose span holds the heading's first character
        if i >= 0:
            out.setdefault(i, []).append(h)
    return out


def _outline_html(headings: tuple[Heading, ...], opened: dict[int, list[Heading]]) -> str:
    if not headings:
        return ""
    segment_of = {id(h): i for i, hs in opened.items() for h in hs}
    top = min(h.level for h in headings)
    items = "".join(
        f'<li style="padding-left:{1.2 * (h.level - top):.1f}em"><a href="#segment-{segment_of[id(h)]}" '
        f'title="{_attr(_path_text(h.path))}">{escape(h.title or "(untitled)")}</a></li>'
        for h in headings if id(h) in segment_of
    )
    n = len(headings)
    return (f'<details class="outline"><summary>outline: {n} heading{"s" if n != 1 else ""} '
            "(each opens the segment of its text; clusters keep within the top sections)</summary>"
            f"<ol>{items}</ol></details>")


def _adjacent_edges(chunking: Chunking) -> int | None:
    """How many adjacent segment pairs the relatedness graph joins (cosine above τ); ``None`` when the
    chunking has no τ or no segment vectors to tell."""
    tau = chunking.info.get("tau")
    vectors = [s.embedding for s in chunking.segments]
    if not isinstance(tau, float) or math.isnan(tau) or len(vectors) < 2 or any(v is None for v in vectors):
        return None
    v = np.stack([np.asarray(x, dtype=np.float32) for x in vectors if x is not None])
    return int((np.einsum("ij,ij->i", v[:-1], v[1:]) > tau).sum())


def render_html(chunking: Chunking, *, title: str | None = None) -> str:
    """Render a chunking as one self-contained HTML page (a pure function: no I/O).

    ``title`` defaults to ``"hseg: <doc_id>"``. All document text is HTML-escaped and shown
    verbatim (whitespace preserved); the page's structure: docs/design.md, ``hseg.chunking.viewer``.

    Example:
        >>> from hseg.chunking.chunks import Chunking, Cluster, Segment
        >>> text = "Intro <b>.\\nMore text.\\n"
        >>> a = Segment("s0", "doc", 0, 0, 11, text[:11], 3, 0, 1, boundary_prob=0.8)
        >>> b = Segment("s1", "doc", 1, 11, 22, text[11:], 2, 1, 2, boundary_prob=1.0)
        >>> c = Cluster("c0", "doc", 0, 0, 22, text, 5, (a, b))
        >>> page = render_html(Chunking("doc", text, (a, b), (c,), k=0.5))
        >>> page.count('<section class="cluster"'), page.count('<span class="segment"')
        (1, 2)
        >>> "&lt;b&gt;" in page and "<b>" not in page
        True
    """
    segs, clusters = chunking.segments, chunking.clusters
    sizes = [c.token_count for c in clusters]
    mean = sum(sizes) / len(sizes) if sizes else 0.0
    k = "\u2013" if chunking.k is None else f"{chunking.k:.3f}"
    page_title = title if title is not None else f"hseg: {chunking.doc_id}"

    stats = [
        ("doc id", chunking.doc_id),
        ("segments", str(len(segs))),
        ("clusters", str(len(clusters))),
        ("mean cluster tokens", f"{mean:.1f}"),
        ("cluster tokens min\u2013max", f"{min(sizes)}\u2013{max(sizes)}" if sizes else "\u2013"),
        ("segment tokens (sum)", str(sum(s.token_count for s in segs))),
        ("k (tau = mean + k\u00b7std of segment cosines)", k),
    ]
    split = sum(1 for c in clusters if c.split_by_cap)
    if split:
        stats.append(("split by cap", str(split)))
    labels = {"tau": "tau (cosine above which segments relate)"}
    for key in ("segmenter", "tau", "sentences"):
        value = chunking.info.get(key)
        if isinstance(value, float):
            value = f"{value:.4g}"
        if value is not None:
            stats.append((labels.get(key, key), str(value)))
    edges = _adjacent_edges(chunking)
    if edges is not None:
        stats.append(("adjacent segments related (cosine above tau)",
                      f"{edges} of {len(segs) - 1}" + ("" if edges else
                                                      ": no edge, clusters come from joining neighbours and the cap")))
    if chunking.headings:
        stats.append(("headings", str(len(chunking.headings))))
    if chunking.source_map is not None and chunking.source_map.spans:
        numbers = [number for _, _, number in chunking.source_map.spans]
        stats.append((chunking.source_map.unit + "s", cite_pages((min(numbers), max(numbers)),
                                                                 chunking.source_map.unit)))
    stats.append(("characters", str(len(chunking.text))))
    stats_html = "".join(f"<div><dt>{escape(a)}</dt><dd>{escape(b)}</dd></div>" for a, b in stats)

    overview = "".join(
        f'<a href="#cluster-{c.index}" style="flex:{max(c.end - c.start, 1)} 1 0;background:'
        f'{_PALETTE[c.index % len(_PALETTE)][0]}" title="cluster {c.index}: {c.token_count} tokens"></a>'
        for c in clusters
    )
    legend = (
        '<div class="legend">'
        f'<span class="item"><span class="swatch" style="border-color:{_PALETTE[0][0]};background:{_PALETTE[0][1]}">'
        f'</span><span class="swatch" style="border-color:{_PALETTE[1][0]};background:{_PALETTE[1][1]}"></span>'
        "band = cluster (label: tokens, segments)</span>"
        '<span class="item">shaded runs = segments; badge at each segment end = its tokens '
        "\u00b7 boundary probability</span>"
        '<span class="item">p 0 <span class="scale"></span> 1</span>'
        + ('<span class="item">dashed bottom edge = cut by the size cap</span>' if split else "")
        + '<span class="item"><label><input type="checkbox" id="toggle-badges" checked> badges</label></span>'
        "<span class=\"item\">hover for details \u00b7 click a cluster to highlight it</span>"
        "</div>"
    )
    opened = _opened_headings(chunking)
    if clusters:
        body = ("<main>" + "".join(_cluster_html(chunking, c, opened) for c in clusters) + "</main>")
    else:
        body = '<main></main><p class="empty">The document is empty or blank: no segments, no clusters.</p>'
    idle = (f"{len(segs)} segments \u00b7 {len(clusters)} clusters \u00b7 mean {mean:.1f} tokens per cluster "
            "\u00b7 hover the text for details")
    csp = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="hseg.chunking.viewer">\n'
        '<link rel="icon" href="data:,">\n'
        f"<title>{escape(page_title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f'<header class="summary"><h1>{escape(page_title)}</h1><dl class="stats">{stats_html}</dl>'
        f'{legend}<nav class="overview" aria-label="clusters">{overview}</nav>'
        f"{_outline_html(chunking.headings, opened)}</header>\n"
        f"{body}\n"
        f'<footer class="status" id="status">{escape(idle)}</footer>\n'
        f"<script>{_SCRIPT}</script>\n</body>\n</html>\n"
    )
