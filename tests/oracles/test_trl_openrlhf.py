"""Optional cross-check against TRL (``trl``, PyPI) and OpenRLHF (``openrlhf``, PyPI), CPU only.

TRL's formulas live inside trainer methods, so the methods themselves are called with a minimal stand-in
``self`` (the attributes they read) and a stand-in model that returns the given per-token log-probs:
``DPOTrainer._compute_loss`` (DPO variants) and ``GRPOTrainer._compute_loss`` (GRPO / Dr. GRPO / CISPO with
the bias-corrected KL). OpenRLHF's functions are loaded from their source files with the heavy imports
(deepspeed, ray, vllm) stubbed (``_load.py``): ``compute_approx_kl`` (k1/k2/k3, ``unbiased_gradient``) and
the GAE / cumulative-return methods of the experience maker.

Deliberate differences, each a named test:
* TRL's GRPO losses divide by all B rows, empty ones included; ours treat empty rows as absent
  (``test_trl_grpo_empty_row_deliberate_difference``).
* TRL 1.16's ``sigmoid`` has no label smoothing, so conservative DPO is not a TRL loss type any more; ours
  keeps it as ``cdpo`` (``test_trl_sigmoid_ignores_label_smoothing``).
* TRL's CISPO caps the weight at ``epsilon_high`` itself (an absolute bound, no lower bound); ours takes
  ``1 + clip_high`` and an optional lower bound, so the comparison passes ``clip_high = epsilon_high - 1``.
* OpenRLHF keeps observation tokens as time steps with r = V = 0 (equal to ours at gamma = lam = 1, not below:
  ``test_openrlhf_gae_interior_masks_deliberate_difference``); its ``get_cumulative_returns`` likewise discounts
  across masked interior tokens (``test_openrlhf_cumulative_returns_interior_masks_deliberate_difference``).
* TRL 1.16's GRPO ratio is ``exp(log_ratio)`` with no clamp; ours (like verl) clamps the token log-ratio to
  [-20, 20] (inputs here stay far inside it).
"""

from __future__ import annotations

import collections
import importlib.util
import sys
import types
from pathlib import Path

import pytest
import torch

if importlib.util.find_spec("ray") is None:
    sys.path.insert(0, str(Path(__file__).parent / "_stubs"))

from impls.rl.aggregation import aggregate  # noqa: E402
from impls.rl.dpo import dpo_variant_loss  # noqa: E402
from impls.rl.gae import discounted_returns, gae  # noqa: E402
from impls.rl.kl import kl_penalty  # noqa: E402
from impls.rl.policy_losses import cispo_loss  # noqa: E402
from impls.rl.ppo import ppo_clip_loss  # noqa: E402

F64 = torch.float64
SEEDS = list(range(6))


def _close(a, b, what, rtol=1e-9, atol=1e-10):
    a, b = torch.as_tensor(a, dtype=F64), torch.as_tensor(b, dtype=F64)
    assert torch.allclose(a, b, rtol=rtol, atol=atol), f"{what}: ours={a.tolist()} theirs={b.tolist()}"


class _Acc:
    device = torch.device("cpu")
    num_processes = 1
    sync_gradients = False

    def gather_for_metrics(self, x):
        return x

    def gather(self, x):
        return x

    def reduce(self, x, reduction="sum"):
        return x


# ---------------------------------------------------------------- TRL
def _trl():
    return pytest.importorskip("trl.trainer.dpo_trainer", reason="trl (and accelerate) not installed"), \
        pytest.importorskip("trl.trainer.grpo_trainer", reason="trl not installed")


def trl_dpo_loss(pc, pr, rc, rr, beta, loss_type, eps, lc, lr):
    dpo_mod, _ = _trl()
    B = pc.shape[0]
    lens = torch.cat([lc, lr])
    T = int(lens.max()) + 1
    cm = (torch.arange(T)[None, :] >= 1) & (torch.arange(T)[None, :] <= lens[:, None])
    per_tok = torch.zeros(2 * B, T - 1, dtype=pc.dtype)
    per_tok[:, 0] = torch.cat([pc, pr])  # the sequence log-prob on the first completion token
    out = types.SimpleNamespace(log_probs=per_tok, entropy=torch.zeros_like(per_tok), mean_logits=torch.zeros_like(per_tok),
                                is_top1=torch.zeros_like(per_tok, dtype=torch.bool), aux_loss=None)
    fake = types.SimpleNamespace(
        model=types.SimpleNamespace(training=True), accelerator=_Acc(), aux_loss_enabled=False, ld_alpha=None,
        precompute_ref_logps=True, f_divergence_type="reverse_kl", loss_types=[loss_type], loss_weights=[1.0], beta=beta,
        label_smoothing=eps, use_weighting=False, _metrics={"train": collections.defaultdict(list)},
        _total_train_tokens=0, _tp_size=1, args=types.SimpleNamespace())
    inputs = {"input_ids": torch.zeros(2 * B, T, dtype=torch.long), "attention_mask": torch.ones(2 * B, T, dtype=torch.long),
              "completion_mask": cm.long(), "ref_chosen_logps": rc, "ref_rejected_logps": rr}
    return dpo_mod.DPOTrainer._compute_loss(fake, lambda **kw: out, inputs, False)


def _pairs(seed, B=8):
    g = torch.Generator().manual_seed(seed)
    pc, pr, rc, rr = (torch.randn(B, generator=g, dtype=F64) * 4 for _ in range(4))
    return pc, pr, rc, rr, torch.randint(1, 30, (B,), generator=g), torch.randint(1, 30, (B,), generator=g)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("loss_type", ["sigmoid", "hinge", "ipo", "robust"])
def test_trl_dpo_variants(seed, loss_type):
    pc, pr, rc, rr, lc, lr = _pairs(seed)
    for beta, eps in ((0.1, 0.0), (0.3, 0.1), (1.0, 0.25)):
        theirs = trl_dpo_loss(pc, pr, rc, rr, beta, loss_type, eps, lc, lr)
        ours = dpo_variant_loss(pc, pr, rc, rr, beta, loss_type, eps, lc, lr)
        _close(ours, theirs, f"DPO {loss_type} beta={beta} eps={eps}")


def test_trl_sigmoid_ignores_label_smoothing():
    pc, pr, rc, rr, lc, lr = _pairs(99)
    theirs = trl_dpo_loss(pc, pr, rc, rr, 0.3, "sigmoid", 0.1, lc, lr)
    _close(dpo_variant_loss(pc, pr, rc, rr, 0.3, "sigmoid"), theirs, "sigmoid")
    assert abs(float(dpo_variant_loss(pc, pr, rc, rr, 0.3, "cdpo", 0.1)) - float(theirs)) > 1e-3


def trl_grpo_loss(logp, old, ref, adv, mask, *, beta, loss_type, bias_corr, eps=(0.2, 0.28), max_len=None):
    _, grpo_mod = _trl()
    B, T = logp.shape
    fake = types.SimpleNamespace(
        model=types.SimpleNamespace(training=True), accelerator=_Acc(), top_entropy_quantile=1.0,
        off_policy_mask_threshold=None, importance_sampling_level="token", beta=beta,
        args=types.SimpleNamespace(use_bias_correction_kl=bias_corr, delta=None, steps_per_generation=1),
        loss_type=loss_type, epsilon_low=eps[0], epsilon_high=eps[1], use_vllm=False,
        current_gradient_accumulation_steps=1, max_completion_length=max_len or T, _entropy_bonus_enabled=False,
        aux_loss_enabled=False, _metrics={"train": collections.defaultdict(list), "eval": collections.defaultdict(list)})
    fake._get_per_token_logps_and_entropies = lambda *a, **k: (logp, torch.zeros_like(logp), None)
    inputs = {"prompt_ids": torch.zeros(B, 1, dtype=torch.long), "prompt_mask": torch.ones(B, 1, dtype=torch.long),
              "completion_ids": torch.zeros(B, T, dtype=torch.long), "completion_mask": mask.long(),
              "advantages": adv, "old_per_token_logps": old, "ref_per_token_logps": ref, "num_items_in_batch": mask.sum()}
    return grpo_mod.GRPOTrainer._compute_loss(fake, None, inputs)


def _grpo_batch(seed, B=6, T=9, empty_row=False):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(B, T, generator=g, dtype=F64) * 3
    logp = old + 0.3 * torch.randn(B, T, generator=g, dtype=F64)
    ref = old + 0.5 * torch.randn(B, T, generator=g, dtype=F64)
    adv = torch.randn(B, generator=g, dtype=F64)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(F64)
    if empty_row:
        mask[1] = 0.0
    return logp, old, ref, adv, mask


def _ours_grpo(logp, old, ref, adv, mask, beta, loss_type, eps=(0.2, 0.28), max_len=None):
    A = adv[:, None].expand_as(mask)
    if loss_type == "cispo":
        pg, _ = cispo_loss(logp, old, A, mask, clip_low=None, clip_high=eps[1] - 1.0, agg="token-mean")
        agg, c = "token-mean", None
    else:
        agg = {"grpo": "seq-mean-token-mean", "dr_grpo": "seq-mean-token-sum-norm"}[loss_type]
        c = max_len or mask.shape[1]
        pg, _ = ppo_clip_loss(logp, old, A, mask, clip_low=eps[0], clip_high=eps[1], agg=agg, norm_constant=c)
    kl = kl_penalty(logp, ref, "k3-is", logp_old=old)  # r * k3 with r differentiable: TRL's bias correction
    return pg + beta * aggregate(kl, mask, agg, c)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "cispo"])
def test_trl_grpo_losses_with_bias_corrected_kl(seed, loss_type):
    """Value and gradient: PPO clip (or CISPO) + beta * r*k3, aggregated as TRL does; Dr. GRPO with max_len."""
    logp, old, ref, adv, mask = _grpo_batch(300 + seed)
    eps = (0.2, 5.0) if loss_type == "cispo" else (0.2, 0.28)
    a = logp.clone().requires_grad_(True)
    b = logp.clone().requires_grad_(True)
    theirs = trl_grpo_loss(b, old, ref, adv, mask, beta=0.04, loss_type=loss_type, bias_corr=True, eps=eps, max_len=16)
    ours = _ours_grpo(a, old, ref, adv, mask, 0.04, loss_type, eps, 16)
    _close(ours.detach(), theirs.detach(), f"TRL {loss_type} loss", rtol=1e-9)
    (ga,) = torch.autograd.grad(ours, a)
    (gb,) = torch.autograd.grad(theirs, b)
    _close(ga, gb, f"TRL {loss_type} gradient", rtol=1e-8, atol=1e-12)


def test_trl_grpo_empty_row_deliberate_difference():
    logp, old, ref, adv, mask = _grpo_batch(399, empty_row=True)
    theirs = trl_grpo_loss(logp, old, ref, adv, mask, beta=0.0, loss_type="grpo", bias_corr=False)
    ours = _ours_grpo(logp, old, ref, adv, mask, 0.0, "grpo")
    B, kept = mask.shape[0], int((mask.sum(-1) > 0).sum())
    _close(theirs, ours * kept / B, "TRL divides by all B rows")


# ---------------------------------------------------------------- OpenRLHF
def _openrlhf():
    spec = importlib.util.find_spec("openrlhf")
    if spec is None:
        pytest.skip("openrlhf not installed")
    sys.path.insert(0, str(Path(__file__).parent))
    from _load import load_file

    root = Path(spec.origin).parent
    utils = load_file("openrlhf.models.utils", root / "models/utils.py",
                      ("deepspeed", "peft", "transformers", "flash_attn", "openrlhf"))
    maker = load_file("oracle_openrlhf_experience_maker", root / "trainer/ppo_utils/experience_maker.py",
                      ("ray", "openrlhf.trainer", "openrlhf.utils", "vllm", "deepspeed"))
    return utils, maker.RemoteExperienceMaker


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", ["k1", "k2", "k3"])
def test_openrlhf_kl_values_and_unbiased_gradient(seed, kind):
    """OpenRLHF casts log-probs to fp32 (``.float()``); both sides get fp32 inputs and are compared at fp32 precision."""
    utils, _ = _openrlhf()
    logp, old, ref, _, _ = (t.float() for t in _grpo_batch(500 + seed))
    theirs = utils.compute_approx_kl(logp, ref, kl_estimator=kind)
    _close(kl_penalty(logp, ref, kind, clamp=10.0), theirs, f"OpenRLHF {kind} value", rtol=1e-6, atol=1e-6)
    a = logp.clone().requires_grad_(True)
    b = logp.clone().requires_grad_(True)
    ours = kl_penalty(a, ref, kind + "+is", logp_old=old, clamp=10.0)
    theirs = utils.compute_approx_kl(b, ref, log_probs_old=old, kl_estimator=kind, unbiased_gradient=True)
    _close(ours.detach(), theirs.detach(), f"OpenRLHF {kind} unbiased_gradient value", rtol=1e-6, atol=1e-6)
    (ga,) = torch.autograd.grad(ours.sum(), a)
    (gb,) = torch.autograd.grad(theirs.sum(), b)
    _close(ga, gb, f"OpenRLHF {kind} unbiased_gradient gradient", rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
def test_openrlhf_gae_right_padding(seed):
    _, maker = _openrlhf()
    logp, old, ref, _, mask = _grpo_batch(600 + seed)
    g = torch.Generator().manual_seed(600 + seed)
    rewards = torch.randn(mask.shape, generator=g, dtype=F64)
    values = torch.randn(mask.shape, generator=g, dtype=F64)
    adv, ret = maker.get_advantages_and_returns(None, values, rewards, mask, 0.99, 0.95)
    ours_a, ours_r = gae(rewards, values, mask, 0.99, 0.95)
    m = mask.bool()
    _close(ours_a[m], adv[m], "OpenRLHF GAE advantages")
    _close(ours_r[m], ret[m], "OpenRLHF GAE returns")
    cum = maker.get_cumulative_returns(None, rewards, mask, 0.99)
    _close(discounted_returns(rewards, mask, 0.99)[m], cum[m], "OpenRLHF cumulative returns")


def test_openrlhf_cumulative_returns_interior_masks_deliberate_difference():
    _, maker = _openrlhf()
    mask = torch.tensor([[1, 1, 0, 0, 1]], dtype=F64)
    rewards = torch.tensor([[0, 0, 0, 0, 1]], dtype=F64)
    theirs = maker.get_cumulative_returns(None, rewards, mask, 0.9)
    ours = discounted_returns(rewards, mask, 0.9)
    _close(theirs[0], [0.9**4, 0.9**3, 0.9**2, 0.9, 1.0], "OpenRLHF: a discount step at every masked token")
    _close(ours[0], [0.9**2, 0.9, 0.0, 0.0, 1.0], "ours: masked tokens skipped, 0 there")
    _close(maker.get_cumulative_returns(None, rewards, mask, 1.0)[0, [0, 1, 4]],
           discounted_returns(rewards, mask, 1.0)[0, [0, 1, 4]], "gamma = 1: equal on model tokens")


def test_openrlhf_gae_interior_masks_deliberate_difference():
    _, maker = _openrlhf()
    mask = torch.tensor([[1, 1, 0, 0, 1]], dtype=F64)
    rewards = torch.tensor([[0, 0, 0, 0, 1]], dtype=F64)
    values = torch.tensor([[0.5, 0.5, 9, 9, 0.5]], dtype=F64)
    same, _ = maker.get_advantages_and_returns(None, values, rewards, mask, 1.0, 1.0)
    ours, _ = gae(rewards, values, mask, 1.0, 1.0)
    _close(same[0, :2], ours[0, :2], "gamma = lam = 1: OpenRLHF's zero steps telescope away")
    low, _ = maker.get_advantages_and_returns(None, values, rewards, mask, 1.0, 0.95)
    ours_low, _ = gae(rewards, values, mask, 1.0, 0.95)
    assert [round(x, 4) for x in low[0, :2].tolist()] == [0.3609, 0.3799]
    assert [round(x, 4) for x in ours_low[0, :2].tolist()] == [0.4512, 0.475]
