"""HTML to markdown with markdownify (on BeautifulSoup): ``<h1>``..``<h6>`` become ``#`` headings, and
what is not the page's text (navigation, scripts, styles, forms' buttons, embedded frames) is dropped.

Links and images keep their text only: a URL in a chunk is noise to the encoder and to the reader.

Example:
    >>> convert_html(Path("page.html")).text  # doctest: +SKIP
    '# Harbour Operations Manual\\n\\nThe harbour ...'
"""

from __future__ import annotations

import re
from pathlib import Path

from hseg.convert.result import Converted
from hseg.convert.support import need

#: elements whose content is not the document's text
DROPPED = ("head", "script", "style", "noscript", "template", "nav", "svg", "iframe", "button", "canvas")


def html_to_markdown(html: str | bytes) -> str:
    """The markdown of an HTML document or fragment (bytes: decoded as its ``<meta charset>`` says).

    Example:
        >>> html_to_markdown("<nav>Home</nav><h2>Tides</h2><p>The <a href='/m'>moon</a> pulls.</p>")
        '## Tides\\n\\nThe moon pulls.'
    """
    bs4 = need("bs4", "HTML")
    markdownify = need("markdownify", "HTML")
    soup = bs4.BeautifulSoup(html, "html.parser")
    for tag in soup.find_all(DROPPED):
        tag.decompose()
    root = soup.body or soup
    # no backslashes before _ and *: the stored text is what the page says ("snake_case", "2*3"), which
    # the encoder, BM25 and a reader's citation all want; only headings, lists and tables are markup
    converter = markdownify.MarkdownConverter(heading_style="ATX", bullets="-", strip=["a", "img"],
                                              escape_underscores=False, escape_asterisks=False, escape_misc=False)
    text = converter.convert_soup(root)
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def convert_html(path: Path) -> Converted:
    """The markdown of the HTML file at ``path`` (no page map: a web page has no pages)."""
    return Converted(html_to_markdown(Path(path).read_bytes()), None, "html")
