"""Decoder shapes and their closed-form parameter and FLOP counts, without torch (``mianjing train-cost`` uses it).

``Arch`` holds the block's switches (the 2017 Transformer, GPT-3, LLaMA, Qwen2, Qwen3), ``Decoder`` a model's
shape; ``impls/ml/transformer.py`` builds the ``nn.Module`` from the same objects, and the verifiers check
``param_counts(cfg)["total"]`` against its ``sum(p.numel())`` and the FLOP counts against
``torch.utils.flop_counter.FlopCounterMode``.

Per layer, with d the width, H query heads, H_kv key/value heads of size d_h and f the MLP width:

    attention  d·H·d_h (q) + 2·d·H_kv·d_h (k, v) + H·d_h·d (o)    [+ biases H·d_h + 2·H_kv·d_h (+ d for o)]
    MLP        SwiGLU 3·d·f (gate, up, down)  |  ReLU/GELU 2·d·f  [+ biases 2f + d (SwiGLU) or f + d]
    norms      2·d (RMSNorm / LayerNorm weight) [+ 2·d LayerNorm bias]      QK-norm: 2·d_h

plus the token embedding V·d, the output head V·d unless tied, a final norm (pre-norm only) and a learned
position table (``context`` rows).

Training FLOPs (PaLM, Chowdhery et al. 2022, Appendix B): per token 6·N_mm + 12·L·H·d_h·T, where N_mm are the
weights of every matrix multiply (all linear layers and the head; the embedding is a lookup) and T the sequence
length: QKᵀ and PV cost 2·T·d_h each per head per token forward, backward twice that, causal or not (the model
FLOPs convention counts the full T×T). ``flops_per_token`` returns both terms; ``hardware_flops_per_token``
adds what activation recomputation replays (Korthikanti et al. 2022: selective = the attention core,
full = the whole layer forward), which HFU counts and MFU does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from impls.inference.kv_cache import PRESETS as KV_PRESETS


@dataclass(frozen=True)
class Arch:
    norm: str = "rmsnorm"          # rmsnorm | layernorm
    norm_position: str = "pre"     # pre | post
    mlp: str = "swiglu"            # swiglu | relu | gelu
    bias: bool = False             # biases in every linear layer and in LayerNorm
    qkv_bias: bool = False         # biases on the q, k, v projections only (Qwen1/2)
    qk_norm: bool = False          # RMSNorm over each head of q and k before RoPE (Qwen3)
    positions: str = "rope"        # rope | learned | sinusoidal
    rope_base: float = 10000.0

    def __post_init__(self) -> None:
        for name, value, allowed in (("norm", self.norm, ("rmsnorm", "layernorm")),
                                     ("norm_position", self.norm_position, ("pre", "post")),
                                     ("mlp", self.mlp, ("swiglu", "relu", "gelu")),
                                     ("positions", self.positions, ("rope", "learned", "sinusoidal"))):
            if value not in allowed:
                raise ValueError(f"Arch.{name} must be one of {allowed}, not {value!r}")


ARCHS: dict[str, Arch] = {
    # Vaswani et al. 2017: post-LN, ReLU MLP of 4d, biases everywhere, sinusoidal positions
    "transformer": Arch("layernorm", "post", "relu", bias=True, positions="sinusoidal"),
    # Brown et al. 2020 (GPT-2/3 style): pre-LN with bias, GELU MLP of 4d, learned positions, tied head
    "gpt3": Arch("layernorm", "pre", "gelu", bias=True, positions="learned"),
    # Touvron et al. 2023: pre-RMSNorm, SwiGLU, no biases, RoPE (GQA is a shape: kv_heads < heads)
    "llama": Arch(),
    # Qwen2: the LLaMA block plus biases on q, k, v
    "qwen2": Arch(qkv_bias=True, rope_base=1e6),
    # Qwen3: no q/k/v bias, RMSNorm on each head of q and k
    "qwen3": Arch(qk_norm=True, rope_base=1e6),
}


@dataclass(frozen=True)
class Decoder:
    name: str
    layers: int
    d: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tie: bool = False
    arch: Arch = field(default_factory=Arch)
    context: int = 4096            # pretraining sequence length (FLOPs' attention term); learned table size
    source: str = ""

    def __post_init__(self) -> None:
        if self.heads % self.kv_heads:
            raise ValueError(f"{self.name}: {self.heads} query heads cannot share {self.kv_heads} K/V heads")


def _from_kv(name: str, arch: str, context: int, source_note: str = "") -> Decoder:
    c = KV_PRESETS[name]
    return Decoder(name, c.n_layers, c.hidden_size, c.n_heads, c.n_kv_heads, c.head_dim, c.intermediate_size,
                   c.vocab_size, c.tie_embeddings, ARCHS[arch], context, c.source + source_note)


HF = "https://huggingface.co/"
# Shapes of the Llama/Qwen presets come from impls/inference/kv_cache.py (transcribed from each config.json);
# context = the pretraining sequence length of the paper (Llama 2 Table 1: 4k; Llama 3 §3.4.1: 8K;
# Qwen2.5 and Qwen3 reports: 4,096 in the first pretraining stage).
MODELS: dict[str, Decoder] = {m.name: m for m in [
    _from_kv("llama-2-7b", "llama", 4096),
    _from_kv("llama-2-13b", "llama", 4096),
    _from_kv("llama-2-70b", "llama", 4096),
    _from_kv("llama-3-8b", "llama", 8192),
    _from_kv("llama-3.1-8b", "llama", 8192),
    _from_kv("llama-3.1-70b", "llama", 8192),
    replace(_from_kv("llama-3.1-70b", "llama", 8192), name="llama-3-70b",
            source=HF + "meta-llama/Meta-Llama-3-70B/blob/main/config.json (the shape of Llama 3.1 70B)"),
    _from_kv("qwen2.5-7b", "qwen2", 4096),
    Decoder("llama-3.1-405b", 126, 16384, 128, 8, 128, 53248, 128256, False, ARCHS["llama"], 8192,
            HF + "meta-llama/Llama-3.1-405B/blob/main/config.json"),
    Decoder("qwen3-8b", 36, 4096, 32, 8, 128, 12288, 151936, False, ARCHS["qwen3"], 4096,
            HF + "Qwen/Qwen3-8B/blob/main/config.json"),
    Decoder("gpt-3-175b", 96, 12288, 96, 96, 128, 4 * 12288, 50257, True, ARCHS["gpt3"], 2048,
            "Brown et al. 2020, Table 2.1 (n_layers 96, d_model 12288, 96 heads of 128); vocabulary of GPT-2"),
]}


def model(name: str) -> Decoder:
    """A preset by name (case-insensitive); KeyError names the known ones."""
    key = name.strip().lower()
    if key not in MODELS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    return MODELS[key]


def scaled_down(cfg: Decoder, d: int = 64, head_dim: int = 16, ffn: int | None = None, layers: int = 2,
                vocab: int = 97, context: int = 32) -> Decoder:
    """The same architecture and head grouping at a size a CPU runs in milliseconds."""
    group = cfg.heads // cfg.kv_heads
    kv = max(1, d // head_dim // group)
    f = ffn or max(8, round(cfg.ffn / cfg.d * d))
    return replace(cfg, name=f"{cfg.name} (scaled down)", layers=layers, d=d, heads=kv * group, kv_heads=kv,
                   head_dim=head_dim, ffn=f, vocab=vocab, context=context)


# ------------------------------------------------------------------------------------ counting
def param_counts(cfg: Decoder) -> dict[str, int]:
    """Closed-form parameter counts by part; ``total`` equals ``sum(p.numel())`` of ``build(cfg)``."""
    a, d, hd, f = cfg.arch, cfg.d, cfg.head_dim, cfg.ffn
    q, kv = cfg.heads * hd, cfg.kv_heads * hd
    attn = d * q + 2 * d * kv + q * d
    if a.bias:
        attn += q + 2 * kv + d
    elif a.qkv_bias:
        attn += q + 2 * kv
    if a.qk_norm:
        attn += 2 * hd
    mats = 3 if a.mlp == "swiglu" else 2
    mlp = mats * d * f + ((mats - 1) * f + d if a.bias else 0)
    ln_bias = a.norm == "layernorm" and a.bias
    norm = d * (2 if ln_bias else 1)
    layer = attn + mlp + 2 * norm
    emb = cfg.vocab * d
    head = 0 if cfg.tie else cfg.vocab * d
    final = norm if a.norm_position == "pre" else 0
    pos = cfg.context * d if a.positions == "learned" else 0
    total = emb + pos + cfg.layers * layer + final + head
    return {"embedding": emb, "positions": pos, "lm_head": head, "attention_per_layer": attn, "mlp_per_layer": mlp,
            "norms_per_layer": 2 * norm, "layer": layer, "final_norm": final, "total": total,
            "non_embedding": total - emb - pos - head, "matmul": matmul_params(cfg)}


def matmul_params(cfg: Decoder) -> int:
    """Weights one token multiplies by: every linear layer's weight and the output head (no biases, norms,
    embedding lookup): the N of 6·N·D."""
    d, hd = cfg.d, cfg.head_dim
    q, kv = cfg.heads * hd, cfg.kv_heads * hd
    mats = 3 if cfg.arch.mlp == "swiglu" else 2
    return cfg.layers * (d * q + 2 * d * kv + q * d + mats * d * cfg.ffn) + cfg.vocab * d


def flops_per_token(cfg: Decoder, seq: int | None = None) -> dict[str, float]:
    """Training FLOPs per token (forward + backward): 6·N_mm and the attention term 12·L·H·d_h·T."""
    t = cfg.context if seq is None else seq
    dense = 6 * matmul_params(cfg)
    attention = 12 * cfg.layers * cfg.heads * cfg.head_dim * t
    return {"dense": dense, "attention": attention, "total": dense + attention}


def hardware_flops_per_token(cfg: Decoder, seq: int | None = None, recompute: str = "none") -> float:
    """FLOPs the hardware executes per token: the model FLOPs plus the recomputed forward
    (selective: the attention core 4·L·H·d_h·T; full: every layer's forward, 2·N_layers + 4·L·H·d_h·T)."""
    t = cfg.context if seq is None else seq
    model_flops = flops_per_token(cfg, t)["total"]
    core = 4 * cfg.layers * cfg.heads * cfg.head_dim * t
    if recompute == "none":
        return model_flops
    if recompute == "selective":
        return model_flops + core
    if recompute == "full":
        return model_flops + 2 * (matmul_params(cfg) - cfg.vocab * cfg.d) + core
    raise ValueError(f"recompute must be none, selective or full, not {recompute!r}")
