"""The scoring helpers of ``benchmarks.converted_retrieval``: words, located word sequences, heading paths."""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.converted_retrieval import Located, heading_agreement, recall, words


@dataclass(frozen=True)
class Seg:
    text: str
    heading_path: tuple[str, ...]


SOURCE = "# Tides\n\nThe moon pulls the **sea** \u2014 twice a day.\n\n## Moorings\n\nRopes hold the boat fast.\n"


def test_words_ignore_markup_case_and_latin1_spelling():
    assert words("The **Moon**\u2014pulls \u201cthe\u201d sea") == words("the moon--pulls \"the\" sea")


def test_located_finds_a_word_sequence_at_its_offset():
    at = Located(SOURCE).find(words("ROPES hold the"))
    assert at == SOURCE.index("Ropes")
    assert Located(SOURCE).find(words("ropes fast")) is None


def test_heading_agreement_compares_with_the_source_path():
    segs = [Seg("Tides The moon pulls the sea", ("Tides",)), Seg("Moorings Ropes hold", ("Tides", "Moorings")),
            Seg("Ropes hold the boat fast.", ("Moorings",)), Seg("not in the source at all", ())]
    assert heading_agreement(SOURCE, segs, probe=3) == (3, 2, 4)


def test_recall_is_the_share_of_reference_4grams_retrieved():
    assert recall(["the moon pulls the sea twice"], ["The **moon** pulls the"]) == 1 / 3
    assert recall(["the moon pulls the sea twice"], []) == 0.0
