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
    full_width = grade(e, "With A>0 only the ｕｐｐｅｒ ｂｏｕｎｄ binds.", "en")
    assert full_width.covered[0].en == "for A>0 only 1+eps binds"
    assert grade(e, "", "en").suggested == AGAIN


def test_suggestion_thresholds():
    assert [suggest(x) for x in (0.0, 0.32, 1 / 3, 0.5, 2 / 3, 0.99, 1.0)] == [AGAIN, AGAIN, HARD, HARD, GOOD,
                                                                           GOOD, EASY]


# -- robust matching (issue 14) ---------------------------------------------------------------------

import pytest  # noqa: E402

from mianjing.quiz.grading import covers, normalise  # noqa: E402
from mianjing.schema import KeyPoint  # noqa: E402


def _kp(en_terms, zh_terms=("占位",), **extra) -> KeyPoint:
    return KeyPoint.model_validate({"zh": "要点", "en": "point", "match": {"en": list(en_terms), "zh": list(zh_terms),
                                                                           **extra}})


@pytest.mark.parametrize("term, answer", [
    ("12Ψ/N", "ZeRO-1 needs 4Psi + 12Psi/N bytes"),  # Greek letter spelled out
    ("12Ψ/N", "4\\Psi + 12\\Psi/N_d"),  # LaTeX
    ("1+eps", "only 1 + ε binds"),
    ("non-empty", "hasNext() checks that the stack is nonempty"),  # hyphen
    ("amortised", "it is amortized O(1)"),  # spelling
    ("1.5x", "ZeRO-3 moves 1.5× the traffic"),
    ("pushed once", "every node is pushed and popped exactly once"),  # words in order, close together
    ("predecessor", "thread the predecesor's right pointer"),  # a typo
    ("16 字节", "每个参数要16字节"),  # Chinese, spacing
    ("梯度保留", "这时梯度会保留下来"),  # Chinese words apart
])
def test_paraphrases_and_spellings_are_found(term, answer):
    assert covers(_kp([term], [term]), answer, "en"), (term, answer, normalise(answer))


@pytest.mark.parametrize("term, answer", [
    ("2Ψ", "ZeRO-1 needs 12Ψ/N"),  # not inside another number
    ("unbiased", "k1 is biased"),
    ("bias", "a bad estimate"),  # short words are found verbatim only
    ("upper bound", "the lower bound"),
])
def test_near_misses_are_not_found(term, answer):
    assert not covers(_kp([term], [term]), answer, "en"), (term, answer)


def test_a_negated_term_does_not_cover_a_positive_point():
    kp = _kp(["clip the ratio"])
    assert covers(kp, "PPO clips the ratio", "en")
    assert not covers(kp, "PPO does not clip the ratio", "en")


def test_near_and_opposite_catch_swapped_statements():
    kp = _kp(["upper bound"], near=[{"en": ["A>0", "positive advantage"], "zh": ["A>0"]}],
             opposite=[{"en": ["A<0", "negative advantage"], "zh": ["A<0"]}])
    from mianjing.quiz.grading import judge_point, parse

    ok = judge_point(kp, parse("For A>0 the upper bound binds, and for A<0 the lower one"), "en")
    swapped = judge_point(kp, parse("For A>0 the lower bound binds, and for A<0 the upper bound"), "en")
    assert ok.covered and not ok.contradicted
    assert not swapped.covered and swapped.contradicted and "A<0" in swapped.evidence


def test_wrong_answers_and_keyword_lists_never_suggest_good():
    e = _entry("ppo-clip")
    listed = grade(e, "update size, trust region, upper bound, 1+eps", "en")
    assert listed.keyword_only and listed.suggested <= HARD and not listed.covered
    assert grade(e, "   \n ", "en").suggested == AGAIN


def test_the_suggestion_follows_the_candidates_ticks():
    e = _entry("gae-basics")
    g = grade(e, "TD residual, exponentially weighted; lambda trades bias against variance", "en")
    assert g.suggested == GOOD
    mine = g.with_ticks([True, True, True], list(e.key_points))
    assert mine.suggested == EASY and mine.overridden
    none = g.with_ticks([False, False, False], list(e.key_points))
    assert none.suggested == AGAIN
