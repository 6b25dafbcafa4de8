"""Reading segmentation training data: the Wiki-727K format and folders of markdown.

A *document* here is a list of sentences plus, per sentence, whether it ends a segment. That is
exactly what the supervised segmenter learns (Koshorek et al. 2018) and what the metrics compare.

How and why: docs/design.md, ``hseg.segmentation.wiki727k``.

Example:
    >>> doc = parse_wiki727k("========,1,preface.\\nA.\\nB.\\n========,1,X.\\n========,2,Y.\\nC.\\n")
    >>> doc.sentences, doc.labels
    (['A.', 'B.', 'C.'], [0, 1, 1])
    >>> doc.masses
    [2, 1]
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

_HEADER = re.compile(r"^========,\d+,.*\.$")
_MD_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+\S")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


@dataclass
class Document:
    """Sentences and their segment-end labels (1 = the sentence ends a segment; the last is always 1)."""

    name: str
    sentences: list[str]
    labels: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.labels) != len(self.sentences):
            raise ValueError(f"labels: {len(self.labels)} labels for {len(self.sentences)} sentences")
        if self.labels:
            self.labels[-1] = 1  # the document end always closes a segment

    @property
    def ends(self) -> list[int]:
        """Indices of the sentences that end a segment (the Segmenter protocol's representation)."""
        return [i for i, lab in enumerate(self.labels) if lab]

    @property
    def masses(self) -> list[int]:
        """Segment lengths in sentences (the representation of :mod:`hseg.segmentation.metrics`)."""
        out, start = [], 0
        for end in self.ends:
            out.append(end + 1 - start)
            start = end + 1
        return out


def _from_sections(name: str, sections: Sequence[list[str]]) -> Document:
    sentences: list[str] = []
    labels: list[int] = []
    for sec in sections:
        if not sec:  # empty parent section: its header is no boundary of its own
            continue
        sentences.extend(sec)
        labels.extend([0] * (len(sec) - 1) + [1])
    return Document(name, sentences, labels)


def parse_wiki727k(text: str, name: str = "") -> Document:
    """Parse one document in the Wiki-727K format (the format: docs/design.md, ``hseg.segmentation.wiki727k``)."""
    sections: list[list[str]] = [[]]
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line == "***LIST***":
            continue
        if _HEADER.match(line):
            sections.append([])
        else:
            sections[-1].append(line)
    return _from_sections(name, sections)


def iter_wiki727k_files(directory: str | Path) -> list[Path]:
    """All ``.txt`` files under ``directory`` (recursively), in a stable order."""
    root = Path(directory)
    if not root.is_dir():
        raise ValueError(f"directory: {str(root)!r} is not a directory")
    return sorted(p for p in root.rglob("*.txt") if p.is_file())


def read_wiki727k(directory: str | Path, *, limit: int | None = None, min_sentences: int = 2) -> list[Document]:
    """Read every Wiki-727K ``.txt`` under ``directory``; documents shorter than ``min_sentences`` are skipped.

    Document names are paths relative to ``directory``.
    """
    root = Path(directory)
    docs = []
    for path in iter_wiki727k_files(root):
        doc = parse_wiki727k(path.read_text(encoding="utf-8"), name=str(path.relative_to(root)))
        if len(doc.sentences) >= min_sentences:
            docs.append(doc)
        if limit is not None and len(docs) >= limit:
            break
    logger.info("read %d documents from %s", len(docs), root)
    return docs


def _markdown_sections(text: str) -> Iterator[str]:
    """Yield the body text of each heading-delimited section (preface first); code blocks dropped
    because their lines are not sentences."""
    body: list[str] = []
    in_code = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            continue
        if _MD_HEADING.match(line):
            yield "\n".join(body)
            body = []
        else:
            body.append(line)
    yield "\n".join(body)


def parse_markdown(text: str, name: str = "") -> Document:
    """Turn one markdown text into a training document: every heading (any level) starts a segment.

    Sentences come from :func:`hseg.text.sentences.split_sentences`, per section.

    Example:
        >>> parse_markdown("# A\\nOne. Two.\\n## B\\nThree.").labels  # doctest: +SKIP
        [0, 1, 1]
    """
    from hseg.text.sentences import split_sentences  # shared splitter, so training matches chunking

    sections = []
    for body in _markdown_sections(text):
        sents = []
        for span in split_sentences(body):
            s = " ".join(span.of(body).split())  # markdown line breaks inside a sentence are not content
            if s:
                sents.append(s)
        sections.append(sents)
    return _from_sections(name, sections)


def markdown_to_documents(directory: str | Path, *, min_segments: int = 2) -> list[Document]:
    """Every ``.md``/``.markdown`` file under ``directory`` as a training document.

    Files with fewer than ``min_segments`` non-empty sections teach nothing about boundaries and
    are skipped.
    """
    root = Path(directory)
    if not root.is_dir():
        raise ValueError(f"directory: {str(root)!r} is not a directory")
    docs = []
    for path in sorted(p for p in root.rglob("*") if p.suffix.lower() in (".md", ".markdown") and p.is_file()):
        doc = parse_markdown(path.read_text(encoding="utf-8"), name=str(path.relative_to(root)))
        if len(doc.ends) >= min_segments:
            docs.append(doc)
    logger.info("read %d markdown documents from %s", len(docs), root)
    return docs
