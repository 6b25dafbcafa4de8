"""Rules 5a, 5 and 6 of ``unit="auto"`` (:mod:`hseg.retrieval.selection`) on Chroma: the best passage
reads on through its parent (paid for by the last passages), then what is left of the budget
continues the passages with the segments after them, then with the first sentences of the next one.

The rules need only each segment's id, size and sentence cuts, which the lexical index's table
holds (:class:`~hseg.retrieval.lexical_query.LexicalSource`), so they are decided on the table and
only the records they use are read from the collection: by the search path with its passages' own
``get`` when it can (:meth:`Continuation.ahead`), else by :func:`continued` in one ``get`` of its
own. Reading only the used records changes no answer: a passage stops at the first segment that
does not fit, whatever lies after it.

The table can lag a write in flight, and a passage must be exact (``text == source[start:end]``),
so each record used is checked against what the table said (document, start, size, the cut among
its cuts). One that does not continue its passage, or that the search's filters exclude, ends that
passage's continuation there, and the rules are decided again without it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hseg.chunking.schema import SegmentMeta, decode_cuts, joined_pages
from hseg.retrieval.hits import SearchHit
from hseg.retrieval.lexical_query import LexicalRow, LexicalSource
from hseg.retrieval.plans import Get, Lexical, Plan, records
from hseg.retrieval.selection import continue_passages, cut_passages, pay_for, read_on
from hseg.text.structure import common_prefix

#: a passage as the rules see it: its segment ids (document order), its tokens, its parent's id and its score
Passage = tuple[list[str], int, str, float]


@dataclass(frozen=True)
class _ReadOn:
    """Rule 5a for ``passages`` in rank order: how many rows of the best passage's chain it reads on
    (``grown``), the passages ``kept`` (indices; those joined to it or dropped to pay are not) and
    what is ``left`` of the budget after them."""

    grown: int
    kept: list[int]
    left: int

    @staticmethod
    def applies(passages: list[Passage], cap: int, margin: float) -> bool:
        """Whether the best passage may read on: room under ``cap``, and a lead over the next passage's
        score of more than ``margin``."""
        return bool(passages) and cap > passages[0][1] and \
            (len(passages) == 1 or passages[0][3] - passages[1][3] > margin)

    @classmethod
    def decide(cls, passages: list[Passage], budget: int, cap: int, margin: float,
               chain: list[LexicalRow]) -> _ReadOn:
        """:func:`read_on` along ``chain`` (the rows after the best passage) where it
        :meth:`applies`, then :func:`pay_for` what it took."""
        grown = 0
        joined: list[int] = []
        if cls.applies(passages, cap, margin):
            _, lead_tokens, lead_cluster, _ = passages[0]
            held = {ids[0]: (j, len(ids)) for j, (ids, *_) in enumerate(passages) if j and ids}
            others = {sid for ids, *_ in passages[1:] for sid in ids}
            grown, joined = read_on([(r.segment_id, r.cluster_id, r.tokens) for r in chain], lead_cluster,
                                    lead_tokens, cap, held, frozenset(others))
        order = [j for j in range(len(passages)) if j not in joined]
        # the best passage holds what it read on, the passages it joined among them
        sizes = [passages[j][1] + (sum(r.tokens for r in chain[:grown]) if j == 0 else 0) for j in order]
        kept = [order[i] for i in pay_for(sizes, budget)] if grown else order
        return cls(grown, kept, budget - sum(sizes[i] for i in range(len(kept))))


@dataclass
class _Plan:
    """Rules 5a, 5 and 6 decided on the table for ``passages`` in rank order (the passages a walk
    gave, with ``chains``: the table's rows after each): the passages ``kept`` (indices into
    ``passages``; rule 5a may join some to the best one and drop the last ones to pay for it), and
    for each kept passage its chain, what it takes of it (``added``) and the cut it ends with
    (``cuts``); ``taken``: the segments the kept passages hold before rules 5 and 6."""

    passages: list[Passage]
    budget: int
    cap: int
    margin: float
    chains: list[list[LexicalRow]]
    kept: list[int]
    taken: set[str]
    added: list[list[str]]
    cuts: list[tuple[str, int, int] | None]

    @classmethod
    def decide(cls, passages: list[Passage], budget: int, cap: int, margin: float,
               chains: list[list[LexicalRow]], lead: _ReadOn | None = None) -> _Plan:
        """Rule 5a (:class:`_ReadOn`; ``lead``, when already decided on ``chains[0]``), rule 5
        (:func:`continue_passages`) on the chains' sizes, then rule 6 (:func:`cut_passages`) on the
        cuts of the segment each passage stopped before."""
        if lead is None:
            lead = _ReadOn.decide(passages, budget, cap, margin, chains[0] if chains else [])
        grown, kept, left = lead.grown, lead.kept, lead.left
        lead_grown = [r.segment_id for r in chains[0][:grown]] if grown else []
        taken = {sid for j in kept for sid in passages[j][0]} | set(lead_grown)
        following = [chains[j][grown:] if j == 0 else chains[j] for j in kept]
        more = continue_passages([[(r.segment_id, r.tokens) for r in chain] for chain in following], left, taken)
        rest = left - sum(r.tokens for chain, m in zip(following, more) for r in chain[:len(m)])  # a prefix each
        added = [(lead_grown if j == 0 else []) + m for j, m in zip(kept, more)]
        kept_chains = [chains[j] for j in kept]
        nexts: list[tuple[str, list[tuple[int, int]]] | None] = [None] * len(kept)
        for i, (chain, took) in enumerate(zip(kept_chains, added)):
            if rest > 0 and len(took) < len(chain):  # its cuts are decoded only where one could still fit
                after = chain[len(took)]
                nexts[i] = (after.segment_id, decode_cuts(after.cuts))
        cuts = cut_passages(nexts, rest, taken | {s for m in more for s in m})
        return cls(passages, budget, cap, margin, chains, kept, taken, added, cuts)

    def without(self, broken: Mapping[int, int]) -> _Plan:
        """The plan decided again with the chain of each kept passage ``i`` in ``broken`` cut to its
        first ``broken[i]`` rows (the records after them do not continue it as the table said). When
        the best passage reads on less, more may be left than the other chains were read for: they
        then stop at their end (a write in flight costs a continuation, never an exact span)."""
        chains = list(self.chains)
        for i, n in broken.items():
            chains[self.kept[i]] = chains[self.kept[i]][:n]
        return _Plan.decide(self.passages, self.budget, self.cap, self.margin, chains)

    def used(self) -> list[str]:
        """The ids of the records the plan reads: the segments added, then those cut."""
        return [sid for more, cut in zip(self.added, self.cuts) for sid in [*more, *([cut[0]] if cut else [])]]


@dataclass
class Continuation:
    """Rules 5a, 5 and 6 of one search: the lexical ``table`` they are decided on, the ``budget``, the
    tokens the best passage may read on to (``cap``; 0: rule 5a off) and the lead over the next passage
    it needs for that (``margin``), the records read for them, and
    their plan for each set of passages (decided once, whether a path reads ahead with it or
    :func:`continued` reads after)."""

    table: LexicalSource
    budget: int
    cap: int = 0
    margin: float = 0.0
    #: records read so far, by id (``None``: asked for and absent)
    found: dict[str, tuple[dict[str, Any], str] | None] = dataclasses.field(default_factory=dict)
    _plans: dict[tuple[tuple[tuple[str, ...], int, str, float], ...], _Plan | None] = \
        dataclasses.field(default_factory=dict)

    def plan(self, passages: list[Passage]) -> Plan[_Plan | None]:
        """The plan for ``passages`` (:data:`Passage`, in rank order); ``None`` when
        there is nothing to decide (no budget left, no reading on). The table's rows are read as a
        value (:class:`~hseg.retrieval.plans.Lexical`)."""
        key = tuple((tuple(ids), tokens, cluster, score) for ids, tokens, cluster, score in passages)
        if key not in self._plans:
            left = self.budget - sum(p[1] for p in passages)
            reads_on = _ReadOn.applies(passages, self.cap, self.margin)
            plan = None
            if passages and (left > 0 or reads_on):
                chains: list[list[LexicalRow]] = [[] for _ in passages]
                firsts, lead = 0, None
                if reads_on:  # its rows first: what rule 5a leaves decides how far the others are read
                    # it reads on at most cap - size, then continues (rule 5) with what is left: no more
                    # than before, or than the largest passage dropped
                    limit = self.cap - passages[0][1] + max(left, max(p[1] for p in passages))
                    (chains[0],) = yield from self._following([passages[0]], limit)
                    lead = _ReadOn.decide(passages, self.budget, self.cap, self.margin, chains[0])
                    firsts, left = 1, lead.left
                if left > 0 and len(passages) > firsts:
                    chains[firsts:] = yield from self._following(passages[firsts:], left)
                plan = _Plan.decide(passages, self.budget, self.cap, self.margin, chains, lead)
            self._plans[key] = plan
        return self._plans[key]

    def _following(self, passages: list[Passage], limit: int) -> Plan[list[list[LexicalRow]]]:
        """The table's rows after each of ``passages``, as far as ``limit`` tokens and the first past it."""
        last = tuple(dict.fromkeys(ids[-1] for ids, *_ in passages if ids))
        following = yield Lexical(self.table, "following", last, limit)
        return [following.get(ids[-1], []) if ids else [] for ids, *_ in passages]

    def ahead(self, passages: list[Passage]) -> Plan[list[str]]:
        """The records the rules will use after ``passages`` if they agree with the table: what a
        search path can read with the passages' own (then :meth:`remember` them)."""
        plan = yield from self.plan(passages)
        return plan.used() if plan is not None else []

    def remember(self, asked: Sequence[str], got: Mapping[str, tuple[dict[str, Any], str]]) -> None:
        """Keep the records ``asked`` for that came in a read's answer ``got`` (``{id: (metadata, text)}``),
        so that :func:`continued` does not read them again; one absent from it has gone since the
        table was read (or was not readable where the path read it: :func:`continued` reads it then)."""
        wanted = set(asked)
        self.found.update(dict.fromkeys(asked))
        self.found.update((rid, record) for rid, record in got.items() if rid in wanted)


def continued(collection: Any, hits: list[SearchHit], rest: Continuation, where: Mapping[str, Any] | None,
               wdoc: Mapping[str, Any] | None) -> Plan[list[SearchHit]]:
    """``hits`` with the rest of the budget spent on the segments after them (rule 5), then on the
    first sentences of the next segment (rule 6).

    Both rules are decided on the lexical table's rows (ids, sizes, cuts), then only the records
    they use are read (those a search path did not read ahead), in one ``get`` under the search's
    filters. A used segment the filters exclude, or whose record does not continue its passage as
    the table says (a document rewritten since the table was read: another start, size or cut),
    ends its passage's continuation, and the rules are decided again without it (another ``get``
    for what that changes, rarely needed). Reading only the used records changes no answer: a
    segment the rules do not use decides nothing (a passage stops at the first segment that does
    not fit, whatever lies after it)."""
    plan = yield from rest.plan([(h.segment_ids, h.token_count, h.cluster_id, h.score) for h in hits])
    if plan is None:
        return hits
    found = rest.found
    while True:  # each round that is not the last ends a chain earlier, so it ends
        wanted = tuple(sid for sid in dict.fromkeys(plan.used()) if sid not in found)
        if wanted:
            got = yield Get(collection, wanted, ("metadatas", "documents"), where, wdoc)
            rest.remember(wanted, records(got))  # absent from the answer: excluded by the filters, or gone
        kept = [hits[j] for j in plan.kept]
        pieces = [_pieces(h, plan.chains[j][:len(more) + (cut is not None)], cut, found)  # a cut follows the added
                  for j, h, more, cut in zip(plan.kept, kept, plan.added, plan.cuts)]
        broken = {i: len(p) for i, (p, ok) in enumerate(pieces) if not ok}
        if not broken:
            return [_extended(h, p) if p else h for h, (p, _) in zip(kept, pieces)]
        plan = plan.without(broken)


def _pieces(hit: SearchHit, rows: list[LexicalRow], cut: tuple[str, int, int] | None,
            found: Mapping[str, tuple[dict[str, Any], str] | None]
            ) -> tuple[list[tuple[str, SegmentMeta, str, int]], bool]:
    """What continues ``hit``: ``rows`` whole, the last one cut where ``cut`` says when given, as
    ``(id, view, text, tokens)`` from their ``found`` records, as far as each record continues
    the passage as the table said (document, start, size, the cut among its cuts); and whether all
    of them did (if not, the pieces stop before the first that did not)."""
    pieces: list[tuple[str, SegmentMeta, str, int]] = []
    end = hit.end
    for j, row in enumerate(rows):
        record = found.get(row.segment_id)
        view = None if record is None else SegmentMeta.read(record[0])
        if record is None or view is None:
            return pieces, False
        text = record[1]
        if view.doc_id != hit.doc_id or view.start != end or view.tokens != row.tokens:
            return pieces, False
        if cut is None or j < len(rows) - 1:
            pieces.append((row.segment_id, view, text, row.tokens))
            end = view.end
        elif (cut[1], cut[2]) in view.cuts():
            pieces.append((row.segment_id, view, text[:cut[1]], cut[2]))
        else:
            return pieces, False
    return pieces, True


def _extended(hit: SearchHit, pieces: list[tuple[str, SegmentMeta, str, int]]) -> SearchHit:
    """``hit`` continued by ``pieces`` of the segments after it, ``(id, view, text, tokens)`` in
    document order, each a whole segment or (the last) its first sentences; its score and the
    segment that gave it are unchanged."""
    last, last_text = pieces[-1][1], pieces[-1][2]
    return dataclasses.replace(
        hit,
        text=hit.text + "".join(text for _, _, text, _ in pieces),  # segments tile their document: exact
        end=last.start + len(last_text),
        token_count=hit.token_count + sum(tokens for *_, tokens in pieces),
        segment_ids=[*hit.segment_ids, *(sid for sid, *_ in pieces)],
        heading_path=common_prefix([hit.heading_path, *(view.heading_path for _, view, _, _ in pieces)]),
        # a cut segment (its first sentences) is on the pages before the cut
        pages=joined_pages([hit.pages, *(view.pages_before(len(text)) for _, view, text, _ in pieces)]),
    )
