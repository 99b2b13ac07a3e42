"""Kata properties for ``mha(x, wq, wk, wv, wo, heads, causal=False, key_padding_mask=None) -> out``.

Conventions: x is [B, T, D]; wq, wk, wv, wo are [D, D] and a projection is ``x @ w`` (no bias); ``heads``
heads of width d = D/heads (raise ValueError when D is not divisible by heads). Scores are
q·k / sqrt(d), d the head width. ``causal``: query t sees keys j <= t. ``key_padding_mask`` [B, T] bool,
True = a real token; a False key is hidden from every query. A query that sees no key at all (a padded
query under a causal mask with left padding, or a sequence that is all padding) gets 0 from every head,
never NaN. The output is [B, T, D] in x's dtype.

Oracles: PyTorch's ``F.scaled_dot_product_attention`` in fp64 with the same boolean mask (rows with no
visible key set to 0 here, explicitly); a per-head loop over column slices ``wq[:, h*d:(h+1)*d]``; and the
definition's invariances (changing a hidden token changes nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from verifiers.katas.budgets import realistic
from verifiers.katas.tensors import close, rejects

F64 = torch.float64


def oracle(x, wq, wk, wv, wo, heads, causal=False, key_padding_mask=None) -> torch.Tensor:
    """SDPA in fp64 with a boolean mask (True = attend); a query with no visible key gives 0."""
    b, t, dim = x.shape
    d = dim // heads
    x, wq, wk, wv, wo = (a.to(F64) for a in (x, wq, wk, wv, wo))

    def heads_of(w):
        return (x @ w).reshape(b, t, heads, d).permute(0, 2, 1, 3)

    visible = torch.ones(b, 1, t, t, dtype=torch.bool)
    if causal:
        visible = visible & torch.ones(t, t, dtype=torch.bool).tril()
    if key_padding_mask is not None:
        visible = visible & key_padding_mask.bool()[:, None, None, :]
    o = F.scaled_dot_product_attention(heads_of(wq), heads_of(wk), heads_of(wv), attn_mask=visible)
    o = torch.where(visible.any(-1, keepdim=True), o, torch.zeros_like(o))
    return o.permute(0, 2, 1, 3).reshape(b, t, dim) @ wo


def _weights(gen, dim, dtype=F64, scale=1.0):
    return [torch.randn(dim, dim, generator=gen, dtype=F64).mul(scale / math.sqrt(dim)).to(dtype) for _ in range(4)]


@dataclass(frozen=True)
class Case:
    """What hypothesis draws (and prints when it shrinks a failure); the tensors come from ``seed``."""

    b: int
    t: int
    heads: int
    d: int
    causal: bool
    mask: int | None  # key_padding_mask as bits, row-major (bit b*T + t set = a real token), or None
    seed: int

    def padding(self) -> torch.Tensor | None:
        if self.mask is None:
            return None
        n = self.b * self.t
        return torch.tensor([(self.mask >> i) & 1 for i in range(n)], dtype=torch.bool).reshape(self.b, self.t)

    def build(self, dtype=F64):
        gen = torch.Generator().manual_seed(self.seed)
        x = torch.randn(self.b, self.t, self.heads * self.d, generator=gen, dtype=F64).to(dtype)
        return x, _weights(gen, self.heads * self.d, dtype), self.heads, self.causal, self.padding()


@st.composite
def cases(draw, max_t: int = 7, max_heads: int = 4, max_width: int = 4, min_t: int = 1, min_heads: int = 1,
          masks: bool = True):
    b, t = draw(st.integers(1, 3)), draw(st.integers(min_t, max_t))
    heads, d = draw(st.integers(min_heads, max_heads)), draw(st.integers(1, max_width))
    causal = draw(st.booleans()) if masks else False
    mask = draw(st.one_of(st.none(), st.integers(0, 2 ** (b * t) - 1))) if masks else None
    return Case(b, t, heads, d, causal, mask, draw(st.integers(0, 2**31 - 1)))


def _where(x, heads, causal, kpm) -> str:
    b, t, dim = x.shape
    mask = None if kpm is None else kpm.int().tolist()
    return f"B={b}, T={t}, D={dim}, heads={heads}, causal={causal}, key_padding_mask={mask}"


def _run(impl, x, ws, heads, causal, kpm):
    return impl(x.clone(), *(w.clone() for w in ws), heads, causal=causal,
                key_padding_mask=None if kpm is None else kpm.clone())


# Constructed first, whatever hypothesis draws: causal alone; padding alone (row 1 left-padded by 2);
# causal with left padding [0, 3]; a sequence that is all padding. (mask bit b*T + t set = a real token)
CONSTRUCTED = [Case(2, 5, 2, 3, True, None, 1), Case(2, 5, 2, 3, False, 0b11100_11111, 2),
               Case(2, 6, 3, 2, True, 0b111000_111111, 3), Case(1, 4, 1, 4, True, 0, 4)]


def prop_matches_sdpa(impl) -> None:
    """Equals PyTorch's scaled_dot_product_attention (fp64) with the same causal and key-padding masks: four
    constructed cases (causal, padding, both with left padding, all padding), then ragged B, T, heads and head
    widths with and without each mask."""

    def one(case):
        x, ws, heads, causal, kpm = case.build()
        got = _run(impl, x, ws, heads, causal, kpm)
        close(got, oracle(x, *ws, heads, causal, kpm), atol=1e-10, rtol=1e-10, dtype=F64, what="the output",
              where=_where(x, heads, causal, kpm))

    for case in CONSTRUCTED:
        one(case)

    @given(cases())
    def check(case):
        one(case)

    check()


def prop_each_head_uses_its_own_columns(impl) -> None:
    """No mask, H >= 2, T >= 2: the output is the concatenation over heads h of single-head attention on the
    columns h*d .. (h+1)*d of x@wq, x@wk, x@wv, times wo. Viewing [B, T, D] as [B, H, T, d] without the
    transpose mixes several tokens into one head's row and fails here."""

    @given(cases(max_t=6, min_t=2, min_heads=2, masks=False))
    def check(case):
        x, (wq, wk, wv, wo), heads, _, _ = case.build()
        d = x.shape[-1] // heads
        per_head = []
        for h in range(heads):
            cols = slice(h * d, (h + 1) * d)
            q, k, v = x @ wq[:, cols], x @ wk[:, cols], x @ wv[:, cols]           # [B, T, d] each
            p = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(d), dim=-1)
            per_head.append(p @ v)
        want = torch.cat(per_head, dim=-1) @ wo
        got = _run(impl, x, [wq, wk, wv, wo], heads, False, None)
        close(got, want, atol=1e-10, rtol=1e-10, what="the output", where=_where(x, heads, False, None)
              + " (oracle: one softmax per head over its own columns)")

    check()


def prop_scale_is_one_over_sqrt_head_width(impl) -> None:
    """D = 8 in 4 heads of width 2: scores are divided by sqrt(2), the head width, not sqrt(8), the model
    width (the two differ by a factor of 2 in every logit)."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(2, 5, 8, generator=gen, dtype=F64) * 2
    ws = _weights(gen, 8, scale=2.0)
    want = oracle(x, *ws, 4, True, None)
    got = _run(impl, x, ws, 4, True, None)
    close(got, want, atol=1e-10, rtol=1e-10, what="the output",
          where="B=2, T=5, D=8, heads=4 (head width 2, causal): scores must be q·k/sqrt(2)")


def prop_hidden_tokens_do_not_leak(impl) -> None:
    """With the causal and the key-padding mask, changing every token after t and every padded token leaves
    the output at each real position <= t unchanged (a mask applied after the softmax, or not at all, lets
    the hidden keys into the normaliser)."""

    @given(cases(max_t=7), st.data())
    def check(case, data):
        x, ws, heads, _, kpm = case.build()
        b, t, dim = x.shape
        if kpm is None:
            kpm = torch.ones(b, t, dtype=torch.bool)
        cut = data.draw(st.integers(0, t - 1), label="t")
        hidden = torch.zeros(b, t, dtype=torch.bool)
        hidden[:, cut + 1:] = True
        hidden |= ~kpm
        noise = torch.randn(b, t, dim, generator=torch.Generator().manual_seed(cut), dtype=F64) * 3
        x2 = torch.where(hidden[..., None], noise, x)
        before = _run(impl, x, ws, heads, True, kpm)
        after = _run(impl, x2, ws, heads, True, kpm)
        keep = (~hidden)[..., None].expand(b, t, dim)
        assert isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor) \
            and before.shape == after.shape == x.shape, f"{_where(x, heads, True, kpm)}: expected [B, T, D] outputs"
        close(after[keep], before[keep].detach(), atol=1e-12, rtol=1e-12,
              what=f"the output at real positions <= {cut} after changing the hidden tokens",
              where=_where(x, heads, True, kpm))

    check()


def prop_fully_masked_rows_are_zero(impl) -> None:
    """Left padding under a causal mask: a padded query sees no key and must give 0 (not NaN, and not an
    average of padding); a sequence that is all padding gives 0 everywhere; real queries are unaffected."""

    @given(st.integers(1, 6), st.lists(st.integers(0, 6), min_size=1, max_size=3), st.integers(1, 3),
           st.integers(1, 3))
    def check(t, pads, heads, d):
        pads = [min(p, t) for p in pads]
        b = len(pads)
        kpm = torch.tensor([[j >= p for j in range(t)] for p in pads], dtype=torch.bool)
        gen = torch.Generator().manual_seed(t * 31 + heads)
        x = torch.randn(b, t, heads * d, generator=gen, dtype=F64)
        ws = _weights(gen, heads * d)
        got = _run(impl, x, ws, heads, True, kpm)
        close(got, oracle(x, *ws, heads, True, kpm), atol=1e-10, rtol=1e-10, what="the output",
              where=_where(x, heads, True, kpm) + f" (left padding {pads})")

    check()


def prop_stable_softmax_in_fp32(impl) -> None:
    """fp32 inputs whose scores reach several thousand: exp without subtracting the row max overflows
    (exp(89) is inf in fp32) and gives NaN; the result must be finite and match the fp64 oracle."""

    @given(cases(max_t=6), st.sampled_from([30.0, 100.0]))
    def check(case, gain):
        x, ws, heads, causal, kpm = case.build()
        x32 = (x * gain).float()
        w32 = [w.float() for w in ws]
        w32[0] = w32[0] * gain
        got = _run(impl, x32, w32, heads, causal, kpm)
        want = oracle(x32, *w32, heads, causal, kpm)
        # |out| <= max|x wv| · max column sum of |wo|: the tolerance is a 1e-3 share of that bound
        bound = float((x32.double() @ w32[2].double()).abs().max()) * float(w32[3].double().abs().sum(0).max())
        close(got, want, atol=1e-3 * (1.0 + bound), dtype=torch.float32, what="the fp32 output",
              where=_where(x, heads, causal, kpm) + f", x and wq multiplied by {gain} (scores in the thousands)")

    check()


def prop_rejects_width_not_divisible(impl) -> None:
    """D = 10 with 4 heads, and D = 6 with 4 heads: the width does not split into equal heads; raise
    ValueError instead of silently truncating or reshaping wrongly."""
    for dim, heads in ((10, 4), (6, 4), (9, 2)):
        gen = torch.Generator().manual_seed(dim)
        x = torch.randn(1, 3, dim, generator=gen, dtype=F64)
        ws = _weights(gen, dim)
        rejects(lambda: _run(impl, x, ws, heads, False, None), f"D={dim} with heads={heads}",
                f"B=1, T=3, D={dim}, heads={heads}")


def prop_realistic_sizes_fp32(impl) -> None:
    """B = 2, T = 256, D = 512 in 8 heads of 64, causal with left padding of 0 and 37 tokens, fp32: matches
    the fp64 oracle to fp32 accuracy and gives exactly 0 at the padded queries."""

    @realistic(1)
    @given(st.integers(0, 2**31 - 1))
    def check(seed):
        gen = torch.Generator().manual_seed(seed)
        b, t, dim, heads = 2, 256, 512, 8
        x = torch.randn(b, t, dim, generator=gen, dtype=F64).float()
        ws = [w.float() for w in _weights(gen, dim, scale=1.5)]
        kpm = torch.ones(b, t, dtype=torch.bool)
        kpm[1, :37] = False
        got = _run(impl, x, ws, heads, True, kpm)
        want = oracle(x, *ws, heads, True, kpm)
        close(got, want, atol=1e-4, rtol=1e-4, dtype=torch.float32, what="the fp32 output",
              where=f"B={b}, T={t}, D={dim}, heads={heads}, causal, left padding [0, 37] (seed {seed})")
        assert bool((got[1, :37] == 0).all()), "the padded queries of row 1 must give exactly 0"

    check()


ALL = [prop_matches_sdpa, prop_each_head_uses_its_own_columns, prop_scale_is_one_over_sqrt_head_width,
       prop_hidden_tokens_do_not_leak, prop_fully_masked_rows_are_zero, prop_stable_softmax_in_fp32,
       prop_rejects_width_not_divisible, prop_realistic_sizes_fp32]

ZH = {
    "doc": """`mha(x, wq, wk, wv, wo, heads, causal=False, key_padding_mask=None) -> out` 的性质。

约定：x 为 [B, T, D]；wq、wk、wv、wo 为 [D, D]，投影是 `x @ w`（无 bias）；共 `heads` 个头，每个头宽 d = D/heads
（D 不能被 heads 整除时抛 ValueError）。打分为 q·k / sqrt(d)，d 是单个头的宽度。`causal`：query t 只能看到 j <= t
的 key。`key_padding_mask` 为 [B, T] 的 bool，True 表示真实 token；为 False 的 key 对所有 query 都不可见。
一个 key 都看不到的 query（左侧 padding 又加 causal mask 时的 padding query，或整条序列都是 padding）
在每个头上的输出都是 0，绝不能是 NaN。输出为 [B, T, D]，dtype 与 x 相同。

对照答案：fp64 下、使用同一个布尔 mask 的 PyTorch `F.scaled_dot_product_attention`（没有可见 key 的行在这里显式置 0）；
按列切片 `wq[:, h*d:(h+1)*d]` 逐头循环的实现；以及定义本身的不变性（改动被遮住的 token，输出不变）。""",
    "prop_matches_sdpa": "与 fp64 的 PyTorch scaled_dot_product_attention 在相同的 causal mask 和 key padding mask 下一致：先跑四个构造用例（只有 causal、只有 padding、causal 加左侧 padding、全是 padding），再跑 B、T、头数、头宽都不规整，各种 mask 有或没有的随机用例。",
    "prop_each_head_uses_its_own_columns": "无 mask、H >= 2、T >= 2：输出等于每个头 h 在 x@wq、x@wk、x@wv 的第 h*d .. (h+1)*d 列上各做一次单头 attention，拼接后再乘 wo。不做 transpose、直接把 [B, T, D] 看成 [B, H, T, d]，会把好几个 token 混进一个头的同一行，这里不通过。",
    "prop_scale_is_one_over_sqrt_head_width": "D = 8 分成 4 个宽 2 的头：打分除以 sqrt(2)（单头宽度），而不是 sqrt(8)（模型宽度）；两者让每个 logit 差 2 倍。",
    "prop_hidden_tokens_do_not_leak": "同时使用 causal mask 和 key padding mask，改动 t 之后的每个 token 和每个 padding token，每个 <= t 的真实位置上的输出都不变（mask 加在 softmax 之后，或者根本没加，被遮住的 key 都会进入归一化的分母）。",
    "prop_fully_masked_rows_are_zero": "causal mask 加左侧 padding：padding 位置的 query 看不到任何 key，输出必须是 0（不能是 NaN，也不能是 padding 的平均）；整条都是 padding 的序列处处输出 0；真实 query 不受影响。",
    "prop_stable_softmax_in_fp32": "fp32 输入，打分高达几千：不减行最大值就求 exp 会溢出（fp32 下 exp(89) 是 inf），得到 NaN；结果必须有限，且与 fp64 对照答案一致。",
    "prop_rejects_width_not_divisible": "D = 10 配 4 个头、D = 6 配 4 个头：宽度不能均分到各个头；要抛 ValueError，而不是悄悄截断或错误地 reshape。",
    "prop_realistic_sizes_fp32": "B = 2、T = 256、D = 512 分成 8 个宽 64 的头，causal，两条序列的左侧 padding 分别为 0 和 37 个 token，fp32：与 fp64 对照答案在 fp32 精度内一致，padding 位置的 query 输出恰好为 0。",
    "mha": """对 x [B, T, D] 做多头自注意力：投影矩阵为 [D, D]（y = x @ w，无 bias），共 `heads` 个头、每个头宽 D/heads -> [B, T, D]。

`causal`：query t 只能看到 j <= t 的 key。`key_padding_mask` 为 [B, T] 的 bool，True 表示真实 token（为 False 的 key
对所有 query 都不可见）。没有任何可见 key 的 query 输出为 0。D 不能被 `heads` 整除时抛 ValueError。""",
}
