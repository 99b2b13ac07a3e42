"""Kata properties for ``distribution(logits, temperature, top_k, top_p) -> probs``: the distribution a
sampler draws its next token from.

Conventions: ``logits`` is a float tensor [..., V]; the result has the same shape and each row sums to 1.
Work in the logits' dtype, at least float32 (bf16 logits are upcast; float64 ones are compared at 1e-9).
Temperature divides the logits before the softmax; ``temperature=0`` is greedy decoding: probability 1 on
the argmax (any one of tied maxima). top-k keeps every token whose logit is >= the k-th largest (ties with
the k-th are kept, as Hugging Face's and vLLM's thresholds do); a k of at least V keeps everything.
top-p keeps the smallest set of most probable tokens whose mass reaches p: walking the tokens in descending
probability, a token is kept iff the mass of the tokens before it is still < p, so the token that crosses p
is kept and the most probable token always survives; where tokens tie at the boundary, any of them may be
the one kept. The filters apply in this order: temperature, top-k, top-p, and the survivors are
renormalised. ``top_k=None`` / ``top_p=None`` switch a filter off.

Oracle: the same distribution computed in plain Python floats from the definitions above: softmax by
``math.exp``, top-k by counting how many logits are strictly larger, top-p by walking the descending order
with ``math.fsum``; where the order has ties at the boundary, every tie-break is accepted.
"""

from __future__ import annotations

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

_logit = st.integers(min_value=-12, max_value=12).map(lambda i: i / 4)    # quarter steps: ties happen
VOCAB = 128256  # Llama 3


def _softmax(z: list[float]) -> list[float]:
    m = max(z)
    e = [0.0 if x == -math.inf else math.exp(x - m) for x in z]
    s = math.fsum(e)
    return [x / s for x in e]


def _top_k(z: list[float], k: int | None) -> list[float]:
    if k is None or k >= len(z):
        return list(z)
    kth = sorted(z, reverse=True)[k - 1]
    return [x if x >= kth else -math.inf for x in z]


def nucleus(z: list[float], top_p: float) -> tuple[set[int], set[int], int]:
    """(tokens that must be kept, tokens tied at the boundary, how many are kept in all)."""
    p = _softmax(z)
    order = sorted(range(len(z)), key=lambda i: -z[i])
    n, mass = 0, []
    for i in order:
        if math.fsum(mass) >= top_p:
            break
        n += 1
        mass.append(p[i])
    edge = z[order[n - 1]]
    must = {i for i in range(len(z)) if z[i] > edge}
    tied = {i for i in range(len(z)) if z[i] == edge}
    return must, tied, n


def reference(z: list[float], temperature: float, top_k: int | None, top_p: float | None) -> list[float]:
    """The filtered distribution from the definitions, ties at the top-p boundary broken by the lower index."""
    if temperature == 0:
        top = max(range(len(z)), key=lambda i: (z[i], -i))
        return [1.0 if i == top else 0.0 for i in range(len(z))]
    z = _top_k([x / temperature for x in z], top_k)
    if top_p is not None and top_p < 1:
        must, tied, n = nucleus(z, top_p)
        keep = must | set(sorted(tied)[: n - len(must)])
        z = [x if i in keep else -math.inf for i, x in enumerate(z)]
    return _softmax(z)


def check_row(got: list[float], z: list[float], temperature: float, top_k, top_p, where: str,
              tol: float = 1e-9) -> None:
    """``got`` is a valid answer: the right support (any tie-break at a boundary) and renormalised values."""
    assert len(got) == len(z), f"{where}: expected {len(z)} probabilities, got {len(got)}"
    assert all(math.isfinite(g) for g in got), f"{where}: non-finite probabilities {got[:20]}"
    support = {i for i, g in enumerate(got) if g > 0}
    if temperature == 0:
        best = max(z)
        assert len(support) == 1 and z[next(iter(support))] == best and abs(got[next(iter(support))] - 1) <= tol, \
            f"{where}: temperature 0 is greedy: all the mass on one of the maximal logits {best}; got {got}"
        return
    zt = _top_k([x / temperature for x in z], top_k)
    if top_p is not None and top_p < 1:
        must, tied, n = nucleus(zt, top_p)
        ok = must <= support and support - must <= tied and len(support) == n
        need = n - len(must)
        want_keep = (f"{sorted(must | tied)}" if need == len(tied) else
                     f"{sorted(must)} and {need} of the tied tokens {sorted(tied)} ({n} in all)")
        assert ok, f"{where}: expected to keep tokens {want_keep}, kept {sorted(support)}; got {got}"
    else:
        keep = {i for i, x in enumerate(zt) if x > -math.inf}
        assert support == keep, f"{where}: expected to keep tokens {sorted(keep)}, kept {sorted(support)}; got {got}"
    want = _softmax([x if i in support else -math.inf for i, x in enumerate(zt)])
    worst = max(range(len(z)), key=lambda i: abs(got[i] - want[i]))
    assert abs(got[worst] - want[worst]) <= tol, \
        f"{where}: token {worst}: expected probability {want[worst]!r}, got {got[worst]!r}"


def _call(impl, z: list[float], t: float, k, p) -> list[float]:
    out = impl(torch.tensor(z, dtype=torch.float64), t, k, p)
    assert isinstance(out, torch.Tensor), f"expected a tensor of probabilities, got {type(out).__name__}"
    return [float(x) for x in out.reshape(-1)]


def prop_matches_the_definition(impl) -> None:
    """Every combination of temperature, top-k and top-p gives the distribution of the definitions (quarter-step
    logits, so ties at the k-th logit and at the top-p boundary are common)."""

    @given(st.lists(_logit, min_size=2, max_size=8), st.sampled_from([0.5, 1.0, 2.0]),
           st.one_of(st.none(), st.integers(1, 8)), st.one_of(st.none(), st.sampled_from([0.3, 0.5, 0.8, 0.95, 1.0])))
    def check(z, t, k, p):
        check_row(_call(impl, z, t, k, p), z, t, k, p, f"logits={z}, T={t}, top_k={k}, top_p={p}")

    check()


def prop_top_k_keeps_ties_with_the_kth(impl) -> None:
    """top_k=2 on logits [3, 1, 1, 0] keeps the three tokens >= the 2nd largest (1), never a fixed two."""
    z = [3.0, 1.0, 1.0, 0.0]
    got = _call(impl, z, 1.0, 2, None)
    check_row(got, z, 1.0, 2, None, f"logits={z}, top_k=2")


def prop_top_k_larger_than_the_vocabulary(impl) -> None:
    """top_k = V, V + 1 and 1000 on V = 5 tokens keeps every token (torch.topk(z, k) with k > V raises)."""
    z = [0.5, -1.0, 2.0, 0.0, 1.25]
    for k in (5, 6, 1000):
        for p in (None, 0.9):
            check_row(_call(impl, z, 1.0, k, p), z, 1.0, k, p, f"logits={z}, V=5, top_k={k}, top_p={p}")


def prop_top_p_boundary_is_exact(impl) -> None:
    """Four equal logits (probabilities exactly 1/4 each, however the softmax is computed) with p = 0.5, and eight
    with p = 0.75: two (six) tokens reach p exactly, so the nucleus is any two (six) of them. Shifting a
    `cumsum > p` mask right keeps one token too many; `cumsum < p` keeps one too few."""
    for v, p in ((4, 0.5), (8, 0.75)):
        z = [0.5] * v
        check_row(_call(impl, z, 1.0, None, p), z, 1.0, None, p, f"{v} equal logits (probabilities 1/{v}), top_p={p}")


def prop_filters_apply_in_order(impl) -> None:
    """Temperature, then top-k, then top-p, each on what the previous one left (renormalised). Probabilities
    [0.4, 0.3, 0.2, 0.1] with top-k 2 and top-p 0.5: after top-k, 0.4/0.7 = 0.57 already reaches 0.5, so one
    token; top-p first keeps two. [0.5, 0.3, 0.2] at T = 0.5 with top-p 0.6: tempered, the first token has
    0.66, so one token; top-p before the temperature keeps two."""
    for probs, t, k, p in (((0.4, 0.3, 0.2, 0.1), 1.0, 2, 0.5), ((0.5, 0.3, 0.2), 0.5, None, 0.6)):
        z = [math.log(x) for x in probs]
        check_row(_call(impl, z, t, k, p), z, t, k, p, f"probs={list(probs)}, T={t}, top_k={k}, top_p={p}")


def prop_top_p_keeps_the_token_that_crosses_p(impl) -> None:
    """Probabilities 0.5, 0.3, 0.2 with p = 0.6: 0.5 alone is short of 0.6, so the token that crosses it (0.3)
    is kept: [5/8, 3/8, 0]. Keeping only tokens whose cumulative mass is <= p keeps just the first one."""
    z = [math.log(x) for x in (0.5, 0.3, 0.2)]
    check_row(_call(impl, z, 1.0, None, 0.6), z, 1.0, None, 0.6, "probs=[0.5,0.3,0.2], top_p=0.6")


def prop_top_p_ties_at_the_boundary(impl) -> None:
    """Probabilities 0.5, 0.25, 0.25 with p = 0.6 (and the same reversed): the nucleus needs one of the two tied
    0.25 tokens, either one, but not both (that is no longer the smallest set) and not neither."""
    for probs in ((0.5, 0.25, 0.25), (0.25, 0.25, 0.5)):
        z = [math.log(x) for x in probs]
        check_row(_call(impl, z, 1.0, None, 0.6), z, 1.0, None, 0.6, f"probs={list(probs)}, top_p=0.6")


def prop_most_probable_token_always_survives(impl) -> None:
    """However small p, the argmax keeps all the mass (p below the top probability)."""

    @given(st.lists(_logit, min_size=2, max_size=8).filter(lambda z: z.count(max(z)) == 1))
    def check(z):
        got = _call(impl, z, 1.0, None, 1e-6)
        top = z.index(max(z))
        assert abs(got[top] - 1.0) <= 1e-12, f"logits={z}, top_p=1e-6: expected all mass on token {top}, got {got}"

    check()


def prop_temperature_zero_is_greedy(impl) -> None:
    """T = 0 puts probability 1 on the argmax (on one of tied maxima), with or without top-k and top-p;
    dividing by 0 gives NaN or inf instead."""

    @given(st.lists(_logit, min_size=1, max_size=8), st.one_of(st.none(), st.integers(1, 8)),
           st.one_of(st.none(), st.sampled_from([0.3, 0.9])))
    def check(z, k, p):
        check_row(_call(impl, z, 0.0, k, p), z, 0.0, k, p, f"logits={z}, T=0, top_k={k}, top_p={p}")

    check()
    z = [1.0, 3.0, 3.0, 0.0]
    check_row(_call(impl, z, 0.0, None, None), z, 0.0, None, None, f"logits={z} (tied maxima), T=0")


def prop_temperature_divides_logits(impl) -> None:
    """T = 2 on logits log([0.7, 0.2, 0.1]) gives probabilities ∝ sqrt(p), not p / T renormalised (= p)."""
    p = [0.7, 0.2, 0.1]
    z = [math.log(x) for x in p]
    got = _call(impl, z, 2.0, None, None)
    s = math.fsum(math.sqrt(x) for x in p)
    want = [math.sqrt(x) / s for x in p]
    assert max(abs(a - b) for a, b in zip(got, want, strict=True)) <= 1e-9, f"probs={p}, T=2: expected {want}, got {got}"


def prop_batched_rows_are_independent(impl) -> None:
    """A [2, 3, V] batch equals its rows filtered one by one."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(2, 3, 7, generator=g, dtype=torch.float64)
    got = impl(z, 0.8, 4, 0.9)
    assert isinstance(got, torch.Tensor) and tuple(got.shape) == (2, 3, 7), \
        f"a [2, 3, 7] batch: expected probabilities of shape (2, 3, 7), got {getattr(got, 'shape', type(got))}"
    for i in range(2):
        for j in range(3):
            check_row([float(x) for x in got[i, j]], z[i, j].tolist(), 0.8, 4, 0.9,
                      f"row [{i},{j}] of a [2, 3, 7] batch, T=0.8, top_k=4, top_p=0.9")


def _nucleus_t(zt: torch.Tensor, top_p: float) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``nucleus`` for one long fp64 row with torch's sort and cumsum (the oracle for 128256 tokens)."""
    probs = torch.softmax(zt, dim=-1)
    zs, order = torch.sort(zt, descending=True)
    before = torch.cumsum(probs[order], dim=0) - probs[order]
    n = int((before < top_p).sum())
    edge = zs[n - 1]
    return zt > edge, zt == edge, n


def check_long_row(got: torch.Tensor, z: torch.Tensor, temperature: float, top_k, top_p, where: str,
                   tol: float = 1e-6) -> None:
    zt = z.double() / temperature
    if top_k is not None and top_k < zt.numel():
        zt = zt.masked_fill(zt < torch.topk(zt, top_k).values[-1], -math.inf)
    support = got > 0
    must, tied, n = _nucleus_t(zt, top_p)
    extra = support & ~must
    ok = bool((must <= support).all()) and bool((extra <= tied).all()) and int(support.sum()) == n
    assert ok, (f"{where}: expected to keep {int(must.sum())} tokens and {n - int(must.sum())} of the "
                f"{int(tied.sum())} tied at the boundary ({n} in all), kept {int(support.sum())}")
    want = torch.softmax(zt.masked_fill(~support, -math.inf), dim=-1)
    err = (got.double() - want).abs()
    i = int(err.argmax())
    assert float(err[i]) <= tol, f"{where}: token {i}: expected probability {float(want[i])!r}, got {float(got[i])!r}"


def _realistic_logits(dtype: torch.dtype, top_k: int | None, top_p: float, seed: int = 0) -> torch.Tensor:
    """Two rows over a 128256-token vocabulary shaped like a model's head: a heavy tail and a few strong
    candidates; the seed is advanced until no token's preceding mass lies within 1e-4 of p (so float32
    rounding cannot move the boundary)."""
    while True:
        g = torch.Generator().manual_seed(seed)
        z = torch.randn(2, VOCAB, generator=g, dtype=torch.float64) * 2.0
        z[:, torch.randint(0, VOCAB, (8,), generator=g)] += torch.linspace(14, 8, 8, dtype=torch.float64)
        z = z.to(dtype)
        ok = True
        for row in z.double():
            zt = row / 0.7
            if top_k is not None:
                zt = zt.masked_fill(zt < torch.topk(zt, top_k).values[-1], -math.inf)
            probs = torch.sort(torch.softmax(zt, dim=-1), descending=True).values
            before = torch.cumsum(probs, dim=0) - probs
            ok = ok and bool(((before - top_p).abs() >= 1e-4).all())
        if ok:
            return z
        seed += 1


def prop_realistic_vocabulary(impl) -> None:
    """Two rows of a 128256-token vocabulary, fp32 and bf16 logits, T = 0.7, with top-k 50 and top-p 0.9, and
    with top-p 0.95 alone: within 1e-6 of the definition (bf16 logits must be upcast: a bf16 softmax is off
    by 2^-8)."""
    for dtype in (torch.float32, torch.bfloat16):
        for k, p in ((50, 0.9), (None, 0.95)):
            z = _realistic_logits(dtype, k, p)
            got = impl(z.clone(), 0.7, k, p)
            assert isinstance(got, torch.Tensor) and tuple(got.shape) == (2, VOCAB), \
                f"expected probabilities of shape (2, {VOCAB}), got {getattr(got, 'shape', type(got))}"
            assert bool(torch.isfinite(got).all()), f"{dtype} logits, top_k={k}, top_p={p}: non-finite probabilities"
            for r in range(2):
                check_long_row(got[r], z[r], 0.7, k, p,
                               f"{dtype} logits over {VOCAB} tokens, row {r}, T=0.7, top_k={k}, top_p={p}")


ALL = [prop_matches_the_definition, prop_top_k_keeps_ties_with_the_kth, prop_top_k_larger_than_the_vocabulary,
       prop_top_p_boundary_is_exact, prop_filters_apply_in_order, prop_top_p_keeps_the_token_that_crosses_p,
       prop_top_p_ties_at_the_boundary,
       prop_most_probable_token_always_survives, prop_temperature_zero_is_greedy, prop_temperature_divides_logits,
       prop_batched_rows_are_independent, prop_realistic_vocabulary]

ZH = {
    "doc": """`distribution(logits, temperature, top_k, top_p) -> probs` 的性质：采样器抽取下一个 token 所用的分布。

约定：`logits` 是 [..., V] 的浮点张量；结果形状相同，每一行之和为 1。在 logits 的 dtype 下计算，至少 float32
（bf16 logits 要先升精度；float64 logits 按 1e-9 比较）。logits 先除以 temperature，再做 softmax；`temperature=0`
即贪心解码：概率 1 全给 argmax（并列最大值中任取一个）。top-k 保留 logit >= 第 k 大值的每个 token（与第 k 个并列的
都保留，Hugging Face 和 vLLM 的阈值也是这样）；k 至少为 V 时全部保留。top-p 保留概率质量达到 p 的最小的一组
最可能 token：按概率从大到小遍历，一个 token 被保留当且仅当排在它前面的 token 的质量之和仍 < p，所以越过 p 的
那个 token 会被保留，概率最大的 token 总能留下；在边界上并列的 token，保留其中哪一个都可以。过滤顺序为：
temperature、top-k、top-p，留下的 token 再重新归一化。`top_k=None` / `top_p=None` 表示关闭对应的过滤。

对照答案：按上面的定义用 Python 普通浮点数算出的同一个分布：softmax 用 `math.exp`，top-k 通过数严格更大的
logit 有几个来判断，top-p 用 `math.fsum` 沿降序累加；排序在边界处有并列时，任何一种打破并列的方式都接受。""",
    "prop_matches_the_definition": "temperature、top-k、top-p 的任意组合都得到定义给出的分布（logits 取 0.25 的整数倍，所以第 k 个 logit 处和 top-p 边界处的并列很常见）。",
    "prop_top_k_keeps_ties_with_the_kth": "logits [3, 1, 1, 0] 上 top_k=2 保留 >= 第 2 大值（1）的三个 token，而不是固定保留两个。",
    "prop_top_k_larger_than_the_vocabulary": "V = 5 个 token 上 top_k = V、V + 1 和 1000 都保留全部 token（torch.topk(z, k) 在 k > V 时会报错）。",
    "prop_top_p_boundary_is_exact": "四个相等的 logit（不论 softmax 怎么算，概率都恰好各为 1/4）配 p = 0.5，八个配 p = 0.75：两个（六个）token 恰好达到 p，所以 nucleus 是其中任意两个（六个）。把 `cumsum > p` 的 mask 右移一位会多保留一个 token；用 `cumsum < p` 会少保留一个。",
    "prop_filters_apply_in_order": "先 temperature，再 top-k，再 top-p，每一步都作用在上一步留下（并重新归一化）的结果上。概率 [0.4, 0.3, 0.2, 0.1]、top-k 2、top-p 0.5：top-k 之后 0.4/0.7 = 0.57 已经达到 0.5，所以只留一个 token；先做 top-p 会留两个。[0.5, 0.3, 0.2]、T = 0.5、top-p 0.6：调温之后第一个 token 的概率为 0.66，所以只留一个；在调温之前做 top-p 会留两个。",
    "prop_top_p_keeps_the_token_that_crosses_p": "概率 0.5、0.3、0.2，p = 0.6：只有 0.5 还不到 0.6，所以越过 0.6 的那个 token（0.3）要保留：[5/8, 3/8, 0]。只保留累积质量 <= p 的 token，就只剩第一个。",
    "prop_top_p_ties_at_the_boundary": "概率 0.5、0.25、0.25，p = 0.6（以及倒过来的顺序）：nucleus 需要两个并列的 0.25 token 中的一个，哪一个都行，但不能两个都要（那就不再是最小的集合），也不能一个都不要。",
    "prop_most_probable_token_always_survives": "不管 p 多小（p 低于最大概率），argmax 拿到全部概率质量。",
    "prop_temperature_zero_is_greedy": "T = 0 把概率 1 给 argmax（并列最大值中的某一个），有没有 top-k、top-p 都一样；除以 0 会得到 NaN 或 inf。",
    "prop_temperature_divides_logits": "logits log([0.7, 0.2, 0.1]) 在 T = 2 下得到 ∝ sqrt(p) 的概率，而不是 p / T 再归一化（= p）。",
    "prop_batched_rows_are_independent": "一个 [2, 3, V] 的批次，结果等于逐行单独过滤。",
    "prop_realistic_vocabulary": "128256 个 token 的词表上两行 fp32 和 bf16 logits，T = 0.7，分别用 top-k 50 加 top-p 0.9、以及只用 top-p 0.95：与定义相差不超过 1e-6（bf16 logits 必须先升精度：bf16 的 softmax 误差有 2^-8）。",
    "distribution": """softmax(top_p(top_k(z / T)))，至少在 fp32 下计算：`sample` 从这个分布里抽样。
`temperature=0`：贪心，概率 1 全给 argmax（并列最大时取第一个，与 `torch.argmax` 相同）。""",
}
