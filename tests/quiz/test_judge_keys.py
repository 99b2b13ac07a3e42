"""What the LeetCode katas added to the judge, attacked: counted keys (compared and hashed on the judge's side),
batched calls, nodes the candidate makes coming back as data, per-property time limits, the tracemalloc meter.
The worker still receives only plain data: a key is an id the judge answers for, nothing more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mianjing.quiz.judge import _deny_paths, judge
from mianjing.quiz.judge_lost import CandidateError
from mianjing.quiz.judge_remote import Candidate, Session
from mianjing.quiz.katas import find
from tests.quiz import leetcode_solutions as L
from tests.quiz.kb import CHECKOUT


@pytest.fixture(autouse=True)
def _few_examples(monkeypatch):
    monkeypatch.setenv("MIANJING_MAX_EXAMPLES", "10")


def run(tmp_path, kata: str, code: str, only=None, timeout: float = 60):
    k = find(CHECKOUT, kata)
    if k is None:
        pytest.skip(f"kata {kata} has not landed in this checkout")
    f = tmp_path / f"{kata}_candidate.py"
    f.write_text(code)
    return judge(CHECKOUT, k, f, only=only, timeout=timeout)


PROBE_KEYS = r'''
import json

def length_of_lis(nums):
    x = nums[0]
    seen = {"repr": repr(x), "type": type(x).__name__}
    for what, f in [("int", lambda: int(x)), ("value", lambda: x.value), ("_v", lambda: x._v),
                    ("less than 5", lambda: x < 5), ("float", lambda: float(x)), ("set attr", lambda: setattr(x, "_v", 1))]:
        try:
            seen[what] = repr(f())
        except Exception as exc:
            seen[what] = type(exc).__name__
    seen["equals 5"] = (x == 5)
    ids = [object.__getattribute__(k, "_jid") for k in nums]
    seen["ids increasing"] = ids == sorted(ids)
    seen["ids consecutive"] = sorted(ids) == list(range(min(ids), min(ids) + len(ids)))
    raise RuntimeError("PROBE" + json.dumps(seen))
'''


def test_a_key_gives_away_nothing_but_comparisons(tmp_path):
    res = run(tmp_path, "length_of_lis", PROBE_KEYS, only=["prop_n_log_n_comparisons"])
    (p,) = res.props
    assert p.passed is False and "PROBE" in p.message, (p.reason, p.message)
    seen = json.loads(p.message.split("PROBE", 1)[1].split("\n")[0])
    assert seen["repr"] == "Key(?)" and seen["type"] == "_JudgeKey"
    assert seen["int"] == "TypeError" and seen["float"] == "TypeError"
    assert seen["value"] == "AttributeError" and seen["_v"] == "AttributeError" and seen["set attr"] == "AttributeError"
    assert seen["less than 5"] == "TypeError"  # a key is compared with keys only: no number can probe it
    assert seen["equals 5"] is False
    # the first shape is random, the second ascending: either way the ids say nothing about the order of creation
    assert seen["ids consecutive"] is False


SWALLOW = r'''
def length_of_lis(nums):
    n = len(nums)
    best = [1] * n
    for i in range(n):
        for j in range(i):
            try:
                smaller = nums[j] < nums[i]
            except Exception:  # the judge stopped answering: carry on regardless
                smaller = False
            if smaller:
                best[i] = max(best[i], best[j] + 1)
    return max(best, default=0)
'''


def test_swallowing_the_stop_does_not_hide_the_count(tmp_path):
    res = run(tmp_path, "length_of_lis", SWALLOW, only=["prop_n_log_n_comparisons"])
    (p,) = res.props
    assert p.passed is False and "the judge stopped counting there" in p.message, (p.reason, p.message)


FORGE = r'''
def length_of_lis(nums):
    worker = object.__getattribute__(nums[0], "_w")
    out = []
    for msg in ({"op": "hash", "target": 12345}, {"op": "compare", "target": object.__getattribute__(nums[0], "_jid"),
                                                   "name": "__class__", "v": None}):
        try:
            out.append(repr(worker.ask_judge(**msg)))
        except Exception as exc:
            out.append(f"{type(exc).__name__}: {exc}")
    raise RuntimeError("FORGED " + " | ".join(out))
'''


def test_forged_key_requests_are_refused(tmp_path):
    res = run(tmp_path, "length_of_lis", FORGE, only=["prop_n_log_n_comparisons"])
    (p,) = res.props
    assert p.passed is False and "FORGED" in p.message, (p.reason, p.message)
    assert "no such key" in p.message and "has no operation" in p.message, p.message


RAISES_ON_MISS = r'''
from collections import OrderedDict


class LRUCache:
    def __init__(self, capacity):
        self.capacity, self.d = capacity, OrderedDict()

    def get(self, key):  # forgets the miss: a KeyError once a key has been evicted
        self.d.move_to_end(key)
        return self.d[key]

    def put(self, key, value):
        self.d[key] = value
        self.d.move_to_end(key)
        if len(self.d) > self.capacity:
            self.d.popitem(last=False)
'''


def test_a_batch_says_which_call_raised(tmp_path):
    res = run(tmp_path, "LRUCache", RAISES_ON_MISS, only=["prop_leetcode_example"])
    (p,) = res.props
    assert p.passed is False and p.reason == "raised KeyError", (p.reason, p.message)
    assert "at call #5: get(2)" in p.example, p.example


def test_nodes_the_candidate_makes_come_back_as_data(tmp_path):
    k = find(CHECKOUT, "build_tree")
    if k is None:
        pytest.skip("build_tree has not landed")
    f = tmp_path / "build_tree.py"
    f.write_text(L.OK["build_tree"])
    s = Session(f, k.symbol, memory_mb=1024, timeout=30, fields=("val", "left", "right"), preload=[],
                deny=_deny_paths(CHECKOUT), cpu_seconds=60)
    try:
        s.start()
        s.greet()
        assert s.load_candidate()["op"] == "loaded"
        root = Candidate(s, k.symbol)([1, 2, 3], [2, 1, 3])
        assert type(root).__name__ == "Node" and type(root).__module__ != "kata_candidate"
        assert (root.val, root.left.val, root.right.val) == (1, 2, 3)  # plain reads: no round trip, no worker object
        assert root.left.left is None and root.right.right is None
        chain = Candidate(s, k.symbol)(list(range(3000)), list(range(2999, -1, -1)))  # a left chain of 3000
        depth, node = 0, chain
        while node is not None:
            depth, node = depth + 1, node.left
        assert depth == 3000
    finally:
        s.close()


def test_a_property_past_its_own_limit_lets_the_next_one_run(tmp_path):
    code = next(w[2] for w in L.WRONG if w[0] == "trap-quadratic-scan")
    res = run(tmp_path, "trap", code, only=["prop_scale", "prop_leetcode_examples"])
    by = {p.name: p for p in res.props}
    assert by["prop_scale"].passed is False and "the limit this property sets" in by["prop_scale"].reason
    assert "timed out after 2 s" in by["prop_scale"].reason
    assert by["prop_leetcode_examples"].passed is True  # a fresh worker, not "not run"


STOPS_THE_METER = r'''
import tracemalloc
from itertools import accumulate


def trap(height):
    try:
        tracemalloc.stop()  # hide the two lists below from the meter
    except Exception:
        pass
    left = list(accumulate(height, max))
    right = list(accumulate(reversed(height), max))[::-1]
    return sum(min(a, b) - h for a, b, h in zip(left, right, height))
'''


def test_the_candidate_cannot_stop_the_memory_meter(tmp_path):
    res = run(tmp_path, "trap", STOPS_THE_METER, only=["prop_constant_extra_space"])
    assert any("tracemalloc.stop()" in a for a in res.attempts), res.attempts
    (p,) = res.props
    assert p.passed is False


def test_a_candidate_error_carries_its_call_index():
    err = CandidateError({"type": "KeyError", "message": "2"})
    err.index = 4
    assert err.index == 4 and str(err) == "KeyError: 2"
