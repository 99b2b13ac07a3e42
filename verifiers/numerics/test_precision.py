"""FP32 / FP16 / BF16 / FP8 as torch implements them; loss scaling; master weights; what mixed precision saves.

Oracles: bit patterns read back from torch tensors (field widths), IEEE arithmetic in Python floats for
rounding errors, torch's own BF16 conversion on every tie and carry, torch.amp.GradScaler on every overflow
pattern, fp32 autograd as the reference gradient, fp64 dot products, and tensors counted byte by byte.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch import nn

from impls.distributed.mixed_precision import MixedPrecisionAdam, tiny_bf16_model
from impls.numerics import precision as F


def _rel_err(x: float, dtype: torch.dtype) -> float:
    y = torch.tensor([x], dtype=torch.float64).to(dtype).double().item()
    return abs(y - x) / abs(x)


@pytest.mark.claim("mp.bit-layouts")
def test_layouts_and_where_fp16_is_more_precise(evidence):
    fp16, bf16 = F.layout(torch.float16), F.layout(torch.bfloat16)
    for name, lay in (("FP16", fp16), ("BF16", bf16)):
        quoted = (1, 5, 10) if name == "FP16" else (1, 8, 7)
        for field, q, m in zip(("sign", "exponent", "mantissa"), quoted, (lay.sign, lay.exponent, lay.mantissa)):
            evidence.quote(f"{name} {field} bits", quoted=q, measured=m, digits=0)
    g = torch.Generator().manual_seed(0)
    inside = torch.exp(torch.empty(20_000, dtype=torch.float64).uniform_(math.log(1e-4), math.log(6e4), generator=g))
    err16 = ((inside.half().double() - inside).abs() / inside).max().item()
    errbf = ((inside.bfloat16().double() - inside).abs() / inside).max().item()
    assert err16 <= 2 ** -11 and errbf <= 2 ** -8 and errbf > 4 * err16   # normal range: fp16 8x finer
    tiny, huge = 1e-6, 1e5
    assert _rel_err(tiny, torch.float16) > 5 * _rel_err(tiny, torch.bfloat16)  # fp16 subnormal: bf16 wins
    # the normal range's lower end and the subnormal counterexample, as the correction quotes them (6.1e-5, %)
    evidence.quote("FP16 smallest normal / 1e-5", quoted=6.1, measured=fp16.smallest_normal / 1e-5, digits=1)
    evidence.quote("FP16 relative error at 1e-6 (%)", quoted=1.3, measured=100 * _rel_err(tiny, torch.float16),
                   digits=1)
    evidence.quote("BF16 relative error at 1e-6 (%)", quoted=0.16, measured=100 * _rel_err(tiny, torch.bfloat16),
                   digits=2)
    assert math.isinf(torch.tensor([huge]).half().item()) and _rel_err(huge, torch.bfloat16) < 2 ** -8
    evidence.update(layouts={"fp16": [1, 5, 10], "bf16": [1, 8, 7]},
                    max_rel_error_normal_range={"fp16": err16, "bf16": errbf},
                    counterexample={"x": tiny, "fp16_rel_error": _rel_err(tiny, torch.float16),
                                    "bf16_rel_error": _rel_err(tiny, torch.bfloat16), "1e5_in_fp16": "inf"})


@pytest.mark.claim("mp.range")
def test_ranges(evidence):
    f32, bf16, f16 = (F.layout(d) for d in (torch.float32, torch.bfloat16, torch.float16))
    evidence.quote("FP16 max", quoted=65504, measured=f16.max, digits=0)
    assert f16.max == (2 - 2 ** -10) * 2 ** 15
    assert bf16.smallest_normal == f32.smallest_normal                 # the same exponent range
    assert bf16.max == (2 - 2 ** -7) * 2 ** 127 and abs(bf16.max / f32.max - 1) < 0.004
    assert bf16.smallest_subnormal > 1e4 * f32.smallest_subnormal      # fewer mantissa bits: shallower subnormals
    evidence.update(max={"fp32": f32.max, "bf16": bf16.max, "fp16": f16.max},
                    smallest_normal={"fp32": f32.smallest_normal, "bf16": bf16.smallest_normal,
                                     "fp16": f16.smallest_normal},
                    smallest_subnormal={"fp32": f32.smallest_subnormal, "bf16": bf16.smallest_subnormal,
                                        "fp16": f16.smallest_subnormal})


def _grads(dtype, scale=1.0):
    """Gradient of a small fp32 loss through a 16-bit matmul (the loss is computed and scaled in fp32)."""
    torch.manual_seed(0)
    x, w, t = torch.randn(64, 32) * 1e-2, torch.randn(32, 16) * 0.1, torch.randn(64, 16) * 1e-2
    ww = w.to(dtype).requires_grad_(True)
    loss = ((x.to(dtype) @ ww).float() - t).pow(2).mean() * 1e-3
    (loss * scale).backward()
    return ww.grad


@pytest.mark.claim("mp.loss-scaling")
def test_fp16_gradients_underflow_loss_scaling_recovers_them(evidence):
    ref = _grads(torch.float32)
    assert ref.abs().max() < 1e-8                                   # every gradient below fp16's 6e-8 floor
    g16 = _grads(torch.float16).float()
    gbf = _grads(torch.bfloat16).float()
    assert bool((g16 == 0).all())                                   # fp16: all of them flush to zero
    assert bool((gbf != 0).all()) and ((gbf - ref).abs().max() / ref.abs().max()) < 0.01
    static = F.LossScaler(2.0 ** 16, dynamic=False)
    g = static.unscale([_grads(torch.float16, static.scale)])[0]
    rel = ((g - ref).abs().max() / ref.abs().max()).item()
    assert rel < 1e-3
    dyn = F.LossScaler(2.0 ** 44, dynamic=True, growth_interval=3)
    steps = []
    for _ in range(10):
        out = dyn.unscale([_grads(torch.float16, dyn.scale)])
        steps.append("skip" if out is None else "ok")
    # the sequence the text describes: five overflows halve 2^44 to 2^39, three clean steps double it to 2^40,
    # which overflows once more and backs off to 2^39
    assert steps == ["skip"] * 5 + ["ok"] * 3 + ["skip", "ok"] and dyn.skipped == 6 and dyn.scale == 2.0 ** 39
    # FP16's flush-to-zero threshold: half the smallest subnormal 2^-24, below which round-to-nearest gives 0
    tiny16 = torch.tensor([2.0 ** -25, 2.0 ** -25 * (1 + 2 ** -20), 2.9e-8, 3.1e-8, 4e-8], dtype=torch.float32).half()
    assert tiny16.tolist() == [0.0, 2.0 ** -24, 0.0, 2.0 ** -24, 2.0 ** -24]
    evidence.update(fp16_zero_fraction=1.0, bf16_zero_fraction=float((gbf == 0).float().mean()),
                    static_scale=2 ** 16, static_max_rel_error=rel, dynamic_steps=steps,
                    dynamic_final_scale=dyn.scale, dynamic_skipped=dyn.skipped)


@pytest.mark.claim("mp.truncation")
def test_truncation_is_not_round_to_nearest(evidence):
    x = torch.tensor([1 + 0.75 * 2 ** -7], dtype=torch.float32)
    # what truncation drops, read from the bit pattern: the low 16 bits as a fraction of one bf16 ulp
    dropped = (int(x.view(torch.int32).item()) & 0xFFFF) / 0x10000
    evidence.quote("dropped part, in bf16 ulps", quoted=0.75, measured=dropped, digits=2)
    evidence.quote("1 + 0.75 * 2^-7 truncated", quoted=1.0, measured=F.bf16_truncate(x).item(), digits=7)
    evidence.quote("1 + 0.75 * 2^-7 rounded to nearest even (torch)", quoted=1.0078125,
                   measured=x.to(torch.bfloat16).item(), digits=7)
    assert F.bf16_truncate(x).item() == 1.0 and x.to(torch.bfloat16).item() == 1.0078125
    nan = torch.tensor([0x7F800001], dtype=torch.int32).view(torch.float32)     # a NaN with payload bit 0
    assert math.isnan(nan.item()) and math.isinf(F.bf16_truncate(nan).item())
    g = torch.Generator().manual_seed(1)
    r = torch.randn(200_000, generator=g) * torch.exp(torch.randn(200_000, generator=g) * 10)
    rne = F.bf16_from_bits(F.bf16_round_bits(r))
    assert torch.equal(rne.view(torch.int16), r.to(torch.bfloat16).view(torch.int16))   # torch rounds RNE
    differ = (F.bf16_truncate(r).view(torch.int16) != rne.view(torch.int16)).double().mean().item()
    assert 0.45 < differ < 0.55
    evidence.quote("random values where truncation differs (%)", quoted=50, measured=100 * differ, digits=0)
    err_t = ((F.bf16_truncate(r).double() - r.double()).abs() / r.double().abs()).mean().item()
    err_n = ((rne.double() - r.double()).abs() / r.double().abs()).mean().item()
    assert err_t > 1.5 * err_n
    evidence.update(fraction_truncation_differs=round(differ, 4), mean_rel_error={"truncate": err_t, "rne": err_n},
                    counterexample={"x": x.item(), "truncate": 1.0, "round_nearest_even": 1.0078125,
                                    "nan_0x7F800001_truncates_to": "inf"})


@pytest.mark.claim("mp.master-weights")
@pytest.mark.parametrize("dtype, lr", [(torch.float16, 1e-3), (torch.bfloat16, 1e-3)])
def test_small_updates_vanish_in_16_bit_weights(dtype, lr, evidence):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 16, generator=g)
    w_star = 1 + 0.05 * torch.randn(16, generator=g)
    y = x @ w_star

    def grad(w):
        return 2 * x.T @ (x @ w - y) / len(y)

    def loss(w):
        return float(((x @ w.float() - y) ** 2).mean())

    w0 = torch.ones(16)
    pure = F.sgd_run(w0, grad, lr, 400, dtype, master=False)
    master = F.sgd_run(w0, grad, lr, 400, dtype, master=True)
    half_ulp = torch.finfo(dtype).eps / 2
    assert lr * grad(w0).abs().max() < half_ulp                       # every update is below half an ulp at 1
    assert torch.equal(pure.float(), w0.to(dtype).float())             # ... so pure 16-bit weights never move
    assert loss(master) < 0.5 * loss(pure)
    evidence[str(dtype).removeprefix("torch.")] = {"loss_start": loss(w0), "loss_pure_16bit": loss(pure),
                                                   "loss_fp32_master": loss(master), "half_ulp_at_1": half_ulp,
                                                   "largest_update": float(lr * grad(w0).abs().max())}


def _model_state_bytes_fp32_adam() -> float:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(23, 31), nn.GELU(), nn.Linear(31, 7))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=False)
    nn.functional.mse_loss(model(torch.randn(8, 23)), torch.randn(8, 7)).backward()
    opt.step()
    psi = sum(p.numel() for p in model.parameters())
    held = sum(p.numel() * p.element_size() for p in model.parameters())
    held += sum(p.grad.numel() * p.grad.element_size() for p in model.parameters())
    held += sum(v.numel() * v.element_size() for s in opt.state.values() for k, v in s.items() if k != "step")
    return held / psi


def _saved_activation_bytes(dtype) -> int:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)).to(dtype)
    params = {p.data_ptr() for p in model.parameters()}
    saved = []

    def pack(t):
        if t.data_ptr() not in params:
            saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(torch.randn(128, 64).to(dtype).requires_grad_(True)).sum().backward()
    return sum(saved)


@pytest.mark.claim("mp.halves-memory")
def test_mixed_precision_adam_holds_as_much_as_fp32_adam(evidence):
    fp32 = _model_state_bytes_fp32_adam()
    model = tiny_bf16_model()
    psi = sum(p.numel() for p in model.parameters())
    opt = MixedPrecisionAdam(model.parameters(), lr=1e-2)
    for _ in range(2):
        nn.functional.mse_loss(model(torch.randn(8, 23).bfloat16()).float(), torch.randn(8, 7)).backward()
        opt.step()
    phase = opt.phases["after_backward"]
    mixed = (sum(phase.values()) - phase["step_counters"]) / psi
    assert fp32 == 16 and mixed == 16                                    # 4+4+8 vs 2+2+4+4+4
    act = {str(d).removeprefix("torch."): _saved_activation_bytes(d) for d in (torch.float32, torch.bfloat16)}
    assert act["bfloat16"] * 2 == act["float32"]                        # activations do halve
    evidence.update(model_state_bytes_per_param={"fp32 Adam": fp32, "mixed-precision Adam": mixed},
                    saved_activation_bytes=act,
                    counterexample={"fp32_adam_bytes_per_param": fp32, "mixed_adam_bytes_per_param": mixed})


def _grad_scaler_trajectory(pattern, init, interval):
    """torch.amp.GradScaler itself (the production state machine) on a parameter whose gradient is finite or
    inf as ``pattern`` says: the scale after each step and whether the optimizer step ran."""
    p = torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.SGD([p], lr=1.0)
    sc = torch.amp.GradScaler("cpu", init_scale=init, growth_interval=interval)
    out = []
    for finite in pattern:
        opt.zero_grad()
        before = p.detach().clone()
        sc.scale((p * torch.tensor([1.0, 1.0 if finite else float("inf")])).sum()).backward()
        sc.step(opt)
        sc.update()
        out.append((sc.get_scale(), not torch.equal(before, p.detach())))
    return out


@pytest.mark.claim("mp.loss-scaling")
def test_dynamic_scaler_is_gradscaler_on_every_overflow_pattern(evidence):
    """Every sequence of 8 clean / overflowing steps, against torch.amp.GradScaler: the same scale after every
    step and the same skipped steps. An overflow must restart the count of clean steps."""
    init, interval, n = 2.0 ** 10, 3, 8
    for pattern in itertools.product([True, False], repeat=n):
        ours = F.LossScaler(init, dynamic=True, growth_interval=interval)
        mine = []
        for finite in pattern:
            g = torch.tensor([1.0, 1.0 if finite else float("inf")]) * ours.scale
            out = ours.unscale([g])
            if out is not None:
                assert torch.equal(out[0], torch.tensor([1.0, 1.0]))         # unscaled exactly, in fp32
            mine.append((ours.scale, out is not None))
        assert mine == _grad_scaler_trajectory(pattern, init, interval), pattern
    static = F.LossScaler(2.0 ** 16, dynamic=False)
    assert static.unscale([torch.tensor([float("nan")])]) is None and static.scale == 2.0 ** 16
    assert torch.equal(static.unscale([torch.tensor([3 * 2.0 ** 14], dtype=torch.float16)])[0], torch.tensor([0.75]))
    evidence.update(patterns_compared=2 ** n, growth_interval=interval, reference="torch.amp.GradScaler('cpu')")


@pytest.mark.claim("mp.truncation")
def test_round_to_nearest_even_formula_on_every_tie_and_carry(evidence):
    """Every one of the 65,536 high halves (all signs, exponents, kept mantissas, ±0, ±inf, NaNs) with the low
    halves that decide rounding: 0, just below, at and just above the tie, and all ones (carry into the
    exponent, overflow to inf). The formula must equal torch's own conversion bit for bit (NaN as NaN)."""
    hi = torch.arange(65536, dtype=torch.int64)
    lows = torch.tensor([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=torch.int64)
    bits = (hi[:, None] << 16 | lows[None, :]).flatten()
    x = (bits - (bits >> 31 << 32)).to(torch.int32).view(torch.float32)
    ours = F.bf16_round_bits(x).to(torch.int64) & 0xFFFF
    theirs = x.to(torch.bfloat16).view(torch.int16).to(torch.int64) & 0xFFFF
    nan = torch.isnan(x)
    ours_nan = ((ours & 0x7F80) == 0x7F80) & ((ours & 0x7F) != 0)
    assert bool((ours_nan == nan).all())                                      # NaN stays NaN, never inf
    assert torch.equal(ours[~nan], theirs[~nan])
    ties = (bits & 0xFFFF) == 0x8000
    assert bool(((ours[ties & ~nan] & 1) == 0).all())                        # a tie always lands on even
    evidence.update(values_checked=int(bits.numel()), ties=int(ties.sum()), nans=int(nan.sum()))


@pytest.mark.claim("mp.fp32-accumulation")
def test_fp16_products_need_an_fp32_accumulator(evidence):
    ones = F.running_sum(torch.ones(4096), torch.float16)
    evidence.quote("4096 ones summed in an FP16 accumulator", quoted=2048, measured=float(ones), digits=0)
    assert float(ones) == 2048 and float(F.running_sum(torch.ones(4096), torch.float32)) == 4096
    spacing = float(torch.tensor(2049.0).half()) - 2048                       # 2049 rounds to even: 2048
    assert spacing == 0 and float(torch.tensor(2050.0).half()) == 2050
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn(64, 4096, generator=g).half() for _ in range(2))
    prod = x.float() * y.float()                                              # fp16 x fp16 is exact in fp32
    ref = (x.double() * y.double()).sum(-1)
    err16 = (F.running_sum(prod, torch.float16).double() - ref).abs().median().item()
    err32 = (F.running_sum(prod, torch.float32).half().double() - ref).abs().median().item()
    assert math.isfinite(err16) and math.isfinite(err32) and err16 > 10 * err32
    evidence.quote("median error of a 4096-long FP16 dot product, FP16 over FP32 accumulation (x)", quoted=38,
                   measured=err16 / err32, digits=0)
    with torch.autocast("cpu", dtype=torch.bfloat16):                        # what CPU autocast keeps in fp32
        a = torch.randn(8, 8, generator=g)
        logits = a @ a
        kept = {"matmul": logits.dtype, "cross_entropy": nn.functional.cross_entropy(logits, torch.arange(8)).dtype,
                "mse_loss": nn.functional.mse_loss(logits, logits.detach()).dtype}
    assert kept == {"matmul": torch.bfloat16, "cross_entropy": torch.float32, "mse_loss": torch.float32}
    evidence.update(median_abs_error={"fp16 accumulator": err16, "fp32 accumulator, result in fp16": err32},
                    cpu_autocast_bf16_dtypes={k_: str(v) for k_, v in kept.items()},
                    median_abs_dot=ref.abs().median().item(),
                    counterexample={"sum of 4096 ones, fp16 accumulator": float(ones)})
