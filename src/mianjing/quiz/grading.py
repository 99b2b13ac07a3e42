"""Grade a free-text answer against an entry's key points.

A key point is covered when any of its match terms (for the chosen language) occurs in the
answer. Matching is on a normalised form: Unicode NFKC (full-width -> ASCII), case-folded,
whitespace removed (Chinese has none and English terms like "1 + eps" vs "1+eps" should meet).
The suggested rating follows the covered fraction.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..schema import Entry, KeyPoint

_SPACE = re.compile(r"\s+")

AGAIN, HARD, GOOD, EASY = 1, 2, 3, 4


def normalise(text: str) -> str:
    return _SPACE.sub("", unicodedata.normalize("NFKC", text).casefold())


@dataclass(frozen=True)
class Grade:
    covered: list[KeyPoint]
    missed: list[KeyPoint]

    @property
    def total(self) -> int:
        return len(self.covered) + len(self.missed)

    @property
    def fraction(self) -> float:
        return len(self.covered) / self.total if self.total else 0.0

    @property
    def suggested(self) -> int:
        return suggest(self.fraction)


def suggest(fraction: float) -> int:
    """All key points -> Easy; at least 2/3 -> Good; at least 1/3 -> Hard; less -> Again."""
    if fraction >= 1.0:
        return EASY
    if fraction >= 2 / 3 - 1e-9:
        return GOOD
    if fraction >= 1 / 3 - 1e-9:
        return HARD
    return AGAIN


def covers(point: KeyPoint, answer: str, lang: str) -> bool:
    norm = normalise(answer)
    # A Chinese answer may use English terms (and vice versa): accept either list.
    terms = point.match.get(lang) + point.match.get("en" if lang == "zh" else "zh")
    return any(normalise(t) and normalise(t) in norm for t in terms)


def grade(entry: Entry, answer: str, lang: str) -> Grade:
    covered, missed = [], []
    for kp in entry.key_points:
        (covered if covers(kp, answer, lang) else missed).append(kp)
    return Grade(covered, missed)
