"""The kata judge: the verifiers' own properties run on a candidate's code in a limited child process.

Katas come from this checkout (impls/ and verifiers/katas/ are other engineers' work); a kata
that has not landed is skipped. Properties that need torch are run one at a time (``only=``)
to keep the group fast; the CLI test runs a whole tree kata.
"""

from __future__ import annotations

import ast
import re
import subprocess

import pytest

from mianjing.quiz.judge import judge
from mianjing.quiz.katas import available, find, given_symbols, stub
from tests.quiz import solutions as S
from tests.quiz.kb import CHECKOUT, MIANJING, cli_env, mini_kb


@pytest.fixture(autouse=True)
def _few_examples(monkeypatch):
    monkeypatch.setenv("MIANJING_MAX_EXAMPLES", "25")


def kata(name: str):
    k = find(CHECKOUT, name)
    if k is None:
        pytest.skip(f"kata {name} has not landed in this checkout")
    return k


def run(tmp_path, name: str, code: str, **kw):
    f = tmp_path / f"{name}_candidate.py"
    f.write_text(code)
    return judge(CHECKOUT, kata(name), f, **kw)


def only_failure(res):
    failed = [p for p in res.props if p.passed is False]
    assert res.fatal is None and failed, res
    return failed


def test_every_kata_offers_a_stub_without_the_solution(tmp_path):
    katas = available(CHECKOUT)
    assert katas, "no kata has landed"
    for k in katas:
        text = stub(CHECKOUT, k)
        compile(text, f"{k.name}.py", "exec")
        assert f"# mianjing-kata: {k.name}" in text
        body = text.split(f"# mianjing-kata: {k.name}", 1)[1]
        for name in given_symbols(k):  # a kernel kata's launch wrapper is part of its spec: given whole
            tree = ast.parse(body)
            node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
            lines = body.splitlines()
            body = "\n".join(lines[:node.lineno - 1] + lines[node.end_lineno:])
        # every def in the stub ends in raise NotImplementedError: nothing else but the docstring
        code_lines = [ln.strip() for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]
        stmts = [ln for ln in code_lines if re.match(r"(return|for|while|if|[a-z_.]+\s*=)\b", ln)]
        assert not stmts, f"{k.name} stub leaks code: {stmts}"
        assert body.count("raise NotImplementedError") >= 1


@pytest.mark.parametrize("name", ["gae", "ppo_clip_loss", "grpo_advantages", "kl_estimate", "dpo_loss", "BSTIterator",
                                  "level_order_with_depth"])
def test_a_correct_solution_passes_every_property(tmp_path, name):
    """Whole katas, not one property: a kata that rejects a correct answer misleads the learner as much as one
    that accepts a wrong one (the GAE solution here predated the multi-turn convention and failed
    prop_observation_tokens_skipped, unnoticed while only prop_matches_double_sum was run on it)."""
    from tests.quiz.accepted import ACCEPTED

    res = run(tmp_path, name, ACCEPTED[name])
    assert res.ok, [(p.name, p.reason, p.message[:300]) for p in res.props if p.passed is False]


def test_gradients_travel_back_through_the_judge(tmp_path):
    """The PPO properties take autograd of the candidate's loss: the backward pass runs in the
    worker and comes back as plain tensors; a wrong case of the clip is still caught."""
    res = run(tmp_path, "ppo_clip_loss", S.PPO_OK, only=["prop_gradient_matches_hand_derived"])
    assert res.ok, [(p.name, p.reason, p.message) for p in res.props]
    bad = S.PPO_OK.replace("torch.minimum(ratio * a, clipped * a)", "ratio.detach() * a")
    res = run(tmp_path, "ppo_clip_loss", bad, only=["prop_gradient_matches_hand_derived"])
    (p,) = only_failure(res)
    assert p.reason in ("wrong result", "raised RuntimeError"), p


def test_gae_off_by_one_bootstrap_is_caught_with_a_shrunk_counterexample(tmp_path):
    res = run(tmp_path, "gae", S.GAE_OFF_BY_ONE, only=["prop_matches_double_sum"])
    (p,) = only_failure(res)
    assert p.reason == "wrong result"
    assert "inputs:" in p.message and "expected:" in p.message and "got:" in p.message
    # shrunk: the smallest batches are tiny
    assert len(p.message) < 2000


def test_gae_ignoring_the_mask_is_caught(tmp_path):
    res = run(tmp_path, "gae", S.GAE_NO_MASK, only=["prop_padding_ignored"])
    (p,) = only_failure(res)
    assert "padding" in p.message and "expected" in p.message


def test_ppo_clip_with_the_wrong_case_is_caught(tmp_path):
    res = run(tmp_path, "ppo_clip_loss", S.PPO_WRONG_SIGN, only=["prop_matches_formula"])
    (p,) = only_failure(res)
    assert "expected" in p.message and "got" in p.message


def test_grpo_with_population_std_is_caught(tmp_path):
    k = kata("grpo_advantages")
    first = k.properties(CHECKOUT)[0][0]
    res = run(tmp_path, "grpo_advantages", S.GRPO_POPULATION_STD, only=[first])
    (p,) = only_failure(res)
    assert "expected" in p.message.lower()


@pytest.mark.parametrize("code", [S.BST_STACK, S.BST_FLATTEN, S.BST_MORRIS], ids=["stack", "flatten", "morris"])
def test_bst_iterator_accepts_every_design_the_entry_calls_valid(tmp_path, code):
    """The entry calls flattening a valid trade-off (O(n) memory for worst-case O(1) calls): the kata
    asks for order, hasNext without side effects, O(n) total work and the tree restored, and
    accepts all three designs."""
    ok = run(tmp_path, "BSTIterator", code)
    assert ok.ok, [(p.name, p.reason, p.message) for p in ok.props if not p.passed]
    assert "prop_lazy_constructor" not in [p.name for p in ok.props]


def test_bst_iterator_that_leaves_threads_in_the_tree_is_caught(tmp_path):
    bad = run(tmp_path, "BSTIterator", S.BST_MORRIS_NO_RESTORE)
    failed = only_failure(bad)
    assert "prop_tree_unchanged" in [p.name for p in failed]


@pytest.mark.parametrize("code, reason", [
    (S.LEVEL_ORDER_INFINITE, r"timed out after 3 s"),
    (S.LEVEL_ORDER_HUGE, r"memory limit exceeded"),
    (S.LEVEL_ORDER_EXIT, r"called sys.exit\(3\)"),
    (S.LEVEL_ORDER_OS_EXIT, r"exited with code 7"),
], ids=["infinite-loop", "10GB-allocation", "sys.exit", "os._exit"])
def test_runaway_code_is_a_clear_failure(tmp_path, code, reason):
    res = run(tmp_path, "level_order_with_depth", code, timeout=3)
    assert res.fatal is None
    first = res.props[0]
    assert first.passed is False and re.search(reason, first.reason), first
    assert all(p.passed is not True for p in res.props)
    assert res.seconds < 60


@pytest.mark.parametrize("code, reason", [
    (S.IMPORT_ERROR, r"importing your file failed: raised ModuleNotFoundError"),
    (S.WRONG_SIGNATURE, r"wrong signature: expected level_order_with_depth\(root"),
    (S.MISSING_SYMBOL, r"defines no `level_order_with_depth`"),
    ("def level_order_with_depth(root:\n", r"syntax error"),
], ids=["import-error", "wrong-signature", "missing-function", "syntax-error"])
def test_broken_files_are_reported_not_crashed_on(tmp_path, code, reason):
    res = run(tmp_path, "level_order_with_depth", code)
    assert res.fatal and re.search(reason, res.fatal), res.fatal
    assert not res.ok and all(p.passed is None for p in res.props)


def test_cli_start_then_judge_and_the_review_is_recorded(tmp_path):
    root = mini_kb(tmp_path, with_kata=True)
    env = cli_env(root, tmp_path, MIANJING_MAX_EXAMPLES="25")
    work = tmp_path / "work"
    work.mkdir()
    listed = subprocess.run([MIANJING, "kata", "list"], env=env, cwd=work, capture_output=True, text=True, timeout=60)
    assert "level_order_with_depth" in listed.stdout and "level-order-with-depth" in listed.stdout
    started = subprocess.run([MIANJING, "kata", "start", "level_order_with_depth"], env=env, cwd=work,
                             capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    f = work / "level_order_with_depth.py"
    assert "raise NotImplementedError" in f.read_text()
    stubbed = subprocess.run([MIANJING, "kata", "judge", str(f)], env=env, cwd=work, capture_output=True, text=True,
                             timeout=120)
    assert stubbed.returncode == 1 and "not implemented yet" in stubbed.stdout and "Traceback" not in stubbed.stdout
    f.write_text(f.read_text().split("def level_order_with_depth")[0] + S.LEVEL_ORDER_OK)
    judged = subprocess.run([MIANJING, "kata", "judge", str(f)], env=env, cwd=work, capture_output=True, text=True,
                            timeout=120)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    assert re.search(r"ACCEPTED: 5/5 properties passed", judged.stdout)
    assert judged.stdout.count("PASS") == 5
    assert "recorded as a review of `level-order-with-depth` (Good)" in judged.stdout
    import sqlite3

    con = sqlite3.connect(env["MIANJING_DB"])
    got = con.execute("SELECT entry_id, rating, source FROM reviews ORDER BY id").fetchall()
    con.close()
    assert got == [("level-order-with-depth", 1, "kata"), ("level-order-with-depth", 3, "kata")]


def test_online_logprobs_kata_accepts_a_one_pass_softmax_and_catches_a_missing_rescale(tmp_path):
    res = run(tmp_path, "online_logprobs", S.ONLINE_LOGPROBS_OK)
    assert res.ok, [(p.name, p.reason, p.message) for p in res.props]
    res = run(tmp_path, "online_logprobs", S.ONLINE_LOGPROBS_NO_RESCALE, only=["prop_maximum_in_a_late_block"])
    (p,) = only_failure(res)
    assert p.reason == "wrong result" and "expected" in p.message


def test_fused_backward_kata_accepts_a_chunked_backward_and_catches_a_missing_temperature(tmp_path):
    res = run(tmp_path, "fused_logprob_backward", S.FUSED_BACKWARD_OK)
    assert res.ok, [(p.name, p.reason, p.message) for p in res.props]
    res = run(tmp_path, "fused_logprob_backward", S.FUSED_BACKWARD_NO_TEMPERATURE,
              only=["prop_temperature_is_a_weight_rescale"])
    (p,) = only_failure(res)
    assert p.reason == "wrong result", p
