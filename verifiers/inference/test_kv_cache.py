"""The KV cache: what it stores, what it saves, and how big it is for real models.

Oracles: the decoder run without a cache (full recomputation) for the values; torch's FlopCounterMode for
the work per step; the bytes of the cache tensors a decoder really allocates (on the ``meta`` device for
full-size configs, which gives exact shapes and dtypes without memory) for the calculator; the published
config.json values transcribed in ``impls/inference/kv_cache.py``.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from impls.inference import kv_cache as K
from impls.inference.tiny_decoder import TinyDecoder, tiny_config

GB, MB = 1e9, 1e6


def _incremental(model, tokens, prefill, cache_dtype="fp32"):
    cache = model.new_cache(tokens.shape[0], tokens.shape[1], cache_dtype)
    outs = [model(tokens[:, :prefill], cache, 0)]
    for t in range(prefill, tokens.shape[1]):
        outs.append(model(tokens[:, t:t + 1], cache, t))
    return torch.cat(outs, 1), cache


@pytest.mark.claim("kv.only-k-v-reused")
@pytest.mark.parametrize("cfg", [tiny_config(8), tiny_config(2), tiny_config(1), tiny_config(attention="mla")],
                         ids=lambda c: c.name)
def test_cached_decoding_needs_only_past_k_and_v(cfg, device, evidence):
    model = TinyDecoder(cfg).to(device)
    tokens = torch.randint(0, cfg.vocab_size, (3, 14), generator=torch.Generator().manual_seed(1)).to(device)
    query_rows = []
    hooks = [blk.attn.wq.register_forward_hook(lambda m, i, o: query_rows.append(i[0].shape[1]))
             for blk in model.blocks]
    full = model(tokens)
    query_rows.clear()
    inc, cache = _incremental(model, tokens, prefill=5)
    for h in hooks:
        h.remove()
    assert torch.allclose(inc, full, atol=2e-5, rtol=1e-5)
    # decode steps project a query for the new token only; past queries are never recomputed or stored
    decode_rows = query_rows[cfg.n_layers:]
    assert decode_rows == [1] * (cfg.n_layers * 9)
    names = {n for layer in cache.layers for n in layer}
    assert names == ({"c_kv", "k_rope"} if cfg.attention == "mla" else {"k", "v"})
    evidence[cfg.name] = {"max_abs_diff_vs_full_recompute": (inc - full).abs().max().item(),
                          "cached_tensors": sorted(names)}


def _step_flops(model, n: int, cached: bool) -> int:
    tokens = torch.randint(0, model.cfg.vocab_size, (1, n), generator=torch.Generator().manual_seed(0))
    if cached:
        cache = model.new_cache(1, n, "fp32")
        model(tokens[:, : n - 1], cache, 0)
        with FlopCounterMode(display=False) as fc:
            model(tokens[:, n - 1:], cache, n - 1)
    else:
        with FlopCounterMode(display=False) as fc:
            model(tokens)
    return fc.get_total_flops()


@pytest.mark.claim("kv.per-token-linear")
def test_work_per_new_token_linear_with_cache_quadratic_without(evidence):
    model = TinyDecoder(tiny_config(2))
    lengths = [16, 32, 48, 64, 80]
    with_cache = [_step_flops(model, n, True) for n in lengths]
    without = [_step_flops(model, n, False) for n in lengths]
    d1 = [b - a for a, b in zip(with_cache, with_cache[1:])]
    assert len(set(d1)) == 1 and d1[0] > 0                    # exactly linear in n (attention over n keys)
    d2 = [b - a for a, b in zip(without, without[1:])]
    dd2 = [b - a for a, b in zip(d2, d2[1:])]
    assert len(set(dd2)) == 1 and dd2[0] > 0                  # exactly quadratic: every query against every key
    # exactly the attention term: per_pair·n² FLOPs for full recompute (second difference 2·per_pair·h²),
    # per_pair·n for the cached step (first difference per_pair·h), h = 16
    cfg = model.cfg
    per_pair = 4 * cfg.n_layers * cfg.n_heads * cfg.head_dim  # QKᵀ and PV FLOPs per (query, key) pair
    assert dd2[0] == 2 * per_pair * 16 * 16 and d1[0] == per_pair * 16
    evidence.update(lengths=lengths, flops_cached_step=with_cache, flops_full_recompute=without)


@pytest.mark.claim("kv.formula")
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp8"])
def test_formula_equals_the_cache_tensors(dtype, device, evidence):
    rows = {}
    for cfg in (tiny_config(8), tiny_config(2), tiny_config(1), tiny_config(attention="mla", n_layers=3)):
        model = TinyDecoder(cfg).to(device)
        for seq, batch in ((7, 1), (19, 3)):
            cache = model.new_cache(batch, seq, dtype)
            model(torch.zeros(batch, seq, dtype=torch.long, device=device), cache, 0)
            assert cache.nbytes() == K.kv_cache_bytes(cfg, seq, batch, dtype)
            rows[f"{cfg.name} seq={seq} batch={batch}"] = cache.nbytes()
    for name in ("llama-2-7b", "llama-3-8b", "qwen2.5-7b", "deepseek-v2-lite"):
        cfg = K.preset(name)
        model = TinyDecoder(cfg, seed=None, device="meta")
        cache = model.new_cache(2, 4096, dtype)
        if dtype == "bf16":      # the full-size forward writes into the cache (its shapes fit); once is enough
            model(torch.zeros(2, 4096, dtype=torch.long, device="meta"), cache, 0)
        assert cache.nbytes() == K.kv_cache_bytes(cfg, 4096, 2, dtype)
        gqa_form = 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4096 * 2 * K.DTYPE_BYTES[dtype]
        assert (cache.nbytes() == gqa_form) == (cfg.attention == "gqa")     # the textbook formula, GQA only
        rows[f"{name} seq=4096 batch=2 (meta)"] = cache.nbytes()
    evidence[dtype] = rows
    if dtype == "bf16":          # MLA: d_c + d_h^R per token and layer, no factor 2, no heads
        lite = K.preset("deepseek-v2-lite")
        textbook = 2 * lite.n_layers * lite.n_kv_heads * lite.head_dim * K.DTYPE_BYTES[dtype]
        real = K.bytes_per_token(lite, dtype)
        assert real == lite.n_layers * (lite.kv_lora_rank + lite.qk_rope_head_dim) * 2
        evidence.quote("DeepSeek-V2-Lite KiB per token, real", quoted=30.4, measured=real / 1024, digits=1)
        evidence.quote("DeepSeek-V2-Lite KiB per token, textbook formula with 16 heads of 192", quoted=324,
                       measured=textbook / 1024, digits=0)
        evidence.update(counterexample={"model": "deepseek-v2-lite (MLA)", "textbook_bytes_per_token": textbook,
                                        "allocated_bytes_per_token": real})


def _per_token(name: str, dtype: str = "bf16") -> int:
    return K.bytes_per_token(K.preset(name), dtype)


@pytest.mark.claim("kv.llama2-13b-1mb")
def test_llama2_13b_per_token(evidence):
    b = _per_token("llama-2-13b")
    assert b == 2 * 40 * 40 * 128 * 2 == 819_200                           # 800 KiB
    evidence.quote("MB of KV cache per token", quoted=1, measured=b / MB, digits=0)
    evidence.update(bytes_per_token=b, mib=b / 2**20)


@pytest.mark.claim("kv.7b-10k-5gb")
def test_seven_b_ten_k_tokens(evidence):
    sizes = {n: K.kv_cache_bytes(K.preset(n), 10_000) / GB for n in ("llama-2-7b", "llama-3-8b", "qwen2.5-7b")}
    evidence.quote("GB for a 7B (MHA) model at 10k tokens", quoted=5, measured=sizes["llama-2-7b"], digits=0)
    assert sizes["llama-3-8b"] < 1.5 and sizes["qwen2.5-7b"] < 0.6                # GQA models: 4x and 9x less
    evidence.quote("Llama-2-7B (MHA) at 10k tokens, GB", quoted=5.24, measured=sizes["llama-2-7b"], digits=2)
    evidence.quote("Llama-3-8B (8 KV heads) at 10k tokens, GB", quoted=1.31, measured=sizes["llama-3-8b"], digits=2)
    evidence.quote("Qwen2.5-7B (4 KV heads) at 10k tokens, GB", quoted=0.57, measured=sizes["qwen2.5-7b"], digits=2)
    evidence.update(gb_at_10k_tokens={k: round(v, 3) for k, v in sizes.items()},
                    counterexample={"model": "qwen2.5-7b (GQA, 4 KV heads)", "gb": round(sizes["qwen2.5-7b"], 3)})


@pytest.mark.claim("kv.hidden-size-formula")
def test_hidden_size_formula_misses_layers_and_kv_heads(evidence):
    def quoted_formula(max_len, batch, hidden, dtype_bytes):
        return max_len * batch * hidden * 2 * dtype_bytes

    as_quoted = quoted_formula(2048, 4, 12288, 1)
    evidence.quote("GB by the quoted formula with hidden 12288", quoted=0.2, measured=as_quoted / GB, digits=1)
    qwen = K.preset("qwen-14b")
    real = K.kv_cache_bytes(qwen, 2048, 4, "fp8")
    assert real == 2 * 40 * 40 * 128 * 2048 * 4                          # 40 layers, 40 KV heads of 128
    assert qwen.hidden_size == 5120 and real / as_quoted > 16
    evidence.quote("Qwen-14B real cache, GB", quoted=3.36, measured=real / GB, digits=2)
    evidence.quote("real over the quoted formula (x)", quoted=16.7, measured=real / as_quoted, digits=1)
    llama = K.preset("llama-3-8b")                                       # GQA: hidden_size overstates per layer
    per_layer = K.kv_cache_bytes(llama, 2048, 4, "fp8") / llama.n_layers
    assert per_layer * 4 == quoted_formula(2048, 4, llama.hidden_size, 1)
    evidence.update(quoted_formula_gb=round(as_quoted / GB, 3), qwen14b_real_gb=round(real / GB, 3),
                    counterexample={"model": "Qwen-14B (hidden 5120, 40 layers, MHA)", "seq": 2048, "batch": 4,
                                    "dtype": "int8/fp8", "formula_gb": round(as_quoted / GB, 3),
                                    "real_gb": round(real / GB, 3)})


@pytest.mark.claim("kv.llama2-70b-320kb")
def test_llama2_70b_gqa_and_mha(evidence):
    gqa = _per_token("llama-2-70b")
    mha = K.bytes_per_token(K.with_kv_heads(K.preset("llama-2-70b"), 64))
    evidence.quote("KB (KiB) per token, GQA-8", quoted=320, measured=gqa / 1024, digits=0)
    evidence.quote("GB for 8K tokens, the statement's approximate figure", quoted=2.6, measured=gqa * 8192 / GB, rel=0.05)
    evidence.quote("GB for 8K tokens", quoted=2.68, measured=gqa * 8192 / GB, digits=2)
    evidence.quote("GB for 8K tokens, one decimal", quoted=2.7, measured=gqa * 8192 / GB, digits=1)
    evidence.quote("GiB for 8K tokens", quoted=2.5, measured=gqa * 8192 / 2**30, digits=1)
    evidence.quote("MB per token with 64 KV heads", quoted=2.6, measured=mha / MB, digits=1)
    assert mha == 8 * gqa
    evidence.update(bytes_per_token_gqa=gqa, bytes_per_token_mha=mha, gb_8192_tokens=gqa * 8192 / GB,
                    gib_8192_tokens=gqa * 8192 / 2**30)


@pytest.mark.claim("kv.32k-context")
def test_32k_context_llama31(evidence):
    small = K.kv_cache_bytes(K.preset("llama-3.1-8b"), 32_768, 1, "fp16")
    big = K.kv_cache_bytes(K.preset("llama-3.1-70b"), 32_768, 1, "fp16")
    assert small == 4 * 2**30 and big == 10 * 2**30                      # exactly 4 GiB and 10 GiB
    assert 8 * GB / small > 1.8 and 40 * GB / big > 3.6
    evidence.quote("Llama-3.1-8B at 32K, GB", quoted=4.29, measured=small / GB, digits=2)
    evidence.quote("Llama-3.1-70B at 32K, GB", quoted=10.7, measured=big / GB, digits=1)
    evidence.quote("8 GB over the real 8B cache (x)", quoted=2, measured=8 * GB / small, digits=0)
    evidence.quote("40 GB over the real 70B cache (x)", quoted=4, measured=40 * GB / big, digits=0)
    evidence.update(gb={"llama-3.1-8b": round(small / GB, 2), "llama-3.1-70b": round(big / GB, 2)},
                    counterexample={"claimed_gb": {"8B": 8, "70B": 40},
                                    "real_gb": {"8B": round(small / GB, 2), "70B": round(big / GB, 2)},
                                    "overstated_by": [round(8 * GB / small, 2), round(40 * GB / big, 2)]})


def test_parameter_count_matches_published():
    # Llama-3-8B: 8,030,261,248 parameters (Hugging Face model card / safetensors index)
    assert K.parameter_count(K.preset("llama-3-8b")) == 8_030_261_248
    assert K.parameter_count(K.preset("llama-2-7b")) == 6_738_415_616


@pytest.mark.claim("kv.tensor-parallel")
def test_kv_cache_per_gpu_under_tensor_parallelism(evidence):
    """The oracle is the GQA head mapping itself: rank r owns query heads [r·H/tp, (r+1)·H/tp) and must cache
    every KV head ⌊h/G⌋ those heads read."""
    rows = {}
    for name in ("llama-3.1-70b", "llama-2-7b", "qwen2.5-7b"):
        cfg = K.preset(name)
        g = cfg.n_heads // cfg.n_kv_heads
        for tp in (1, 2, 4, 8, 16, 32, 64):
            if cfg.n_heads % tp or (cfg.n_kv_heads % tp and tp % cfg.n_kv_heads):
                continue
            per = cfg.n_heads // tp
            needed = max(len({h // g for h in range(r * per, (r + 1) * per)}) for r in range(tp))
            assert K.kv_heads_per_gpu(cfg, tp) == needed
            rows[f"{name} tp={tp}"] = needed
    big = K.preset("llama-3.1-70b")
    at8, at16 = (K.kv_cache_bytes_per_gpu(big, 32_768, 1, "bf16", tp) for tp in (8, 16))
    assert at16 == at8 == K.kv_cache_bytes(big, 32_768) / 8                   # no saving past 8 ranks
    evidence.quote("Llama-3.1-70B per-GPU cache at TP=16 over total/16 (x)", quoted=2,
                   measured=at16 / (K.kv_cache_bytes(big, 32_768) / 16), digits=0)
    lite = K.preset("deepseek-v2-lite")
    assert K.kv_cache_bytes_per_gpu(lite, 4096, 1, "bf16", 8) == K.kv_cache_bytes(lite, 4096)   # MLA: whole latent
    with pytest.raises(ValueError):
        K.kv_heads_per_gpu(K.preset("qwen2.5-7b"), 8)                        # 4 KV heads, 28 query heads
    evidence.update(kv_heads_per_gpu=rows, llama31_70b_32k_gib_per_gpu={"tp=8": at8 / 2**30, "tp=16": at16 / 2**30})
