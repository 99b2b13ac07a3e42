"""LoRA's initialisation, merge and parameter counts; QLoRA's NF4 code book, storage and compute type.

Oracles: exact equality with the frozen base (torch.equal), autograd's gradients against the closed forms,
FlopCounterMode for the unmerged cost, PEFT's published trainable-parameter prints, the NF4 values published
with QLoRA/bitsandbytes, a Lloyd–Max quantiser fitted to the same data, and tensor byte counts.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from impls.distributed.mixed_precision import MixedPrecisionAdam, tiny_bf16_model
from impls.ml.counting import model
from impls.ml.lora import (NF4_OFFSET, NF4_PUBLISHED, LoRALinear, apply_lora, dequantize_blockwise, double_dequantize,
                           double_quantize, lora_params, nf4_codebook, qlora_forward, quantize_blockwise,
                           storage_bits, trainable)
from impls.ml.transformer import build

F64 = torch.float64


def _layer(seed=0, i=24, o=40, dtype=F64, **kw) -> LoRALinear:
    torch.manual_seed(seed)
    return LoRALinear(nn.Linear(i, o, dtype=dtype), r=4, alpha=8, **kw)


def _grads(layer: LoRALinear, x: torch.Tensor, up: torch.Tensor):
    layer.zero_grad(set_to_none=True)
    (layer(x) * up).sum().backward()
    return layer.lora_A.grad, layer.lora_B.grad


@pytest.mark.claim("lora.b-zero-start")
@pytest.mark.parametrize("dtype", [F64, torch.float32, torch.bfloat16])
def test_b_zero_starts_exactly_at_the_base(dtype):
    layer = _layer(dtype=dtype)
    x = torch.randn(3, 5, 24, dtype=dtype)
    assert torch.equal(layer(x), layer.base(x))                          # bit for bit, any dtype
    assert float(layer.lora_A.detach().abs().max()) > 0 and float(layer.lora_B.detach().abs().max()) == 0
    # and it does move after one step
    opt = torch.optim.SGD([layer.lora_A, layer.lora_B], lr=0.1)
    layer(x).float().pow(2).sum().backward()
    opt.step()
    assert not torch.equal(layer(x), layer.base(x))


@pytest.mark.claim("lora.both-zero-stuck")
def test_a_and_b_both_zero_never_move():
    layer = _layer(init="zeros")
    opt = torch.optim.SGD([layer.lora_A, layer.lora_B], lr=1.0)
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        x, up = torch.randn(8, 24, generator=g, dtype=F64), torch.randn(8, 40, generator=g, dtype=F64)
        ga, gb = _grads(layer, x, up)
        assert float(ga.abs().max()) == 0 == float(gb.abs().max())      # ∂L/∂A ∝ Bᵀ·, ∂L/∂B ∝ ·A: both 0
        opt.step()
    assert float(layer.lora_A.abs().max()) == 0 == float(layer.lora_B.abs().max())


@pytest.mark.claim("lora.a-zero-slow")
def test_a_zero_blocks_b_for_one_step_only(evidence):
    g = torch.Generator().manual_seed(0)
    x, up = torch.randn(8, 24, generator=g, dtype=F64), torch.randn(8, 40, generator=g, dtype=F64)
    mirror = _layer(init="b_random")                                   # A = 0, B random
    ga, gb = _grads(mirror, x, up)
    assert float(gb.abs().max()) == 0 and float(ga.abs().max()) > 0   # step 0: B gets nothing, A does
    # closed forms: ∂L/∂A = s·Bᵀ Gᵀ X, ∂L/∂B = s·Gᵀ X Aᵀ with G = ∂L/∂y = up
    assert torch.allclose(ga, mirror.scaling * mirror.lora_B.t() @ up.t() @ x)
    torch.optim.SGD([mirror.lora_A, mirror.lora_B], lr=0.1).step()
    _, gb1 = _grads(mirror, x, up)
    assert float(gb1.abs().max()) > 0                                   # step 1: B is learning
    default = _layer()                                                  # PEFT's default: the same, mirrored
    ga0, gb0 = _grads(default, x, up)
    assert float(ga0.abs().max()) == 0 and float(gb0.abs().max()) > 0
    evidence["step 0, A = 0"] = {"|grad A|": float(ga.norm()), "|grad B|": float(gb.norm())}
    evidence["step 1, A = 0"] = {"|grad B|": float(gb1.norm())}
    evidence["step 0, B = 0 (default)"] = {"|grad A|": float(ga0.norm()), "|grad B|": float(gb0.norm())}


@pytest.mark.claim("lora.merge-no-overhead")
def test_merge_is_exact_and_unmerged_costs_extra_flops(evidence):
    layer = _layer()
    with torch.no_grad():
        layer.lora_B.normal_()
    x = torch.randn(6, 24, dtype=F64)
    merged = layer.merge()
    assert torch.allclose(merged(x), layer(x), atol=1e-12)
    assert torch.allclose(merged.weight - layer.base.weight, (8 / 4) * layer.lora_B @ layer.lora_A)   # (α/r)·BA
    with FlopCounterMode(display=False) as base_fc:
        merged(x)
    with FlopCounterMode(display=False) as lora_fc:
        layer(x)
    assert base_fc.get_total_flops() == 2 * 6 * 24 * 40
    assert lora_fc.get_total_flops() - base_fc.get_total_flops() == 2 * 6 * 4 * (24 + 40)   # 2r(in+out) per token
    # in bf16 the merged weight is rounded once: outputs agree to bf16 precision, not bit for bit
    b16 = _layer(dtype=torch.bfloat16)
    with torch.no_grad():
        b16.lora_B.normal_(std=0.05)
    xb = torch.randn(64, 24, dtype=torch.bfloat16)
    diff = float((b16.merge()(xb).double() - b16(xb).double()).abs().max())
    evidence["bf16 merged vs unmerged, max |diff|"] = diff
    assert diff < 0.1


@pytest.mark.claim("lora.full-ft-memory")
def test_full_fine_tuning_needs_sixteen_bytes_per_parameter(evidence):
    net = tiny_bf16_model()
    opt = MixedPrecisionAdam(net.parameters())
    net(torch.randn(5, 23, dtype=torch.bfloat16)).float().pow(2).sum().backward()
    opt.step()
    n = sum(p.numel() for p in net.parameters())
    after_backward = opt.phases["after_backward"]
    states = after_backward["params16"] + after_backward["grads16"] + opt.phases["after_adam_update"][
        "master32"] + opt.phases["after_adam_update"]["adam_moments32"]
    per_param = states / n
    assert per_param == 16
    evidence.quote("model states of a 6B model under mixed-precision Adam, GB", quoted=96, measured=6e9 * per_param / 1e9,
                   abs=0)
    evidence.quote("the claim's 3 x 6B x 2 bytes, GB", quoted=36, measured=3 * 6e9 * 2 / 1e9, abs=0)


PEFT_PRINTS = [  # model, r, targets, trainable params as PEFT's print_trainable_parameters() reports them
    ("llama-2-7b", 8, ("q_proj", "v_proj"), 4_194_304),
    ("llama-3-8b", 16, ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), 41_943_040),
]


@pytest.mark.claim("lora.trainable-count")
def test_trainable_parameters_per_target(evidence):
    for name, r, targets, published in PEFT_PRINTS:
        cfg = model(name)
        assert lora_params(cfg, r, targets) == published
        net = apply_lora(build(cfg, device="meta"), targets, r, 2 * r)
        assert trainable(net) == published                                    # counted on the wrapped model
        total = sum(p.numel() for p in net.parameters())
        evidence[name] = {"r": r, "targets": list(targets), "trainable": published,
                          "trainable %": 100 * published / total}
    share = 100 * 4_194_304 / (6_738_415_616 + 4_194_304)
    evidence.quote("trainable share, Llama-2-7B r=8 on q, v, %", quoted=0.062, measured=share, abs=0.0005)


# ------------------------------------------------------------------------------------------- QLoRA
@pytest.mark.claim("qlora.nf4-codebook")
def test_nf4_from_normal_quantiles_matches_the_published_levels(evidence):
    built = nf4_codebook()
    published = torch.tensor(NF4_PUBLISHED, dtype=F64)
    assert float((built - published).abs().max()) < 1e-7                  # fp32 rounding of the published table
    assert built[7] == 0 and built[0] == -1 and built[-1] == 1             # an exact zero, 7 negative, 8 positive
    evidence["max |built − published|"] = float((built - published).abs().max())
    evidence.quote("offset δ of the construction", quoted=0.9677083, measured=NF4_OFFSET, abs=0)
    evidence.quote("scale bits per parameter after double quantisation", quoted=0.127,
                   measured=storage_bits(64 * 256 * 64, double=True) - 4, abs=0.0005)


def _normalised_gaussian_blocks(n_blocks=16384, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n_blocks * 64, generator=g)
    idx, absmax = quantize_blockwise(w, nf4_codebook())
    return (w.view(-1, 64) / absmax[:, None]).flatten().double(), idx.flatten().long()


def _lloyd_max(x: torch.Tensor, levels: torch.Tensor, iters: int = 60) -> torch.Tensor:
    for _ in range(iters):
        b = torch.bucketize(x, (levels[1:] + levels[:-1]) / 2)
        sums = torch.zeros_like(levels).index_add_(0, b, x)
        counts = torch.bincount(b, minlength=levels.numel()).to(levels.dtype)
        levels = torch.where(counts > 0, sums / counts.clamp_min(1), levels)
    return levels


def _mse(x, levels):
    return float((levels[torch.bucketize(x, (levels[1:] + levels[:-1]) / 2)] - x).pow(2).mean())


@pytest.mark.claim("qlora.nf4-optimal")
def test_nf4_is_neither_equal_mass_nor_mse_optimal(evidence):
    x, idx = _normalised_gaussian_blocks()
    code = nf4_codebook()
    p = torch.bincount(idx, minlength=16).double() / idx.numel()
    entropy = float(-(p * p.log2()).sum())
    assert entropy < 3.95                                           # equal-mass bins would carry 4 bits
    lloyd = _lloyd_max(x, code.clone())
    nf4, best = _mse(x, code), _mse(x, lloyd)
    uniform = _mse(x, torch.linspace(-1, 1, 16, dtype=F64))         # int4-style evenly spaced levels
    assert best < nf4 < uniform                                      # better than even spacing, not MSE-optimal
    evidence.quote("bits of information per NF4 code on absmax-normalised Gaussian blocks", quoted=3.88,
                   measured=entropy, abs=0.005)
    evidence.quote("NF4 MSE over a Lloyd–Max quantiser of the same data, %", quoted=14, measured=100 * (nf4 / best - 1),
                   abs=1)
    evidence["MSE"] = {"NF4": nf4, "Lloyd–Max": best, "uniform 16 levels": uniform}
    evidence["code use"] = p.tolist()


@pytest.mark.claim("qlora.computes-in-4bit")
def test_qlora_stores_nf4_and_computes_in_bf16(evidence):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(48, 64, generator=g) * 0.02
    code = nf4_codebook()
    idx, absmax = quantize_blockwise(w, code)
    a = torch.randn(4, 64, generator=g) * 0.01
    b = torch.randn(48, 4, generator=g) * 0.01
    x = torch.randn(5, 64, generator=g)
    y = qlora_forward(x, idx, absmax, code, w.shape, a, b, 2.0)
    assert y.dtype == torch.bfloat16
    # exactly the bf16 matmul with the dequantised weight: the 4-bit codes only index a table
    w16 = dequantize_blockwise(idx, absmax, code, w.shape, torch.bfloat16)
    x16 = x.to(torch.bfloat16)
    assert torch.equal(y, x16 @ w16.t() + 2.0 * ((x16 @ a.to(torch.bfloat16).t()) @ b.to(torch.bfloat16).t()))
    # NF4 is not an arithmetic type: a product of two levels is (almost) never a level
    levels = set(code.tolist())
    products = {u * v for u in levels for v in levels}
    assert len(products - levels) > 100
    evidence["products of two NF4 levels that are not a level"] = len(products - levels)


@pytest.mark.claim("qlora.double-quant-saving")
def test_double_quantisation_saves_0_37_bits(evidence):
    numel = 64 * 256 * 64
    g = torch.Generator().manual_seed(0)
    w = torch.randn(numel, generator=g)
    idx, absmax = quantize_blockwise(w, nf4_codebook())
    codes, scale, mean = double_quantize(absmax)
    # measured storage: 4-bit codes (two per byte) + the constants as the tensors hold them
    single = (idx.numel() * 4 + absmax.numel() * absmax.element_size() * 8) / numel
    double = (idx.numel() * 4 + codes.numel() * codes.element_size() * 8 + scale.numel() * 32 + 32) / numel
    assert single == storage_bits(numel) == 4.5 and double == pytest.approx(storage_bits(numel, double=True))
    evidence.quote("bits per parameter saved by double quantisation", quoted=0.37, measured=single - double, abs=0.005)
    evidence.quote("scale bits per parameter after double quantisation", quoted=0.127, measured=double - 4, abs=0.0005)
    # and the scales survive: relative error of the recovered absmax
    back = double_dequantize(codes, scale, mean, absmax.numel())
    assert float(((back - absmax).abs() / absmax).max()) < 0.01


@pytest.mark.claim("qlora.single-gpu")
def test_a_65b_base_fits_in_48_gb(evidence):
    params = 65.2e9
    nf4 = params * storage_bits(64 * 256 * 64, double=True) / 8
    full = params * 16
    assert nf4 < 48e9 < full
    evidence["65B weights, NF4 + double quantisation, GB"] = nf4 / 1e9
    evidence["65B full fine-tuning model states (16 B/param), GB"] = full / 1e9
