"""Kata properties for ``cached_attention(x, wq, wk, wv, wo, heads, cache_k, cache_v, base=10000.0)``
-> ``(out, keys, values)``: causal multi-head attention with RoPE for T new tokens after S cached ones.

Conventions: x [B, T, D]; wq, wk, wv, wo [D, D], a projection is ``x @ w`` (no bias); heads of width
d = D/heads, split as ``view(B, T, H, d).transpose(1, 2)``; scores q·k / sqrt(d). ``cache_k``, ``cache_v``
[B, H, S, d] hold the keys (already rotated) and the values of the S earlier tokens; S = 0 (empty tensors)
is the prefill. The new tokens sit at absolute positions S .. S+T-1. RoPE rotates q and k (never v) at
those positions, pairing dimension i with i + d/2 (Hugging Face Llama's rotate-half) at angle
position·theta_i, theta_i = base^(-2i/d), i = 0 .. d/2-1 (angles in float32 at least; fp64 results are
compared at 1e-5, which float32 angles meet and every structural slip misses by far). Query S+i sees
keys 0 .. S+i. Return the output [B, T, D] in x's dtype and the caches with the new rotated keys
and the new values appended ([B, H, S+T, d]), which the next call receives.

Oracles: the uncached forward of the whole sequence computed here (RoPE as a complex multiplication
(x_i + i·x_{i+d/2})·e^{i·pos·theta_i}, then ``F.scaled_dot_product_attention(is_causal=True)`` on the square
score matrix) in fp64, and, for caches that no sequence produced, the same attention of the new queries
against exactly the keys and values given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from verifiers.katas.budgets import realistic
from verifiers.katas.tensors import close

F64 = torch.float64
TOL = 1e-5  # fp64 inputs: RoPE angles computed in float32 (as Hugging Face does) are off by < 1e-5 here


def rope_complex(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """Rotate the pairs (i, i + d/2) of x [..., T, d] as complex numbers by positions·theta_i."""
    d = x.shape[-1]
    half = d // 2
    theta = torch.tensor([base ** (-2.0 * i / d) for i in range(half)], dtype=F64)
    angle = positions.to(F64)[:, None] * theta[None, :]
    z = torch.complex(x[..., :half].to(F64), x[..., half:].to(F64)) * torch.polar(torch.ones_like(angle), angle)
    return torch.cat([z.real, z.imag], dim=-1)


def _heads(y: torch.Tensor, heads: int) -> torch.Tensor:
    b, t, dim = y.shape
    return y.reshape(b, t, heads, dim // heads).permute(0, 2, 1, 3)


def attend(q, keys, values, wo, start: int) -> torch.Tensor:
    """Queries at start .. start+T-1 against keys 0 .. S+T-1 (causal, bottom-right), merged and projected."""
    t, s = q.shape[2], keys.shape[2]
    visible = torch.arange(s)[None, :] <= torch.arange(start, start + t)[:, None]
    o = F.scaled_dot_product_attention(q, keys, values, attn_mask=visible)
    b, h, _, d = o.shape
    return o.permute(0, 2, 1, 3).reshape(b, t, h * d) @ wo.to(F64)


def full_forward(x, wq, wk, wv, wo, heads, base):
    """The uncached forward of the whole sequence x [B, N, D] in fp64: (out, rotated keys, values)."""
    x, wq, wk, wv = (a.to(F64) for a in (x, wq, wk, wv))
    pos = torch.arange(x.shape[1])
    q, k = rope_complex(_heads(x @ wq, heads), pos, base), rope_complex(_heads(x @ wk, heads), pos, base)
    v = _heads(x @ wv, heads)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    b, h, n, d = o.shape
    return o.permute(0, 2, 1, 3).reshape(b, n, h * d) @ wo.to(F64), k, v


@dataclass(frozen=True)
class Seq:
    """A drawn problem: batch, prompt length, further tokens, heads, head width, RoPE base, seed."""

    b: int
    prompt: int
    more: int
    heads: int
    d: int
    base: float
    seed: int

    def build(self, dtype=F64, scale: float = 1.0):
        gen = torch.Generator().manual_seed(self.seed)
        dim = self.heads * self.d
        x = torch.randn(self.b, self.prompt + self.more, dim, generator=gen, dtype=F64)
        ws = [torch.randn(dim, dim, generator=gen, dtype=F64).mul(scale / math.sqrt(dim)) for _ in range(4)]
        return x.to(dtype), [w.to(dtype) for w in ws]


@st.composite
def seqs(draw, max_prompt: int = 6, max_more: int = 4, min_prompt: int = 1):
    return Seq(draw(st.integers(1, 2)), draw(st.integers(min_prompt, max_prompt)), draw(st.integers(0, max_more)),
               draw(st.integers(1, 3)), draw(st.sampled_from([2, 4, 6])), draw(st.sampled_from([10000.0, 500000.0])),
               draw(st.integers(0, 2**31 - 1)))


def _empty(b, heads, d, dtype):
    return torch.zeros(b, heads, 0, d, dtype=dtype)


def _call(impl, x, ws, heads, ck, cv, base, where):
    res = impl(x.clone(), *(w.clone() for w in ws), heads, ck.clone(), cv.clone(), base)
    assert isinstance(res, (tuple, list)) and len(res) == 3, \
        f"{where}: expected (out, keys, values), got {type(res).__name__}"
    return res


def prop_prefill_matches_the_full_forward(impl) -> None:
    """With an empty cache (S = 0) the output, the rotated keys and the values equal the uncached forward."""

    @given(seqs(max_prompt=7, max_more=0))
    def check(s):
        x, ws = s.build()
        where = f"{s} (prefill of {s.prompt} tokens into an empty cache)"
        out, keys, values = _call(impl, x, ws, s.heads, _empty(s.b, s.heads, s.d, F64), _empty(s.b, s.heads, s.d, F64),
                                  s.base, where)
        want, k, v = full_forward(x, *ws, s.heads, s.base)
        close(out, want, atol=TOL, rtol=TOL, dtype=F64, what="the output", where=where)
        close(keys, k, atol=TOL, rtol=TOL, what="the returned keys (rotated at positions 0..T-1)", where=where)
        close(values, v, atol=TOL, rtol=TOL, what="the returned values (not rotated)", where=where)

    check()


def prop_decode_token_by_token_matches_the_full_forward(impl) -> None:
    """Prefill the prompt, then feed the remaining tokens one per call, passing the returned caches back:
    every step's output equals the full forward's row at that position, and the final caches its keys and
    values."""

    @given(seqs(max_more=5))
    def check(s):
        x, ws = s.build()
        want, k, v = full_forward(x, *ws, s.heads, s.base)
        ck, cv = _empty(s.b, s.heads, s.d, F64), _empty(s.b, s.heads, s.d, F64)
        out, ck, cv = _call(impl, x[:, :s.prompt], ws, s.heads, ck, cv, s.base, f"{s}: prefill")
        close(out, want[:, :s.prompt], atol=TOL, rtol=TOL, what="the prefill output", where=f"{s}")
        for pos in range(s.prompt, s.prompt + s.more):
            where = f"{s}: decoding the token at position {pos} with {pos} cached"
            out, ck, cv = _call(impl, x[:, pos:pos + 1], ws, s.heads, ck, cv, s.base, where)
            close(out, want[:, pos:pos + 1], atol=TOL, rtol=TOL, dtype=F64, what="the step's output", where=where)
        close(ck, k, atol=TOL, rtol=TOL, what="the final key cache", where=f"{s}")
        close(cv, v, atol=TOL, rtol=TOL, what="the final value cache", where=f"{s}")

    check()


def prop_rope_at_the_absolute_position(impl) -> None:
    """One new token after S = 3..40 cached ones (the cache made by the oracle): its q and k are rotated at
    position S, not 0; the returned last key is the oracle's key at position S, and the output its row."""

    @given(seqs(max_prompt=40, min_prompt=3, max_more=0))
    def check(s):
        x, ws = s.build()
        want, k, v = full_forward(x, *ws, s.heads, s.base)
        n = s.prompt - 1
        where = f"{s}: one new token at position {n} after {n} cached"
        out, keys, values = _call(impl, x[:, n:], ws, s.heads, k[:, :, :n], v[:, :, :n], s.base, where)
        close(keys, k, atol=TOL, rtol=TOL, what=f"the keys (the new one rotated at position {n})", where=where)
        close(out, want[:, n:], atol=TOL, rtol=TOL, dtype=F64, what="the output", where=where)

    check()


def prop_chunk_after_a_cache_uses_an_offset_mask(impl) -> None:
    """T >= 2 new tokens after S >= 1 cached ones (a chunked prefill, a speculative-decoding check): query S+i
    sees keys 0..S+i. No mask at all, or a causal mask aligned top-left (``tril`` of a T x (S+T) block, or
    ``scaled_dot_product_attention(is_causal=True)`` with T != S+T), gives other rows."""

    @given(seqs(max_prompt=5, max_more=0), st.integers(2, 4))
    def check(s, chunk):
        x, ws = s.build()
        x2 = torch.cat([x, torch.randn(s.b, chunk, x.shape[-1], generator=torch.Generator().manual_seed(s.seed + 1),
                                       dtype=F64)], dim=1)
        want, k, v = full_forward(x2, *ws, s.heads, s.base)
        n = s.prompt
        where = f"{s}: a chunk of {chunk} new tokens at positions {n}..{n + chunk - 1} after {n} cached"
        out, keys, values = _call(impl, x2[:, n:], ws, s.heads, k[:, :, :n], v[:, :, :n], s.base, where)
        close(out, want[:, n:], atol=TOL, rtol=TOL, dtype=F64, what="the chunk's output", where=where)
        close(keys, k, atol=TOL, rtol=TOL, what="the keys", where=where)

    check()


def prop_attends_to_the_cache_it_is_given(impl) -> None:
    """Caches that no earlier call produced (random keys and values, S = 1..8, handed over after another
    request's prefill, as a server interleaves requests): the new tokens attend to exactly those keys and
    values (not re-rotated, not recomputed from tokens kept on the side) and to their own, and the returned
    caches are the given ones with the new entries appended."""

    @given(seqs(max_prompt=8, max_more=0), st.integers(1, 3))
    def check(s, t):
        gen = torch.Generator().manual_seed(s.seed + 7)
        dim = s.heads * s.d
        x, ws = s.build()
        x = torch.randn(s.b, t, dim, generator=gen, dtype=F64)
        ck = torch.randn(s.b, s.heads, s.prompt, s.d, generator=gen, dtype=F64)
        cv = torch.randn(s.b, s.heads, s.prompt, s.d, generator=gen, dtype=F64)
        pos = torch.arange(s.prompt, s.prompt + t)
        q = rope_complex(_heads(x @ ws[0], s.heads), pos, s.base)
        keys = torch.cat([ck, rope_complex(_heads(x @ ws[1], s.heads), pos, s.base)], dim=2)
        values = torch.cat([cv, _heads(x @ ws[2], s.heads)], dim=2)
        where = f"{s}: {t} new tokens after a given cache of {s.prompt} random keys and values"
        other = torch.randn(s.b, 3, dim, generator=gen, dtype=F64)        # another request's prefill comes first
        _call(impl, other, ws, s.heads, _empty(s.b, s.heads, s.d, F64), _empty(s.b, s.heads, s.d, F64), s.base,
              f"{s}: a prefill of 3 other tokens")
        out, got_k, got_v = _call(impl, x, ws, s.heads, ck, cv, s.base, where)
        close(got_k, keys, atol=TOL, rtol=TOL, what="the returned keys", where=where)
        close(got_v, values, atol=TOL, rtol=TOL, what="the returned values", where=where)
        close(out, attend(q, keys, values, ws[3], s.prompt), atol=TOL, rtol=TOL, dtype=F64,
              what="the output", where=where)

    check()


def prop_realistic_decode_in_fp32(impl) -> None:
    """B = 2, D = 256 in 2 heads of 128 (a Llama head), RoPE base 500000, a 96-token prompt then 8 decode
    steps in fp32: every step within 1e-4 of the fp64 full forward."""

    @realistic(1)
    @given(st.integers(0, 2**31 - 1))
    def check(seed):
        s = Seq(2, 96, 8, 2, 128, 500000.0, seed)
        x, ws = s.build(torch.float32)
        want, _, _ = full_forward(x, *ws, s.heads, s.base)
        ck = cv = _empty(s.b, s.heads, s.d, torch.float32)
        out, ck, cv = _call(impl, x[:, :s.prompt], ws, s.heads, ck, cv, s.base, f"{s}: prefill")
        close(out, want[:, :s.prompt], atol=1e-4, rtol=1e-4, dtype=torch.float32, what="the prefill output",
              where=f"{s}")
        for pos in range(s.prompt, s.prompt + s.more):
            where = f"{s}: fp32 decode step at position {pos}"
            out, ck, cv = _call(impl, x[:, pos:pos + 1], ws, s.heads, ck, cv, s.base, where)
            close(out, want[:, pos:pos + 1], atol=1e-4, rtol=1e-4, dtype=torch.float32, what="the output",
                  where=where)

    check()


ALL = [prop_prefill_matches_the_full_forward, prop_decode_token_by_token_matches_the_full_forward,
       prop_rope_at_the_absolute_position, prop_chunk_after_a_cache_uses_an_offset_mask,
       prop_attends_to_the_cache_it_is_given, prop_realistic_decode_in_fp32]

ZH = {
    "doc": """`cached_attention(x, wq, wk, wv, wo, heads, cache_k, cache_v, base=10000.0)` -> `(out, keys, values)` 的性质：
已缓存 S 个 token 之后，对 T 个新 token 做带 RoPE 的 causal 多头注意力。

约定：x 为 [B, T, D]；wq、wk、wv、wo 为 [D, D]，投影是 `x @ w`（无 bias）；每个头宽 d = D/heads，按
`view(B, T, H, d).transpose(1, 2)` 切分；打分为 q·k / sqrt(d)。`cache_k`、`cache_v` 为 [B, H, S, d]，存放之前 S 个
token 的 key（已经旋转过）和 value；S = 0（空张量）就是 prefill。新 token 位于绝对位置 S .. S+T-1。RoPE 在这些位置上
旋转 q 和 k（v 从不旋转），第 i 维与第 i + d/2 维配成一对（Hugging Face Llama 的 rotate-half），旋转角为
position·theta_i，theta_i = base^(-2i/d)，i = 0 .. d/2-1（角度至少用 float32 计算；fp64 的结果按 1e-5 比较，
float32 的角度满足这个精度，而任何结构性错误都差得很远）。query S+i 能看到 key 0 .. S+i。返回 dtype 与 x 相同的
输出 [B, T, D]，以及在末尾追加了新的旋转后 key 和新 value 的缓存（[B, H, S+T, d]），交给下一次调用。

对照答案：这里用 fp64 计算的整条序列的无缓存前向（RoPE 写成复数乘法 (x_i + i·x_{i+d/2})·e^{i·pos·theta_i}，
然后在方形打分矩阵上调用 `F.scaled_dot_product_attention(is_causal=True)`）；对于不是由任何序列生成的缓存，
则是新 query 对恰好给定的那些 key 和 value 做同样的注意力。""",
    "prop_prefill_matches_the_full_forward": "缓存为空（S = 0）时，输出、旋转后的 key 和 value 都等于无缓存前向的结果。",
    "prop_decode_token_by_token_matches_the_full_forward": "先 prefill prompt，再每次调用喂一个剩余的 token，并把返回的缓存传回去：每一步的输出都等于完整前向在该位置的那一行，最终的缓存等于完整前向的 key 和 value。",
    "prop_rope_at_the_absolute_position": "在 S = 3..40 个已缓存 token（缓存由对照实现生成）之后来一个新 token：它的 q 和 k 在位置 S 旋转，而不是 0；返回的最后一个 key 等于对照答案在位置 S 的 key，输出等于对照答案的那一行。",
    "prop_chunk_after_a_cache_uses_an_offset_mask": "在 S >= 1 个已缓存 token 之后来 T >= 2 个新 token（分块 prefill、投机解码的验证）：query S+i 能看到 key 0..S+i。完全不加 mask，或者 causal mask 左上对齐（T x (S+T) 块的 `tril`，或 T != S+T 时用 `scaled_dot_product_attention(is_causal=True)`），都会算出别的行。",
    "prop_attends_to_the_cache_it_is_given": "不是由之前任何一次调用产生的缓存（随机的 key 和 value，S = 1..8，在另一个请求的 prefill 之后传入，就像服务端交错处理多个请求）：新 token 恰好对这些 key 和 value（不重新旋转，也不从另存的 token 重新计算）以及它们自己的 key、value 做注意力；返回的缓存是给定的缓存在末尾追加新条目。",
    "prop_realistic_decode_in_fp32": "B = 2、D = 256 分成 2 个宽 128 的头（Llama 的头宽），RoPE base 500000，96 个 token 的 prompt 之后 decode 8 步，全部 fp32：每一步都与 fp64 完整前向相差不超过 1e-4。",
    "cached_attention": """对已缓存的 S 个 token 之后的 T 个新 token x [B, T, D] 做带 RoPE 的 causal 多头注意力。

`cache_k`、`cache_v` 为 [B, H, S, D/H]：之前 S 个 token 旋转后的 key 和 value（prefill 时 S = 0）。新 token 位于
绝对位置 S .. S+T−1：q 和 k 在这些位置上做 RoPE 旋转，配对 (i, i + d/2)，θ_i = base^(−2i/d)；v 不旋转。
query S+i 对 key 0 .. S+i 做注意力。返回 (out [B, T, D], keys [B, H, S+T, D/H], values [B, H, S+T, D/H])：
即追加了新的旋转后 key 和 value 的缓存，可直接交给下一次调用。""",
}
