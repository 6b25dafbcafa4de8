"""A query's words for the lexical (BM25) side: what is looked up, and why the stop words go.

The lexical index (:mod:`hseg.store.lexical_index`) is SQLite FTS5 with the tokenizer
``porter unicode61 remove_diacritics 2``: Unicode word characters, case and diacritics folded,
English words stemmed (Porter), any other script kept as it is. A query is cut into words the same
way (``\\w+``) and each word goes to FTS5 as a quoted string, so FTS5 applies its own tokenizer to
it and no query syntax (``AND``, ``NEAR``, ``*``, quotes) can be injected by the question.

English stop words are left out of the query, not of the index: BM25 gives a word found in half
the segments almost no weight (FTS5 clamps its IDF at 1e-6), but FTS5 still scores every segment
that holds it, so "What is the ..." cost 30-60 ms on 40k segments with them and ~1 ms without
(``benchmarks/lexical_engines.py``). A question in another language keeps all its words.

Example:
    >>> query_terms("What is the Coriolis effect?")
    ['coriolis', 'effect']
    >>> fts5_match(["coriolis", "effect"])
    '"coriolis" OR "effect"'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["ENGLISH_STOP_WORDS", "query_terms", "fts5_match"]

#: English function words (articles, pronouns, auxiliaries, prepositions, conjunctions, question words)
ENGLISH_STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves s t d ll m re ve
""".split())

_WORD = re.compile(r"\w+")


def query_terms(text: str, stop_words: frozenset[str] = ENGLISH_STOP_WORDS) -> list[str]:
    """The distinct words of a query, lower-cased, in order, stop words left out (all of them kept
    when the query has nothing else, e.g. "To be or not to be")."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    kept = [w for w in words if w not in stop_words]
    return kept or words


def fts5_match(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression: any of ``terms``, each a quoted string (quotes doubled)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
