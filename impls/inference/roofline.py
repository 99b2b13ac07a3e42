"""Roofline of one forward step of a dense decoder: FLOPs, HBM bytes, arithmetic intensity, time bound.

For ``batch`` sequences, each adding ``new`` tokens on top of ``context`` cached ones (prefill: context = 0,
new = prompt length; decode: new = 1), per step:

    FLOPs  = 2·P_lin·batch·new                                 (every weight matrix, multiply + add)
           + 4·n_layers·n_heads·head_dim·batch·(new·context + new(new+1)/2)   (QKᵀ and PV, causal)
    bytes  = P_lin·w                                           (weights read once per step)
           + n_layers·e_kv·batch·(context + new)·c             (KV read, new K/V written)
           + batch·new·Σ_linear (in + out)·a                   (GEMM activations in and out)

with P_lin the parameters of all matmuls (attention projections, MLP, output head; the embedding is a
lookup), e_kv the cached elements per token and layer, and w, c, a the bytes per weight, cache element and
activation. Arithmetic intensity I = FLOPs / bytes; the roofline bound is

    time ≥ max(FLOPs / peak, bytes / bandwidth),   ridge point I* = peak / bandwidth,

memory-bound when I < I*. Peak figures are dense (no 2:4 sparsity) from NVIDIA's datasheets.
"""

from __future__ import annotations

from dataclasses import dataclass

from .kv_cache import ModelConfig, elements_per_token_per_layer


@dataclass(frozen=True)
class GPU:
    name: str
    peak_flops: float          # dense BF16/FP16 tensor-core FLOP/s
    bandwidth: float           # HBM bytes/s
    memory: float              # HBM bytes
    peak_int8: float           # dense INT8 tensor-core OP/s
    source: str

    @property
    def ridge(self) -> float:
        """FLOPs per byte above which a kernel is compute-bound."""
        return self.peak_flops / self.bandwidth


NV = "https://www.nvidia.com/"
GPUS: dict[str, GPU] = {g.name: g for g in [
    # H100 SXM5: BF16 1,979 TFLOPS with sparsity (989.4 dense), INT8 3,958 TOPS with sparsity, 80 GB at 3.35 TB/s
    GPU("H100-SXM", 989.4e12, 3.35e12, 80e9, 1978.9e12, NV + "en-us/data-center/h100/ (H100 datasheet, SXM column)"),
    # H200 SXM: same compute as H100 SXM, 141 GB HBM3e at 4.8 TB/s
    GPU("H200-SXM", 989.4e12, 4.8e12, 141e9, 1978.9e12, NV + "en-us/data-center/h200/ (H200 datasheet, SXM column)"),
    # A100 SXM 80GB: BF16 312 TFLOPS (624 sparse), INT8 624 TOPS dense, 2,039 GB/s
    GPU("A100-SXM-80GB", 312e12, 2.039e12, 80e9, 624e12, NV + "en-us/data-center/a100/ (A100 datasheet, 80GB SXM)"),
    # A100 40GB: same compute, 1,555 GB/s
    GPU("A100-SXM-40GB", 312e12, 1.555e12, 40e9, 624e12, NV + "en-us/data-center/a100/ (A100 datasheet, 40GB SXM)"),
]}


def linear_shapes(cfg: ModelConfig) -> list[tuple[int, int]]:
    """(in, out) of every weight matrix one token passes through, all layers, plus the output head."""
    h, hd = cfg.hidden_size, cfg.head_dim
    layer = [(h, cfg.n_heads * hd), (h, cfg.n_kv_heads * hd), (h, cfg.n_kv_heads * hd), (cfg.n_heads * hd, h),
             (h, cfg.intermediate_size), (h, cfg.intermediate_size), (cfg.intermediate_size, h)]
    return layer * cfg.n_layers + [(h, cfg.vocab_size)]


def linear_params(cfg: ModelConfig) -> int:
    return sum(i * o for i, o in linear_shapes(cfg))


@dataclass(frozen=True)
class StepCost:
    linear_flops: int
    attention_flops: int
    weight_bytes: float
    kv_bytes: float
    activation_bytes: float

    @property
    def flops(self) -> int:
        return self.linear_flops + self.attention_flops

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes + self.activation_bytes

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def linear_intensity(self) -> float:
        """FLOPs per byte of the weight GEMMs alone (weights + their activations)."""
        return self.linear_flops / (self.weight_bytes + self.activation_bytes)

    @property
    def attention_intensity(self) -> float:
        return self.attention_flops / self.kv_bytes if self.kv_bytes else float("inf")

    def time(self, gpu: GPU) -> float:
        return max(self.flops / gpu.peak_flops, self.bytes / gpu.bandwidth)

    def bound(self, gpu: GPU) -> str:
        return "compute" if self.flops / gpu.peak_flops >= self.bytes / gpu.bandwidth else "memory"


def step_cost(cfg: ModelConfig, *, batch: int, new: int, context: int = 0, weight_bytes: float = 2,
              cache_bytes: float = 2, act_bytes: float = 2) -> StepCost:
    """Cost of one forward over ``batch`` sequences × ``new`` tokens with ``context`` cached tokens each."""
    if batch < 1:
        raise ValueError("batch must be >= 1")
    return mixed_step_cost(cfg, [(new, context)] * batch, weight_bytes=weight_bytes, cache_bytes=cache_bytes,
                           act_bytes=act_bytes)


def mixed_step_cost(cfg: ModelConfig, seqs: list[tuple[int, int]], *, weight_bytes: float = 2,
                    cache_bytes: float = 2, act_bytes: float = 2) -> StepCost:
    """One iteration over sequences given as (new tokens, cached context), e.g. prefills and decodes batched
    together as Orca's iteration-level scheduler does. The weights are read once for all of them."""
    if cfg.attention != "gqa":
        raise ValueError("the roofline model covers MHA/GQA/MQA decoders")
    if not seqs or any(n < 1 or c < 0 for n, c in seqs):
        raise ValueError("every sequence needs new >= 1 and context >= 0")
    tokens = sum(n for n, _ in seqs)
    lin = 2 * linear_params(cfg) * tokens
    pairs = sum(n * c + n * (n + 1) // 2 for n, c in seqs)
    attn = 4 * cfg.n_layers * cfg.n_heads * cfg.head_dim * pairs
    kv = cfg.n_layers * elements_per_token_per_layer(cfg) * sum(n + c for n, c in seqs) * cache_bytes
    act = tokens * sum(i + o for i, o in linear_shapes(cfg)) * act_bytes
    return StepCost(lin, attn, linear_params(cfg) * weight_bytes, kv, act)


def decode_floor_seconds(n_params: float, bytes_per_param: float, n_gpus: int, bandwidth: float) -> float:
    """Lower bound on a batch-1 decode step: every weight byte crosses HBM once, the GPUs reading their
    shards in parallel: n_params·bytes_per_param / (n_gpus·bandwidth)."""
    return n_params * bytes_per_param / (n_gpus * bandwidth)
