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


# -- issue 22: negation, compounds, antonyms, morphology, notation, refuted claims -----------------

from types import SimpleNamespace  # noqa: E402

from mianjing.quiz.grading import judge_point, parse  # noqa: E402
from mianjing.schema import Text  # noqa: E402


def _point(zh: str, en: str, zh_terms, en_terms) -> KeyPoint:
    return KeyPoint.model_validate({"zh": zh, "en": en, "match": {"zh": list(zh_terms), "en": list(en_terms)}})


LOSSLESS = _point("输出分布与 target 完全相同（无损）", "the output distribution is exactly the target's (lossless)",
                  ["无损", "完全相同"], ["lossless", "same distribution"])


@pytest.mark.parametrize("answer, lang, covered, contradicted", [
    ("投机解码是无损的", "zh", True, False),
    ("投机解码不是无损的，只是近似", "zh", False, True),  # 无 inside 无损 is no negation; 不是 before it is
    ("它并非无损", "zh", False, True),
    ("the samples keep the same distribution", "en", True, False),
    ("it does not give the same distribution as the target", "en", False, True),
    ("a different distribution, but fast", "en", False, False),  # "same distribution" is not "distribution"
])
def test_negation_is_read_as_words_and_against_the_points_own_polarity(answer, lang, covered, contradicted):
    r = judge_point(LOSSLESS, parse(answer), lang)
    assert (r.covered, r.contradicted) == (covered, contradicted), (answer, r)


def test_a_point_that_is_itself_negative_is_covered_by_the_negative_and_contradicted_by_the_positive():
    kp = _point("clip 不限制比值", "the clip does not bound the ratio", ["限制比值"], ["bound the ratio"])
    assert judge_point(kp, parse("PPO's clip does not bound the ratio at all"), "en").covered
    said = judge_point(kp, parse("the clip bounds the ratio to the band"), "en")
    assert not said.covered and said.contradicted
    assert judge_point(kp, parse("clip 并不限制比值"), "zh").covered


def test_words_with_a_negating_character_are_not_negations():
    kp = _point("k3 非负且无偏", "k3 is non-negative and unbiased", ["无偏"], ["unbiased"])
    assert judge_point(kp, parse("k3 非负且无偏"), "zh").covered  # 非负 before 无偏 negates nothing
    assert judge_point(kp, parse("两者没有区别，k3 无偏"), "zh").covered
    assert not judge_point(kp, parse("k3 不是无偏的"), "zh").covered


@pytest.mark.parametrize("term, answer, found", [
    ("contiguous", "PagedAttention stores KV in non-contiguous blocks", False),  # an antonym is not a typo
    ("contiguous", "one contiguous region per request", True),
    ("精度", "半精度训练更快", False),  # inside a longer word
    ("精度", "FP16 的精度更高", True),
    ("激活", "激活函数用 GELU", False),
    ("激活", "激活值减半", True),
    ("precision", "mixed precision saves memory", False),
    ("epoch", "after several Epochs the ratio drifts", True),  # morphology
    ("quadratic", "memory grows quadratically with length", True),
    ("conditional", "the probability conditioned on reaching the position", True),
    ("5as²b", "the attention term 5as^2b", True),  # notation, after NFKC
    ("5as²b", "the attention term 5·a·s²·b", True),
    ("1/3", "about a third more FLOPs", True),
    ("1/3", "多了三分之一的计算", True),
    ("gamma*c", "the bonus token after gamma tokens", False),
    ("k3+", "k3 is never negative", False),  # a term with symbols is found verbatim or not at all
])
def test_terms_are_found_as_words(term, answer, found):
    assert covers(_kp([term], [term]), answer, "en") == found, (term, answer, normalise(answer))


MIXED = SimpleNamespace(
    key_points=[
        _point("FP16 是 1/5/10，BF16 是 1/8/7；FP16 上限 65504", "FP16 is 1/5/10, BF16 1/8/7; FP16 tops out at 65504",
               ["65504", "1/8/7"], ["65504", "1/8/7"]),
        _point("FP32 转 BF16 是就近舍入到偶数，不是截断", "FP32 to BF16 rounds to nearest even, it does not truncate",
               ["就近舍入", "截断", "尾数"], ["round to nearest", "truncat", "mantissa"]),
        _point("主权重用 FP32", "FP32 master weights", ["主权重"], ["master weight"]),
    ],
    claims=[SimpleNamespace(
        verdict="refuted",
        statement=Text.model_validate({"zh": "FP32 转 BF16 只需截断尾数（丢掉低 16 位）",
                                       "en": "Converting FP32 to BF16 only requires truncating the mantissa (dropping "
                                             "the low 16 bits)"}),
        correction=Text.model_validate({"zh": "PyTorch 的转换是就近舍入到偶数；直接截断是有偏的另一种转换",
                                        "en": "PyTorch rounds to nearest, ties to even; truncation is a different, "
                                              "biased conversion"}))])


@pytest.mark.parametrize("answer, lang", [
    ("Converting FP32 to BF16 only needs the mantissa truncated: drop the low 16 bits. Master weights stay in FP32.",
     "en"),
    ("FP32 转 BF16 只需要截断尾数，丢掉低 16 位就行；主权重用 FP32。", "zh"),
])
def test_an_answer_that_states_a_refuted_claim_is_contradicted(answer, lang):
    g = grade(MIXED, answer, lang)
    assert g.misconceptions, g
    assert MIXED.key_points[1] in g.contradicted and MIXED.key_points[1] not in g.covered
    assert MIXED.key_points[2] in g.covered  # what it got right still counts
    assert g.suggested <= HARD


@pytest.mark.parametrize("answer, lang", [
    ("A common misconception is that converting FP32 to BF16 only truncates the mantissa; it rounds to nearest even.",
     "en"),
    ("FP32 to BF16 does not just truncate the low 16 bits of the mantissa: it rounds to nearest, ties to even.", "en"),
    ("有人以为 FP32 转 BF16 只需截断尾数，其实是就近舍入到偶数。", "zh"),
])
def test_naming_a_misconception_to_reject_it_is_not_stating_it(answer, lang):
    g = grade(MIXED, answer, lang)
    assert not g.misconceptions, g.misconceptions
    assert MIXED.key_points[1] in g.covered


def test_a_figure_said_of_the_other_format_is_contradicted():
    r = judge_point(MIXED.key_points[0], parse("BF16 tops out at 65504 and FP16 has FP32's range"), "en")
    assert not r.covered and r.contradicted, r
    assert judge_point(MIXED.key_points[0], parse("FP16 tops out at 65504"), "en").covered
