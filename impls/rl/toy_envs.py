r"""Small environments whose answers can be computed exactly.

* :class:`SoftmaxBandit` – a K-armed bandit with a softmax policy; $J(\theta)=\sum_a \pi_\theta(a) r_a$.
* :class:`TabularMDP` – a finite-horizon MDP with a stationary softmax policy
  $\pi_\theta(a\mid s)=\mathrm{softmax}(\theta_s)_a$. Every trajectory can be enumerated, so
  $J(\theta)=\sum_\tau p_\theta(\tau) G(\tau)$, its gradient (autograd) and the exact mean and
  variance of any per-trajectory estimator are available. A second oracle (backward dynamic
  programming) gives $V_t, Q_t$ and the state marginals $d_t$.
* :class:`RingWalker` – an object moving on a ring with a hidden velocity; observing the position
  alone is not Markov (exact distributions over observation sequences).
* :class:`RepetitionGame` – a two-line "board game" with a repetition rule: the board picture is
  not a Markov state, because the optimal move depends on how often the board has occurred.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch


class SoftmaxBandit:
    r"""K-armed bandit, arm $a$ pays $r_a$ plus Gaussian noise of std ``noise``."""

    def __init__(self, means: torch.Tensor, noise: float = 0.0):
        if means.dim() != 1:
            raise ValueError(f"means must be 1-D, got shape {tuple(means.shape)}")
        self.means = means.to(torch.float64)
        self.noise = noise

    @property
    def n_arms(self) -> int:
        return self.means.numel()

    def J(self, logits: torch.Tensor) -> torch.Tensor:
        r"""$J(\theta)=\sum_a \mathrm{softmax}(\theta)_a\, r_a$ (differentiable)."""
        return (torch.softmax(logits.to(torch.float64), -1) * self.means.to(logits.device)).sum(-1)

    def pull(self, actions: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        r = self.means.to(actions.device)[actions]
        if self.noise > 0:
            r = r + self.noise * torch.randn(r.shape, generator=generator, dtype=r.dtype).to(r.device)
        return r


@dataclass
class Trajectories:
    """All trajectories of a finite-horizon MDP, as ``[N, H]`` tensors."""

    states: torch.Tensor  # long [N, H]
    actions: torch.Tensor  # long [N, H]
    rewards: torch.Tensor  # float64 [N, H]
    env_logp: torch.Tensor  # float64 [N]: log p0(s_0) + sum_t log P(s_{t+1}|s_t,a_t)


class TabularMDP:
    r"""Finite-horizon MDP: $s_0\sim p_0$, $s_{t+1}\sim P(\cdot\mid s_t,a_t)$, reward $R(s_t,a_t)$,
    $t=0..H-1$; return $G=\sum_t \gamma^t r_t$. Policy: stationary softmax logits ``[S, A]``."""

    def __init__(self, p0: torch.Tensor, P: torch.Tensor, R: torch.Tensor, horizon: int, gamma: float = 1.0):
        S, A, S2 = P.shape
        if S != S2 or p0.shape != (S,) or R.shape != (S, A):
            raise ValueError(f"bad shapes p0 {tuple(p0.shape)}, P {tuple(P.shape)}, R {tuple(R.shape)}")
        if not torch.allclose(P.sum(-1), torch.ones(S, A, dtype=P.dtype)) or abs(float(p0.sum()) - 1) > 1e-9:
            raise ValueError("p0 and every P[s, a] must sum to 1")
        self.p0, self.P, self.R = p0.double(), P.double(), R.double()
        self.S, self.A, self.H, self.gamma = S, A, horizon, gamma

    @staticmethod
    def random(S: int, A: int, horizon: int, gamma: float = 1.0, seed: int = 0) -> "TabularMDP":
        g = torch.Generator().manual_seed(seed)
        p0 = torch.softmax(torch.randn(S, generator=g, dtype=torch.float64), 0)
        P = torch.softmax(2.0 * torch.randn(S, A, S, generator=g, dtype=torch.float64), -1)
        R = torch.randn(S, A, generator=g, dtype=torch.float64)
        return TabularMDP(p0, P, R, horizon, gamma)

    # ---- enumeration oracle -------------------------------------------------------------
    def trajectories(self) -> Trajectories:
        """Every (s_0, a_0, ..., s_{H-1}, a_{H-1}) with non-zero probability under the dynamics."""
        S, A, H = self.S, self.A, self.H
        rows_s, rows_a, rows_lp = [], [], []
        for combo in itertools.product(range(S), range(A), repeat=H):
            s, a = combo[0::2], combo[1::2]
            lp = torch.log(self.p0[s[0]])
            for t in range(H - 1):
                lp = lp + torch.log(self.P[s[t], a[t], s[t + 1]])
            if torch.isfinite(lp):
                rows_s.append(s)
                rows_a.append(a)
                rows_lp.append(lp)
        states = torch.tensor(rows_s, dtype=torch.long)
        actions = torch.tensor(rows_a, dtype=torch.long)
        return Trajectories(states, actions, self.R[states, actions], torch.stack(rows_lp))

    def policy_logp(self, logits: torch.Tensor, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        r"""$\log\pi_\theta(a_t\mid s_t)$ per step, ``[N, H]``."""
        logp_all = torch.log_softmax(logits, -1)
        return logp_all[states, actions]

    def traj_probs(self, logits: torch.Tensor, tr: Trajectories | None = None) -> torch.Tensor:
        r"""$p_\theta(\tau)=p_0(s_0)\prod_t \pi_\theta(a_t\mid s_t)P(s_{t+1}\mid s_t,a_t)$ for every trajectory."""
        tr = tr or self.trajectories()
        return torch.exp(tr.env_logp + self.policy_logp(logits, tr.states, tr.actions).sum(-1))

    def discounts(self) -> torch.Tensor:
        return self.gamma ** torch.arange(self.H, dtype=torch.float64)

    def J(self, logits: torch.Tensor, tr: Trajectories | None = None) -> torch.Tensor:
        r"""$J(\theta)=\sum_\tau p_\theta(\tau)\sum_t\gamma^t r_t$ by enumeration (differentiable)."""
        tr = tr or self.trajectories()
        return (self.traj_probs(logits, tr) * (tr.rewards * self.discounts()).sum(-1)).sum()

    def exact_grad(self, logits: torch.Tensor) -> torch.Tensor:
        th = logits.detach().clone().requires_grad_(True)
        (g,) = torch.autograd.grad(self.J(th), th)
        return g

    def estimator_moments(self, logits: torch.Tensor, per_traj: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Exact mean $\sum_\tau p(\tau) g(\tau)$ and total variance $E\|g\|^2-\|Eg\|^2$ of a
        per-trajectory estimator ``per_traj`` of shape ``[N, ...]``."""
        p = self.traj_probs(logits.detach()).detach()
        g = per_traj.reshape(per_traj.shape[0], -1)
        mean = (p[:, None] * g).sum(0)
        var = (p * (g**2).sum(-1)).sum() - (mean**2).sum()
        return mean.reshape(per_traj.shape[1:]), var

    # ---- dynamic-programming oracle -----------------------------------------------------
    def dp(self, logits: torch.Tensor) -> dict[str, torch.Tensor]:
        r"""Backward DP: $Q_t(s,a)=R(s,a)+\gamma\sum_{s'}P(s'|s,a)V_{t+1}(s')$, $V_t=\sum_a\pi Q_t$;
        forward state marginals $d_t(s)$. Returns tensors ``V [H+1,S]``, ``Q [H,S,A]``, ``d [H,S]``."""
        pi = torch.softmax(logits, -1)
        V = torch.zeros(self.H + 1, self.S, dtype=torch.float64)
        Q = torch.zeros(self.H, self.S, self.A, dtype=torch.float64)
        for t in range(self.H - 1, -1, -1):
            Q[t] = self.R + self.gamma * self.P @ V[t + 1]
            V[t] = (pi * Q[t]).sum(-1)
        d = torch.zeros(self.H, self.S, dtype=torch.float64)
        d[0] = self.p0
        for t in range(1, self.H):
            d[t] = torch.einsum("s,sa,sax->x", d[t - 1], pi, self.P)
        return {"V": V, "Q": Q, "d": d, "pi": pi}

    def optimal_dp(self) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Optimal $Q^*_t(s,a)$ ``[H,S,A]`` and greedy actions ``[H,S]`` (time-dependent in general)."""
        V = torch.zeros(self.S, dtype=torch.float64)
        Qs = []
        for _ in range(self.H):
            Q = self.R + self.gamma * self.P @ V
            V = Q.max(-1).values
            Qs.append(Q)
        Qs = torch.stack(Qs[::-1])
        return Qs, Qs.argmax(-1)

    # ---- sampling (black box: the learner sees only s, a, r) -------------------------------
    def sample(self, logits: torch.Tensor, n: int, generator: torch.Generator | None = None) -> Trajectories:
        pi = torch.softmax(logits.detach(), -1)
        s = torch.multinomial(self.p0, n, replacement=True, generator=generator)
        S_, A_, R_ = [], [], []
        for _ in range(self.H):  # loop over time only; batched over trajectories
            a = torch.multinomial(pi[s], 1, generator=generator).squeeze(-1)
            S_.append(s)
            A_.append(a)
            R_.append(self.R[s, a])
            s = torch.multinomial(self.P[s, a], 1, generator=generator).squeeze(-1)
        st, ac = torch.stack(S_, 1), torch.stack(A_, 1)
        return Trajectories(st, ac, torch.stack(R_, 1), torch.zeros(n, dtype=torch.float64))


class RingWalker:
    r"""An object on a ring of ``n`` cells with a hidden velocity $v\in\{-1,+1\}$; each step
    $x_{t+1}=x_t+v_{t+1} \bmod n$, where the velocity flips with probability ``flip``. Start:
    uniform position and velocity. Observation: the position $x_t$ only."""

    def __init__(self, n: int = 5, flip: float = 0.1):
        self.n, self.flip = n, flip

    def sequence_probs(self, T: int) -> dict[tuple[int, ...], float]:
        """Exact probability of every observation sequence (x_0, ..., x_{T-1})."""
        out: dict[tuple[int, ...], float] = {}
        for x0 in range(self.n):
            for v0 in (-1, 1):
                stack = [((x0,), v0, 1.0 / (2 * self.n))]
                while stack:
                    xs, v, p = stack.pop()
                    if len(xs) == T:
                        out[xs] = out.get(xs, 0.0) + p
                        continue
                    for nv, q in ((v, 1 - self.flip), (-v, self.flip)):
                        stack.append((xs + ((xs[-1] + nv) % self.n,), nv, p * q))
        return out

    @staticmethod
    def conditional(probs: dict[tuple[int, ...], float], given: dict[int, int], target: int) -> dict[int, float]:
        """P(x_target = . | x_i = given[i]) from the exact joint."""
        num: dict[int, float] = {}
        for xs, p in probs.items():
            if all(xs[i] == v for i, v in given.items()):
                num[xs[target]] = num.get(xs[target], 0.0) + p
        z = sum(num.values())
        return {k: v / z for k, v in num.items()} if z > 0 else {}


class RepetitionGame:
    r"""A repetition rule makes the board picture non-Markov.

    The player stands at board ``P``. Move ``try``: wins (+1) with probability ``p_win``,
    otherwise the board returns to exactly the same picture ``P``. Move ``safe``: ends the game
    with value ``safe_value``. When ``P`` appears for the ``max_occurrences``-th time the game is
    drawn at once (value 0), like a repetition rule in chess. The Markov state is
    (board, occurrence count); the board alone is not enough."""

    def __init__(self, p_win: float = 0.5, safe_value: float = 0.6, max_occurrences: int = 3):
        self.p_win, self.safe_value, self.max_occurrences = p_win, safe_value, max_occurrences

    def optimal(self, count: int) -> tuple[float, str]:
        """Optimal value and move at board P when P has now occurred ``count`` times (exact recursion)."""
        if count >= self.max_occurrences:
            return 0.0, "draw"
        v_next, _ = self.optimal(count + 1)
        v_try = self.p_win + (1 - self.p_win) * v_next
        return (v_try, "try") if v_try > self.safe_value else (self.safe_value, "safe")

    def board_only_value(self, q_try: float) -> float:
        """Value from the first occurrence of a policy that sees the board only: play ``try`` with
        probability ``q_try`` at every visit of P (the same at each visit, as the board looks the same)."""
        v = 0.0  # value at the max_occurrences-th visit (draw)
        for _ in range(self.max_occurrences - 1):
            v = q_try * (self.p_win + (1 - self.p_win) * v) + (1 - q_try) * self.safe_value
        return v
