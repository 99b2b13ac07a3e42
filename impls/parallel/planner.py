r"""Choose a DP × TP × PP × CP layout for a dense decoder on a cluster: memory per GPU and step time.

A layout puts ``d·t·p·c`` GPUs to work: tensor parallelism ``t`` (Megatron, with sequence parallelism
when t > 1), context parallelism ``c`` (ring attention over sequence chunks), pipeline parallelism ``p``
(1F1B, or interleaved with ``v`` chunks per device) and data parallelism ``d`` (ZeRO stage ``zero`` over
the d·c ranks that hold the same weights, as Megatron's distributed optimizer does). Ranks are numbered
tp fastest, then cp, dp, pp (Megatron's default order), so a group stays inside a node when
stride × size <= GPUs per node.

**Memory** (bytes per GPU, the busier of the first and last pipeline stage), from the calculators this
project verifies:

* model states: ``memory.model_state_bytes_num(zero, ψ_stage, d·c)`` with ψ_stage the stage's parameters
  (its L/p layers, plus the embedding on the first stage and the output layer on the last) over t;
* activations: ``memory.activation_bytes_num`` per layer (Korthikanti et al. 2022 §4–5: the GPT layer; for
  SwiGLU/GQA models an approximation at the model's hidden size) at sequence s/c and micro-batch b, times
  the layers per stage, times the chunk-forwards in flight on the first stage, counted by the 1F1B /
  interleaved schedules of ``pipeline.py``; recomputation "none" keeps everything (attention scores too),
  "selective" drops the attention core (what FlashAttention also does), "full" keeps each layer's input and
  one layer's selective set while it is recomputed; the last stage adds its fp32 logits 4·b·(s/c)·V/t.

**Time** per optimizer step: counted FLOPs over ``efficiency × peak`` (the dense-GEMM efficiency assumed),
the pipeline's (m + (p-1)/v) micro-batch slots of the slowest stage (the last one carries the output
layer), and an α–β model of every collective over the link it crosses (``collectives`` / ``memory``):

* TP: per layer and micro-batch 2 all-reduces forward and 2 backward (+2 when the forward is recomputed)
  of b·(s/c)·h activations — with sequence parallelism all-gathers + reduce-scatters of the same bytes —
  on the critical path;
* CP: the K/V ring, (c-1) hops of 2·(s/c)·b·kv_dim per layer forward and twice that backward, overlapped
  with attention: only its excess over the attention time is exposed;
* PP: one activation send each way per micro-batch and chunk boundary (b·(s/c)·h/t, 2 bytes);
* DP: the gradient reduce (all-reduce for ZeRO-0, reduce-scatter for ZeRO-1/2/3, bf16) overlaps the last
  micro-batch's backward and the parameter all-gather (ZeRO-1/2) the first forward of the next step (Megatron's
  ``--overlap-grad-reduce`` / ``--overlap-param-gather``); only what exceeds them is exposed. ZeRO-3 gathers
  the parameters for every micro-batch forward and backward, prefetched under the compute.

FLOPs (Narayanan et al. 2021, §5.1, Eq. 3 counts the same): per token and layer 2·(matmul weights) + 4·s·h
for the attention scores and values (halved when ``causal``), the backward twice the forward, full
recomputation one more forward, selective recomputation the attention core again; the output layer 2·h·V.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from impls.distributed.memory import activation_bytes_num, model_state_bytes_num, ring_time

ZERO_STAGES = {0: "dp", 1: "zero1", 2: "zero2", 3: "zero3"}
_activation_bytes = lru_cache(maxsize=65536)(activation_bytes_num)      # sympy: evaluate each case once
_model_state_bytes = lru_cache(maxsize=65536)(model_state_bytes_num)
RECOMPUTE = ("none", "selective", "full")


# ------------------------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class Spec:
    """A dense decoder: GPT (LayerNorm with biases, GELU MLP, learned positions, tied embeddings) or
    Llama (RMSNorm, SwiGLU MLP, rotary positions, GQA, untied head)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    style: str = "llama"            # "gpt" | "llama"
    head_dim: int = 0

    def __post_init__(self) -> None:
        if self.style not in ("gpt", "llama"):
            raise ValueError(f"style must be gpt or llama, got {self.style!r}")
        if min(self.layers, self.hidden, self.heads, self.kv_heads, self.ffn, self.vocab) < 1:
            raise ValueError(f"{self.name}: every dimension must be positive")
        if self.heads % self.kv_heads:
            raise ValueError(f"{self.name}: {self.heads} heads do not split into {self.kv_heads} KV groups")

    @property
    def dh(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        return self.heads * self.dh

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.dh

    def layer_matmul_params(self) -> int:
        """Weights of the matmuls of one layer: Q, K, V, O and the MLP (2 matrices GELU, 3 SwiGLU)."""
        h = self.hidden
        attn = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        mlp = (2 if self.style == "gpt" else 3) * h * self.ffn
        return attn + mlp

    def layer_params(self) -> int:
        """All parameters of one layer: matmul weights, biases (GPT) and norm weights."""
        h = self.hidden
        if self.style == "gpt":
            biases = self.q_dim + 2 * self.kv_dim + h + self.ffn + h
            return self.layer_matmul_params() + biases + 4 * h      # two LayerNorms, weight and bias
        return self.layer_matmul_params() + 2 * h                   # two RMSNorms

    def embedding_params(self, seq: int) -> int:
        """Input embedding (+ learned positions for GPT)."""
        return self.vocab * self.hidden + (seq * self.hidden if self.style == "gpt" else 0)

    def head_params(self) -> int:
        """The output layer held apart from the embedding: GPT ties it (Megatron keeps a copy on the last
        stage when p > 1), Llama has its own; plus the final norm."""
        final_norm = 2 * self.hidden if self.style == "gpt" else self.hidden
        return self.vocab * self.hidden + final_norm

    def total_params(self, seq: int) -> int:
        tied = self.style == "gpt"
        return (self.layers * self.layer_params() + self.embedding_params(seq) + self.head_params()
                - (self.vocab * self.hidden if tied else 0))


def spec_from_config(cfg) -> Spec:
    """A :class:`Spec` from an ``impls.inference.kv_cache.ModelConfig`` (Llama-style GQA presets)."""
    if cfg.attention != "gqa":
        raise ValueError(f"{cfg.name}: the planner covers dense MHA/GQA decoders")
    return Spec(cfg.name, cfg.n_layers, cfg.hidden_size, cfg.n_heads, cfg.n_kv_heads, cfg.intermediate_size,
                cfg.vocab_size, "llama", cfg.head_dim)


def gpt_spec(name: str, layers: int, hidden: int, heads: int, vocab: int = 51200) -> Spec:
    """The GPT models of Narayanan et al. 2021 (4h MLP, vocabulary 51,200)."""
    return Spec(name, layers, hidden, heads, heads, 4 * hidden, vocab, "gpt")


@dataclass(frozen=True)
class Link:
    bandwidth: float   # bytes/s per GPU, one direction
    latency: float     # seconds per message


@dataclass(frozen=True)
class Cluster:
    name: str
    gpus_per_node: int
    peak_flops: float      # dense BF16 per GPU
    memory: float          # bytes per GPU
    intra: Link            # NVLink/NVSwitch
    inter: Link            # InfiniBand, one NIC per GPU
    source: str = ""


CLUSTERS: dict[str, Cluster] = {c.name: c for c in [
    # DGX A100: NVLink3 600 GB/s total per GPU (300 each way), 8 × 200 Gb/s HDR InfiniBand per node
    Cluster("dgx-a100", 8, 312e12, 80e9, Link(300e9, 3e-6), Link(25e9, 8e-6),
            "NVIDIA DGX A100 datasheet; Narayanan et al. 2021 §5 (8 A100 80GB per node, NVLink/NVSwitch, 8 HDR IB)"),
    # DGX H100: NVLink4 900 GB/s total per GPU (450 each way), 8 × 400 Gb/s NDR InfiniBand per node
    Cluster("dgx-h100", 8, 989.4e12, 80e9, Link(450e9, 3e-6), Link(50e9, 8e-6),
            "NVIDIA DGX H100 datasheet (NVLink 4, ConnectX-7 400 Gb/s per GPU)"),
]}


@dataclass(frozen=True)
class Layout:
    d: int
    t: int
    p: int
    c: int = 1
    v: int = 1                 # model chunks per device (interleaved 1F1B when > 1)
    b: int = 1                 # micro-batch size (sequences)
    recompute: str = "none"
    zero: int = 1

    @property
    def gpus(self) -> int:
        return self.d * self.t * self.p * self.c

    def label(self) -> str:
        extra = (f" cp{self.c}" if self.c > 1 else "") + (f" v{self.v}" if self.v > 1 else "")
        return f"dp{self.d} tp{self.t} pp{self.p}{extra}"


@dataclass
class Plan:
    layout: Layout
    memory: dict[str, float]          # bytes per GPU on the busiest stage, by part
    time: dict[str, float]            # seconds per step, by part
    flops: float                      # per step, all GPUs
    micro_batches: int
    in_flight: int                    # chunk-forwards held on the first stage
    links: dict[str, str] = field(default_factory=dict)
    capacity: float = 0.0

    @property
    def total_memory(self) -> float:
        return sum(self.memory.values())

    @property
    def fits(self) -> bool:
        return self.total_memory <= self.capacity

    @property
    def step_time(self) -> float:
        return sum(self.time.values())

    def mfu(self, cluster: Cluster) -> float:
        return self.flops / (self.step_time * self.layout.gpus * cluster.peak_flops)

    def why_not(self) -> str:
        """One line: what does not fit and by how much."""
        parts = ", ".join(f"{k} {v / 1e9:,.1f} GB" for k, v in self.memory.items())
        return (f"{self.layout.label()}: needs {self.total_memory / 1e9:,.1f} GB per GPU > "
                f"{self.capacity / 1e9:g} GB usable ({parts})")


# ------------------------------------------------------------------------------------ counting
def forward_flops_per_sequence(spec: Spec, seq: int, causal: bool = True) -> dict[str, float]:
    """FLOPs of one forward over one sequence: per-layer matmuls, attention (QKᵀ and PV), output layer."""
    attn_pairs = seq * seq / 2 if causal else seq * seq
    return {
        "matmuls": 2 * seq * spec.layer_matmul_params() * spec.layers,
        "attention": 4 * attn_pairs * spec.q_dim * spec.layers,
        "output": 2 * seq * spec.hidden * spec.vocab,
    }


def step_flops(spec: Spec, seq: int, batch: int, recompute: str = "none", causal: bool = True) -> float:
    """FLOPs of one training step over ``batch`` sequences: forward + backward (2×) + recomputation."""
    f = forward_flops_per_sequence(spec, seq, causal)
    layers = f["matmuls"] + f["attention"]
    extra = {"none": 0.0, "selective": f["attention"], "full": layers}[recompute]
    return batch * (3 * (layers + f["output"]) + extra)


@lru_cache(maxsize=65536)
def group_links(layout: Layout, gpus_per_node: int) -> dict[str, bool]:
    """For each parallel dimension, does any of its groups span more than one node? Ranks are numbered
    tp fastest, then cp, dp, pp: rank = tp + t·(cp + c·(dp + d·pp))."""
    sizes = {"tp": layout.t, "cp": layout.c, "dp": layout.d, "pp": layout.p}
    order = ["tp", "cp", "dp", "pp"]
    stride = {k: 1 for k in order}
    for prev, k in zip(order, order[1:]):
        stride[k] = stride[prev] * sizes[prev]
    total = layout.gpus
    out = {}
    for k in order:
        crossing = False
        for start in range(total):
            if (start // stride[k]) % sizes[k]:                 # only the group's first member starts it
                continue
            nodes = {(start + i * stride[k]) // gpus_per_node for i in range(sizes[k])}
            if len(nodes) > 1:
                crossing = True
                break
        out[k] = crossing
    return out


def in_flight(p: int, m: int, v: int = 1) -> tuple[int, ...]:
    """Per device d, the most chunk-forwards whose backward has not finished — the schedules of
    ``pipeline.py`` read in order (the tests check these against its simulator):

        1F1B          min(p - d, m)
        interleaved   m·v when m = p (all forwards first), else min(2(p-d-1) + (v-1)·p + 1, m·v)
    """
    if v == 1:
        return tuple(min(p - d, m) for d in range(p))
    if m == p:
        return tuple(m * v for _ in range(p))
    return tuple(min(2 * (p - d - 1) + (v - 1) * p + 1, m * v) for d in range(p))


def tp_all_reduces_per_layer(recompute: str) -> int:
    """All-reduces (or all-gather + reduce-scatter pairs, the same bytes, under sequence parallelism) of
    the b·s·h activations per layer and micro-batch: 2 forward, 2 backward, 2 more if the forward is
    recomputed (Megatron's f and g operators, Shoeybi et al. 2019 §3)."""
    return 4 + (2 if recompute == "full" else 0)


def tp_elements_per_collective(b: int, s_local: int, h: int) -> int:
    """Elements of the full buffer each TP collective reduces or gathers: the layer's activations."""
    return b * s_local * h


def pp_messages(p: int, m: int, v: int = 1) -> tuple[int, ...]:
    """Point-to-point sends per device and step: each of its m·v chunk-forwards sends its output on
    (except at the last virtual stage) and each backward sends the input gradient back (except at the
    first)."""
    return tuple(m * (v - (d == p - 1)) + m * (v - (d == 0)) for d in range(p)) if p > 1 else (0,)


def pp_elements_per_message(b: int, s_local: int, h: int, t: int) -> float:
    """Elements of one stage-boundary message: the micro-batch's activations (or their gradient), split
    over the TP ranks by sequence parallelism."""
    return b * s_local * h / t


def _ring(collective: str, size: float, n: int, link: Link) -> float:
    return ring_time(collective, size, n, link.bandwidth, link.latency) if n > 1 else 0.0


USABLE = 0.9   # share of HBM a layout may plan for: the rest is CUDA context, NCCL buffers, fragmentation


def evaluate(spec: Spec, cluster: Cluster, layout: Layout, *, seq: int, global_batch: int,
             efficiency: float = 0.6, causal: bool = True, usable: float = USABLE) -> Plan:
    """Memory per GPU and step time of ``layout`` (see the module docstring); raises ValueError when the
    layout cannot be formed (sizes that do not divide)."""
    d, t, p, c, v, b = layout.d, layout.t, layout.p, layout.c, layout.v, layout.b
    if layout.recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, got {layout.recompute!r}")
    if layout.zero not in ZERO_STAGES:
        raise ValueError(f"zero must be 0, 1, 2 or 3, got {layout.zero}")
    if spec.heads % t:
        raise ValueError(f"tp{t} does not divide {spec.heads} attention heads")
    if spec.layers % (p * v):
        raise ValueError(f"pp{p} × v{v} does not divide {spec.layers} layers")
    if seq % c:
        raise ValueError(f"cp{c} does not divide the sequence length {seq}")
    if global_batch % (d * b):
        raise ValueError(f"the global batch {global_batch} does not split into dp{d} × micro-batch {b}")
    m = global_batch // (d * b)
    if v > 1 and (p == 1 or m % p):
        raise ValueError(f"interleaving needs pp > 1 and micro-batches ({m}) a multiple of pp{p}")
    s_local, h = seq // c, spec.hidden
    per_stage = spec.layers // p
    if p == 1:
        first = last = spec.total_params(seq)
    else:
        body = per_stage * spec.layer_params()
        first, last = body + spec.embedding_params(seq), body + spec.head_params()
    psi = {"first": first / t, "last": last / t}
    stage = ZERO_STAGES[layout.zero]
    states = {k: _model_state_bytes(stage, x, d * c) for k, x in psi.items()}
    mask = 1 if spec.style == "gpt" else 0
    parallel = "tensor+sequence" if t > 1 else "none"
    per_layer = _activation_bytes(s_local, b, h, spec.heads, t, parallel, layout.recompute, mask)
    flight = in_flight(p, m, v)
    chunk_layers = per_stage // v
    live = _activation_bytes(s_local, b, h, spec.heads, t, parallel, "selective", mask) \
        if layout.recompute == "full" else 0.0          # the layer being recomputed is live (flash attention)
    act = {k: per_layer * chunk_layers * n + live for k, n in (("first", flight[0]), ("last", flight[-1]))}
    logits = 4 * b * s_local * spec.vocab / t
    mem_first = {"model states": states["first"], "activations": act["first"]}
    mem_last = {"model states": states["last"], "activations": act["last"], "logits": logits}
    memory = mem_last if p == 1 else max(mem_first, mem_last, key=lambda x: sum(x.values()))

    # ---- time
    crosses = group_links(layout, cluster.gpus_per_node)
    link = {k: cluster.inter if crosses[k] else cluster.intra for k in crosses}
    rate = efficiency * cluster.peak_flops
    f = forward_flops_per_sequence(spec, s_local, causal)
    f_attn = f["attention"] * c                          # ring attention: each rank scores s/c queries × s keys
    layer_fwd = b * (f["matmuls"] + f_attn) / spec.layers / t
    recompute_extra = {"none": 0.0, "selective": b * f_attn / spec.layers / t, "full": layer_fwd}[layout.recompute]
    mb_layers = per_stage * (3 * layer_fwd + recompute_extra) / rate
    mb_output = 3 * b * f["output"] / t / rate
    act_bytes = 2 * tp_elements_per_collective(b, s_local, h)
    tp_per_mb = per_stage * tp_all_reduces_per_layer(layout.recompute) * _ring("all_reduce", act_bytes, t, link["tp"])
    kv_bytes = 2 * 2 * s_local * b * spec.kv_dim / t    # K and V chunk, bf16
    cp_comm = 3 * (c - 1) * (link["cp"].latency + kv_bytes / link["cp"].bandwidth) if c > 1 else 0.0
    cp_exposed = per_stage * max(0.0, cp_comm - 3 * b * f_attn / spec.layers / t / rate)
    p2p = (link["pp"].latency + 2 * pp_elements_per_message(b, s_local, h, t) / link["pp"].bandwidth) if p > 1 else 0.0
    slot = mb_layers + tp_per_mb + cp_exposed + 2 * v * p2p
    slot_last = slot + mb_output
    pipeline = m * slot_last + (p - 1) / v * slot_last
    grad_bytes = 2 * max(psi.values())
    n_dp = d * c
    bwd_last = 2 * per_stage * layer_fwd / rate
    if layout.zero == 0:
        reduce = _ring("all_reduce", grad_bytes, n_dp, link["dp"])
        gather = 0.0
    else:
        reduce = _ring("reduce_scatter", grad_bytes, n_dp, link["dp"])
        gather = _ring("all_gather", grad_bytes, n_dp, link["dp"])
    fwd_first = per_stage * layer_fwd / rate
    if layout.zero == 3:                                 # gathered again for every micro-batch, prefetched
        compute = m * (mb_layers + mb_output)
        dp_exposed = max(0.0, m * (reduce + 2 * gather) - compute)
    else:                                                # reduce under the last backward, gather under the next forward
        dp_exposed = max(0.0, reduce - bwd_last) + max(0.0, gather - fwd_first)
    time = {"compute": m * (mb_layers + mb_output), "pipeline bubble": pipeline - m * slot_last,
            "tp comm": m * tp_per_mb, "cp comm (exposed)": m * cp_exposed, "pp comm": m * 2 * v * p2p,
            "dp comm (exposed)": dp_exposed}
    flops = step_flops(spec, seq, global_batch, layout.recompute, causal)
    return Plan(layout, memory, time, flops, m, flight[0],
                {k: ("IB" if crosses[k] else "NVLink") for k in crosses}, usable * cluster.memory)


# ----------------------------------------------------------------------------------- searching
def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def candidates(spec: Spec, gpus: int, *, seq: int, global_batch: int, zero: int = 1,
               recompute: tuple[str, ...] = RECOMPUTE, micro_batches: tuple[int, ...] = (1, 2, 4, 8),
               max_cp: int = 8, interleave: tuple[int, ...] = (1, 2)) -> list[Layout]:
    """Every layout that can be formed on ``gpus`` GPUs (sizes divide; c only while s/c >= 1024)."""
    out = []
    for t in _divisors(gpus):
        if spec.heads % t:
            continue
        for p in _divisors(gpus // t):
            for c in _divisors(gpus // (t * p)):
                if c > max_cp or seq % c or (c > 1 and seq // c < 1024):
                    continue
                d = gpus // (t * p * c)
                for b in micro_batches:
                    if global_batch % (d * b):
                        continue
                    m = global_batch // (d * b)
                    for v in interleave:
                        if spec.layers % (p * v) or (v > 1 and (p == 1 or m % p)):
                            continue
                        out += [Layout(d, t, p, c, v, b, r, zero) for r in recompute]
    return out


def plan(spec: Spec, cluster: Cluster, gpus: int, *, seq: int, global_batch: int, zero: int = 1,
         efficiency: float = 0.6, usable: float = USABLE, **kw) -> tuple[list[Plan], list[Plan]]:
    """(fitting plans, fastest first, best choice of b / v / recomputation per (d, t, p, c);
    layouts of which no variant fits, each its smallest-memory variant)."""
    if gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {gpus}")
    if gpus % cluster.gpus_per_node and gpus > cluster.gpus_per_node:
        raise ValueError(f"--gpus {gpus} is not a whole number of {cluster.gpus_per_node}-GPU nodes")
    best: dict[tuple, Plan] = {}
    smallest: dict[tuple, Plan] = {}
    for lay in candidates(spec, gpus, seq=seq, global_batch=global_batch, zero=zero, **kw):
        pl = evaluate(spec, cluster, lay, seq=seq, global_batch=global_batch, efficiency=efficiency, usable=usable)
        key = (lay.d, lay.t, lay.p, lay.c)
        if pl.fits and (key not in best or pl.step_time < best[key].step_time):
            best[key] = pl
        if key not in smallest or pl.total_memory < smallest[key].total_memory:
            smallest[key] = pl
    fits = sorted(best.values(), key=lambda x: x.step_time)
    no = sorted((x for k, x in smallest.items() if k not in best), key=lambda x: x.total_memory)
    return fits, no


def parameter_check(spec: Spec, seq: int) -> float:
    """Narayanan et al. 2021 Eq. (2): P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)) (GPT models)."""
    l, h = spec.layers, spec.hidden
    return 12 * l * h * h * (1 + 13 / (12 * h) + (spec.vocab + seq) / (12 * l * h))


def paper_flops(spec: Spec, seq: int, batch: int) -> float:
    """Narayanan et al. 2021 Eq. (3), with activation recomputation: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))."""
    l, h = spec.layers, spec.hidden
    return 96 * batch * seq * l * h * h * (1 + seq / (6 * h) + spec.vocab / (16 * l * h))
