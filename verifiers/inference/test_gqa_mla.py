"""MHA / GQA / MQA as one function, what sharing K/V heads saves, and how big MLA's cache is.

Oracles: ``F.scaled_dot_product_attention`` on explicitly repeated K/V heads (MHA, GQA) and a per-head
einsum with one shared K/V (MQA); torch's FlopCounterMode for the work of a layer; the cache tensors the
decoder allocates for the cache size; DeepSeek-V2's Table 1 formulas entered here independently.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from impls.inference import kv_cache as K
from impls.inference.gqa import grouped_query_attention
from impls.inference.kv_cache import ModelConfig
from impls.inference.roofline import linear_params
from impls.inference.tiny_decoder import GQAttention, TinyDecoder


def _sdpa_repeated(q, k, v, causal, kpm):
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    t, s = q.shape[2], k.shape[2]
    vis = torch.arange(s)[None, :] <= torch.arange(t)[:, None] + (s - t) if causal else torch.ones(t, s, dtype=torch.bool)
    vis = vis[None, None] & kpm[:, None, None, :]
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=vis)


@pytest.mark.claim("gqa.endpoints")
@given(b=st.integers(1, 2), h_kv=st.sampled_from([1, 2, 4]), g=st.sampled_from([1, 2, 4]), t=st.integers(1, 9),
       extra=st.integers(0, 6), d=st.sampled_from([4, 8]), causal=st.booleans(), seed=st.integers(0, 999))
def test_one_function_mha_gqa_mqa(b, h_kv, g, t, extra, d, causal, seed):
    h, s = h_kv * g, t + extra
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, t, d, generator=gen, dtype=torch.float64)
    k = torch.randn(b, h_kv, s, d, generator=gen, dtype=torch.float64)
    v = torch.randn(b, h_kv, s, d + 1, generator=gen, dtype=torch.float64)
    kpm = torch.rand(b, s, generator=gen) > 0.2
    kpm[:, 0] = True
    out = grouped_query_attention(q, k, v, causal=causal, key_padding_mask=kpm)
    assert torch.allclose(out, _sdpa_repeated(q, k, v, causal, kpm), atol=1e-12)
    if h_kv == 1:   # MQA: every head against the one shared K/V, written as an einsum
        sc = torch.einsum("bhtd,bsd->bhts", q, k[:, 0]) / d ** 0.5
        vis = (torch.arange(s)[None, :] <= torch.arange(t)[:, None] + (s - t)) if causal else torch.ones(t, s, dtype=torch.bool)
        sc = sc.masked_fill(~(vis[None, None] & kpm[:, None, None, :]), float("-inf"))
        mqa = torch.einsum("bhts,bse->bhte", sc.softmax(-1), v[:, 0])
        assert torch.allclose(out, mqa, atol=1e-12)
    if g == 1:      # MHA: plain SDPA, no repetition at all
        vis = (torch.arange(s)[None, :] <= torch.arange(t)[:, None] + (s - t)) if causal else torch.ones(t, s, dtype=torch.bool)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=vis[None, None] & kpm[:, None, None, :])
        assert torch.allclose(out, ref, atol=1e-12)


def _layer_flops(n_kv: int, t: int = 64) -> dict[str, int]:
    cfg = ModelConfig(f"h8-kv{n_kv}", 1, 256, 8, n_kv, 32, 512, 100)
    layer = GQAttention(cfg)
    x = torch.randn(2, t, cfg.hidden_size)
    flops = {}
    with FlopCounterMode(display=False) as fc:
        q = layer.wq(x)
    flops["q_proj"] = fc.get_total_flops()
    with FlopCounterMode(display=False) as fc:
        k, v = layer.wk(x), layer.wv(x)
    flops["kv_proj"] = fc.get_total_flops()
    qh = q.view(2, t, 8, 32).transpose(1, 2)
    kh, vh = (z.view(2, t, n_kv, 32).transpose(1, 2) for z in (k, v))
    with FlopCounterMode(display=False) as fc:
        o = grouped_query_attention(qh, kh, vh, causal=True)
    flops["attention_scores_and_pv"] = fc.get_total_flops()
    with FlopCounterMode(display=False) as fc:
        layer.wo(o.transpose(1, 2).reshape(2, t, -1))
    flops["o_proj"] = fc.get_total_flops()
    flops["kv_cache_bytes_per_token_bf16"] = K.bytes_per_token(cfg)
    return flops


@pytest.mark.claim("gqa.compute-unchanged")
def test_sharing_kv_heads_saves_cache_not_attention_flops(evidence):
    rows = {n_kv: _layer_flops(n_kv) for n_kv in (8, 2, 1)}
    mha, gqa, mqa = rows[8], rows[2], rows[1]
    assert mha["attention_scores_and_pv"] == gqa["attention_scores_and_pv"] == mqa["attention_scores_and_pv"]
    assert mha["kv_proj"] == 4 * gqa["kv_proj"] == 8 * mqa["kv_proj"]
    assert mha["kv_cache_bytes_per_token_bf16"] == 8 * mqa["kv_cache_bytes_per_token_bf16"]
    totals = {n: sum(v for k_, v in r.items() if k_ != "kv_cache_bytes_per_token_bf16") for n, r in rows.items()}
    assert totals[8] - totals[1] == mha["kv_proj"] - mqa["kv_proj"]        # the whole saving: K/V projections
    # a real model: Llama-3-8B (GQA-8) against the same model with 32 KV heads, FLOPs per token and KV bytes
    llama = K.preset("llama-3-8b")
    as_mha = K.with_kv_heads(llama, llama.n_heads)
    flop_saving = 1 - linear_params(llama) / linear_params(as_mha)
    kv_ratio = K.bytes_per_token(as_mha) / K.bytes_per_token(llama)
    assert flop_saving < 0.12 and kv_ratio == 4
    evidence.quote("Llama-3-8B FLOPs per token saved against the same shape with MHA, %", 10, 100 * flop_saving, digits=0)
    evidence.update(flops_by_kv_heads=rows, llama3_8b_linear_flop_saving_vs_mha=round(flop_saving, 4),
                    llama3_8b_kv_cache_ratio_mha_over_gqa=kv_ratio,
                    counterexample={"attention_flops_mha": mha["attention_scores_and_pv"],
                                    "attention_flops_mqa": mqa["attention_scores_and_pv"],
                                    "kv_cache_ratio": 8})


@pytest.mark.claim("gqa.mla-vs-mqa")
def test_mla_cache_is_larger_than_mqa(evidence):
    # DeepSeek-V2 Table 1 per token and layer: MHA 2 n_h d_h, GQA 2 n_g d_h, MQA 2 d_h, MLA d_c + d_h^R,
    # with d_c = 4 d_h and d_h^R = d_h / 2 (§2.1.4), i.e. 4.5 d_h
    d_h, n_h = 128, 128
    table = {"MHA": 2 * n_h * d_h, "MQA": 2 * d_h, "MLA": 4 * d_h + d_h // 2}
    assert table["MLA"] / table["MQA"] == 2.25 and table["MLA"] / table["MHA"] < 0.02
    v2 = K.preset("deepseek-v2")
    assert K.elements_per_token_per_layer(v2) == table["MLA"] == 576
    # measured on two small decoders with the same ratios: cache tensors of MLA vs MQA vs MHA
    d = 16
    mla = ModelConfig("mla", 2, 64, 8, 8, 24, 96, 97, attention="mla", kv_lora_rank=4 * d,
                      qk_rope_head_dim=d // 2, qk_nope_head_dim=d, v_head_dim=d)
    sizes = {}
    for name, cfg in (("MLA", mla), ("MQA", ModelConfig("mqa", 2, 64, 8, 1, d, 96, 97)),
                      ("MHA", ModelConfig("mha", 2, 64, 8, 8, d, 96, 97))):
        model = TinyDecoder(cfg)
        cache = model.new_cache(2, 11, "bf16")
        model(torch.zeros(2, 11, dtype=torch.long), cache, 0)
        sizes[name] = cache.nbytes()
    assert sizes["MLA"] == 2.25 * sizes["MQA"] and sizes["MHA"] == 8 * sizes["MQA"]
    evidence.quote("MLA cache over MQA cache, measured on the decoders", 2.25, sizes["MLA"] / sizes["MQA"], digits=2)
    lite = K.preset("deepseek-v2-lite")
    evidence.update(elements_per_token_layer_deepseek_v2=table, measured_bytes=sizes,
                    deepseek_v2_lite_bytes_per_token_bf16=K.bytes_per_token(lite),
                    counterexample={"MLA_over_MQA": table["MLA"] / table["MQA"], "MLA_over_MHA": round(table["MLA"] / table["MHA"], 4)})
