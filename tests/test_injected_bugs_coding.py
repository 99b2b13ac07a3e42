"""A deliberately broken implementation makes the right claims fail under `mianjing verify`."""

from __future__ import annotations

import pytest

from mianjing.loader import load
from mianjing.paths import repo_root
from tests.injected import outcomes_with_fault

ROOT = repo_root()
CODING = ["coding.bst-iterator.ascending-order", "coding.bst-iterator.flatten-tradeoff",
          "coding.level-order.bfs-batches-are-levels", "coding.level-order.queue-log-n"]


@pytest.mark.parametrize(
    "fault, must_fail, must_pass",
    [
        ("impls.coding.bst_iterator:BSTIterator=tests.broken:RightChildIterator",
         {"coding.bst-iterator.ascending-order"}, {"coding.bst-iterator.flatten-tradeoff"}),
        ("impls.coding.level_order:level_order_with_depth=tests.broken:level_order_unbatched",
         {"coding.level-order.bfs-batches-are-levels"}, {"coding.bst-iterator.ascending-order"}),
    ],
)
def test_broken_implementation_fails_named_claims(tmp_path, monkeypatch, fault, must_fail, must_pass):
    kb = load(ROOT).kb
    assert set(CODING) <= set(kb.claim_index()), "the coding claims were renamed: update this test"
    outcomes = outcomes_with_fault(ROOT, kb, must_fail | must_pass, fault, tmp_path, monkeypatch)
    assert {c for c in must_fail if outcomes[c] == "failed"} == must_fail, outcomes
    assert {c for c in must_pass if outcomes[c] == "passed"} == must_pass, outcomes
