"""Flash-Decoding: split-KV attention for one query with the log-sum-exp merge, and the parallelism it adds.

Oracles: standard attention (``attention.naive_attention``) in fp64 on the same inputs with a padding mask;
merging partials in any grouping must give the same result (the merge is associative); the launch grid
``flash_attention_triton`` really asks for (captured without running the kernel); SM counts from NVIDIA's
whitepapers; the HBM traffic counted by ``attention.IOCount``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from impls.inference import flash_decoding as F
from impls.inference.attention import IOCount, naive_attention

F64 = torch.float64


def _oracle(q, k, v, lengths):
    """fp64 softmax(qKᵀ/√d)V with the keys past each sequence's length masked, GQA by repeating K/V heads."""
    b, h, d = q.shape
    g = h // k.shape[1]
    kk, vv = (x.double().repeat_interleave(g, dim=1) for x in (k, v))
    mask = (torch.arange(k.shape[2]).view(1, 1, 1, -1) < lengths.view(b, 1, 1, 1))
    o, lse = naive_attention(q.double().unsqueeze(2), kk, vv, mask=mask)
    return o.squeeze(2), lse.squeeze(2)


@st.composite
def _problem(draw):
    b, h_kv = draw(st.integers(1, 3)), draw(st.sampled_from([1, 2]))
    h, n, d = h_kv * draw(st.sampled_from([1, 2, 4])), draw(st.integers(1, 70)), draw(st.sampled_from([4, 8, 16]))
    lengths = torch.tensor([draw(st.integers(0, n)) for _ in range(b)])
    lengths[draw(st.integers(0, b - 1))] = n                     # at least one full-length sequence
    splits = draw(st.integers(1, n + 3))                          # more splits than keys: some are empty
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    q, k, v = (torch.randn(*shape, generator=gen, dtype=F64) * 2 for shape in ((b, h, d), (b, h_kv, n, d), (b, h_kv, n, d)))
    return q, k, v, lengths, splits


@pytest.mark.claim("fd.split-kv-exact")
@given(prob=_problem())
def test_split_kv_equals_full_attention(prob):
    q, k, v, lengths, splits = prob
    o, lse = F.split_kv_attention(q, k, v, splits, lengths=lengths)
    want_o, want_lse = _oracle(q, k, v, lengths)
    empty = lengths == 0
    torch.testing.assert_close(o[~empty], want_o[~empty], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lse[~empty], want_lse[~empty], rtol=1e-12, atol=1e-12)
    assert (o[empty] == 0).all() and torch.isinf(lse[empty]).all()         # nothing to attend to: 0, −∞


@pytest.mark.claim("fd.split-kv-exact")
@given(prob=_problem(), cut=st.integers(1, 10))
def test_merge_is_associative(prob, cut):
    q, k, v, lengths, splits = prob
    o_p, lse_p = F.split_partials(q, k, v, splits, lengths=lengths)
    o_all, lse_all = F.merge_partials(o_p, lse_p)
    c = min(cut, splits)
    left, right = F.merge_partials(o_p[:, :, :c], lse_p[:, :, :c]), F.merge_partials(o_p[:, :, c:], lse_p[:, :, c:])
    o2, lse2 = F.merge_partials(torch.stack([left[0], right[0]], 2), torch.stack([left[1], right[1]], 2))
    keep = lengths > 0
    torch.testing.assert_close(o2[keep], o_all[keep], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lse2[keep], lse_all[keep], rtol=1e-12, atol=1e-12)
    one = F.split_kv_attention(q, k, v, 1, lengths=lengths)[0]
    torch.testing.assert_close(one[keep], o_all[keep], rtol=1e-12, atol=1e-12)


@pytest.mark.claim("fd.split-kv-exact")
def test_bf16_inputs_accumulate_in_fp32(evidence):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(*s, generator=gen).bfloat16() for s in ((2, 8, 64), (2, 2, 4096, 64), (2, 2, 4096, 64)))
    lengths = torch.tensor([4096, 1777])
    o, lse = F.split_kv_attention(q, k, v, 16, lengths=lengths)
    want, _ = _oracle(q, k, v, lengths)
    assert o.dtype == torch.bfloat16 and lse.dtype == torch.float32
    err = (o.double() - want).abs().max().item()
    assert err <= 2 ** -8 * want.abs().max().item()                       # only the final bf16 rounding
    evidence.update(max_abs_err_vs_fp64=err, splits=16, n_keys=4096)


def _grid_of_flash_attention(b: int, h: int, n_q: int, n_k: int, d: int):
    """The grid ``flash_attention_triton`` launches, captured in place of the kernel (nothing runs)."""
    triton_mod = pytest.importorskip("impls.inference.flash_attention_triton")
    seen = []

    class Capture:
        def __getitem__(self, grid):
            seen.append(tuple(grid))
            return lambda *a, **kw: None

    original = triton_mod._flash_fwd_kernel
    triton_mod._flash_fwd_kernel = Capture()
    try:
        triton_mod.flash_attention_triton(torch.zeros(b, h, n_q, d), torch.zeros(b, h, n_k, d), torch.zeros(b, h, n_k, d))
    finally:
        triton_mod._flash_fwd_kernel = original
    return seen[0]


@pytest.mark.claim("fd.batch-heads-only")
def test_one_query_leaves_sms_idle(evidence):
    grid = _grid_of_flash_attention(1, 32, 1, 32768, 128)
    programs = grid[0] * grid[1]
    assert grid[0] == 1 and programs == F.decode_programs(1, 32)          # one query block: B·H programs
    assert _grid_of_flash_attention(1, 32, 4096, 4096, 128)[0] > 1          # prefill also splits the queries
    sms = F.SMS["H100-SXM"]
    evidence.quote("programs at batch 1, 32 heads", quoted=32, measured=programs, abs=0)
    evidence.quote("SMs of an H100 SXM left without a program (%)", quoted=76, measured=100 * (1 - programs / sms), digits=0)
    splits = F.num_splits_heuristic(programs, 2 * sms, 32768 // 256)
    split_programs = F.decode_programs(1, 32, splits)
    evidence.quote("splits FlashAttention-2's heuristic picks", quoted=7, measured=splits, abs=0)
    evidence.quote("programs with split-KV", quoted=224, measured=split_programs, abs=0)
    assert split_programs > sms                                           # every SM has work
    big_batch = F.num_splits_heuristic(F.decode_programs(16, 32), 2 * sms, 128)
    assert big_batch == 1                                                 # enough (batch, head) pairs: no split
    assert F.num_splits_heuristic(220, 264, 128) == 1                     # 80% of the budget is enough
    evidence.update(grid=grid, h100_sms=sms)


@pytest.mark.claim("fd.not-useless")
def test_what_fusion_saves_at_decode(evidence):
    n, d = 4096, 128
    q, k, v = torch.randn(1, 1, 1, d), torch.randn(1, 1, n, d), torch.randn(1, 1, n, d)
    c = IOCount()
    naive_attention(q, k, v, counter=c)
    fused = 2 * n * d + 2 * d                                             # read q, K, V once, write o
    ratio = (c.hbm_read + c.hbm_written) / fused
    evidence.quote("HBM traffic, standard over fused, one query, d = 128 (%)", quoted=101.6, measured=100 * ratio, digits=1)
    assert ratio == pytest.approx(1 + 2 / d, rel=1e-3)                    # the scores add only 4N to 2Nd
    # at prefill the same count is the quadratic saving FlashAttention is known for
    cp = IOCount()
    naive_attention(torch.randn(1, 1, 1024, d), torch.randn(1, 1, 1024, d), torch.randn(1, 1, 1024, d), counter=cp)
    assert (cp.hbm_read + cp.hbm_written) / (4 * 1024 * d) > 8
    evidence.update(decode_elements={"standard": c.hbm_read + c.hbm_written, "fused": fused})


@pytest.mark.claim("fd.unified-max-merges-by-sums")
@given(prob=_problem(), offset=st.floats(-30, 30))
def test_one_fixed_maximum_lets_splits_merge_by_sums(prob, offset):
    """fp32, any split count and φ within ±30 of the true row maximum: plain sums of the splits' partials equal
    fp64 attention, and no row asks for recomputation. (Full-length sequences: a padded cache is not what the
    unified-max path changes.)"""
    q, k, v, _, splits = prob
    lengths = torch.full((q.shape[0],), k.shape[2])
    want, lse = _oracle(q, k, v, lengths)
    top = float((torch.einsum("bhd,bhnd->bhn", q, k.repeat_interleave(q.shape[1] // k.shape[1], 1)) * q.shape[-1] ** -0.5).max())
    o, redo = F.unified_max_attention(q.float(), k.float(), v.float(), splits, top + offset)
    assert not bool(redo.any())
    err = float((o.double() - want).abs().max())
    assert err <= 2e-5 * (1 + float(v.abs().max())), err


@pytest.mark.claim("fd.unified-max-merges-by-sums")
def test_a_score_far_above_the_fixed_maximum_overflows(evidence):
    """Constructed: one key whose score is 100 above φ overflows fp32's exp (e^88.7 is its largest) and the
    row is flagged for recomputation; with φ at that score the same row is exact. A row whose every score is
    110 below φ underflows to 0/0 and is flagged too. Each split using its own maximum instead of φ would
    need the rescale of ``merge_partials``: without it the result is wrong (the last check)."""
    d = 4
    q = torch.zeros(1, 1, d)
    q[0, 0, 0] = 2.0                                           # τ = 1/2: score = k[0]
    k = torch.zeros(1, 1, 6, d)
    k[0, 0, :, 0] = torch.tensor([0.0, 1.0, 2.0, 100.0, 3.0, 0.5])
    v = torch.arange(24.0).view(1, 1, 6, d)
    want, _ = _oracle(q.double(), k.double(), v.double(), torch.tensor([6]))
    o, redo = F.unified_max_attention(q, k, v, 3, phi=0.0)
    assert bool(redo.all()) and not bool(torch.isfinite(o).all())
    o, redo = F.unified_max_attention(q, k, v, 3, phi=100.0)
    assert not bool(redo.any()) and float((o.double() - want).abs().max()) <= 1e-5
    o, redo = F.unified_max_attention(q, k * 0, v, 2, phi=110.0)
    assert bool(redo.all())
    parts, _ = F.split_partials(q, k, v, 3)                    # each split normalised by its own maximum
    naive_sum = parts.mean(-2)                                 # merged without the lse weights
    assert float((naive_sum.double() - want).abs().max()) > 1.0
    evidence["counterexample"] = {"score above phi": 100, "fp32 exp limit": 88.72, "flagged": True}
