"""Kata properties for ``online_logprobs(logits, targets, *, block_size, temperature, ignore_index)``
-> ``(logp, entropy)``: token log-probs and entropies of ``[N, V]`` logits, reading the vocabulary
``block_size`` columns at a time with a running maximum (online softmax).

Conventions: ``x = logits / temperature``; ``logp[i] = x[i, y_i] - logsumexp(x[i])``, 0 where
``targets[i] == ignore_index``; ``entropy[i] = -sum_v p log p`` for every row; results ``[N]`` in fp64
for fp64 logits. Oracle: the two-pass ``log_softmax`` of the full row in fp64, computed here.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

IGNORE = -100


def _oracle(z: torch.Tensor, y: torch.Tensor, tau: float) -> tuple[list[float], list[float]]:
    x = z.double() / tau
    ls = torch.log_softmax(x, -1)
    lp = torch.where(y == IGNORE, 0.0, ls.gather(1, y.clamp(min=0)[:, None])[:, 0])
    ent = -(ls.exp() * ls).sum(-1)
    return lp.tolist(), ent.tolist()


@st.composite
def cases(draw, max_v: int = 200):
    N = draw(st.integers(1, 5))
    V = draw(st.integers(1, max_v))
    block = draw(st.integers(1, max_v + 10))
    tau = draw(st.sampled_from([1.0, 0.5, 2.0]))
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(N, V, generator=gen, dtype=torch.float64) * draw(st.sampled_from([1.0, 10.0]))
    y = torch.randint(0, V, (N,), generator=gen)
    y = torch.where(torch.rand(N, generator=gen) < 0.25, IGNORE, y)
    return z, y, block, tau


def _check(impl, z, y, block, tau, tol=1e-9):
    want_lp, want_ent = _oracle(z, y, tau)
    lp, ent = impl(z.clone(), y.clone(), block_size=block, temperature=tau, ignore_index=IGNORE)
    lp = [float(v) for v in torch.as_tensor(lp).double().reshape(-1).tolist()]
    ent = [float(v) for v in torch.as_tensor(ent).double().reshape(-1).tolist()]
    where = f"N,V={tuple(z.shape)}, block_size={block}, temperature={tau}, targets={y.tolist()}"
    assert len(lp) == len(want_lp) and len(ent) == len(want_ent), f"{where}: expected [N] outputs, got {len(lp)}, {len(ent)}"
    for i, (a, b, c, d) in enumerate(zip(lp, want_lp, ent, want_ent)):
        mag = max(1.0, abs(b), abs(d))
        assert abs(a - b) <= tol * mag, f"{where}: row {i} log-prob expected {b!r}, got {a!r}"
        assert abs(c - d) <= tol * mag, f"{where}: row {i} entropy expected {d!r}, got {c!r}"


def prop_matches_two_pass(impl) -> None:
    """Log-probs and entropies equal the two-pass fp64 log_softmax, for any V and block size (ragged last block)."""

    @given(cases())
    def check(case):
        _check(impl, *case)

    check()


def prop_maximum_in_a_late_block(impl) -> None:
    """The largest logit arrives in the last block, far above the rest (+1000): earlier sums must be rescaled,
    and nothing may overflow (exp(1000) is inf in fp64)."""

    @given(cases(max_v=120), st.sampled_from([1000.0, -1000.0]))
    def check(case, shift):
        z, y, block, tau = case
        z = z.clone()
        z[:, -1] += abs(shift)  # a dominant last column
        if shift < 0:
            z[:, :-1] += shift  # and, the other way round, all earlier blocks far below it
        _check(impl, z, y, block, tau)

    check()


def prop_ignore_index_gives_zero(impl) -> None:
    """A row whose target is ignore_index gets log-prob exactly 0 (and its entropy as usual)."""

    @given(cases(max_v=60))
    def check(case):
        z, y, block, tau = case
        y = torch.full_like(y, IGNORE)
        lp, _ = impl(z.clone(), y, block_size=block, temperature=tau, ignore_index=IGNORE)
        got = torch.as_tensor(lp).double().reshape(-1).tolist()
        assert all(v == 0.0 for v in got), f"N,V={tuple(z.shape)}: every target ignored, expected zeros, got {got}"
        _check(impl, z, y, block, tau)

    check()


ALL = [prop_matches_two_pass, prop_maximum_in_a_late_block, prop_ignore_index_gives_zero]
