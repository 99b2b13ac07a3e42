"""Injected faults in the Triton kernels (and the online-softmax loop) make the named claims' verifiers fail.

Each case swaps one function for a mutant that differs from the shipped source by one line
(``tests/broken_kernels.py``: a wrong rescale in an online softmax, an off-by-one at a block or tile
edge) and runs ``mianjing verify`` on the CPU device, where the kernels run in Triton's interpreter:
the claims that depend on the broken code must fail, an unrelated one must still pass.
"""

from __future__ import annotations

import pytest

from impls.scale.triton_support import HAVE_TRITON, WHY_NOT
from mianjing.loader import load
from mianjing.paths import repo_root
from tests.injected import outcomes_with_fault

ROOT = repo_root()
BK = "tests.broken_kernels"

CASES = [
    ("impls.scale.fused_logprobs_triton:chunk_forward=" + BK + ":logprob_fwd_no_rescale",
     {"kernels.online-softmax.matches-two-pass", "kernels.fused-logprob.grad-exact"},
     {"kernels.fused-logprob.recompute-cost"}),
    ("impls.scale.fused_logprobs_triton:chunk_forward=" + BK + ":logprob_fwd_block_edge",
     {"kernels.online-softmax.matches-two-pass", "kernels.fused-logprob.grad-exact"},
     {"kernels.fused-logprob.recompute-cost"}),
    ("impls.scale.fused_logprobs:online_logprobs=" + BK + ":online_entropy_rescale",
     {"kernels.online-softmax.matches-two-pass", "kernels.softmax-needs-two-passes"},
     {"kernels.fused-logprob.recompute-cost"}),
    ("impls.rl.gae_triton:gae_triton=" + BK + ":gae_tile_edge",
     {"gae.triton-kernel.matches-oracle"},
     {"kernels.fused-logprob.recompute-cost"}),
    ("impls.inference.flash_attention_triton:flash_attention_triton=" + BK + ":flash_no_rescale",
     {"kernels.flash-attention-triton.equals-naive"},
     {"kernels.fused-logprob.recompute-cost"}),
]


@pytest.mark.skipif(not HAVE_TRITON, reason=WHY_NOT or "Triton unavailable")
@pytest.mark.parametrize("fault, must_fail, must_pass", CASES,
                         ids=["logprob-rescale", "logprob-block-edge", "online-entropy-rescale", "gae-tile-edge",
                              "flash-rescale"])
def test_injected_kernel_bug_fails_named_claims(tmp_path, monkeypatch, fault, must_fail, must_pass):
    kb = load(ROOT).kb
    assert (must_fail | must_pass) <= set(kb.claim_index()), "the kernel claims were renamed: update this test"
    monkeypatch.setenv("MIANJING_MAX_EXAMPLES", "10")
    monkeypatch.setenv("MIANJING_HYPOTHESIS_PROFILE", "faults")  # no shrinking: a failure is all we need
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # before any kernel module (or mutant) is imported
    outcomes = outcomes_with_fault(ROOT, kb, must_fail | must_pass, fault, tmp_path, monkeypatch)
    assert {c for c in must_fail if outcomes.get(c) == "failed"} == must_fail, outcomes
    assert {c for c in must_pass if outcomes.get(c) == "passed"} == must_pass, outcomes
