r"""One hand-written PPO-RLHF iteration on a tiny token policy (no framework).

The loop InstructGPT-style RLHF runs, at a size that trains in seconds on a CPU:

1. **Rollout** (no grad): sample a response $y\sim\pi_{\theta_{old}}(\cdot\mid x)$ token by token,
   record $\log\pi_{old}(y_t)$, $\log\pi_{ref}(y_t)$ and $V_{old}(s_t)$; right-pad after EOS.
2. **Rewards**: $r_t = -\beta\,\widehat{KL}_t$ on every response token, plus the reward-model
   score $R(x,y)$ on the last one (:func:`impls.rl.reward.kl_shaped_rewards`).
3. **GAE**: $\delta_t = r_t+\gamma V_{t+1}-V_t$, $\hat A_t=\sum_l(\gamma\lambda)^l\delta_{t+l}$,
   value target $\hat R_t=\hat A_t+V_t$ (the $\lambda$-return); advantages whitened over the batch.
4. **Update**: ``epochs`` passes of shuffled minibatches minimising
   $$L = -\,\mathbb E_t\big[\min(\rho_t\hat A_t,\ \mathrm{clip}(\rho_t,1-\epsilon,1+\epsilon)\hat A_t)\big]
        + c_v\,L^{V} - c_e\,\mathbb E_t[H(\pi_\theta(\cdot\mid s_t))],\quad
        \rho_t = \exp(\log\pi_\theta(y_t)-\log\pi_{old}(y_t)),$$
   with $\log\pi_{old}$ a detached constant; gradient-norm clipping.
5. **KL control**: feed the mean per-sequence KL to the controller, which sets the next $\beta$.

The policy, the critic and the reference are separate networks (the critic is not a head on
the policy, as in InstructGPT, where the value function is initialised from the RM).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from impls.rl.gae import gae
from impls.rl.kl import kl_estimate
from impls.rl.masking import masked_sum, whiten
from impls.rl.ppo import entropy_from_logits, ppo_clip_loss, value_loss
from impls.rl.reward import kl_shaped_rewards

__all__ = [
    "PPOConfig",
    "TinyNet",
    "BagOfTokensRM",
    "token_logp",
    "generate",
    "rollout",
    "ppo_rlhf_iteration",
]


@dataclass
class PPOConfig:
    gamma: float = 1.0  # no discounting inside a response (common in RLHF)
    lam: float = 0.95
    clip: float = 0.2
    vf_clip: float | None = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    epochs: int = 4
    minibatch_size: int = 32
    kl_kind: str = "k1"
    max_grad_norm: float = 1.0
    whiten_advantages: bool = True
    agg: str = "token-mean"


class TinyNet(nn.Module):
    """A tiny autoregressive network: output at position t depends on (prompt, y_{t-1}, t).

    ``out_dim = vocab`` gives a policy (logits), ``out_dim = 1`` a critic (values).
    Position t reads token ``y_{t-1}`` (BOS = ``vocab`` at t = 0), so teacher-forced
    evaluation of a whole [B, T] response is one vectorised call.
    """

    def __init__(self, vocab: int, n_prompts: int, max_len: int, out_dim: int, hidden: int = 32):
        super().__init__()
        self.vocab, self.max_len, self.out_dim = vocab, max_len, out_dim
        self.tok = nn.Embedding(vocab + 1, hidden)  # + BOS
        self.prompt = nn.Embedding(n_prompts, hidden)
        self.pos = nn.Embedding(max_len, hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, out_dim))

    def step(self, prompts: torch.Tensor, prev: torch.Tensor, t: int) -> torch.Tensor:
        """Output for one position t: [B, out_dim]."""
        pos = torch.full_like(prev, t)
        return self.mlp(self.tok(prev) + self.prompt(prompts) + self.pos(pos))

    def forward(self, prompts: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Teacher-forced outputs for every position: [B, T, out_dim] (values: [B, T])."""
        B, T = tokens.shape
        if T > self.max_len:
            raise ValueError(f"sequence length {T} exceeds max_len {self.max_len}")
        bos = torch.full((B, 1), self.vocab, dtype=tokens.dtype, device=tokens.device)
        prev = torch.cat([bos, tokens[:, :-1]], dim=1)
        pos = torch.arange(T, device=tokens.device).expand(B, T)
        h = self.tok(prev) + self.prompt(prompts)[:, None, :] + self.pos(pos)
        out = self.mlp(h)
        return out.squeeze(-1) if self.out_dim == 1 else out


class BagOfTokensRM(nn.Module):
    """A frozen toy reward model: $R(x, y) = \\sum_t m_t\\, w_{x, y_t}$ (one weight per prompt and token)."""

    def __init__(self, weights: torch.Tensor):
        super().__init__()
        self.register_buffer("w", weights.float())

    @torch.no_grad()
    def forward(self, prompts: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return masked_sum(self.w[prompts[:, None], tokens], mask, dim=1)


def token_logp(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """$\\log\\pi(y_t\\mid s_t)$ of the given tokens, [B, T], computed in fp32."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


@torch.no_grad()
def generate(
    policy: TinyNet, prompts: torch.Tensor, max_len: int, eos: int, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample responses (loop over positions: generation is sequential).

    Returns tokens [B, T] (0 after the end) and mask [B, T] (1 up to and including EOS).
    """
    B = prompts.shape[0]
    dev = prompts.device
    tokens = torch.zeros(B, max_len, dtype=torch.long, device=dev)
    mask = torch.zeros(B, max_len, dtype=torch.float32, device=dev)
    alive = torch.ones(B, dtype=torch.bool, device=dev)
    prev = torch.full((B,), policy.vocab, dtype=torch.long, device=dev)
    for t in range(max_len):
        probs = torch.softmax(policy.step(prompts, prev, t).float(), dim=-1)
        tok = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        tokens[:, t] = torch.where(alive, tok, torch.zeros_like(tok))
        mask[:, t] = alive.float()
        alive = alive & (tok != eos)
        prev = tok
    return tokens, mask


@torch.no_grad()
def rollout(policy, critic, ref_policy, reward_model, prompts, max_len, eos, beta, kind="k1", generator=None):
    """Steps 1-2: sample, score, and build KL-shaped per-token rewards. Everything returned is detached."""
    tokens, mask = generate(policy, prompts, max_len, eos, generator)
    logp_old = token_logp(policy(prompts, tokens), tokens) * mask
    logp_ref = token_logp(ref_policy(prompts, tokens), tokens) * mask
    values_old = critic(prompts, tokens).float() * mask
    score = reward_model(prompts, tokens, mask)
    rewards = kl_shaped_rewards(score, logp_old, logp_ref, mask, beta, kind)
    kl = kl_estimate(logp_old, logp_ref, kind) * mask  # for the controller and the logs
    return dict(
        prompts=prompts, tokens=tokens, mask=mask, logp_old=logp_old, logp_ref=logp_ref,
        values_old=values_old, score=score, rewards=rewards, kl=kl,
    )


def ppo_rlhf_iteration(
    policy: TinyNet,
    critic: TinyNet,
    ref_policy: TinyNet,
    reward_model: nn.Module,
    optimizer: torch.optim.Optimizer,
    prompts: torch.Tensor,
    kl_ctl,
    cfg: PPOConfig = PPOConfig(),
    max_len: int = 6,
    eos: int = 0,
    generator: torch.Generator | None = None,
) -> dict:
    """One PPO-RLHF iteration (rollout, rewards, GAE, ``cfg.epochs`` x minibatch updates, KL control).

    ``generator`` (optional) must live on the prompts' device; everything follows ``prompts.device``.
    Returns JSON-able statistics of the rollout and the update.
    """
    batch = rollout(policy, critic, ref_policy, reward_model, prompts, max_len, eos,
                    kl_ctl.value, cfg.kl_kind, generator)
    mask = batch["mask"]
    adv, returns = gae(batch["rewards"], batch["values_old"], mask, cfg.gamma, cfg.lam)
    if cfg.whiten_advantages:
        adv = whiten(adv, mask)
    B = prompts.shape[0]
    stats: dict[str, list[float]] = {"policy_loss": [], "value_loss": [], "entropy": [], "clip_frac": [],
                                     "approx_kl": [], "ratio_max": []}
    params = [p for g in optimizer.param_groups for p in g["params"]]
    for _ in range(cfg.epochs):
        gen_dev = generator.device if generator is not None else prompts.device
        perm = torch.randperm(B, generator=generator, device=gen_dev).to(prompts.device)
        for start in range(0, B, cfg.minibatch_size):
            idx = perm[start : start + cfg.minibatch_size]
            m = mask[idx]
            logits = policy(prompts[idx], batch["tokens"][idx])
            logp = token_logp(logits, batch["tokens"][idx])
            pl, st = ppo_clip_loss(logp, batch["logp_old"][idx], adv[idx], m, clip_low=cfg.clip, agg=cfg.agg)
            v = critic(prompts[idx], batch["tokens"][idx])
            vl = value_loss(v, batch["values_old"][idx], returns[idx], m, clip=cfg.vf_clip, agg=cfg.agg)
            ent = entropy_from_logits(logits, m, agg=cfg.agg)
            loss = pl + cfg.vf_coef * vl - cfg.ent_coef * ent
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            optimizer.step()
            stats["ratio_max"].append(float(st["ratio_max"]))  # ratio before this minibatch's step
            stats["policy_loss"].append(pl.item())
            stats["value_loss"].append(vl.item())
            stats["entropy"].append(ent.item())
            stats["clip_frac"].append(float(st["clip_frac"]))
            stats["approx_kl"].append(float(st["approx_kl"]))
    seq_kl = float(masked_sum(batch["kl"], mask, dim=1).mean())
    beta_used = kl_ctl.value
    kl_ctl.update(seq_kl, B)
    out = {k: sum(v) / len(v) for k, v in stats.items() if k != "ratio_max"}
    out.update(
        ratio_max=max(stats["ratio_max"]),
        score_mean=float(batch["score"].mean()),
        seq_kl=seq_kl,
        beta_used=beta_used,
        beta_next=kl_ctl.value,
        mean_len=float(mask.sum(1).mean()),
    )
    return out
