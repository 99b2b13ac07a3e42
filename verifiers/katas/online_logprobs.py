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

from verifiers.katas.budgets import metered, reads_in_blocks, realistic, within_memory

IGNORE = -100
VOCAB = 128256  # Llama 3's vocabulary: 31 blocks of 4096 and a ragged one


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


def prop_one_pass_in_blocks(impl) -> None:
    """At a real vocabulary (V = 128256, fp32 logits, block_size 4096) the logits are read block_size columns at
    a time, each block once, holding under half the logits' size in temporaries: what makes it online. A
    log_softmax of whole rows, a copy of the logits, or a first pass for the maximum and a second for the
    sum are rejected. Values as the two-pass fp64 oracle, to fp32 accuracy."""

    @realistic(6)
    @given(st.integers(1, 4), st.sampled_from([1.0, 0.7]), st.integers(0, 2**31 - 1))
    def check(N, tau, seed):
        gen = torch.Generator().manual_seed(seed)
        z = torch.randn(N, VOCAB, generator=gen) * 4
        y = torch.randint(0, VOCAB, (N,), generator=gen)
        z[torch.arange(N), y] += 12  # the sampled token stands out, as it does in a trained model
        block = 4096
        (lp, ent), usage = metered(impl, z, y, watch=0, block_size=block, temperature=tau, ignore_index=IGNORE)
        where = f"N={N}, V={VOCAB}, block_size={block}, temperature={tau}, fp32 logits (seed {seed})"
        reads_in_blocks(usage, VOCAB, block, where)
        within_memory(usage, N * VOCAB * 4 // 2, "the call", where)
        want_lp, want_ent = _oracle(z, y, tau)
        lp = torch.as_tensor(lp).double().reshape(-1).tolist()
        ent = torch.as_tensor(ent).double().reshape(-1).tolist()
        assert len(lp) == N and len(ent) == N, f"{where}: expected [N] outputs, got {len(lp)}, {len(ent)}"
        for i in range(N):
            for what, a, b in (("log-prob", lp[i], want_lp[i]), ("entropy", ent[i], want_ent[i])):
                assert abs(a - b) <= 1e-4 * max(1.0, abs(b)), f"{where}: row {i} {what} expected {b!r}, got {a!r}"

    check()


ALL = [prop_matches_two_pass, prop_maximum_in_a_late_block, prop_ignore_index_gives_zero, prop_one_pass_in_blocks]

ZH = {
    "doc": """`online_logprobs(logits, targets, *, block_size, temperature, ignore_index) -> (logp, entropy)` 的性质：
计算 `[N, V]` logits 的 token 对数概率和熵，每次只读词表的 `block_size` 列，维护运行中的最大值（online softmax）。

约定：`x = logits / temperature`；`logp[i] = x[i, y_i] - logsumexp(x[i])`，`targets[i] == ignore_index` 处为 0；
每一行都有 `entropy[i] = -sum_v p log p`；fp64 logits 的结果为 fp64 的 `[N]`。对照答案：在这里计算的、整行 fp64 的两遍
`log_softmax`。""",
    "prop_matches_two_pass": "对任意 V 和块大小（最后一块不满），对数概率和熵都等于两遍计算的 fp64 log_softmax。",
    "prop_maximum_in_a_late_block": "最大的 logit 出现在最后一块，远高于其余（+1000）：之前累积的和必须重新缩放，且不能溢出（fp64 下 exp(1000) 是 inf）。",
    "prop_ignore_index_gives_zero": "target 为 ignore_index 的行，对数概率恰好为 0（熵照常计算）。",
    "prop_one_pass_in_blocks": "在真实词表规模（V = 128256，fp32 logits，block_size 4096）下，logits 每次只读 block_size 列、每块只读一次，临时张量不超过 logits 大小的一半：这才是 online。整行 log_softmax、复制一份 logits、或先扫一遍求最大值再扫一遍求和，都会被拒绝。数值与两遍 fp64 对照答案一致，达到 fp32 精度。",
    "online_logprobs": r"""计算 `[N, V]` logits 的 token 对数概率和熵，每次读词表的 `block_size` 列。

一遍扫描，维护运行最大值 m、s = sum_v e^{x_v-m} 和 a = sum_v e^{x_v-m}(x_v-m)，其中 x = z/tau；某一块把最大值提高到 m' 时：
s <- e^{m-m'} s，a <- e^{m-m'}(a + s(m-m'))。最后 log pi(y) = x_y - m - log s，H = log s - a/s。返回 `(logp, entropy)`，
都是 `[N]`，fp32（fp64 logits 时为 fp64）；target 为 `ignore_index` 处 `logp` 为 0。""",
}
