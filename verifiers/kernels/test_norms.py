"""LayerNorm / RMSNorm kernels: forward and backward against fp64 autograd (ragged widths, means far from 0,
constant rows, every dtype), the weight gradient's fixed summation order, the bytes each variant moves (the
meter), what one warp per row compiles to, the one-pass variance, Newton's rsqrt.

Oracles: ``torch.nn.functional.layer_norm`` / ``rms_norm`` in fp64 with autograd; the interpreter meter; ptxas's
register and spill report; numpy float32 arithmetic run over every float of two binades.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.gpu.occupancy import occupancy

triton = pytest.importorskip("triton", reason="Triton has wheels for Linux x86-64/aarch64 only")

from impls.kernels import norms as NM  # noqa: E402
from verifiers.kernels.meter import Meter  # noqa: E402

U32 = 2.0**-24
OUT_U = {torch.float32: 0.0, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-7}  # bf16: the interpreter truncates
TINY = {torch.float32: 2.0**-126, torch.float16: 2.0**-24, torch.bfloat16: 2.0**-126}


def _oracle(x, w, b, rms, eps, g):
    xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
    bd = None if b is None else b.double().requires_grad_()
    D = x.shape[-1]
    y = (torch.nn.functional.rms_norm(xd, (D,), wd, eps) if rms
         else torch.nn.functional.layer_norm(xd, (D,), wd, bd, eps))
    y.backward(g.double())
    return y.detach(), xd.grad, wd.grad, (None if bd is None else bd.grad)


def _close(got, want, tol, where):
    got = got.double().cpu()
    assert torch.isfinite(got).all(), f"{where}: not finite"
    excess = (got - want).abs() - tol
    assert bool((excess <= 0).all()), f"{where}: off by {float(excess.max()):.3g} beyond the bound"


@st.composite
def cases(draw):
    N = draw(st.integers(1, 9))
    D = draw(st.one_of(st.sampled_from([1, 2, 7, 16, 100, 257, 1000]), st.integers(1, 400)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 255)))
    x = torch.randn(N, D, generator=gen) * draw(st.sampled_from([1.0, 0.01]))
    x = x + draw(st.sampled_from([0.0, 30.0, -1e3]))  # means far from 0, relative to the spread
    if draw(st.booleans()):
        x[0] = draw(st.sampled_from([0.0, 5.0]))  # a constant row: variance 0
    w = 1 + torch.randn(D, generator=gen) * 0.5
    b = torch.randn(D, generator=gen)
    g = torch.randn(N, D, generator=gen)
    return x, w, b, g


@pytest.mark.claim("norms.triton-kernels.match-fp64")
@settings(max_examples=10)
@given(cases(), st.booleans(), st.sampled_from([torch.float32, torch.float16, torch.bfloat16]),
       st.sampled_from([1, 3, 16]))
def test_forward_and_backward_match_fp64(device, case, rms, dtype, rows_per_program):
    x, w, b, g = case
    x, w, b = x.to(dtype), w.to(dtype), b.to(dtype)
    eps = 1e-5
    N, D = x.shape
    y, mean, rstd = NM.norm_forward(x.to(device), w.to(device), None if rms else b.to(device), rms=rms, eps=eps)
    dx, dw, db = NM.norm_backward(g.to(dtype).to(device), x.to(device), w.to(device), mean, rstd, rms=rms,
                                  has_bias=not rms, rows_per_program=rows_per_program)
    y0, dx0, dw0, db0 = _oracle(x, w, None if rms else b, rms, eps, g.to(dtype))
    # first-order bounds of the fp32 evaluation: tree sums of D terms ((L + 8) u each), the centred row's error
    # carried by the mean's (mean|x| of it), times the size of every term; then the output's rounding
    L = max(1, math.ceil(math.log2(D)))
    xd, wd, gd = x.double(), w.double(), g.to(dtype).double()
    mu = torch.zeros(N, 1, dtype=torch.float64) if rms else xd.mean(-1, keepdim=True)
    r = 1 / torch.sqrt(((xd - mu) ** 2).mean(-1, keepdim=True) + eps)
    xhat = (xd - mu) * r
    spread = r * (xd.abs().mean(-1, keepdim=True) + (xd - mu).abs())
    c = (L + 8) * U32
    tol_y = c * (spread * wd.abs() + y0.abs()) + OUT_U[dtype] * y0.abs() + TINY[dtype]
    _close(y, y0, tol_y, f"y ({'RMS' if rms else 'Layer'}Norm {N}x{D} {dtype})")
    gw = gd * wd
    terms = gw.abs() + gw.abs().mean(-1, keepdim=True) + (xhat.abs() + spread) * (gw * xhat).abs().mean(-1, keepdim=True)
    tol_dx = 2 * c * r * terms * (1 + spread) + OUT_U[dtype] * dx0.abs() + TINY[dtype]
    _close(dx, dx0, tol_dx, f"dx ({N}x{D} {dtype}, {rows_per_program} rows per program)")
    tol_dw = (N + L + 16) * U32 * (gd.abs() * (xhat.abs() + spread)).sum(0) + OUT_U[dtype] * dw0.abs() + TINY[dtype]
    _close(dw, dw0, tol_dw, "dw")
    if not rms:
        _close(db, db0, (N + 8) * U32 * gd.abs().sum(0) + OUT_U[dtype] * db0.abs() + TINY[dtype], "db")
    assert torch.isfinite(rstd).all() and float(rstd.max()) <= 1 / math.sqrt(eps) * (1 + 1e-6)


@pytest.mark.claim("norms.triton-kernels.match-fp64")
def test_autograd_fused_add_determinism_and_bad_input(device, evidence):
    gen = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(2, 5, 300, generator=gen), torch.randn(300, generator=gen), torch.randn(300, generator=gen)
    g = torch.randn(2, 5, 300, generator=gen)
    for rms in (False, True):
        xs, ws = x.clone().to(device).requires_grad_(), w.clone().to(device).requires_grad_()
        bs = None if rms else b.clone().to(device).requires_grad_()
        y = NM.rms_norm(xs, ws) if rms else NM.layer_norm(xs, ws, bs)
        y.backward(g.to(device))
        y0, dx0, dw0, _ = _oracle(x, w, None if rms else b, rms, 1e-6 if rms else 1e-5, g)
        assert float((y.detach().double().cpu() - y0).abs().max()) < 1e-4
        assert float((xs.grad.double().cpu() - dx0).abs().max()) < 1e-4
        assert float((ws.grad.double().cpu() - dw0).abs().max()) < 1e-3
    r = torch.randn(2, 5, 300, generator=gen)
    for fused in (True, False):
        y, h = NM.add_rms_norm(x.to(device), r.to(device), w.to(device), fused=fused)
        assert torch.equal(h.cpu(), x + r)
        y0 = torch.nn.functional.rms_norm((x + r).double(), (300,), w.double(), 1e-6)
        assert float((y.double().cpu() - y0).abs().max()) < 1e-4
    # the weight gradient's order is fixed: the same bits on every run
    xx, ww = torch.randn(64, 256, generator=gen), torch.randn(256, generator=gen)
    _, mean, rstd = NM.norm_forward(xx.to(device), ww.to(device), rms=True)
    gg = torch.randn(64, 256, generator=gen).to(device)
    runs = {NM.norm_backward(gg, xx.to(device), ww.to(device), mean, rstd, rms=True, has_bias=False)[1]
            .cpu().numpy().tobytes() for _ in range(3)}
    assert len(runs) == 1
    for bad, msg in (((torch.randn(3, 4), torch.randn(5)), "must be"), ((torch.randn(3, 0), torch.randn(0)), "D >= 1"),
                     ((torch.randn(3, 4).double(), torch.randn(4).double()), "fp16, bf16 or fp32")):
        with pytest.raises(ValueError, match=msg):
            NM.norm_forward(*bad)
    with pytest.raises(ValueError, match="no bias"):
        NM.norm_forward(torch.randn(2, 4), torch.randn(4), torch.randn(4), rms=True)
    evidence["runs_bitwise_equal_dw"] = 3


# ---------------------------------------------------------------------------------------------------------------
# the claims


@pytest.mark.claim("norms.one-pass-variance")
def test_one_pass_variance_cancels(device, evidence):
    rng = np.random.default_rng(0)
    D = 4096
    x = (1e4 + rng.standard_normal((8, D))).astype(np.float32)
    true = x.astype(np.float64).var(-1)
    mean = x.sum(-1, dtype=np.float32) / np.float32(D)
    one_pass = (x * x).sum(-1, dtype=np.float32) / np.float32(D) - mean * mean  # E[x^2] - E[x]^2 in fp32
    two_pass = ((x - mean[:, None]) ** 2).sum(-1, dtype=np.float32) / np.float32(D)
    rel_one = np.abs(one_pass - true) / true
    rel_two = np.abs(two_pass - true) / true
    assert rel_one.max() > 1.0 and rel_two.max() < 1e-3  # the one-pass error exceeds the variance itself
    _, _, rstd = NM.norm_forward(torch.from_numpy(x).to(device), torch.ones(D).to(device), eps=0.0)
    rel_kernel = np.abs(1 / rstd.cpu().double().numpy() ** 2 - true) / true
    assert rel_kernel.max() < 1e-3
    evidence["rows"] = "8 rows of 1e4 + N(0, 1), D = 4096, fp32"
    evidence["max_relative_error"] = {"E[x^2] - E[x]^2": float(rel_one.max()), "two-pass": float(rel_two.max()),
                                      "the kernel": float(rel_kernel.max())}
    evidence["negative_one_pass_variances"] = int((one_pass < 0).sum())


@pytest.mark.claim("norms.warp-or-block-per-row")
def test_one_warp_per_row_is_a_register_budget(built, evidence):
    rows = {}
    for b in (1024, 2048, 4096, 8192):
        one, wrap = built[f"norm.warp{b}.80"], built[f"norm.wrapper{b}.80"]
        o1 = occupancy("sm_80", 32, one.registers, one.shared)
        o2 = occupancy("sm_80", wrap.threads, wrap.registers, wrap.shared)
        rows[b] = {"1 warp": {"registers": one.registers, "spill_bytes": one.spill_stores, "warps_per_sm": o1.warps},
                   f"{wrap.num_warps} warps": {"registers": wrap.registers, "spill_bytes": wrap.spill_stores,
                                               "warps_per_sm": o2.warps}}
    evidence["rmsnorm_forward_sm80"] = rows
    assert rows[1024]["1 warp"]["spill_bytes"] == 0 and rows[4096]["1 warp"]["spill_bytes"] == 0
    assert rows[8192]["1 warp"]["spill_bytes"] > 0
    evidence.quote("registers, one warp holding a row of 1024", quoted=69, measured=rows[1024]["1 warp"]["registers"],
                   abs=0)
    evidence.quote("registers, one warp holding a row of 4096", quoted=242,
                   measured=rows[4096]["1 warp"]["registers"], abs=0)
    for b in (1024, 2048, 4096, 8192):
        assert all(v["spill_bytes"] == 0 for k, v in rows[b].items() if k != "1 warp")


@pytest.mark.claim("norms.fused-residual-saves")
def test_the_fused_add_saves_one_read(device, evidence):
    if device.type != "cpu":
        pytest.skip("the meter reads Triton's interpreter")
    N, D = 6, 300
    x, r, w = torch.randn(N, D), torch.randn(N, D), torch.randn(D)
    got = {}
    for fused in (True, False):
        h = torch.empty(N, D)
        y = torch.empty(N, D)
        rstd, mean = torch.empty(N), torch.empty(N)
        with Meter(x=x, r=r, w=w, h=h, y=y, rstd=rstd, mean=mean) as m:
            if fused:
                NM.add_rms_norm_kernel[(N,)](x, r, w, h, y, rstd, D, D, 1e-6, BLOCK=512)
            else:
                NM.add_kernel[(triton.cdiv(N * D, 256),)](x, r, h, N * D, BLOCK=256)
                NM.norm_fwd_kernel[(N,)](h, w, w, y, mean, rstd, D, D, D, 1e-6, RMS=True, HAS_BIAS=False, BLOCK=512)
        assert torch.equal(h, x + r) and m.stray == 0
        acts = sum(m.loads[k] + m.stores[k] for k in ("x", "r", "h", "y"))
        got[fused] = acts / (N * D)
        assert m.bytes() == NM.bytes_moved(N, D, "add+rmsnorm" if fused else "add,rmsnorm", 4)
    evidence.quote("activation passes, fused", quoted=4, measured=got[True], rel=1e-9)
    evidence.quote("activation passes, add then norm", quoted=5, measured=got[False], rel=1e-9)
    evidence.quote("traffic saved (%)", quoted=20, measured=100 * (1 - got[True] / got[False]), rel=1e-9)


@pytest.mark.claim("norms.newton-rsqrt")
def test_newton_rsqrt_doubles_the_correct_bits(built, evidence):
    # every float in [1, 4): the magic-constant guess has a period of two binades, Newton's step is scale-free
    bits = np.arange(0x3F800000, 0x40800000, dtype=np.uint32)
    x = bits.view(np.float32)
    y = (np.uint32(0x5F3759DF) - (bits >> np.uint32(1))).view(np.float32)
    true = 1 / np.sqrt(x.astype(np.float64))
    errs = []
    half, three_halves = np.float32(0.5), np.float32(1.5)
    for _ in range(4):
        errs.append(float((np.abs(y - true) / true).max()))
        y = y * (three_halves - half * x * y * y)  # y <- y (3 - x y^2) / 2, in fp32
    for i, quoted in ((0, 0.0344), (1, 0.00175)):
        evidence.quote(f"max relative error after {i} Newton steps", quoted=quoted, measured=errs[i], rel=0.02)
    evidence.quote("max relative error after 2 Newton steps (millionths)", quoted=4.7, measured=errs[2] * 1e6, rel=0.02)
    assert errs[3] < 4 * U32 * 2  # the third step reaches fp32's own rounding
    evidence["errors"] = errs
    ptx = built["rsqrt.80"].ptx
    assert re.search(r"rsqrt\.approx(\.ftz)?\.f32", ptx), "tl.math.rsqrt should be the hardware's approximation"
    assert any(op.startswith("MUFU.RSQ") for op in built["rsqrt.80"].sass_opcodes())
    evidence["ptx"] = re.search(r"rsqrt\.approx\S*", ptx).group(0)


@pytest.mark.claim("norms.rmsnorm-half-cost")
def test_rmsnorm_moves_almost_the_same_bytes(device, evidence):
    N, D, e = 4096, 4096, 2
    ln = NM.bytes_moved(N, D, "layernorm", e, weights_once=True)
    rms = NM.bytes_moved(N, D, "rmsnorm", e, weights_once=True)
    evidence.quote("RMSNorm / LayerNorm bytes, 4096 x 4096 bf16", quoted=1.00, measured=rms / ln, digits=2)
    # arithmetic per element (forward): LayerNorm sub, square, two sums, scale, affine (+ bias) vs RMSNorm's square,
    # sum, scale, weight: either way a few FLOPs per 4 bytes moved, far under any ridge
    flops_ln, flops_rms = 8 * N * D, 5 * N * D
    assert flops_ln / ln < 2 and flops_rms / rms < 2
    if device.type == "cpu":  # and the kernels issue what the model counts
        x, w, b = torch.randn(5, 300), torch.randn(300), torch.randn(300)
        for kind, rms_ in (("layernorm", False), ("rmsnorm", True)):
            y, mean, rstd = torch.empty(5, 300), torch.empty(5), torch.empty(5)
            with Meter(x=x, w=w, b=b, y=y, mean=mean, rstd=rstd) as m:
                NM.norm_fwd_kernel[(5,)](x, w, b, y, mean, rstd, 300, 300, 300, 1e-5, RMS=rms_, HAS_BIAS=not rms_,
                                         BLOCK=512)
            assert m.bytes() == NM.bytes_moved(5, 300, kind, 4), kind
    evidence["bytes"] = {"layernorm": ln, "rmsnorm": rms}
