"""Models of PPO/GRPO in GPU memory, colocated or disaggregated; weight-sync volume and time; the step's
time split.

Oracles: the ZeRO formulas (``mianjing zero``'s numbers) for every trainable role, 2 bytes per frozen
parameter, the KV calculator for the engine's cache, the roofline for decode steps, bf16 rounding of a
real Adam trajectory on a small transformer for the delta a sync must carry.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from impls.distributed.memory import model_state_bytes_num
from impls.inference.kv_cache import kv_cache_bytes, parameter_count, preset
from impls.inference.roofline import GPUS
from impls.rl import placement as P
from impls.rl.tiny_lm import TinyCausalLM
from verifiers.one_thread import one_thread  # noqa: F401 -- the tiny-model Adam run is thousands of small ops

pytestmark = pytest.mark.usefixtures("one_thread")

CFG, GPU = preset("llama-3-8b"), GPUS["H100-SXM"]
PSI = parameter_count(CFG)
KV = kv_cache_bytes(CFG, 4096, 64)          # one engine per GPU, 64 sequences of 4096 tokens


def _gb(roles, gpus=8):
    return sum(P.training_bytes(roles, gpus).values()) / 1e9


def test_role_bytes_are_the_zero_formulas():
    for gpus in (1, 8):
        tb = P.training_bytes(P.model_set("ppo", PSI), gpus)
        assert tb["actor"] == tb["critic"] == model_state_bytes_num("zero3", PSI, gpus)
        assert tb["reference"] == tb["reward"] == pytest.approx(2 * PSI / gpus)
    assert P.training_bytes([P.Role("ref", 1e9, False)], 8, "zero1")["ref"] == 2e9     # replicated without FSDP
    assert [r.name for r in P.model_set("grpo", PSI, reward_model=False, reference=False)] == ["actor"]


@pytest.mark.claim("rlsys.grpo-models")
def test_what_grpo_keeps_in_memory(evidence):
    full = P.model_set("grpo", PSI)
    assert [r.name for r in full] == ["actor", "reference", "reward"]
    share = P.training_bytes(full, 8)["actor"] / sum(P.training_bytes(full, 8).values())
    evidence.quote("actor's share of GRPO's training memory (%)", quoted=80, measured=100 * share, digits=0)
    engine = sum(P.rollout_bytes(PSI, 1, KV).values()) / 1e9
    evidence.quote("rollout engine per GPU: weights + KV (GB)", quoted=50.4, measured=engine, digits=1)
    evidence.quote("GRPO training roles per GPU on 8 GPUs (GB)", quoted=20.1, measured=_gb(full), digits=1)
    evidence.update(rule_reward=[r.name for r in P.model_set("grpo", PSI, reward_model=False)],
                    beta_zero=[r.name for r in P.model_set("grpo", PSI, reward_model=False, reference=False)])


@pytest.mark.claim("rlsys.grpo-drops-critic")
def test_dropping_the_critic(evidence):
    ppo, grpo = P.model_set("ppo", PSI), P.model_set("grpo", PSI)
    saving = 1 - _gb(grpo) / _gb(ppo)
    evidence.quote("training memory saved by GRPO, equal-size critic (%)", quoted=44, measured=100 * saving, digits=0)
    col = {a: P.peak_bytes(r, 8, placement="colocated", tp=1, kv_bytes=KV)["peak"] for a, r in (("ppo", ppo), ("grpo", grpo))}
    evidence.quote("with the rollout engine on the same GPUs (%)", quoted=19, measured=100 * (1 - col["grpo"] / col["ppo"]), digits=0)
    small = _gb(P.model_set("ppo", PSI, critic_params=PSI / 8))
    evidence.quote("saved against a critic an eighth of the actor (%)", quoted=9, measured=100 * (1 - _gb(grpo) / small), digits=0)
    flops = {a: sum((6 if r.trainable else 2) for r in rs) + 2 for a, rs in (("ppo", ppo), ("grpo", grpo))}
    evidence.quote("training FLOPs saved per token (%)", quoted=33, measured=100 * (1 - flops["grpo"] / flops["ppo"]), digits=0)
    evidence.quote("the same, to the statement's 'roughly 30' (%)", quoted=30, measured=100 * (1 - flops["grpo"] / flops["ppo"]),
                   digits=-1)
    rule = _gb(P.model_set("grpo", PSI, reward_model=False))
    evidence.quote("training memory saved by GRPO with a rule reward against PPO with a reward model (%)", quoted=50,
                   measured=100 * (1 - rule / _gb(ppo)), digits=0)
    step = {a: P.step_seconds(CFG, GPU, gpus=8, prompt_len=512, lengths=[1024] * 512, algorithm=a) for a in ("ppo", "grpo")}
    total = {a: sum(s.values()) for a, s in step.items()}
    evidence.quote("step time saved, 1024-token responses (%)", quoted=27, measured=100 * (1 - total["grpo"] / total["ppo"]), digits=0)
    evidence.update(step_seconds=step)


def _heavy_tail(mean: int, n: int = 512, sigma: float = 1.0, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    return [max(1, min(32768, round(rng.lognormvariate(math.log(mean) - sigma**2 / 2, sigma)))) for _ in range(n)]


@pytest.mark.claim("rlsys.generation-share")
def test_generation_share_depends_on_lengths(evidence):
    cases = {"uniform 1024": [1024] * 512, "uniform 4096": [4096] * 512, "long tail, mean 4096": _heavy_tail(4096)}
    efficiency, share = 0.4, {}
    evidence.quote("training at this share of peak (%)", quoted=40, measured=100 * efficiency, digits=0)
    for name, lengths in cases.items():
        s = P.step_seconds(CFG, GPU, gpus=8, prompt_len=512, lengths=lengths, efficiency=efficiency)
        share[name] = s["generation"] / (s["generation"] + s["training"])
    evidence.quote("generation share, 1024-token responses (%)", quoted=18, measured=100 * share["uniform 1024"], digits=0)
    evidence.quote("generation share, 4096-token responses (%)", quoted=30, measured=100 * share["uniform 4096"], digits=0)
    evidence.quote("generation share, long-tailed responses averaging 4096 (%)", quoted=65,
                   measured=100 * share["long tail, mean 4096"], digits=0)
    assert share["uniform 1024"] < share["uniform 4096"] < share["long tail, mean 4096"]
    # the batch waits for its longest sequence: decoding alone at the tail costs a weight read per token
    one = P.step_seconds(CFG, GPU, gpus=1, prompt_len=512, lengths=[1, 2000])
    two = P.step_seconds(CFG, GPU, gpus=1, prompt_len=512, lengths=[2000, 2000])
    assert one["generation"] > 0.9 * two["generation"]
    evidence.update(shares=share)


@pytest.mark.claim("rlsys.colocate-vs-disaggregate")
def test_colocation_contends_disaggregation_ships_weights(evidence):
    ppo = P.model_set("ppo", PSI)
    plain = P.peak_bytes(ppo, 8, placement="colocated", tp=1, kv_bytes=KV)
    asleep = P.peak_bytes(ppo, 8, placement="colocated", tp=1, kv_bytes=KV, offload=True)
    split = P.peak_bytes(ppo, 4, placement="disaggregated", tp=1, kv_bytes=KV, rollout_gpus=4)
    assert plain["peak"] > GPU.memory >= asleep["peak"]
    evidence.quote("colocated PPO peak per GPU, nothing offloaded (GB)", quoted=86.6, measured=plain["peak"] / 1e9, digits=1)
    evidence.quote("with the engine asleep during training (GB)", quoted=50.4, measured=asleep["peak"] / 1e9, digits=1)
    evidence.quote("disaggregated, 4 trainer GPUs (GB)", quoted=72.3, measured=split["training"] / 1e9, digits=1)
    evidence.quote("8B weight sync over one 400 Gb/s link (s)", quoted=0.32, measured=P.weight_sync_seconds(PSI, 50e9), digits=2)
    evidence.quote("70B weight sync over one 400 Gb/s link (s)", quoted=2.8,
                   measured=P.weight_sync_seconds(parameter_count(preset("llama-3-70b")), 50e9), digits=1)
    assert P.weight_sync_seconds(PSI, 50e9, receivers=16) == pytest.approx(P.weight_sync_seconds(PSI, 50e9))
    assert P.weight_sync_seconds(PSI, 50e9, receivers=16, scheme="sequential") == pytest.approx(16 * P.weight_sync_seconds(PSI, 50e9))


def _adam_deltas(lr: float, steps: int) -> tuple[list[float], float]:
    torch.manual_seed(0)
    model = TinyCausalLM(vocab=64, d=64, n_heads=4, n_layers=2)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    start = [p.detach().clone() for p in model.parameters()]
    gen = torch.Generator().manual_seed(1)
    per_step = []
    for _ in range(steps):
        x = torch.randint(0, 64, (8, 16), generator=gen)
        out = model(x)
        logits = out[0] if isinstance(out, tuple) else out
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 64), x.roll(-1, 1).reshape(-1))
        opt.zero_grad()
        loss.backward()
        before = [p.detach().clone() for p in model.parameters()]
        opt.step()
        after = [p.detach() for p in model.parameters()]
        per_step.append(P.bf16_changed_fraction(before, after))
        assert all(not torch.equal(a, b) for a, b in zip(before, after) if a.dim() > 1)   # fp32 changes everywhere
    return per_step, P.bf16_changed_fraction(start, [p.detach() for p in model.parameters()])


@pytest.mark.claim("rlsys.weight-sync-volume")
def test_bf16_deltas_are_sparse_at_rl_learning_rates(evidence):
    steps, total = _adam_deltas(1e-6, 100)
    big, _ = _adam_deltas(1e-5, 1)
    evidence.quote("bf16 weights changed by one Adam step at lr 1e-6 (%)", quoted=1.6, measured=100 * steps[0], digits=1)
    evidence.quote("per step later on (step 100, %)", quoted=0.6, measured=100 * steps[-1], digits=1)
    evidence.quote("after 100 steps, against the start (%)", quoted=11, measured=100 * total, digits=0)
    evidence.quote("one step at lr 1e-5 (%)", quoted=9.2, measured=100 * big[0], digits=1)
    full = P.weight_sync_seconds(1e12, 50e9)
    delta = P.weight_sync_seconds(1e12, 50e9, changed=steps[0])
    evidence.quote("full 1T sync over one link / sparse delta of one step", quoted=21, measured=full / delta, digits=0)
    evidence.quote("1T parameters over one 400 Gb/s link (s)", quoted=40, measured=full, digits=0)
    evidence.quote("over a node's 8 NICs (s)", quoted=5, measured=P.weight_sync_seconds(1e12, 50e9, links=8), digits=0)
