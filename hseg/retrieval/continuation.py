"""Rules 5 and 6 of ``unit="auto"`` (:mod:`hseg.retrieval.selection`) on Chroma: what a walk leaves of
the budget continues its passages with the segments after them, then with the first sentences of
the next one.

Both rules need only each segment's id, size and sentence cuts, which the lexical index's table
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
from hseg.retrieval.selection import continue_passages, cut_passages
from hseg.text.structure import common_prefix


@dataclass
class _Plan:
    """Rules 5 and 6 decided on the table for passages in rank order: what is ``left`` of the
    budget, the segments the passages hold (``taken``), the table's rows after each (``chains``),
    what each passage takes of its chain (``added``) and the cut it ends with (``cuts``)."""

    left: int
    taken: set[str]
    chains: list[list[LexicalRow]]
    added: list[list[str]]
    cuts: list[tuple[str, int, int] | None]

    @classmethod
    def decide(cls, left: int, taken: set[str], chains: list[list[LexicalRow]]) -> _Plan:
        """Rule 5 (:func:`continue_passages`) on the chains' sizes, then rule 6 (:func:`cut_passages`)
        on the cuts of the segment each passage stopped before."""
        added = continue_passages([[(r.segment_id, r.tokens) for r in chain] for chain in chains], left, taken)
        rest = left - sum(r.tokens for chain, more in zip(chains, added) for r in chain[:len(more)])  # a prefix each
        nexts: list[tuple[str, list[tuple[int, int]]] | None] = [None] * len(chains)
        for i, (chain, more) in enumerate(zip(chains, added)):
            if rest > 0 and len(more) < len(chain):  # its cuts are decoded only where one could still fit
                after = chain[len(more)]
                nexts[i] = (after.segment_id, decode_cuts(after.cuts))
        return cls(left, taken, chains, added, cut_passages(nexts, rest, taken | {s for more in added for s in more}))

    def used(self) -> list[str]:
        """The ids of the records the plan reads: the segments added, then those cut."""
        return [sid for more, cut in zip(self.added, self.cuts) for sid in [*more, *([cut[0]] if cut else [])]]


@dataclass
class Continuation:
    """Rules 5 and 6 of one search: the lexical ``table`` they are decided on, the ``budget``, the
    records read for them, and their plan for each set of passages (decided once, whether a path
    reads ahead with it or :func:`continued` reads after)."""

    table: LexicalSource
    budget: int
    #: records read so far, by id (``None``: asked for and absent)
    found: dict[str, tuple[dict[str, Any], str] | None] = dataclasses.field(default_factory=dict)
    _plans: dict[tuple[tuple[tuple[str, ...], int], ...], _Plan | None] = dataclasses.field(default_factory=dict)

    def plan(self, passages: list[tuple[list[str], int]]) -> Plan[_Plan | None]:
        """The plan for ``passages`` (``(segment ids, tokens)``, in rank order); ``None`` when no
        budget is left. The table's rows are read as a value (:class:`~hseg.retrieval.plans.Lexical`)."""
        key = tuple((tuple(ids), tokens) for ids, tokens in passages)
        if key not in self._plans:
            left = self.budget - sum(tokens for _, tokens in passages)
            plan = None
            if left > 0 and passages:
                following = yield Lexical(self.table, "following",
                                          tuple(dict.fromkeys(ids[-1] for ids, _ in passages if ids)), left)
                chains = [following.get(ids[-1], []) if ids else [] for ids, _ in passages]
                taken = {sid for ids, _ in passages for sid in ids}
                plan = _Plan.decide(left, taken, chains)
            self._plans[key] = plan
        return self._plans[key]

    def ahead(self, passages: list[tuple[list[str], int]]) -> Plan[list[str]]:
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
    plan = yield from rest.plan([(h.segment_ids, h.token_count) for h in hits])
    if plan is None:
        return hits
    found = rest.found
    while True:  # each round that is not the last ends a chain earlier, so it ends
        wanted = tuple(sid for sid in dict.fromkeys(plan.used()) if sid not in found)
        if wanted:
            got = yield Get(collection, wanted, ("metadatas", "documents"), where, wdoc)
            rest.remember(wanted, records(got))  # absent from the answer: excluded by the filters, or gone
        pieces = [_pieces(h, chain[:len(more) + (cut is not None)], cut, found)  # a cut segment follows the added
                  for h, chain, more, cut in zip(hits, plan.chains, plan.added, plan.cuts)]
        broken = {i: len(p) for i, (p, ok) in enumerate(pieces) if not ok}
        if not broken:
            return [_extended(h, p) if p else h for h, (p, _) in zip(hits, pieces)]
        chains = [chain[:broken[i]] if i in broken else chain for i, chain in enumerate(plan.chains)]
        plan = _Plan.decide(plan.left, plan.taken, chains)


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
