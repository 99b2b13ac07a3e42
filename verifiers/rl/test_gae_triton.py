"""Verifier for the Triton GAE kernel (impls/rl/gae_triton.py) on the multi-turn mask convention.

Oracle: GAE written from its definition on each episode's trained tokens alone (masked tokens removed,
episodes cut at ``dones``), as an explicit double sum in plain Python floats -- no recursion, no scan.
Cross-check: where the conventions coincide (no interior masked token, or every segment ended by a
``done``) the per-timestep loop ``impls.rl.gae.gae`` and the scan ``impls.rl.gae_scan.gae_scan``.
The kernel runs in Triton's CPU interpreter on the CPU device, compiled on CUDA.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.rl import gae as gae_loop_mod
from impls.rl import gae_scan as gae_scan_mod
from impls.scale.triton_support import HAVE_TRITON, WHY_NOT
from verifiers.errors import max_abs_err, worst

pytestmark = pytest.mark.skipif(not HAVE_TRITON, reason=WHY_NOT or "Triton unavailable")


def episode_oracle(r, v, m, d, gamma, lam):
    """A_t = sum_k (gamma lam)^k delta_{i_{j+k}} over the trained tokens i_j, i_{j+1}, ... of t's episode,
    delta_{i_j} = r_{i_j} + gamma V_{i_{j+1}} - V_{i_j} (V = 0 past the episode's last trained token).
    Returns (advantages, returns) as nested lists; untrained positions are 0."""
    B, T = len(r), len(r[0])
    adv = [[0.0] * T for _ in range(B)]
    ret = [[0.0] * T for _ in range(B)]
    for b in range(B):
        episodes, cur = [], []
        for t in range(T):
            cur.append(t)
            if d[b][t]:
                episodes.append(cur)
                cur = []
        episodes.append(cur)
        for ep in episodes:
            idx = [t for t in ep if m[b][t]]
            n = len(idx)
            delta = [r[b][idx[j]] + (gamma * v[b][idx[j + 1]] if j + 1 < n else 0.0) - v[b][idx[j]] for j in range(n)]
            for j in range(n):
                a = sum((gamma * lam) ** (k - j) * delta[k] for k in range(j, n))
                adv[b][idx[j]] = a
                ret[b][idx[j]] = a + v[b][idx[j]]
    return adv, ret


def _kernel():
    from impls.rl import gae_triton as GT  # looked up at call time (fault injection swaps it)

    return GT.gae_triton


@st.composite
def multi_turn_batches(draw):
    B = draw(st.integers(1, 5))
    T = draw(st.integers(1, 70))
    seed = draw(st.integers(0, 2**31 - 1))
    hole_p = draw(st.sampled_from([0.0, 0.2, 0.5]))
    done_p = draw(st.sampled_from([0.0, 0.05, 0.2]))
    gamma = draw(st.sampled_from([1.0, 0.99, 0.9, 0.5]))
    lam = draw(st.sampled_from([1.0, 0.95, 0.7, 0.0]))
    block_t = draw(st.sampled_from([1, 2, 4, 16, 32]))
    block_b = draw(st.sampled_from([1, 2, 4]))
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, T + 1, (B,), generator=gen)
    m = (torch.arange(T)[None, :] < lengths[:, None]) & (torch.rand(B, T, generator=gen) >= hole_p)
    d = torch.rand(B, T, generator=gen) < done_p
    r = torch.randn(B, T, generator=gen, dtype=torch.float64)
    v = torch.randn(B, T, generator=gen, dtype=torch.float64)
    return r, v, m, d, gamma, lam, block_t, block_b


@pytest.mark.claim("gae.triton-kernel.matches-oracle")
def test_gae_kernel_matches_episode_oracle(evidence, device):
    seen = {"err": 0.0, "n": 0}
    dtype = torch.float32 if device.type == "cuda" else torch.float64

    @settings(max_examples=min(settings().max_examples, 25))
    @given(multi_turn_batches())
    def check(case):
        r, v, m, d, gamma, lam, block_t, block_b = case
        want_a, want_r = episode_oracle(r.tolist(), v.tolist(), m.tolist(), d.tolist(), gamma, lam)
        want_a = torch.tensor(want_a, dtype=torch.float64)
        want_r = torch.tensor(want_r, dtype=torch.float64)
        a, ret = _kernel()(r.to(device, dtype), v.to(device, dtype), m.to(device), gamma, lam, dones=d.to(device),
                           block_t=block_t, block_b=block_b)
        scale = max(1.0, float(want_a.abs().max()), float(want_r.abs().max()))
        tol = (1e-12 if dtype == torch.float64 else 1e-5) * scale
        err = worst(max_abs_err(a, want_a), max_abs_err(ret, want_r))
        assert err <= tol, (f"B,T={tuple(r.shape)} gamma={gamma} lam={lam} block_t={block_t} block_b={block_b}: "
                            f"max error {err:.3g} > {tol:.3g}")
        seen["err"] = max(seen["err"], err / scale)
        seen["n"] += 1

    check()
    # the multi-turn reproducer: an observation span inside one episode is skipped, not a reset
    r = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]], dtype=dtype)
    v = torch.tensor([[0.5, 0.5, 9.0, 9.0, 0.5]], dtype=dtype)
    m = torch.tensor([[1, 1, 0, 0, 1]])
    a, _ = _kernel()(r.to(device), v.to(device), m.to(device), 1.0, 1.0, block_t=2)
    assert a.cpu().tolist() == [[0.5, 0.5, 0.0, 0.0, 0.5]], a
    for i, q in ((0, 0.5), (1, 0.5)):
        evidence.quote(f"turn-1 advantage, token {i}", quoted=q, measured=float(a[0, i]), abs=1e-6)
    # the same tokens with a `done` after turn 1 reset there: turn 1 no longer sees the final reward
    a_done, _ = _kernel()(r.to(device), v.to(device), m.to(device), 1.0, 1.0,
                          dones=torch.tensor([[0, 1, 0, 0, 1]]).to(device), block_t=2)
    assert a_done.cpu().tolist() == [[-0.5, -0.5, 0.0, 0.0, 0.5]], a_done
    evidence["examples"] = seen["n"]
    evidence["max_rel_err"] = seen["err"]
    evidence["multi_turn_example"] = {"mask": [1, 1, 0, 0, 1], "rewards": [0, 0, 0, 0, 1],
                                      "values": [0.5, 0.5, 9, 9, 0.5], "advantages": a.cpu().tolist()[0],
                                      "with_done_after_turn_1": a_done.cpu().tolist()[0]}


def _segment_ends(m: torch.Tensor) -> torch.Tensor:
    """dones that reproduce the reset-at-every-zero convention: a trained token followed by an untrained one."""
    nxt = torch.nn.functional.pad(m[:, 1:], (0, 1))
    return m & ~nxt


@pytest.mark.claim("gae.triton-kernel.matches-oracle")
def test_gae_kernel_agrees_with_loop_and_scan(evidence, device):
    """Long rows (T up to 1500, several tiles of 128): the kernel against ``gae`` and ``gae_scan``."""
    gen = torch.Generator().manual_seed(21)
    dtype = torch.float32 if device.type == "cuda" else torch.float64
    gae_has_dones = "dones" in inspect.signature(gae_loop_mod.gae).parameters
    largest = 0.0
    for B, T, hole_p in ((3, 1500, 0.0), (4, 700, 0.1), (2, 333, 0.3)):
        lengths = torch.randint(T // 2, T + 1, (B,), generator=gen)
        m = (torch.arange(T)[None, :] < lengths[:, None]) & (torch.rand(B, T, generator=gen) >= hole_p)
        r = torch.randn(B, T, generator=gen, dtype=torch.float64)
        v = torch.randn(B, T, generator=gen, dtype=torch.float64)
        gamma, lam = 0.99, 0.95
        if gae_has_dones:  # issue 13's API: the same convention, dones explicit (random episode ends here)
            dones = torch.rand(B, T, generator=gen) < 0.003
            refs = [gae_loop_mod.gae(r, v, m.double(), gamma, lam, dones=dones),
                    gae_scan_mod.gae_scan(r, v, m.double(), gamma, lam, dones=dones)]
        else:  # before it: every zero resets, which is the kernel's convention with a done ending each segment
            refs = [gae_loop_mod.gae(r, v, m.double(), gamma, lam), gae_scan_mod.gae_scan(r, v, m.double(), gamma, lam)]
            dones = _segment_ends(m)
        a, ret = _kernel()(r.to(device, dtype), v.to(device, dtype), m.to(device), gamma, lam,
                           dones=None if dones is None else dones.to(device))
        for ra, rr in refs:
            scale = max(1.0, float(ra.abs().max()))
            err = worst(max_abs_err(a, ra), max_abs_err(ret, rr)) / scale
            assert err <= (1e-11 if dtype == torch.float64 else 1e-5), (B, T, hole_p, err)
            largest = max(largest, err)
    evidence["reference_convention"] = "gae/gae_scan(dones=random episode ends)" if gae_has_dones else "reset at every zero (dones at segment ends)"
    evidence["max_rel_err_vs_loop_and_scan"] = largest


@pytest.mark.claim("gae.triton-kernel.matches-oracle")
def test_gamma_and_lambda_reach_the_compiled_kernel_in_the_accumulator_dtype(monkeypatch):
    """γ and γλ travel as a tensor of the accumulator's dtype (``*fp64`` for fp64 inputs, ``*fp32``
    otherwise), never as Python floats, which Triton compiles as fp32 scalars whatever the inputs' dtype."""
    from impls.rl import gae_triton as K
    from verifiers.launches import launch_types

    for dtype, want in ((torch.float64, "*fp64"), (torch.float32, "*fp32")):
        r = torch.ones(2, 5, dtype=dtype)
        m = torch.ones(2, 5, dtype=torch.bool)
        (types,) = launch_types(monkeypatch, K, "_gae_kernel", lambda: K.gae_triton(r, r, m, 0.99, 0.95))
        assert "fp32" not in types and types[-1] == want, types
