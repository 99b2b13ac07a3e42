"""Parameters and training FLOPs of a decoder from its config, against torch's own FLOP counter, published
parameter totals and published GPU-hours.

Oracles: ``torch.utils.flop_counter.FlopCounterMode`` on scaled-down models of every block variant (forward and
backward, with and without recomputation: exact integer equality), the parameter counts Meta and Qwen publish,
``nn.Conv2d`` under the same counter, and the GPU-hours of the Llama 2 paper and the Llama 3.1 model card.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from impls.arch.params import deepseek_v3_counts, load_config
from impls.ml.compute import PUBLISHED_RUNS, conv2d_flops, conv2d_params, gpu, published_mfu, train_cost
from impls.ml.counting import (ARCHS, MODELS, flops_per_token, hardware_flops_per_token, matmul_params, model,
                               param_counts, scaled_down)
from impls.ml.transformer import Layer, build, numel
from impls.parallel.moe import moe

F64 = torch.float64
VARIANTS = ["transformer", "gpt3", "llama", "qwen2", "qwen3"]


def _variant(arch: str):
    return scaled_down(replace(model("llama-3-8b"), arch=ARCHS[arch], tie=arch == "gpt3"))


def _counted(cfg, recompute: str = "none", batch: int = 2) -> int:
    m = build(cfg, recompute=recompute).double()
    tok = torch.randint(0, cfg.vocab, (batch, cfg.context), generator=torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as fc:
        m(tok).pow(2).mean().backward()
    return fc.get_total_flops()


@pytest.mark.claim("flops.6nd")
@pytest.mark.parametrize("arch", VARIANTS)
def test_six_nd_plus_attention_is_what_torch_counts(arch, evidence):
    cfg = _variant(arch)
    tokens = 2 * cfg.context
    got = _counted(cfg)
    per = flops_per_token(cfg)
    assert got == per["total"] * tokens                          # exact: 6·N_mm·D + 12·L·H·d_h·T·D
    assert got > 6 * matmul_params(cfg) * tokens                 # 6ND alone undercounts
    evidence["counted / 6ND"] = got / (6 * matmul_params(cfg) * tokens)


@pytest.mark.claim("flops.6nd")
def test_the_attention_term_at_full_size(evidence):
    cfg = model("llama-3-8b")
    per = flops_per_token(cfg, 8192)
    share = per["attention"] / per["dense"]
    evidence.quote("attention term over 6N, Llama 3 8B at T = 8192", quoted=0.29, measured=share, abs=0.005)
    short = flops_per_token(cfg, 2048)
    evidence["attention / 6N at T = 2048"] = short["attention"] / short["dense"]
    # forward is a third: 2N_mm per token forward, 4N_mm backward (FlopCounterMode forward only)
    small = _variant("llama")
    m = build(small).double()
    tok = torch.randint(0, small.vocab, (2, small.context))
    with FlopCounterMode(display=False) as fc:
        m(tok)
    assert 3 * fc.get_total_flops() == flops_per_token(small)["total"] * 2 * small.context


@pytest.mark.claim("flops.recompute-8nd")
@pytest.mark.parametrize("arch", ["transformer", "llama"])
def test_recomputation_adds_hardware_flops_not_model_flops(arch, evidence):
    cfg = _variant(arch)
    tokens = 2 * cfg.context
    none, sel, full = (_counted(cfg, r) for r in ("none", "selective", "full"))
    for r, got in (("selective", sel), ("full", full)):
        assert got == hardware_flops_per_token(cfg, recompute=r) * tokens
    # full recompute replays every layer's forward: the matmul part goes from 6 to 8 per weight per token
    layer_w = matmul_params(cfg) - cfg.vocab * cfg.d
    core = 4 * cfg.layers * cfg.heads * cfg.head_dim * cfg.context
    assert full - none == (2 * layer_w + core) * tokens
    assert sel - none == core * tokens                           # selective: only QKᵀ and PV again
    big = model("llama-3-8b")
    ratio_full = hardware_flops_per_token(big, recompute="full") / flops_per_token(big)["total"]
    ratio_sel = hardware_flops_per_token(big, recompute="selective") / flops_per_token(big)["total"]
    evidence["hardware / model FLOPs, Llama 3 8B, T = 8192"] = {"full": ratio_full, "selective": ratio_sel}
    assert 1.3 < ratio_full < 1.45 and ratio_sel < 1.08


@pytest.mark.claim("flops.moe-active-params")
def test_moe_flops_follow_active_parameters(evidence):
    g = torch.Generator().manual_seed(0)
    t, h, f, e, k = 64, 16, 32, 8, 2
    x = torch.randn(t, h, generator=g, dtype=F64, requires_grad=True)
    w_router = torch.randn(e, h, generator=g, dtype=F64, requires_grad=True)
    w1 = torch.randn(e, h, f, generator=g, dtype=F64, requires_grad=True)
    w2 = torch.randn(e, f, h, generator=g, dtype=F64, requires_grad=True)
    with FlopCounterMode(display=False) as fc:
        y, stats = moe(x, w_router, w1, w2, k, capacity_factor=1.0)
        y.pow(2).sum().backward()
    active = e * h + k * 2 * h * f                  # router + the k experts a token uses
    total = e * h + e * 2 * h * f
    assert fc.get_total_flops() == 6 * active * t
    assert 6 * total * t > 3 * fc.get_total_flops()
    # DeepSeek-V3: 37B of 671B weights per token (impls/arch/params, checked there against its config)
    ds = deepseek_v3_counts(load_config("deepseek-v3"))
    assert round(ds["total"] / 1e9) == 671 and 36e9 < ds["active_without_embedding"] < ds["active"] < 38e9
    evidence["toy MoE, 8 experts top-2"] = {"counted": fc.get_total_flops(), "6·N_active·D": 6 * active * t,
                                           "6·N_total·D": 6 * total * t}


PUBLISHED_TOTALS = {   # exact counts (Meta's model cards / safetensors metadata; PEFT's print for Llama 2 7B)
    "llama-2-7b": 6_738_415_616, "llama-3-8b": 8_030_261_248, "llama-3.1-8b": 8_030_261_248,
    "llama-3.1-70b": 70_553_706_496, "llama-3.1-405b": 405_853_388_800,
}


@pytest.mark.claim("params.12ld2")
def test_twelve_l_d_squared(evidence):
    def rule(cfg):
        return 12 * cfg.layers * cfg.d ** 2 + cfg.vocab * cfg.d

    gpt3 = model("gpt-3-175b")
    assert abs(rule(gpt3) / param_counts(gpt3)["total"] - 1) < 0.001        # MHA, 4d MLP, tied head: the rule's case
    llama = model("llama-3-8b")
    assert param_counts(llama)["total"] == PUBLISHED_TOTALS["llama-3-8b"]
    short = 1 - rule(llama) / PUBLISHED_TOTALS["llama-3-8b"]
    evidence.quote("12·L·d² + V·d below Llama 3 8B's count", quoted=13, measured=100 * short, abs=0.5)
    per_layer = param_counts(llama)["layer"] / llama.d ** 2
    evidence["Llama 3 8B weights per layer / d²"] = per_layer   # 2.5 (GQA attention) + 10.5 (SwiGLU at 3.5d)
    assert per_layer == pytest.approx(13.0, abs=1e-3)


class _ElementOps(TorchDispatchMode):
    """Elements produced by pointwise ops plus elements read by reductions: about one FLOP each."""

    MATMUL = {torch.ops.aten.mm.default, torch.ops.aten.bmm.default, torch.ops.aten.addmm.default}

    def __init__(self):
        super().__init__()
        self.elements = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in self.MATMUL:
            return out
        if torch.Tag.pointwise in func.tags and isinstance(out, torch.Tensor):
            self.elements += out.numel()
        elif any(r in func.__name__ for r in ("sum", "mean", "amax", "softmax")):
            self.elements += args[0].numel()
        return out


@pytest.mark.claim("flops.nonmatmul-negligible")
def test_non_matmul_flops_are_a_fraction_of_a_percent(evidence):
    cfg = model("llama-3-8b")
    layer = Layer(cfg, device="meta")                        # full-size shapes, no memory
    x = torch.empty(1, 4096, cfg.d, device="meta")
    with FlopCounterMode(display=False) as fc, _ElementOps() as ew:
        layer(x)
    share = ew.elements / fc.get_total_flops()
    assert share < 0.002                                    # "under two per mille"
    evidence["non-matmul elements / matmul FLOPs, one Llama 3 8B layer, T = 4096"] = share
    # ...but not negligible in time: a pointwise op moves ~2 bytes per FLOP while an H100 needs ~295 FLOPs/byte
    h100 = gpu("h100")
    evidence["H100 ridge point (FLOPs/byte)"] = h100.ridge
    assert h100.ridge > 100


@pytest.mark.claim("flops.conv2d")
@pytest.mark.parametrize("c_in, c_out, k, stride, pad, groups, h, w", [
    (64, 128, 3, 1, 1, 1, 64, 128),          # the question: [64, 64, 128] -> [128, 64, 128]
    (3, 16, 5, 2, 0, 1, 33, 47),             # odd sizes, stride, no padding
    (32, 64, 3, 1, 1, 4, 17, 9),             # grouped
    (16, 16, 3, 1, 1, 16, 12, 12),           # depthwise
    (8, 24, (1, 3), 1, (0, 1), 1, 10, 11),   # rectangular kernel
])
def test_conv2d_flops_and_params(c_in, c_out, k, stride, pad, groups, h, w, evidence):
    conv = torch.nn.Conv2d(c_in, c_out, k, stride=stride, padding=pad, groups=groups, bias=True)
    x = torch.randn(1, c_in, h, w)
    with FlopCounterMode(display=False) as fc:
        y = conv(x)
    h_out, w_out = y.shape[-2:]
    assert fc.get_total_flops() == conv2d_flops(c_in, c_out, k, h_out, w_out, groups)   # torch counts no bias
    assert sum(p.numel() for p in conv.parameters()) == conv2d_params(c_in, c_out, k, groups)
    # an independent count: unfold = im2col, then one matmul of [C_out/g, C_in/g·K²] x [C_in/g·K², H_out·W_out]
    cols = F.unfold(x, k, padding=pad, stride=stride)
    assert cols.shape[-1] == h_out * w_out
    macs = c_out * (cols.shape[1] // groups) * cols.shape[-1]
    assert conv2d_flops(c_in, c_out, k, h_out, w_out, groups) == 2 * macs
    if (c_in, c_out, h, w) == (64, 128, 64, 128):
        evidence["the question's conv"] = {"params": conv2d_params(64, 128, 3), "FLOPs": 2 * macs,
                                           "output": list(y.shape[1:])}
        assert conv2d_params(64, 128, 3) == 73_856 and 2 * macs == 1_207_959_552


@pytest.mark.claim("train.time.published-runs")
def test_published_gpu_hours_imply_plausible_mfu(evidence):
    implied = {r.model: published_mfu(r) for r in PUBLISHED_RUNS}
    for name in ("llama-2-7b", "llama-2-13b", "llama-2-70b"):
        assert 0.4 < implied[name] < 0.5, (name, implied[name])
    evidence.quote("MFU implied by Llama 2 70B's GPU-hours", quoted=0.46, measured=implied["llama-2-70b"], abs=0.005)
    evidence.quote("MFU implied by Llama 2 7B's GPU-hours", quoted=0.45, measured=implied["llama-2-7b"], abs=0.005)
    evidence.quote("MFU implied by Llama 3.1 405B's GPU-hours", quoted=0.37, measured=implied["llama-3.1-405b"],
                   abs=0.005)
    evidence.quote("MFU implied by Llama 3 8B's GPU-hours", quoted=0.19, measured=implied["llama-3-8b"], abs=0.005)
    evidence.quote("MFU implied by Llama 3 70B's GPU-hours", quoted=0.32, measured=implied["llama-3-70b"], abs=0.005)
    # the paper's own compute figure is 6·N·D with N the total parameters
    n405 = param_counts(model("llama-3.1-405b"))["total"]
    evidence.quote("6·N·D of Llama 3.1 405B on 15.6T tokens, ×1e25 FLOPs", quoted=3.8, measured=6 * n405 * 15.6e12 / 1e25,
                   digits=1)
    # time: the same arithmetic the CLI prints
    c = train_cost(model("llama-2-70b"), 2e12, 2048, gpu("a100"), implied["llama-2-70b"])
    assert c.gpu_hours == pytest.approx(1_720_320, rel=1e-9)
    evidence["implied MFU"] = implied


@pytest.mark.claim("arch.param-count-from-config")
def test_counts_from_config_equal_published_totals(evidence):
    for name, total in PUBLISHED_TOTALS.items():
        assert param_counts(model(name))["total"] == total, name
    q25, q3 = param_counts(model("qwen2.5-7b")), param_counts(model("qwen3-8b"))
    # the Qwen model cards round: 7.61B / 6.53B non-embedding, 8.2B / 6.95B
    evidence.quote("Qwen2.5-7B parameters, B", quoted=7.61, measured=q25["total"] / 1e9, abs=0.01)
    evidence.quote("Qwen2.5-7B non-embedding, B", quoted=6.53, measured=q25["non_embedding"] / 1e9, abs=0.01)
    evidence.quote("Qwen3-8B parameters, B", quoted=8.2, measured=q3["total"] / 1e9, abs=0.05)
    evidence.quote("Qwen3-8B non-embedding, B", quoted=6.95, measured=q3["non_embedding"] / 1e9, abs=0.005)
    evidence["counts"] = {n: param_counts(c)["total"] for n, c in MODELS.items()}


@pytest.mark.claim("arch.param-count-from-config")
@pytest.mark.parametrize("arch", VARIANTS)
def test_counts_equal_the_state_dict_of_a_scaled_down_instance(arch):
    cfg = _variant(arch)
    m = build(cfg)
    sd = m.state_dict()
    pc = param_counts(cfg)
    assert sum(t.numel() for t in sd.values()) == pc["total"] == numel(m)      # a tied head is not stored twice
    layer0 = {k.split("layers.0.")[1]: v.numel() for k, v in sd.items() if ".layers.0." in k}
    attn = sum(v for k, v in layer0.items() if k.startswith("self_attn."))
    mlp = sum(v for k, v in layer0.items() if k.startswith("mlp."))
    assert (attn, mlp) == (pc["attention_per_layer"], pc["mlp_per_layer"])
    bias_keys = [k for k in layer0 if k.endswith("bias")]
    if arch == "llama":
        assert not bias_keys
        assert set(layer0) == {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                               "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                               "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"}
    if arch == "qwen2":
        assert sorted(bias_keys) == ["self_attn.k_proj.bias", "self_attn.q_proj.bias", "self_attn.v_proj.bias"]
    if arch == "qwen3":
        assert not bias_keys and {"self_attn.q_norm.weight", "self_attn.k_norm.weight"} <= set(layer0)
    # and full size on the meta device, no memory
    full = replace(model("llama-3-8b"), arch=ARCHS[arch], tie=arch == "gpt3")
    assert numel(build(full, device="meta")) == param_counts(full)["total"]
