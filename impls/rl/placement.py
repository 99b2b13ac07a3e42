r"""Where the models of PPO and GRPO sit in GPU memory, colocated or disaggregated, and what syncing the
rollout engine's weights costs.

Roles (per model, Ψ parameters): a **trainable** model (actor, PPO's critic) holds bf16 weights, bf16
gradients and fp32 Adam state — (2 + 2 + 12)Ψ, sharded by ZeRO/FSDP over the training GPUs
(``impls.distributed.memory.model_state_bytes_num``); a **frozen** model (reference, reward model) holds bf16
weights only, 2Ψ, sharded the same way; the **rollout engine** (vLLM/SGLang) holds its own bf16 copy of the
actor, split over its tensor-parallel group, plus its KV cache.

* PPO: actor, critic, reference, reward model. GRPO: no critic; the reward model is absent with a rule
  reward (math/code verifiers), the reference with β = 0 (DAPO).
* **Colocated** (verl's hybrid engine, OpenRLHF's ``--colocate_all_models``): every role on the same N GPUs.
  Without offloading the peak holds training states and the engine together; with the engine put to sleep
  during training and the optimizer offloaded during generation the peak is the larger phase.
* **Disaggregated** (OpenRLHF's default Ray placement): trainer GPUs hold the training roles, rollout GPUs
  the engine; weights cross the network after every update.

Weight sync of a Ψ-parameter actor in bf16 (2Ψ bytes) to R rollout engines over links of bandwidth β:
a pipelined broadcast (NCCL's ring/tree, chunks forwarded as they arrive) takes ≈ α·R + 2Ψ/β whatever R,
sending to each engine in turn takes R·2Ψ/β; colocated resharding moves weights inside the node only.
A bf16 *delta* carries only the elements whose bf16 value changed (``bf16_changed_fraction``).

Time split of one PPO step (``step_seconds``): generation is B·L decode tokens on the engine (each decode
step timed on the roofline, ``impls.inference.roofline``), training is counted FLOPs over efficiency × peak:
6Ψ per token for each trainable model's forward and backward, 2Ψ per token for each frozen model's forward
and for the actor's recomputed old log-probs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from impls.distributed.memory import model_state_bytes_num

ALGORITHMS = ("ppo", "grpo")


@dataclass(frozen=True)
class Role:
    name: str
    params: float
    trainable: bool


def model_set(algorithm: str, actor_params: float, *, critic_params: float | None = None,
              reward_params: float | None = None, reference: bool = True, reward_model: bool = True) -> list[Role]:
    """The models an ``algorithm`` step keeps: critic and reward model default to the actor's size."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    roles = [Role("actor", actor_params, True)]
    if algorithm == "ppo":
        roles.append(Role("critic", critic_params or actor_params, True))
    if reference:
        roles.append(Role("reference", actor_params, False))
    if reward_model:
        roles.append(Role("reward", reward_params or actor_params, False))
    return roles


def training_bytes(roles: list[Role], gpus: int, zero: str = "zero3") -> dict[str, float]:
    """Per-GPU bytes of each role on ``gpus`` training GPUs: trainable at 16 B/param under ``zero``,
    frozen at 2 B/param, sharded the same way (FSDP), replicated under plain DP."""
    out = {}
    for r in roles:
        if r.trainable:
            out[r.name] = model_state_bytes_num(zero, r.params, gpus)
        else:
            out[r.name] = 2 * r.params / (gpus if zero == "zero3" else 1)
    return out


def rollout_bytes(actor_params: float, tp: int, kv_bytes: float) -> dict[str, float]:
    """Per-GPU bytes of a rollout engine: its bf16 actor split over ``tp`` GPUs and ``kv_bytes`` of KV cache."""
    if tp < 1:
        raise ValueError(f"tp must be >= 1, got {tp}")
    return {"engine weights": 2 * actor_params / tp, "KV cache": kv_bytes}


def peak_bytes(roles: list[Role], gpus: int, *, placement: str, tp: int, kv_bytes: float, rollout_gpus: int = 0,
               offload: bool = False, zero: str = "zero3") -> dict[str, float]:
    """Peak per-GPU bytes. ``colocated``: training and rollout on the same ``gpus``; with ``offload`` the
    engine sleeps during training and training states leave the GPU during generation, so the peak is the
    larger phase. ``disaggregated``: the larger of a trainer GPU (``gpus``) and a rollout GPU."""
    train = sum(training_bytes(roles, gpus, zero).values())
    actor = next(r.params for r in roles if r.name == "actor")
    roll = sum(rollout_bytes(actor, tp, kv_bytes).values())
    if placement == "colocated":
        both = max(train, roll) if offload else train + roll
        return {"training": train, "rollout": roll, "peak": both}
    if placement == "disaggregated":
        if rollout_gpus < tp:
            raise ValueError("disaggregated placement needs at least one engine's worth of rollout GPUs")
        return {"training": train, "rollout": roll, "peak": max(train, roll)}
    raise ValueError(f"placement must be colocated or disaggregated, got {placement!r}")


def weight_sync_seconds(actor_params: float, bandwidth: float, *, receivers: int = 1, latency: float = 0.0,
                        scheme: str = "pipelined", bytes_per_param: float = 2.0, links: int = 1,
                        changed: float = 1.0) -> float:
    """Seconds to push the actor to ``receivers`` engines: ``pipelined`` ≈ α·R + S/(links·β), ``sequential``
    R·(α + S/(links·β)), with S = ``changed`` × Ψ × bytes_per_param (``changed`` < 1 for a sparse delta,
    which also carries a 4-byte index per element)."""
    if receivers < 1 or links < 1 or bandwidth <= 0:
        raise ValueError("receivers and links must be >= 1 and bandwidth positive")
    if not 0 <= changed <= 1:
        raise ValueError(f"changed must be a fraction, got {changed}")
    size = actor_params * (bytes_per_param if changed == 1 else changed * (bytes_per_param + 4))
    one = size / (links * bandwidth)
    if scheme == "pipelined":
        return latency * receivers + one
    if scheme == "sequential":
        return receivers * (latency + one)
    raise ValueError(f"scheme must be pipelined or sequential, got {scheme!r}")


def bf16_changed_fraction(before: list[torch.Tensor], after: list[torch.Tensor]) -> float:
    """Share of elements whose bf16 copy differs between two sets of (fp32 master) weights: what a bf16
    delta sync would have to send."""
    changed = total = 0
    for a, b in zip(before, after, strict=True):
        changed += int((a.bfloat16() != b.bfloat16()).sum())
        total += a.numel()
    return changed / total


def step_seconds(cfg, gpu, *, gpus: int, prompt_len: int, lengths: list[int], algorithm: str = "ppo",
                 efficiency: float = 0.4, stride: int = 16) -> dict[str, float]:
    """One synchronous RL step on ``gpus`` GPUs, one rollout engine per GPU, responses of ``lengths`` tokens
    dealt round-robin to the engines. Generation: each engine prefills its prompts, then decodes while any
    of its sequences is unfinished (the batch shrinks as they finish; every ``stride``-th step is timed on
    the roofline and held for ``stride`` steps); the step waits for the slowest engine. Training: counted
    FLOPs over the actual tokens at ``efficiency`` × peak (see the module docstring)."""
    from impls.inference.kv_cache import parameter_count
    from impls.inference.roofline import step_cost

    if not lengths or min(lengths) < 1 or gpus < 1:
        raise ValueError("need at least one response of at least one token and one GPU")
    engines = [sorted(lengths[e::gpus]) for e in range(gpus)]
    gen = 0.0
    for mine in engines:
        if not mine:
            continue
        t_engine = step_cost(cfg, batch=len(mine), new=prompt_len).time(gpu)
        for t in range(0, mine[-1], stride):
            alive = sum(1 for n in mine if n > t)
            t_engine += min(stride, mine[-1] - t) * step_cost(cfg, batch=alive, new=1, context=prompt_len + t).time(gpu)
        gen = max(gen, t_engine)
    psi = parameter_count(cfg)
    tokens = sum(prompt_len + n for n in lengths)
    roles = model_set(algorithm, psi)
    flops = sum((6 if r.trainable else 2) * r.params * tokens for r in roles) + 2 * psi * tokens   # + old log-probs
    return {"generation": gen, "training": flops / (gpus * efficiency * gpu.peak_flops)}
