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
from impls.inference import roofline as R
from impls.inference.tiny_decoder import GQAttention, TinyDecoder, rope, tiny_config


def _sdpa_repeated(q, k, v, causal, kpm, scale):
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    t, s = q.shape[2], k.shape[2]
    vis = torch.arange(s)[None, :] <= torch.arange(t)[:, None] + (s - t) if causal else torch.ones(t, s, dtype=torch.bool)
    vis = vis[None, None] & kpm[:, None, None, :]
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=vis, scale=scale)


@pytest.mark.claim("gqa.endpoints")
@given(b=st.integers(1, 2), h_kv=st.sampled_from([1, 2, 4]), g=st.sampled_from([1, 2, 4]), t=st.integers(1, 9),
       extra=st.integers(0, 6), d=st.sampled_from([4, 8]), causal=st.booleans(), seed=st.integers(0, 999),
       scale=st.sampled_from([None, 0.3]))
def test_one_function_mha_gqa_mqa(b, h_kv, g, t, extra, d, causal, seed, scale):
    h, s = h_kv * g, t + extra
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, t, d, generator=gen, dtype=torch.float64)
    k = torch.randn(b, h_kv, s, d, generator=gen, dtype=torch.float64)
    v = torch.randn(b, h_kv, s, d + 1, generator=gen, dtype=torch.float64)
    kpm = torch.rand(b, s, generator=gen) > 0.2
    kpm[:, 0] = True
    out = grouped_query_attention(q, k, v, causal=causal, key_padding_mask=kpm, scale=scale)
    assert torch.allclose(out, _sdpa_repeated(q, k, v, causal, kpm, scale), atol=1e-12, rtol=0)
    if h_kv == 1:   # MQA: every head against the one shared K/V, written as an einsum
        sc = torch.einsum("bhtd,bsd->bhts", q, k[:, 0]) * (d ** -0.5 if scale is None else scale)
        vis = (torch.arange(s)[None, :] <= torch.arange(t)[:, None] + (s - t)) if causal else torch.ones(t, s, dtype=torch.bool)
        sc = sc.masked_fill(~(vis[None, None] & kpm[:, None, None, :]), float("-inf"))
        mqa = torch.einsum("bhts,bse->bhte", sc.softmax(-1), v[:, 0])
        assert torch.allclose(out, mqa, atol=1e-12, rtol=0)
    if g == 1:      # MHA: plain SDPA, no repetition at all
        vis = (torch.arange(s)[None, :] <= torch.arange(t)[:, None] + (s - t)) if causal else torch.ones(t, s, dtype=torch.bool)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=vis[None, None] & kpm[:, None, None, :],
                                                               scale=scale)
        assert torch.allclose(out, ref, atol=1e-12, rtol=0)


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
    # "far below GQA" only for three or more groups: GQA with n_g groups caches 2 n_g d_h
    assert [n_g for n_g in range(1, 9) if 2 * n_g * d_h < table["MLA"]] == [1, 2]
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


def _mla_decode(model, tokens, prefill, absorbed, kpm=None):
    for blk in model.blocks:
        blk.attn.absorbed = absorbed
    cache = model.new_cache(tokens.shape[0], tokens.shape[1], "fp32")
    outs = [model(tokens[:, :prefill], cache, 0, None if kpm is None else kpm[:, :prefill])]
    for t in range(prefill, tokens.shape[1]):
        outs.append(model(tokens[:, t:t + 1], cache, t, None if kpm is None else kpm[:, : t + 1]))
    for blk in model.blocks:
        blk.attn.absorbed = False
    return torch.cat(outs, 1)


def _attention_flops_per_key(cfg, absorbed: bool) -> float:
    """FLOPs one decode step spends per extra cached key, all heads and layers (FlopCounterMode, first
    difference over the context length: everything that does not grow with the context cancels)."""
    model = TinyDecoder(cfg).double()
    for blk in model.blocks:
        blk.attn.absorbed = absorbed
    flops = []
    for ctx in (8, 16):
        tokens = torch.zeros(1, ctx + 1, dtype=torch.long)
        cache = model.new_cache(1, ctx + 1, "fp32")
        model(tokens[:, :ctx], cache, 0)
        with FlopCounterMode(display=False) as fc:
            model(tokens[:, ctx:], cache, ctx)
        flops.append(fc.get_total_flops())
    return (flops[1] - flops[0]) / 8


@pytest.mark.claim("mla.absorbed-decode")
def test_absorbed_mla_is_mqa_over_the_latent(evidence):
    cfg = tiny_config(attention="mla")
    model = TinyDecoder(cfg).double()
    tokens = torch.randint(0, cfg.vocab_size, (3, 13), generator=torch.Generator().manual_seed(4))
    kpm = torch.ones(3, 13, dtype=torch.bool)
    kpm[1, :3] = False                                                # a left-padded row
    for mask in (None, kpm):
        expanded = _mla_decode(model, tokens, 5, False, mask)
        absorbed = _mla_decode(model, tokens, 5, True, mask)
        assert torch.allclose(absorbed, expanded, atol=1e-12, rtol=0)
    d_c, d_r, d_n, d_v, h, L = (cfg.kv_lora_rank, cfg.qk_rope_head_dim, cfg.qk_nope_head_dim, cfg.v_head_dim,
                                cfg.n_heads, cfg.n_layers)
    # per extra cached key: absorbed = one shared (d_c + d_R)-wide key and d_c-wide value for every head;
    # expanded = re-expanding that key's K and V for every head, then ordinary per-head attention
    per_key_abs = _attention_flops_per_key(cfg, True)
    per_key_exp = _attention_flops_per_key(cfg, False)
    assert per_key_abs == L * h * 2 * (2 * d_c + d_r)
    assert per_key_exp == L * (2 * d_c * h * (d_n + d_v) + h * 2 * (d_n + d_r + d_v))
    # DeepSeek-V2 at decode: FLOPs per key per head against a 128-dim MHA head, and FLOPs per cached byte
    v2 = K.preset("deepseek-v2")
    per_head = 2 * (2 * v2.kv_lora_rank + v2.qk_rope_head_dim)
    vs_mha = per_head / (2 * (128 + 128))
    intensity = v2.n_heads * per_head / K.bytes_per_token(v2) * v2.n_layers      # bf16 latent, read once per step
    evidence.quote("absorbed MLA attention FLOPs per key and head over a 128-dim MHA head (x)", quoted=4.25,
                   measured=vs_mha, digits=2)
    evidence.quote("DeepSeek-V2 absorbed decode attention, FLOP per cached byte", quoted=242, measured=intensity,
                   digits=0)
    evidence.quote("... as a multiple of the number of query heads", quoted=1.9, measured=intensity / v2.n_heads,
                   digits=1)
    llama = K.preset("llama-3-8b")
    gqa_intensity = R.step_cost(llama, batch=1, new=1, context=4096).attention_intensity
    assert intensity > 50 * gqa_intensity and intensity < R.GPUS["H100-SXM"].ridge
    evidence.update(tiny_flops_per_cached_key={"absorbed": per_key_abs, "expanded": per_key_exp},
                    deepseek_v2_attention_flop_per_byte=round(intensity, 1),
                    llama3_8b_gqa_attention_flop_per_byte=round(gqa_intensity, 2),
                    h100_ridge=round(R.GPUS["H100-SXM"].ridge, 1))


@pytest.mark.claim("mla.decoupled-rope")
def test_rope_on_the_compressed_key_would_block_absorption(evidence):
    """Any absorbed score is a function of (query, c_j) alone, so it cannot tell two keys with the same
    latent apart. With RoPE applied to the compressed key W^UK c_j, the same latent at different positions
    scores differently: no position-free matrix can be folded into the query. The decoupled design keeps the
    latent's part position-free and carries position in the one shared k^R."""
    cfg = tiny_config(attention="mla")
    layer = TinyDecoder(cfg).double().blocks[0].attn
    g = torch.Generator().manual_seed(0)
    d_n, d_r = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim
    w = layer.w_ukv.weight.detach().view(cfg.n_heads, d_n + cfg.v_head_dim, cfg.kv_lora_rank)[0, :d_n]  # head 0: W^UK
    c = torch.randn(cfg.kv_lora_rank, generator=g, dtype=torch.float64)
    s = 9
    pos = torch.arange(s)
    q = torch.randn(d_n, generator=g, dtype=torch.float64)
    q_at = rope(q.expand(1, d_n), torch.tensor([s - 1]))[0]                        # the query, at the last position
    keys = w @ c                                                                    # the same latent at every j
    coupled = rope(keys.expand(s, d_n), pos) @ q_at                                 # RoPE on W^UK c_j
    absorbed = (w.T @ q).expand(s, -1) @ c                                          # (W^UKᵀ q)·c_j, the folded form
    assert torch.allclose(absorbed, absorbed[:1].expand(s), atol=0, rtol=1e-13)    # blind to position (a BLAS
    # GEMV over the expanded rows may sum them in different orders: equal to the last bits, not bit for bit)
    spread = float(coupled.max() - coupled.min())
    assert spread > 0.1 * float(coupled.abs().max())                                # the coupled scores are not
    # decoupled: position lives in the shared RoPE key only; the latent part stays foldable
    kr = torch.randn(d_r, generator=g, dtype=torch.float64)
    qr = torch.randn(d_r, generator=g, dtype=torch.float64)
    decoupled = absorbed + rope(kr.expand(s, d_r), pos) @ rope(qr.expand(1, d_r), torch.tensor([s - 1]))[0]
    assert float(decoupled.max() - decoupled.min()) > 0                            # still position-aware
    evidence.update(coupled_scores_same_latent=[round(float(x), 4) for x in coupled],
                    absorbed_scores_same_latent=[round(float(x), 4) for x in absorbed],
                    counterexample={"same latent at 9 positions": "one absorbed score, nine RoPE'd scores",
                                    "spread_of_coupled_scores": round(spread, 4)})
