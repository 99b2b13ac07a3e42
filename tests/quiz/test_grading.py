"""Key points are covered by their match terms; the suggested rating follows the coverage."""

from __future__ import annotations

import yaml

from mianjing.quiz.grading import AGAIN, EASY, GOOD, HARD, grade, suggest
from mianjing.schema import Entry
from tests.quiz.kb import ENTRIES


def _entry(eid: str) -> Entry:
    return Entry.model_validate(yaml.safe_load(ENTRIES[eid]))


def test_chinese_answer_covers_by_chinese_terms():
    e = _entry("gae-basics")
    g = grade(e, "GAE 把 TD 残差做指数加权；λ 越大偏差越小", "zh")
    assert [kp.en for kp in g.covered] == ["exponentially weighted TD residuals", "lambda trades bias for variance"]
    assert [kp.en for kp in g.missed] == ["no bootstrap after the last token"]
    assert g.suggested == GOOD


def test_english_matching_ignores_case_width_and_spaces():
    e = _entry("ppo-clip")
    g = grade(e, "It caps the UPDATE  SIZE; with A>0 only the upper bound 1 + eps binds", "en")
    assert len(g.covered) == 2 and g.suggested == EASY
    assert grade(e, "ｕｐｐｅｒ ｂｏｕｎｄ", "en").covered[0].en == "for A>0 only 1+eps binds"  # full-width
    assert grade(e, "", "en").suggested == AGAIN


def test_suggestion_thresholds():
    assert [suggest(x) for x in (0.0, 0.32, 1 / 3, 0.5, 2 / 3, 0.99, 1.0)] == [AGAIN, AGAIN, HARD, HARD, GOOD,
                                                                           GOOD, EASY]
