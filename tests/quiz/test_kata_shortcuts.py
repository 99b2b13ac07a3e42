"""Wrong or off-topic solutions that the katas used to accept, each judged through the real judge and
rejected by the property named for it (issue 22). Beside each, the property the shortcut still passes:
the rejection comes from the named property, not from a side effect."""

from __future__ import annotations

import pytest

from mianjing.quiz.judge import judge
from mianjing.quiz.katas import find
from tests.quiz import solutions as S
from tests.quiz.kb import CHECKOUT


@pytest.fixture(autouse=True)
def _few_examples(monkeypatch):
    monkeypatch.setenv("MIANJING_MAX_EXAMPLES", "20")


def run(tmp_path, kata: str, code: str, only: list[str]):
    k = find(CHECKOUT, kata)
    if k is None:
        pytest.skip(f"kata {kata} has not landed in this checkout")
    f = tmp_path / f"{kata}_candidate.py"
    f.write_text(code)
    return judge(CHECKOUT, k, f, only=only, timeout=60)


SHORTCUTS = [
    # (kata, solution, a property it passes, the property that rejects it, what the rejection says)
    ("kl_estimate", S.KL_EMPTY_K2, "prop_k1_k3_unbiased", "prop_closed_forms", "expected"),
    ("grpo_advantages", S.GRPO_FIRST_EIGHT, "prop_matches_group_formula", "prop_realistic_group_sizes", "group_size="),
    ("ppo_clip_loss", S.PPO_PROBABILITY_RATIO, "prop_matches_formula", "prop_fp32_rollouts_with_rare_tokens",
     "rare tokens"),
    ("dpo_loss", S.DPO_LOG_OF_SIGMOID, "prop_matches_formula", "prop_large_margins_in_fp32", "expected loss"),
    ("online_logprobs", S.ONLINE_FULL_ROWS, "prop_matches_two_pass", "prop_one_pass_in_blocks", "columns of the logits at once"),
    ("online_logprobs", S.ONLINE_TWO_PASS_BLOCKS, "prop_matches_two_pass", "prop_one_pass_in_blocks", "swept 2 times"),
    ("fused_logprob_backward", S.FUSED_FULL_AUTOGRAD, "prop_matches_autograd", "prop_never_materialises_logits",
     "the budget is"),
    ("level_order_with_depth", S.LEVEL_ORDER_DEEP_RECURSION, "prop_levels_match_oracle", "prop_deep_chain",
     "recursion"),
]


@pytest.mark.parametrize("kata, code, passes, rejects, says", SHORTCUTS,
                         ids=["kl-empty-k2", "grpo-first-eight", "ppo-probability-ratio", "dpo-log-of-sigmoid",
                              "online-full-rows", "online-two-pass-blocks", "fused-full-autograd",
                              "dfs-raising-recursion-limit"])
def test_the_shortcut_is_rejected_by_its_property(tmp_path, kata, code, passes, rejects, says):
    res = run(tmp_path, kata, code, only=[passes, rejects])
    assert res.fatal is None, (res.fatal, res.fatal_detail)
    by_name = {p.name: p for p in res.props}
    assert by_name[passes].passed, (passes, by_name[passes].reason, by_name[passes].message[:500])
    bad = by_name[rejects]
    assert bad.passed is False, f"{rejects} accepted the shortcut"
    assert says in (bad.reason + " " + bad.message), (bad.reason, bad.message[:800])


def test_the_recursion_limit_attempt_is_named(tmp_path):
    res = run(tmp_path, "level_order_with_depth", S.LEVEL_ORDER_DEEP_RECURSION, only=["prop_deep_chain"])
    assert any("sys.setrecursionlimit(100000)" in a for a in res.attempts), res.attempts


@pytest.mark.parametrize("kata, code, props", [
    ("online_logprobs", S.ONLINE_LOGPROBS_OK, ["prop_one_pass_in_blocks"]),
    ("fused_logprob_backward", S.FUSED_BACKWARD_OK, ["prop_never_materialises_logits"]),
    ("grpo_advantages", S.GRPO_POPULATION_STD.replace("unbiased=False", "unbiased=True"), ["prop_realistic_group_sizes"]),
    ("ppo_clip_loss", S.PPO_OK, ["prop_fp32_rollouts_with_rare_tokens"]),
], ids=["online-one-pass", "fused-chunked", "grpo-unbiased", "ppo-log-difference"])
def test_an_honest_solution_passes_the_new_property(tmp_path, kata, code, props):
    res = run(tmp_path, kata, code, only=props)
    assert res.ok, [(p.name, p.reason, p.message[:500]) for p in res.props]
