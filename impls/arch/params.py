"""Total and per-token (active) parameters of an MoE model, from its published ``config.json``.

``configs/mixtral-8x7b.json`` and ``configs/deepseek-v3.json`` hold the fields of the Hugging Face
configs of mistralai/Mixtral-8x7B-v0.1 and deepseek-ai/DeepSeek-V3 that fix the parameter count,
with their published values.

Counts are by module, named as in the Hugging Face implementations:

* Mixtral: per layer q/k/v/o projections (grouped-query: k and v have ``num_key_value_heads``
  heads), a router ``gate`` [E, h], E SwiGLU experts of 3·h·I each, two RMSNorms; plus the token
  embedding, the final norm and an untied ``lm_head``. A token uses top-k experts, every
  attention weight, the router, the norms and the head.
* DeepSeek-V3: multi-head latent attention (q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa,
  kv_a_layernorm, kv_b_proj, o_proj), the first ``first_k_dense_replace`` layers with a dense
  SwiGLU MLP, the others with 256 routed experts + 1 shared expert and a router with a
  per-expert score-correction bias; one multi-token-prediction (MTP) module (enorm, hnorm,
  eh_proj, one more MoE layer, shared_head.norm) whose embedding and head are the main model's.

"Active" counts the weights one token's forward multiplies by; the input embedding is a table
lookup, so it is reported both ways. ``skeleton(cfg)`` builds the same module tree on the meta
device (no memory), so ``sum(p.numel())`` checks the arithmetic.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

CONFIGS = Path(__file__).with_name("configs")


def load_config(name: str) -> dict:
    """``mixtral-8x7b`` or ``deepseek-v3``."""
    return json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8"))


def _swiglu(h: int, inter: int) -> int:
    return 3 * h * inter  # gate_proj, up_proj, down_proj (w1, w3, w2)


def mixtral_counts(cfg: dict) -> dict[str, int]:
    h, layers, vocab = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim") or h // heads
    e, k = cfg["num_local_experts"], cfg["num_experts_per_tok"]
    attn = h * heads * d + 2 * h * kv * d + heads * d * h
    expert = _swiglu(h, cfg["intermediate_size"])
    router, norms = e * h, 2 * h
    emb = vocab * h
    head = 0 if cfg.get("tie_word_embeddings") else vocab * h
    shared = layers * (attn + router + norms) + h + head
    return {
        "embedding": emb, "lm_head": head, "attention_per_layer": attn, "expert": expert,
        "total": emb + shared + layers * e * expert,
        "active": emb + shared + layers * k * expert,
        "active_without_embedding": shared + layers * k * expert,
    }


def _mla(cfg: dict) -> int:
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    qr, kvr = cfg["q_lora_rank"], cfg["kv_lora_rank"]
    nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    return (h * qr + qr + qr * heads * (nope + rope)          # q_a_proj, q_a_layernorm, q_b_proj
            + h * (kvr + rope) + kvr + kvr * heads * (nope + vd)  # kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj
            + heads * vd * h)                                  # o_proj


def deepseek_v3_counts(cfg: dict) -> dict[str, int]:
    h, layers, vocab = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    dense_layers = cfg["first_k_dense_replace"]
    e, shared_e, k = cfg["n_routed_experts"], cfg["n_shared_experts"], cfg["num_experts_per_tok"]
    attn, norms = _mla(cfg), 2 * h
    expert = _swiglu(h, cfg["moe_intermediate_size"])
    router = e * h + e                                    # gate.weight and gate.e_score_correction_bias
    dense_layer = attn + norms + _swiglu(h, cfg["intermediate_size"])
    moe_total = attn + norms + router + (e + shared_e) * expert
    moe_active = attn + norms + router + (k + shared_e) * expert
    emb = vocab * h
    head = 0 if cfg.get("tie_word_embeddings") else vocab * h
    outside = h + head                                    # final norm, lm_head
    body = dense_layers * dense_layer
    mtp_extra = 2 * h + 2 * h * h + h                    # enorm, hnorm, eh_proj, shared_head.norm
    mtp = cfg.get("num_nextn_predict_layers", 0)
    return {
        "embedding": emb, "lm_head": head, "attention_per_layer": attn, "expert": expert,
        "total": emb + outside + body + (layers - dense_layers) * moe_total,
        "active": emb + outside + body + (layers - dense_layers) * moe_active,
        "active_without_embedding": outside + body + (layers - dense_layers) * moe_active,
        "mtp_unique": mtp * (mtp_extra + moe_total),
        "mtp_active_without_embedding": mtp * (mtp_extra + moe_active) + head,
        # the checkpoint stores the MTP layer with its own copy of the embedding and the head
        "checkpoint": emb + outside + body + (layers - dense_layers) * moe_total
                      + mtp * (mtp_extra + moe_total + emb + head),
    }


COUNTERS = {"mixtral": mixtral_counts, "deepseek_v3": deepseek_v3_counts}


def counts(cfg: dict) -> dict[str, int]:
    kind = cfg["model_type"]
    if kind not in COUNTERS:
        raise ValueError(f"no parameter counter for model_type {kind!r}")
    return COUNTERS[kind](cfg)


# ------------------------------------------------------------------- module skeletons (meta)
def _lin(i: int, o: int) -> nn.Linear:
    return nn.Linear(i, o, bias=False)


class _RMSNorm(nn.Module):
    def __init__(self, h: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(h))


class _SwiGLU(nn.Module):
    def __init__(self, h: int, inter: int):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = _lin(h, inter), _lin(h, inter), _lin(inter, h)


class _Router(nn.Module):
    def __init__(self, h: int, e: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(e, h))
        if bias:
            self.e_score_correction_bias = nn.Parameter(torch.empty(e))


class _MoE(nn.Module):
    def __init__(self, h: int, inter: int, e: int, shared: int, router_bias: bool):
        super().__init__()
        self.gate = _Router(h, e, router_bias)
        self.experts = nn.ModuleList(_SwiGLU(h, inter) for _ in range(e))
        if shared:
            self.shared_experts = _SwiGLU(h, inter * shared)


class _GQA(nn.Module):
    def __init__(self, h: int, heads: int, kv: int, d: int):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj = _lin(h, heads * d), _lin(h, kv * d), _lin(h, kv * d)
        self.o_proj = _lin(heads * d, h)


class _MLA(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
        qr, kvr = cfg["q_lora_rank"], cfg["kv_lora_rank"]
        nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        self.q_a_proj, self.q_a_layernorm = _lin(h, qr), _RMSNorm(qr)
        self.q_b_proj = _lin(qr, heads * (nope + rope))
        self.kv_a_proj_with_mqa, self.kv_a_layernorm = _lin(h, kvr + rope), _RMSNorm(kvr)
        self.kv_b_proj = _lin(kvr, heads * (nope + vd))
        self.o_proj = _lin(heads * vd, h)


class _Layer(nn.Module):
    def __init__(self, attn: nn.Module, mlp: nn.Module, h: int):
        super().__init__()
        self.self_attn, self.mlp = attn, mlp
        self.input_layernorm, self.post_attention_layernorm = _RMSNorm(h), _RMSNorm(h)


def skeleton(cfg: dict) -> nn.Module:
    """The model's parameter tree on the meta device: {"main": ..., "mtp": ...} (mtp may be empty)."""
    h, vocab, n = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    with torch.device("meta"):
        main, mtp = nn.Module(), nn.Module()
        main.embed_tokens = nn.Embedding(vocab, h)
        main.norm = _RMSNorm(h)
        if not cfg.get("tie_word_embeddings"):
            main.lm_head = _lin(h, vocab)
        if cfg["model_type"] == "mixtral":
            d = cfg.get("head_dim") or h // cfg["num_attention_heads"]
            main.layers = nn.ModuleList(
                _Layer(_GQA(h, cfg["num_attention_heads"], cfg["num_key_value_heads"], d),
                       _MoE(h, cfg["intermediate_size"], cfg["num_local_experts"], 0, False), h)
                for _ in range(n))
        elif cfg["model_type"] == "deepseek_v3":
            def moe_layer() -> _Layer:
                return _Layer(_MLA(cfg), _MoE(h, cfg["moe_intermediate_size"], cfg["n_routed_experts"],
                                              cfg["n_shared_experts"], True), h)

            main.layers = nn.ModuleList(
                _Layer(_MLA(cfg), _SwiGLU(h, cfg["intermediate_size"]), h) if i < cfg["first_k_dense_replace"]
                else moe_layer() for i in range(n))
            mtp.layers = nn.ModuleList()
            for _ in range(cfg.get("num_nextn_predict_layers", 0)):
                block = moe_layer()
                block.enorm, block.hnorm, block.eh_proj = _RMSNorm(h), _RMSNorm(h), _lin(2 * h, h)
                block.shared_head = nn.Module()
                block.shared_head.norm = _RMSNorm(h)
                mtp.layers.append(block)
        else:
            raise ValueError(f"no skeleton for model_type {cfg['model_type']!r}")
        model = nn.Module()
        model.main, model.mtp = main, mtp
    return model


def numel(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
