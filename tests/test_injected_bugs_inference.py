"""Injected bugs in the inference and numerics reference code make the named claims' verifiers fail.

Each case swaps one function (``tests/faults.py`` patches the module attribute at ``pytest_configure``
time; the verifiers reach it through the module at call time) and runs ``mianjing verify`` on a few
claims: those that depend on the broken behaviour must fail, unrelated ones must still pass.
"""

from __future__ import annotations

import pytest
import torch

from mianjing.loader import load
from mianjing.paths import repo_root
from tests.injected import outcomes_with_fault

ROOT = repo_root()


# --------------------------------------------------------------------------- broken implementations


def no_rescale(m_old, m_new, exp):
    """The online softmax without e^{m_old − m_new}: earlier blocks keep the weight of a stale maximum."""
    return torch.where(torch.isinf(m_old), torch.zeros_like(m_new), torch.ones_like(m_new))


def resample_from_target(p, q):
    """On rejection, resample from p itself instead of the residual max(0, p − q)."""
    return p.clone()


def truncate(x):
    """Round toward zero instead of to nearest: errors up to a whole step."""
    return torch.trunc(x)


def kv_bytes_from_hidden_size(cfg, seq_len, batch=1, dtype="bf16"):
    """The popular max_len × batch × hidden_size × 2 × bytes: no layers, query heads for KV heads."""
    from impls.inference.kv_cache import DTYPE_BYTES

    return seq_len * batch * cfg.hidden_size * 2 * DTYPE_BYTES[dtype]


# --------------------------------------------------------------------------- the check

ME = "tests.test_injected_bugs_inference"
CASES = [
    ("impls.inference.attention:correction=" + ME + ":no_rescale",
     {"fa.tiled-matches-naive", "fa.backward-recompute-matches", "fa.exact-not-bitwise", "fa.hbm-bound-no-nxn"},
     {"fa.flops-not-reduced", "fa.io-complexity"}),
    ("impls.inference.speculative:residual_weights=" + ME + ":resample_from_target",
     {"sd.lossless", "sd.rejection-rule", "sd.unlikely-is-probabilistic"},
     {"sd.expected-tokens", "sd.alpha-is-not-survival", "sd.speedup-formula"}),
    ("impls.numerics.quantization:rounding=" + ME + ":truncate",
     {"qt.rtn-error-bound", "qt.absmax-per-channel"},
     {"qt.fp32-int4-memory", "qt.fp8-formats", "mp.truncation"}),
    ("impls.inference.kv_cache:kv_cache_bytes=" + ME + ":kv_bytes_from_hidden_size",
     {"kv.formula", "kv.llama2-13b-1mb", "kv.32k-context"},
     {"kv.only-k-v-reused", "gqa.endpoints"}),
]


@pytest.mark.parametrize("fault, must_fail, must_pass", CASES,
                         ids=["online-softmax-rescale", "speculative-resample", "int8-rounding", "kv-formula"])
def test_injected_bug_fails_named_claims(tmp_path, monkeypatch, fault, must_fail, must_pass):
    kb = load(ROOT).kb
    assert (must_fail | must_pass) <= set(kb.claim_index()), "the claims were renamed: update this test"
    monkeypatch.setenv("MIANJING_MAX_EXAMPLES", "15")
    outcomes = outcomes_with_fault(ROOT, kb, must_fail | must_pass, fault, tmp_path, monkeypatch)
    assert {c for c in must_fail if outcomes.get(c) == "failed"} == must_fail, outcomes
    assert {c for c in must_pass if outcomes.get(c) == "passed"} == must_pass, outcomes
