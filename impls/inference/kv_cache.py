"""KV-cache size from a model config (no torch; ``mianjing kv`` uses it).

Elements cached per token and layer (DeepSeek-V2, arXiv 2405.04434, Table 1):

    MHA  2·n_h·d_h        GQA  2·n_g·d_h        MQA  2·d_h        MLA  (d_c + d_h^R)

and the cache of a batch is

    bytes = n_layers · elements_per_token_per_layer · seq_len · batch · bytes_per_element.

For GQA this is the familiar 2 · n_layers · n_kv_heads · head_dim · seq · batch · bytes. MLA caches the
compressed latent c_KV (d_c = ``kv_lora_rank``) and one decoupled RoPE key shared by all heads
(d_h^R = ``qk_rope_head_dim``).

Presets are transcribed from each model's published ``config.json`` (URL in ``source``); the tests check
the calculator against the cache tensors a decoder built from the same config really allocates.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a decoder-only transformer as far as attention, the KV cache and FLOPs need it."""

    name: str
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_embeddings: bool = False
    attention: str = "gqa"          # gqa (MHA/GQA/MQA by n_kv_heads) | mla
    kv_lora_rank: int = 0           # MLA d_c
    qk_rope_head_dim: int = 0       # MLA d_h^R
    qk_nope_head_dim: int = 0       # MLA per-head key dimension without RoPE
    v_head_dim: int = 0             # MLA per-head value dimension
    source: str = ""

    def __post_init__(self) -> None:
        if self.attention not in ("gqa", "mla"):
            raise ValueError(f"attention must be 'gqa' or 'mla', not {self.attention!r}")
        if self.attention == "gqa" and self.n_heads % self.n_kv_heads:
            raise ValueError(f"{self.name}: {self.n_heads} query heads cannot be split into {self.n_kv_heads} groups")

    @property
    def kind(self) -> str:
        if self.attention == "mla":
            return "MLA"
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else f"GQA-{self.n_kv_heads}"


def _gqa(name, layers, hidden, heads, kv, inter, vocab, source, head_dim=None, tie=False) -> ModelConfig:
    return ModelConfig(name, layers, hidden, heads, kv, head_dim or hidden // heads, inter, vocab, tie, source=source)


HF = "https://huggingface.co/"
PRESETS: dict[str, ModelConfig] = {c.name: c for c in [
    _gqa("llama-2-7b", 32, 4096, 32, 32, 11008, 32000, HF + "meta-llama/Llama-2-7b-hf/blob/main/config.json"),
    _gqa("llama-2-13b", 40, 5120, 40, 40, 13824, 32000, HF + "meta-llama/Llama-2-13b-hf/blob/main/config.json"),
    _gqa("llama-2-70b", 80, 8192, 64, 8, 28672, 32000, HF + "meta-llama/Llama-2-70b-hf/blob/main/config.json"),
    _gqa("llama-3-8b", 32, 4096, 32, 8, 14336, 128256, HF + "meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
    _gqa("llama-3-70b", 80, 8192, 64, 8, 28672, 128256, HF + "meta-llama/Meta-Llama-3-70B/blob/main/config.json"),
    _gqa("llama-3.1-8b", 32, 4096, 32, 8, 14336, 128256, HF + "meta-llama/Llama-3.1-8B/blob/main/config.json"),
    _gqa("llama-3.1-70b", 80, 8192, 64, 8, 28672, 128256, HF + "meta-llama/Llama-3.1-70B/blob/main/config.json"),
    _gqa("qwen2.5-7b", 28, 3584, 28, 4, 18944, 152064, HF + "Qwen/Qwen2.5-7B/blob/main/config.json"),
    _gqa("qwen-14b", 40, 5120, 40, 40, 13696, 152064, HF + "Qwen/Qwen-14B/blob/main/config.json"),
    ModelConfig("deepseek-v2-lite", 27, 2048, 16, 16, 192, 10944, 102400, attention="mla", kv_lora_rank=512,
                qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                source=HF + "deepseek-ai/DeepSeek-V2-Lite/blob/main/config.json"),
    ModelConfig("deepseek-v2", 60, 5120, 128, 128, 192, 12288, 102400, attention="mla", kv_lora_rank=512,
                qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                source=HF + "deepseek-ai/DeepSeek-V2/blob/main/config.json"),
]}
# Qwen-14B's config.json gives intermediate_size 27392 for the fused gate+up projection (2 × 13696).


def preset(name: str) -> ModelConfig:
    """Look up a preset by name (case-insensitive); KeyError names the known ones."""
    key = name.strip().lower()
    if key not in PRESETS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(PRESETS)}")
    return PRESETS[key]


def elements_per_token_per_layer(cfg: ModelConfig) -> int:
    """Cached elements for one token in one layer (DeepSeek-V2 Table 1)."""
    if cfg.attention == "mla":
        return cfg.kv_lora_rank + cfg.qk_rope_head_dim
    return 2 * cfg.n_kv_heads * cfg.head_dim


def kv_cache_bytes(cfg: ModelConfig, seq_len: int, batch: int = 1, dtype: str = "bf16") -> int:
    """n_layers · elements_per_token_per_layer · seq_len · batch · bytes_per_element."""
    if seq_len < 0 or batch < 0:
        raise ValueError("seq_len and batch must be non-negative")
    return cfg.n_layers * elements_per_token_per_layer(cfg) * seq_len * batch * DTYPE_BYTES[dtype]


def kv_heads_per_gpu(cfg: ModelConfig, tp: int) -> int:
    """KV heads each of ``tp`` tensor-parallel ranks caches: n_kv / tp while tp <= n_kv; beyond that every
    rank still needs the one KV head its query heads read, so heads are replicated (vLLM's
    ``max(1, n_kv // tp)``). MLA's latent has no heads and is replicated whole on every rank."""
    if tp < 1 or cfg.n_heads % tp:
        raise ValueError(f"{cfg.name}: {cfg.n_heads} query heads cannot be split over {tp} ranks")
    if cfg.attention == "mla":
        return 1
    if cfg.n_kv_heads % tp and tp % cfg.n_kv_heads:
        raise ValueError(f"{cfg.name}: {cfg.n_kv_heads} KV heads cannot be split or replicated over {tp} ranks")
    return max(1, cfg.n_kv_heads // tp)


def kv_cache_bytes_per_gpu(cfg: ModelConfig, seq_len: int, batch: int = 1, dtype: str = "bf16", tp: int = 1) -> int:
    """The cache one tensor-parallel rank holds: its KV heads (``kv_heads_per_gpu``), or the whole MLA latent."""
    if cfg.attention == "mla":
        return kv_cache_bytes(cfg, seq_len, batch, dtype)
    return kv_cache_bytes(replace(cfg, n_kv_heads=kv_heads_per_gpu(cfg, tp)), seq_len, batch, dtype)


def bytes_per_token(cfg: ModelConfig, dtype: str = "bf16") -> int:
    return kv_cache_bytes(cfg, 1, 1, dtype)


def with_kv_heads(cfg: ModelConfig, n_kv_heads: int) -> ModelConfig:
    """The same model with ``n_kv_heads`` K/V heads (n_heads = MHA, 1 = MQA)."""
    return replace(cfg, name=f"{cfg.name} ({n_kv_heads} KV heads)", n_kv_heads=n_kv_heads, attention="gqa")


def mha_equivalent(cfg: ModelConfig) -> ModelConfig:
    """What an MLA model would cache with ordinary per-head keys and values: n_h·(d_nope + d_rope + d_v)
    elements per token and layer. Encoded as a GQA config whose 2·n_kv·head_dim has that value."""
    if cfg.attention != "mla":
        return with_kv_heads(cfg, cfg.n_heads)
    per_head = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim + cfg.v_head_dim
    return replace(cfg, name=f"{cfg.name} (MHA)", attention="gqa", n_kv_heads=cfg.n_heads, head_dim=per_head // 2)


def variants(cfg: ModelConfig) -> list[tuple[str, ModelConfig]]:
    """The model as configured, then its MHA and MQA (and for GQA models nothing else) counterparts."""
    rows = [(f"{cfg.kind} (configured)", cfg)]
    if cfg.attention == "mla":
        rows.append((f"MHA, {cfg.n_heads} × (K {cfg.qk_nope_head_dim + cfg.qk_rope_head_dim} + V {cfg.v_head_dim})",
                     mha_equivalent(cfg)))
        return rows
    if cfg.n_kv_heads != cfg.n_heads:
        rows.append((f"MHA, {cfg.n_heads} KV heads", with_kv_heads(cfg, cfg.n_heads)))
    if cfg.n_kv_heads != 1:
        rows.append(("MQA, 1 KV head", with_kv_heads(cfg, 1)))
    return rows


def parameter_count(cfg: ModelConfig) -> int:
    """Parameters of a Llama-style dense decoder: attention (q, k, v, o), SwiGLU MLP (3·h·ffn), two RMSNorm
    vectors per layer, a final norm, the embedding and (unless tied) the output head. Dense GQA models only."""
    if cfg.attention != "gqa":
        raise ValueError("parameter_count covers dense GQA decoders only")
    h, hd = cfg.hidden_size, cfg.head_dim
    attn = h * cfg.n_heads * hd * 2 + h * cfg.n_kv_heads * hd * 2
    mlp = 3 * h * cfg.intermediate_size
    per_layer = attn + mlp + 2 * h
    emb = cfg.vocab_size * h * (1 if cfg.tie_embeddings else 2)
    return cfg.n_layers * per_layer + emb + h
