"""The LeetCode katas through the real judge: a correct file is accepted whole, and every wrong or shortcut answer
of ``tests/quiz/leetcode_solutions.py`` is rejected by the property named for it -- beside a property it passes,
so the rejection comes from that property and not from a side effect."""

from __future__ import annotations

import pytest

from mianjing.quiz.judge import judge
from mianjing.quiz.katas import find
from tests.quiz import leetcode_solutions as L
from tests.quiz.kb import CHECKOUT


@pytest.fixture(autouse=True)
def _few_examples(monkeypatch):
    monkeypatch.setenv("MIANJING_MAX_EXAMPLES", "20")


def run(tmp_path, kata: str, code: str, only=None):
    k = find(CHECKOUT, kata)
    if k is None:
        pytest.skip(f"kata {kata} has not landed in this checkout")
    f = tmp_path / f"{kata}_candidate.py"
    f.write_text(code)
    return judge(CHECKOUT, k, f, only=only, timeout=60)


@pytest.mark.parametrize("kata", sorted(L.OK))
def test_a_correct_solution_is_accepted(tmp_path, kata):
    res = run(tmp_path, kata, L.OK[kata])
    assert res.ok, [(p.name, p.reason, p.message[:400]) for p in res.props if not p.passed] or res.fatal


@pytest.mark.parametrize("name, kata, code, passes, rejects, says", L.WRONG, ids=[w[0] for w in L.WRONG])
def test_a_wrong_answer_is_rejected_by_its_property(tmp_path, name, kata, code, passes, rejects, says):
    only = [rejects] + ([passes] if passes else [])
    res = run(tmp_path, kata, code, only=only)
    assert res.fatal is None, (res.fatal, res.fatal_detail)
    by_name = {p.name: p for p in res.props}
    if passes:
        assert by_name[passes].passed, (passes, by_name[passes].reason, by_name[passes].message[:500])
    bad = by_name[rejects]
    assert bad.passed is False, f"{rejects} accepted {name}"
    assert says in f"{bad.reason} {bad.message} {bad.example}", (bad.reason, bad.message[:800])


def test_every_leetcode_kata_has_a_correct_solution_and_wrong_answers():
    from mianjing.quiz.katas import REGISTRY

    new = {"length_of_lis", "LRUCache", "trap", "merge", "merge_k_lists", "num_islands", "find_order",
           "is_valid_bst", "build_tree"}
    assert new <= {k.name for k in REGISTRY if k.track == "leetcode"}
    assert set(L.OK) == new
    for kata in new:
        assert sum(1 for w in L.WRONG if w[1] == kata) >= 2, kata


def test_the_meter_reset_attempt_is_named(tmp_path):
    code = next(w[2] for w in L.WRONG if w[0] == "trap-prefix-maxima-resetting-the-meter")
    res = run(tmp_path, "trap", code, only=["prop_constant_extra_space"])
    assert any("tracemalloc.reset_peak()" in a for a in res.attempts), res.attempts
