"""Kata properties for ``grpo_advantages(scores, group_size, scale_by_std=True, eps=1e-6)``.

Each ``prop_*`` takes the implementation under test and raises ``AssertionError`` with the
inputs, the expected and the received values. The oracle is plain-Python statistics in fp64.
"""

from __future__ import annotations

import math
import statistics

import torch
from hypothesis import given
from hypothesis import strategies as st

_score = st.floats(min_value=-10, max_value=10, allow_nan=False, width=32)


@st.composite
def grouped_scores(draw, max_groups: int = 4, max_size: int = 6):
    g = draw(st.integers(min_value=2, max_value=max_size))
    n = draw(st.integers(min_value=1, max_value=max_groups))
    return draw(st.lists(_score, min_size=g * n, max_size=g * n)), g


def _oracle(scores: list[float], g: int, scale_by_std: bool, eps: float) -> list[float]:
    out = []
    for k in range(0, len(scores), g):
        grp = scores[k : k + g]
        mu = math.fsum(grp) / g
        sd = statistics.stdev(grp) if scale_by_std else None  # unbiased (G-1)
        out += [(x - mu) / (sd + eps) if scale_by_std else x - mu for x in grp]
    return out


def _close(got: list[float], want: list[float], rtol=1e-4, atol=1e-4) -> bool:
    return all(abs(a - b) <= atol + rtol * abs(b) for a, b in zip(got, want, strict=True))


def prop_matches_group_formula(impl) -> None:
    """A_i = (r_i - mean_g) / (std_g + eps), unbiased std, contiguous groups; Dr. GRPO without std."""

    @given(grouped_scores(), st.booleans())
    def check(data, scale):
        scores, g = data
        got = impl(torch.tensor(scores, dtype=torch.float64), g, scale_by_std=scale, eps=1e-6)
        got = [float(x) for x in got]
        want = _oracle(scores, g, scale, 1e-6)
        assert _close(got, want), f"scores={scores}, group_size={g}, scale_by_std={scale}: expected {want}, got {got}"

    check()


def prop_equal_group_is_exactly_zero(impl) -> None:
    """A group whose scores are all equal gets advantage exactly 0 (no NaN)."""

    @given(_score, st.integers(min_value=2, max_value=8))
    def check(value, g):
        scores = torch.full((g,), value, dtype=torch.float32)
        got = impl(scores, g)
        assert torch.equal(got, torch.zeros_like(got)), f"scores={scores.tolist()}, group_size={g}: expected all 0, got {got.tolist()}"

    check()


def prop_groups_are_independent(impl) -> None:
    """Changing one group's scores leaves the other groups' advantages unchanged."""

    @given(grouped_scores(max_groups=3), _score)
    def check(data, new_value):
        scores, g = data
        if len(scores) == g:
            return
        base = impl(torch.tensor(scores, dtype=torch.float64), g)
        changed = list(scores)
        changed[0] = new_value
        after = impl(torch.tensor(changed, dtype=torch.float64), g)
        assert torch.allclose(base[g:], after[g:]), (
            f"scores={scores}, group_size={g}: changing score 0 to {new_value} moved other groups "
            f"from {base[g:].tolist()} to {after[g:].tolist()}"
        )

    check()


def prop_eps_guards_nearly_equal_groups(impl) -> None:
    """A group whose scores differ by about eps (std ~ 1e-6) gets (r - mean) / (std + eps), which is about
    half the size of the unguarded (r - mean) / std: eps is in the denominator, not optional."""

    @given(st.integers(min_value=2, max_value=8), st.floats(min_value=-1.0, max_value=1.0),
           st.floats(min_value=0.5e-6, max_value=2e-6), st.integers(min_value=0, max_value=2**16))
    def check(g, base, spread, seed):
        gen = torch.Generator().manual_seed(seed)
        offsets = torch.rand(g, generator=gen, dtype=torch.float64) * spread
        offsets[0], offsets[1] = 0.0, spread  # at least two distinct values
        scores = [base + float(o) for o in offsets]
        got = [float(x) for x in impl(torch.tensor(scores, dtype=torch.float64), g, eps=1e-6)]
        want = _oracle(scores, g, True, 1e-6)
        assert _close(got, want, rtol=1e-3, atol=1e-3), (
            f"scores={scores}, group_size={g}, eps=1e-6: expected {want}, got {got}")

    check()


PROPERTIES = [prop_matches_group_formula, prop_equal_group_is_exactly_zero, prop_groups_are_independent,
              prop_eps_guards_nearly_equal_groups]
