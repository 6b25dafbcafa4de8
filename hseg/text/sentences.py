"""Sentence splitting with exact character spans, robust on markdown, with an optional token cap.

:func:`split_sentences` returns tight :class:`~hseg.text.spans.Span` objects (no leading or trailing
whitespace) that together cover every non-whitespace character of the input exactly once.

How and why: docs/design.md, ``hseg.text.sentences``.
"""

from __future__ import annotations

import bisect
import functools
import logging
import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import NamedTuple

from hseg.text.spans import Span

logger = logging.getLogger(__name__)

TokenCounter = Callable[[str], int]


def word_count(text: str) -> int:
    """Whitespace word count, the default ``count_tokens`` when only ``max_tokens`` is given.

    Example:
        >>> word_count("two  words\\n")
        2
    """
    return len(text.split())


# --------------------------------------------------------------------------- line structure

_FENCE_OPEN = re.compile(r"[ \t]{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"[ \t]{0,3}#{1,6}(?:[ \t]|$)")
_RULE = re.compile(r"[ \t]{0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,}|(?:=[ \t]*){3,})$")
_TABLE_DELIMITER = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)+\|?[ \t]*$")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+\u2022\u25e6\u25aa\u2023\u2043]|\d{1,9}[.)])[ \t]+\S")
# Sentence-final punctuation (with closing quotes/brackets) at the end of a line.
_LINE_END_TERMINAL = re.compile(r"[.!?\u2026\u3002\uff01\uff1f\uff61:;][\"'\u201d\u2019\u00bb)\]]*$")
# Everything str.splitlines() breaks on, i.e. all line separators that str.isspace() accepts.
_LINE_BREAK_CHARS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


class _Kind:
    PROSE = "prose"
    LIST = "list"  # a list item: prose, but it always starts a new paragraph
    ATOMIC = "atomic"  # heading, table row, rule: one unit per line
    BLANK = "blank"
    CODE = "code"


class _Line(NamedTuple):
    start: int
    end: int  # line break excluded
    text: str


class _Block(NamedTuple):
    start: int
    end: int
    kind: str
    lines: tuple[tuple[int, int], ...]  # (start, end) of the block's lines, line breaks excluded


def _lines(text: str) -> list[_Line]:
    out = []
    pos = 0
    for raw in text.splitlines(keepends=True):
        line = raw.rstrip(_LINE_BREAK_CHARS)
        out.append(_Line(pos, pos + len(line), line))
        pos += len(raw)
    return out


def _closes_fence(line: str, fence: str) -> bool:
    """CommonMark: a closing fence is only fence characters, at least as many as the opening."""
    stripped = line.strip()
    return stripped.startswith(fence) and not stripped.strip(fence[0])


def _classify(lines: list[_Line]) -> list[str]:
    kinds = []
    fence: str | None = None
    for line in lines:
        if fence is not None:
            kinds.append(_Kind.CODE)
            if _closes_fence(line.text, fence):
                fence = None
            continue
        opening = _FENCE_OPEN.match(line.text)
        if opening:
            fence = opening.group(1)
            kinds.append(_Kind.CODE)
        elif not line.text.strip():
            kinds.append(_Kind.BLANK)
        elif _HEADING.match(line.text) or _RULE.match(line.text) or line.text.lstrip().startswith("|"):
            kinds.append(_Kind.ATOMIC)
        elif _LIST_ITEM.match(line.text):
            kinds.append(_Kind.LIST)
        else:
            kinds.append(_Kind.PROSE)
    _mark_pipe_tables(lines, kinds)
    return kinds


def _mark_pipe_tables(lines: list[_Line], kinds: list[str]) -> None:
    """Tables written without a leading ``|`` are only recognisable by their delimiter row."""
    for i, line in enumerate(lines):
        if kinds[i] == _Kind.CODE or "|" not in line.text or not _TABLE_DELIMITER.match(line.text):
            continue
        kinds[i] = _Kind.ATOMIC
        if i > 0 and kinds[i - 1] in (_Kind.PROSE, _Kind.LIST) and "|" in lines[i - 1].text:
            kinds[i - 1] = _Kind.ATOMIC
        j = i + 1
        while j < len(lines) and kinds[j] in (_Kind.PROSE, _Kind.LIST) and "|" in lines[j].text:
            kinds[j] = _Kind.ATOMIC
            j += 1


def _blocks(text: str) -> list[_Block]:
    """Group lines into blocks: code blocks, atomic lines, and prose paragraphs / list items."""
    lines = _lines(text)
    kinds = _classify(lines)
    blocks: list[_Block] = []
    i = 0
    while i < len(lines):
        kind = kinds[i]
        if kind == _Kind.BLANK:
            i += 1
            continue
        if kind == _Kind.ATOMIC:
            j = i + 1
        elif kind == _Kind.CODE:
            j = _code_block_end(lines, i)
        else:  # a paragraph or a list item; plain prose lines continue it
            j = i + 1
            while j < len(lines) and kinds[j] == _Kind.PROSE:
                j += 1
            kind = _Kind.PROSE
        block_lines = tuple((line.start, line.end) for line in lines[i:j])
        blocks.append(_Block(lines[i].start, lines[j - 1].end, kind, block_lines))
        i = j
    return blocks


def _code_block_end(lines: list[_Line], i: int) -> int:
    """Index after the closing fence of the code block opened at line ``i`` (or after the last line)."""
    fence = _FENCE_OPEN.match(lines[i].text).group(1)  # type: ignore[union-attr]
    for j in range(i + 1, len(lines)):
        if _closes_fence(lines[j].text, fence):
            return j + 1
    return len(lines)


_FIRST_WORD = re.compile(r"\s*(\S*)")
_MIN_WRAP_WIDTH = 30


def _looks_hard_wrapped(text: str, lines: tuple[tuple[int, int], ...]) -> bool:
    """Whether a paragraph of 3+ lines was filled greedily to a fixed width (e-mail, plain-text docs).

    Under greedy filling every line but the last is broken only because the next word would
    not fit, so ``len(line) + 1 + len(next first word)`` exceeds the width, estimated as the
    longest line. Chat messages and one-sentence-per-line text almost never do this on every line.
    """
    if len(lines) < 3:
        return False
    width = max(end - start for start, end in lines[:-1])
    if width < _MIN_WRAP_WIDTH:
        return False
    for (start, end), (next_start, next_end) in zip(lines, lines[1:]):
        first_word = _FIRST_WORD.match(text, next_start, next_end).group(1)  # type: ignore[union-attr]
        if (end - start) + 1 + len(first_word) <= width:
            return False
    return True


def _continues_line(prev_line: str, next_line: str, width: int = 0) -> bool:
    """Whether a line break inside a paragraph is a wrapped continuation, not a sentence end: the
    line before it does not end a sentence, and the next line starts in lower case or the line
    before it was full: its next word would not have fit on it within ``width`` (the paragraph's
    longest line, when that is at least :data:`_MIN_WRAP_WIDTH`), so it was broken for width
    (``rebuilt on Plymouth`` / ``Hoe, where ...``), while a title or a short line is not."""
    nxt = next_line.lstrip()
    if not nxt or _LINE_END_TERMINAL.search(prev_line.rstrip()):
        return False
    if nxt[0].islower():
        return True
    first_word = _FIRST_WORD.match(next_line).group(1)  # type: ignore[union-attr]
    return width >= _MIN_WRAP_WIDTH and len(prev_line) + 1 + len(first_word) > width


# --------------------------------------------------------------------------- punctuation rules

_SPACED_TERMINATORS = ".!?\u2026\u203c\u2047\u2048\u2049\u061f\u06d4\u0964\u0965\u1362\u1367"
_CJK_TERMINATORS = "\u3002\uff01\uff1f\uff61\ufe12\ufe52\ufe56\ufe57\uff0e"
_CLOSERS = "\"'\u201d\u2019\u00bb)]}\u300d\u300f\uff09\uff3d"
# The look-behind anchors a match at the start of a run of terminators: without it a long
# run not followed by whitespace ("......") is re-tried from every position (quadratic).
_TERMINATOR = re.compile(
    "[{cjk}]+[{cl}]*|(?<![{sp}])[{sp}]+[{cl}]*(?=\\s)".format(
        cjk=re.escape(_CJK_TERMINATORS), cl=re.escape(_CLOSERS), sp=re.escape(_SPACED_TERMINATORS)
    )
)
_ANY_TERMINATOR = re.compile(f"[{re.escape(_SPACED_TERMINATORS + _CJK_TERMINATORS)}]")
# The two characters "\n" of a JSON / repr dump, possibly repeated ("\n\n", "\r\n").
_ESCAPED_BREAK = re.compile(r"\\(?:r\\)?n(?:\\(?:r\\)?n)*")
_NON_SPACE = re.compile(r"\S")
_LAST_TOKEN = re.compile(r"\S*\Z")
_NEXT_WORD = re.compile(r"\w+")
_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")  # U.S, e.g, a.m (the final dot is the terminator)
_OPENERS = "([{\"'\u201c\u2018\u00ab"
_NOT_SENTENCE_START = frozenset(",;:)]}" + _SPACED_TERMINATORS)

# Abbreviations that are (almost) never sentence-final: a name or a noun follows.
_NEVER_FINAL = frozenset(
    "mr mrs ms mx dr prof sen rep gov gen col lt sgt capt cmdr adm maj rev hon messrs mme mlle "
    "st mt ft v vs cf al approx e.g i.e viz".split()
)
# Abbreviations that precede a number ("No. 5", "Fig. 3", "pp. 12", "c. 1850").
_BEFORE_NUMBER = frozenset(
    "no nos vol vols p pp fig figs eq eqs art sec ch ref refs op c ca b d fl "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
# Abbreviations that may end a sentence: a boundary only if a typical sentence opener follows.
_MAYBE_FINAL = frozenset("etc inc ltd co corp jr sr bros dept univ est".split())
_SENTENCE_OPENERS = frozenset(
    "a an the he she it they we i you this that these those there his her its their our my your "
    "but and or so yet however in on at as after before when while if for from by with to of "
    "what why how who where one some many most then although though since during also".split()
)
_MAX_LIST_NUMBER_DIGITS = 3


def _cut_ok(text: str, term_start: int, next_start: int, sentence_start: int) -> bool:
    """Whether a terminator at ``term_start`` followed by text at ``next_start`` ends a sentence."""
    nxt = text[next_start]
    # A sentence starts neither in lower case nor with a comma, closing bracket or terminator
    # (", March 17" after "Fla.", "? ?" in tokenised text).
    if nxt.islower() or nxt in _NOT_SENTENCE_START:
        return False
    if text[term_start] != ".":
        return True
    last = _LAST_TOKEN.search(text, max(sentence_start, term_start - 40), term_start)
    token = last.group() if last else ""  # \S*\Z matches, maybe empty, in every window
    if token.isdigit() and len(token) <= _MAX_LIST_NUMBER_DIGITS:
        if _NON_SPACE.search(text, sentence_start, term_start - len(token)) is None:
            return False  # a list number ("3. Mix well") opening the sentence
    token = token.lstrip(_OPENERS)
    if not token:
        return True
    low = token.lower()
    if low in _NEVER_FINAL or (nxt.isdigit() and low in _BEFORE_NUMBER):
        return False
    if len(token) == 1 and token.isupper():  # an initial, as in "John F. Kennedy"
        return False
    if low in _MAYBE_FINAL or _DOTTED.fullmatch(token):
        word = _NEXT_WORD.match(text, next_start)
        return word is not None and word.group().lower() in _SENTENCE_OPENERS
    return True


def _punctuation_cuts(text: str, a: int, b: int) -> list[int]:
    """Sentence boundaries strictly inside ``text[a:b]`` by punctuation alone."""
    cuts = []
    sentence_start = a
    for m in _TERMINATOR.finditer(text, a, b):
        nxt = _NON_SPACE.search(text, m.end(), b)
        if nxt is None:
            break
        if text[m.start()] in _CJK_TERMINATORS or _cut_ok(text, m.start(), nxt.start(), sentence_start):
            cuts.append(m.end())
            sentence_start = m.end()
    return cuts


def _escaped_break_cuts(text: str, a: int, b: int) -> list[int]:
    """Cuts after escaped line breaks that are followed by a new line of text (not lower case)."""
    cuts: list[int] = []
    if text.find("\\", a, b) < 0:
        return cuts
    for m in _ESCAPED_BREAK.finditer(text, a, b):
        if m.start() > a and text[m.start() - 1] == "\\":
            continue  # "\\n" is an escaped backslash followed by the letter n
        nxt = _NON_SPACE.search(text, m.end(), b)
        if nxt is not None and not text[nxt.start()].islower():
            cuts.append(m.end())
    return cuts


def _line_cuts(text: str, a: int, b: int) -> list[int]:
    """Boundaries strictly inside one line (or one re-flowed run of lines)."""
    if _ANY_TERMINATOR.search(text, a, b) is None and text.find("\\", a, b) < 0:
        return []  # titles, short items and fragments: nothing to do, and most lines are such
    cuts: list[int] = []
    start = a
    for cut in [*_escaped_break_cuts(text, a, b), b]:
        cuts.extend(_punctuation_cuts(text, start, cut))
        if cut < b:
            cuts.append(cut)
        start = cut
    return cuts


def _regex_sentence_spans(text: str, a: int, b: int) -> list[tuple[int, int]]:
    """The punctuation rules alone on ``text[a:b]`` (benchmark baseline), as ``(start, end)`` pairs."""
    return [(s.start, s.end) for s in _tight_pieces(text, a, b, _punctuation_cuts(text, a, b))]


# --------------------------------------------------------------------------- blocks -> sentences


def _tight_pieces(text: str, a: int, b: int, cuts: Sequence[int]) -> list[Span]:
    """Split ``[a, b)`` at ``cuts`` and strip whitespace; whitespace-only pieces vanish."""
    spans = []
    prev = a
    for cut in [*cuts, b]:
        piece = text[prev:cut]
        stripped = piece.strip()
        if stripped:
            lead = len(piece) - len(piece.lstrip())
            spans.append(Span(prev + lead, prev + lead + len(stripped)))
        prev = cut
    return spans


def _prose_cuts(text: str, block: _Block, newline_policy: str) -> list[int]:
    """Boundaries inside a paragraph: its line breaks (per ``newline_policy``), then punctuation."""
    if newline_policy == "auto":
        newline_policy = "never" if _looks_hard_wrapped(text, block.lines) else "continuation"
    cuts: list[int] = []
    run_start = block.lines[0][0]
    width = max(end - start for start, end in block.lines)
    for (prev_start, prev_end), (next_start, next_end) in zip(block.lines, block.lines[1:]):
        if newline_policy == "never" or (
            newline_policy == "continuation"
            and _continues_line(text[prev_start:prev_end], text[next_start:next_end], width)
        ):
            continue
        cuts.extend(_line_cuts(text, run_start, prev_end))
        cuts.append(prev_end)
        run_start = next_start
    cuts.extend(_line_cuts(text, run_start, block.end))
    return cuts


def _block_sentences(text: str, block: _Block, newline_policy: str) -> list[Span]:
    if block.kind == _Kind.PROSE:
        return _tight_pieces(text, block.start, block.end, _prose_cuts(text, block, newline_policy))
    # Code keeps its lines together; headings, table rows and rules are units of their own.
    return _tight_pieces(text, block.start, block.end, ())


# --------------------------------------------------------------------------- token cap


class _Budget(NamedTuple):
    """What "fits" means: at most ``max_tokens`` by ``count``, which returns ``overhead`` for ""."""

    max_tokens: int
    count: TokenCounter
    overhead: int

    def fits(self, text: str, a: int, b: int) -> bool:
        # Assumption (documented on split_sentences): apart from a fixed overhead (special
        # tokens, measured as count("")), every token covers at least one UTF-8 byte, so a
        # piece with few enough bytes fits without calling the tokenizer.
        room = self.max_tokens - self.overhead
        if 4 * (b - a) <= room:  # a character is at most 4 UTF-8 bytes
            return True
        piece = text[a:b]
        if (len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))) <= room:
            return True
        return self.count(piece) <= self.max_tokens


_EXTENDERS = re.compile("[\u200c\u200d\ufe00-\ufe0f\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f\U000e0100-\U000e01ef]")
_REGIONAL_RUN = re.compile("[\U0001f1e6-\U0001f1ff]{2,}")


def _is_grapheme_break(text: str, pos: int) -> bool:
    """Approximate extended-grapheme boundary (flags aside): not before a combining mark,
    joiner or modifier, not after a ZWJ and not inside a surrogate pair."""
    nxt, prev = text[pos], text[pos - 1]
    if unicodedata.category(nxt) in ("Mn", "Mc", "Me") or _EXTENDERS.match(nxt):
        return False
    return prev != "\u200d" and not ("\ud800" <= prev <= "\udbff" and "\udc00" <= nxt <= "\udfff")


class _GraphemeEnds(Sequence[int]):
    """Lazy sorted end positions in ``(a, b]`` moved forward to grapheme boundaries (hard splits)."""

    def __init__(self, text: str, a: int, b: int) -> None:
        self.text, self.a, self.b = text, a, b
        # Flags are pairs of regional indicators: a run splits only at even offsets from its
        # start (``a`` is a boundary, so a run is counted from there at the earliest).
        self.flag_runs = [(max(m.start(), a), m.end()) for m in _REGIONAL_RUN.finditer(text, max(0, a - 1), b)]

    def __len__(self) -> int:
        return self.b - self.a

    def __getitem__(self, i: int) -> int:  # type: ignore[override]
        pos = self.a + 1 + i
        while pos < self.b and not (_is_grapheme_break(self.text, pos) and self._between_flags(pos)):
            pos += 1
        return pos

    def _between_flags(self, pos: int) -> bool:
        j = bisect.bisect_right(self.flag_runs, (pos, math.inf)) - 1
        if j < 0:
            return True
        start, end = self.flag_runs[j]
        return not (start < pos < end) or (pos - start) % 2 == 0


_WORD = re.compile(r"\S+")

EndsFinder = Callable[[int, int], Sequence[int]]


def _word_ends(text: str) -> EndsFinder:
    return lambda a, b: [m.end() for m in _WORD.finditer(text, a, b)]


def _line_ends(text: str, lines: tuple[tuple[int, int], ...]) -> EndsFinder:
    def find(a: int, b: int) -> list[int]:
        ends = []
        for start, end in lines:
            start, end = max(start, a), min(end, b)
            if start < end and text[start:end].strip():
                ends.append(start + len(text[start:end].rstrip()))
        return ends

    return find


def _fit(text: str, span: Span, budget: _Budget, code_lines: tuple[tuple[int, int], ...] | None) -> list[Span]:
    """``span`` as tight pieces that fit: cut at line ends (code), else whitespace, else graphemes."""
    if budget.fits(text, span.start, span.end):
        return [span]
    levels: list[EndsFinder] = [_word_ends(text), lambda a, b: _GraphemeEnds(text, a, b)]
    if code_lines is not None and len(code_lines) > 1:
        levels.insert(0, _line_ends(text, code_lines))
    return _greedy(text, span.start, span.end, budget, levels)


def _greedy(text: str, a: int, b: int, budget: _Budget, levels: list[EndsFinder]) -> list[Span]:
    """Longest fitting prefixes ending at ``levels[0]`` positions; finer levels for a too-long first step."""
    ends = levels[0](a, b)
    out: list[Span] = []
    p, k = a, 0
    while p < b:
        while ends[k] <= p:  # ends are sorted and the last one is b
            k += 1
        if budget.fits(text, p, ends[k]):
            k = _gallop(ends, k, functools.partial(budget.fits, text, p))
            out.append(Span(p, ends[k]))
        elif len(levels) > 1:
            out.extend(_greedy(text, p, ends[k], budget, levels[1:]))
        else:
            logger.warning("one character cluster at offset %d exceeds max_tokens=%d", p, budget.max_tokens)
            out.append(Span(p, ends[k]))
        p = _NON_SPACE.search(text, ends[k], b).start() if ends[k] < b else b  # type: ignore[union-attr]
    return out


def _gallop(ends: Sequence[int], k: int, fits: Callable[[int], bool]) -> int:
    """Largest index ``j >= k`` with ``fits(ends[j])``, given ``fits(ends[k])``: O(log(j - k)) calls."""
    good, step, bad = k, 1, len(ends)
    while good + step < bad:
        if fits(ends[good + step]):
            good += step
            step *= 2
        else:
            bad = good + step
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(ends[mid]):
            good = mid
        else:
            bad = mid
    return good


# --------------------------------------------------------------------------- public API


def _check_arguments(text: object, max_tokens: object, count_tokens: object) -> None:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise TypeError(f"max_tokens must be an int or None, got max_tokens={max_tokens!r}")
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive number of tokens, got max_tokens={max_tokens}")
    if count_tokens is not None and not callable(count_tokens):
        raise TypeError(f"count_tokens must be callable, got {type(count_tokens).__name__}")


def _split(
    text: str,
    max_tokens: int | None,
    count_tokens: TokenCounter | None,
    newline_policy: str = "auto",
) -> list[Span]:
    """:func:`split_sentences` with the line-break policy exposed for the benchmark."""
    _check_arguments(text, max_tokens, count_tokens)
    blocks = _blocks(text)
    if max_tokens is None:
        return [span for block in blocks for span in _block_sentences(text, block, newline_policy)]
    count = count_tokens or word_count
    overhead = max(0, count(""))
    if overhead >= max_tokens:
        raise ValueError(
            f"max_tokens={max_tokens} leaves no room for text: count_tokens('') is already {overhead}"
        )
    budget = _Budget(max_tokens, count, overhead)
    out: list[Span] = []
    for block in blocks:
        code_lines = block.lines if block.kind == _Kind.CODE else None
        for span in _block_sentences(text, block, newline_policy):
            out.extend(_fit(text, span, budget, code_lines))
    return out


def split_sentences(
    text: str,
    *,
    max_tokens: int | None = None,
    count_tokens: TokenCounter | None = None,
) -> list[Span]:
    """Split ``text`` into sentence spans (the rules: docs/design.md, ``hseg.text.sentences``).

    The spans are in order, do not overlap, have no leading or trailing whitespace and cover
    every non-whitespace character (``str.isspace``) of ``text`` exactly once; text that is
    empty or only whitespace gives ``[]``. Markdown headings, table rows and list items are
    units of their own and fenced code blocks stay whole.

    Args:
        text: the document.
        max_tokens: if given, no span is longer than this many tokens: longer units are cut at
            line ends (code), whitespace, or grapheme boundaries, each piece as long as fits.
        count_tokens: the tokenizer's counter, used only with ``max_tokens`` (default
            :func:`word_count`). It is only called on pieces that could exceed the cap,
            assuming that apart from the count it gives for ``""`` (special tokens) every token
            covers at least one UTF-8 byte -- true for word counts, WordPiece and byte-level BPE
            such as tiktoken. A single grapheme over the cap is returned whole, with a warning.

    Raises:
        ValueError: ``max_tokens`` is not positive, or not above ``count_tokens("")``.
        TypeError: an argument has the wrong type.

    Example:
        >>> text = "# Intro\\nDr. Smith paid $1.5 million. He left!\\n\\n| a | b |"
        >>> [s.of(text) for s in split_sentences(text)]
        ['# Intro', 'Dr. Smith paid $1.5 million.', 'He left!', '| a | b |']
        >>> words = "one two three four five"
        >>> [s.of(words) for s in split_sentences(words, max_tokens=2)]
        ['one two', 'three four', 'five']
    """
    return _split(text, max_tokens, count_tokens)
