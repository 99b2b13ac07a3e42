"""Kata properties for ``gpt_forward(tokens, params, heads) -> (logits, loss)``: a one-block pre-norm GPT
and its language-model loss.

Conventions: tokens [B, T] int64 with T >= 2. ``params`` is a dict of tensors: wte [V, D] (token embedding,
also the output head: logits = ... @ wte.T), wpe [T_max, D] (learned positions), LayerNorm weights and biases
ln1_w, ln1_b, ln2_w, ln2_b, lnf_w, lnf_b [D] with eps 1e-5, attention projections wq, wk, wv, wo [D, D]
(y = x @ w, no bias; ``heads`` heads of D/heads, scores / sqrt(D/heads), causal), MLP w1 [D, F], b1 [F],
w2 [F, D], b2 [D] with the exact (erf) GELU. Pre-norm: h = h + Attn(LN1(h)); h = h + MLP(LN2(h)); then
logits = LNf(h) @ wte.T, [B, T, V] in the params' dtype. ``loss`` is the mean cross-entropy of logits at
positions 0..T-2 against the tokens at 1..T-1 (labels shifted left by one), a 0-d tensor, computed in
float32 at least without ever taking log of a softmax that underflowed.

Oracle: PyTorch's own ``nn.TransformerEncoderLayer(norm_first=True, activation="gelu")`` with a causal mask,
loaded with the same weights, then ``F.layer_norm`` and ``F.cross_entropy`` on the shifted labels, in fp64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from verifiers.katas.budgets import realistic
from verifiers.katas.tensors import close

F64 = torch.float64
EPS = 1e-5


def oracle(tokens: torch.Tensor, params: dict, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    p = {k: v.to(F64) for k, v in params.items()}
    d, f = p["wq"].shape[0], p["w1"].shape[1]
    layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=f, dropout=0.0, activation="gelu",
                                       layer_norm_eps=EPS, batch_first=True, norm_first=True, dtype=F64)
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([p["wq"].t(), p["wk"].t(), p["wv"].t()], dim=0))
        layer.self_attn.in_proj_bias.zero_()
        layer.self_attn.out_proj.weight.copy_(p["wo"].t())
        layer.self_attn.out_proj.bias.zero_()
        layer.linear1.weight.copy_(p["w1"].t())
        layer.linear1.bias.copy_(p["b1"])
        layer.linear2.weight.copy_(p["w2"].t())
        layer.linear2.bias.copy_(p["b2"])
        layer.norm1.weight.copy_(p["ln1_w"])
        layer.norm1.bias.copy_(p["ln1_b"])
        layer.norm2.weight.copy_(p["ln2_w"])
        layer.norm2.bias.copy_(p["ln2_b"])
        layer.train()                                   # dropout is 0; train() keeps it off the fused fast path
        t = tokens.shape[1]
        h = p["wte"][tokens] + p["wpe"][:t]
        causal = nn.Transformer.generate_square_subsequent_mask(t, dtype=F64)
        h = layer(h, src_mask=causal, is_causal=True)
        logits = F.layer_norm(h, (d,), p["lnf_w"], p["lnf_b"], EPS) @ p["wte"].t()
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    return logits, loss


@dataclass(frozen=True)
class Model:
    v: int
    d: int
    heads: int
    ffn: int
    t_max: int
    seed: int
    scale: float = 1.0

    def params(self, dtype=F64) -> dict:
        g = torch.Generator().manual_seed(self.seed)
        d, f = self.d, self.ffn

        def r(*shape, s=1.0):
            return torch.randn(*shape, generator=g, dtype=F64) * s

        p = {"wte": r(self.v, d, s=self.scale), "wpe": r(self.t_max, d, s=0.5),
             "ln1_w": 1 + r(d, s=0.3), "ln1_b": r(d, s=0.3), "wq": r(d, d, s=d ** -0.5), "wk": r(d, d, s=d ** -0.5),
             "wv": r(d, d, s=d ** -0.5), "wo": r(d, d, s=d ** -0.5), "ln2_w": 1 + r(d, s=0.3), "ln2_b": r(d, s=0.3),
             "w1": r(d, f, s=d ** -0.5), "b1": r(f, s=0.1), "w2": r(f, d, s=f ** -0.5), "b2": r(d, s=0.1),
             "lnf_w": 1 + r(d, s=0.3), "lnf_b": r(d, s=0.3)}
        return {k: v.to(dtype) for k, v in p.items()}

    def tokens(self, b: int, t: int, seed: int) -> torch.Tensor:
        return torch.randint(0, self.v, (b, t), generator=torch.Generator().manual_seed(seed))


@st.composite
def models(draw):
    heads, hd = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    d = heads * hd
    return Model(draw(st.integers(2, 11)), d, heads, draw(st.sampled_from([d, 4 * d])), 8, draw(st.integers(0, 2**31 - 1)))


def _run(impl, tokens, params, heads, where):
    res = impl(tokens.clone(), {k: v.clone() for k, v in params.items()}, heads)
    assert isinstance(res, (tuple, list)) and len(res) == 2, f"{where}: expected (logits, loss), got {type(res).__name__}"
    return res


def _check(impl, m: Model, tokens, params, where, tol=1e-9, dtype=F64):
    logits, loss = _run(impl, tokens, params, m.heads, where)
    want_logits, want_loss = oracle(tokens, params, m.heads)
    close(logits, want_logits, atol=tol, rtol=tol, dtype=dtype, what="the logits", where=where)
    assert isinstance(loss, torch.Tensor) and loss.numel() == 1, f"{where}: the loss must be a 0-d tensor, got {loss!r}"
    close(loss.reshape(()), want_loss, atol=tol, rtol=tol, what="the loss", where=where)
    return logits, loss


def prop_matches_pytorch_encoder_layer(impl) -> None:
    """Ragged vocabularies, widths, heads, MLP sizes, batches and lengths: logits and loss equal PyTorch's
    pre-norm TransformerEncoderLayer with a causal mask, final LayerNorm, tied head and shifted cross-entropy,
    in fp64."""

    @given(models(), st.integers(1, 3), st.integers(2, 8), st.integers(0, 2**31 - 1))
    def check(m, b, t, seed):
        _check(impl, m, m.tokens(b, t, seed), m.params(), f"{m}, B={b}, T={t}, token seed {seed}")

    check()


def prop_labels_are_shifted(impl) -> None:
    """The loss scores the logits at t against the token at t+1: on tokens [[1, 2, 3, 0]] it is the mean of
    -log p(2 | 1), -log p(3 | 1 2), -log p(0 | 1 2 3); scoring position t against its own token (no shift)
    gives another number."""
    m = Model(5, 8, 2, 32, 8, 11)
    tokens = torch.tensor([[1, 2, 3, 0]])
    p = m.params()
    _, loss = _run(impl, tokens, p, m.heads, "tokens [[1, 2, 3, 0]]")
    logits, want = oracle(tokens, p, m.heads)
    unshifted = F.cross_entropy(logits[0], tokens[0])
    assert isinstance(loss, torch.Tensor) and abs(float(loss) - float(want)) <= 1e-9, (
        f"{m}, tokens [[1, 2, 3, 0]]: expected the shifted loss {float(want):.6f} (without the shift it would be "
        f"{float(unshifted):.6f}), got {float(loss) if isinstance(loss, torch.Tensor) else loss!r}")


def prop_residual_adds_the_unnormalised_input(impl) -> None:
    """With wo = 0 and w2 = 0, b2 = 0 both sub-layers add nothing, so the block is the identity and the logits
    are LNf(wte[tokens] + wpe) @ wte.T; adding the sub-layer to LN(x) instead of x puts LN1 and LN2 (with
    non-trivial weights and biases) in the path."""

    @given(models(), st.integers(2, 6), st.integers(0, 2**31 - 1))
    def check(m, t, seed):
        p = m.params()
        p["wo"], p["w2"], p["b2"] = torch.zeros_like(p["wo"]), torch.zeros_like(p["w2"]), torch.zeros_like(p["b2"])
        tokens = m.tokens(1, t, seed)
        h = p["wte"][tokens] + p["wpe"][:t]
        want = F.layer_norm(h, (m.d,), p["lnf_w"], p["lnf_b"], EPS) @ p["wte"].t()
        logits, _ = _run(impl, tokens, p, m.heads, f"{m}")
        close(logits, want, atol=1e-9, rtol=1e-9, what="the logits with both sub-layers silenced",
              where=f"{m}, T={t}, wo = w2 = b2 = 0 (expected LNf(h0) @ wte.T)")

    check()


def prop_causal(impl) -> None:
    """Changing the tokens after position t leaves the logits at positions <= t unchanged."""

    @given(models(), st.integers(2, 8), st.data())
    def check(m, t, data):
        cut = data.draw(st.integers(0, t - 2), label="t")
        p = m.params()
        a = m.tokens(2, t, cut)
        b = a.clone()
        b[:, cut + 1:] = (b[:, cut + 1:] + 1) % m.v
        la, _ = _run(impl, a, p, m.heads, f"{m}")
        lb, _ = _run(impl, b, p, m.heads, f"{m}")
        assert isinstance(la, torch.Tensor) and isinstance(lb, torch.Tensor) and la.shape == lb.shape == (2, t, m.v), \
            f"{m}: expected logits of shape (2, {t}, {m.v})"
        close(lb[:, :cut + 1], la[:, :cut + 1].detach(), atol=1e-12, rtol=1e-12,
              what=f"the logits at positions <= {cut} after changing the later tokens", where=f"{m}, T={t}")

    check()


def prop_confident_logits_in_fp32(impl) -> None:
    """fp32 weights with a large embedding (logits spread over hundreds) and every target the least likely
    token: the loss is large but finite and within 1e-4 of the fp64 oracle. log(softmax(z)) underflows to
    log 0 = -inf for a logit about 104 below the maximum."""
    m = Model(32, 16, 2, 64, 8, 3, scale=40.0)
    p = m.params()
    tokens = torch.zeros(1, 8, dtype=torch.long)
    for t in range(7):                                  # the next token is the least likely one, position by position
        logits, _ = oracle(tokens[:, : t + 2], p, m.heads)         # logits at t depend on tokens 0..t only
        tokens[0, t + 1] = int(logits[0, t].argmin())
    p32 = {k: v.float() for k, v in p.items()}
    logits, want = oracle(tokens, p32, m.heads)
    spread = float((logits.amax(-1) - logits.amin(-1)).min())
    assert spread > 150, f"the construction should spread the logits over > 150, got {spread}"
    got_logits, loss = _run(impl, tokens, p32, m.heads, f"{m} in fp32")
    close(got_logits, logits, atol=1e-3, rtol=1e-4, dtype=torch.float32, what="the fp32 logits", where=f"{m}")
    assert isinstance(loss, torch.Tensor) and loss.numel() == 1 and math.isfinite(float(loss)), \
        f"{m}, fp32, tokens {tokens.tolist()} (each the least likely next token): expected a finite loss of " \
        f"{float(want):.3f}, got {loss!r}"
    assert abs(float(loss) - float(want)) <= 1e-4 * float(want), \
        f"{m}, fp32, tokens {tokens.tolist()}: expected the loss {float(want):.4f}, got {float(loss):.4f}"


def prop_realistic_size_in_fp32(impl) -> None:
    """B = 2, T = 128, D = 256 in 8 heads, MLP 1024, V = 2048, fp32: logits and loss within 1e-4 of the fp64
    oracle."""

    @realistic(1)
    @given(st.integers(0, 2**31 - 1))
    def check(seed):
        m = Model(2048, 256, 8, 1024, 128, seed, scale=0.5)
        _check(impl, m, m.tokens(2, 128, seed), m.params(torch.float32), f"{m}, B=2, T=128, fp32", tol=1e-4,
               dtype=torch.float32)

    check()


ALL = [prop_matches_pytorch_encoder_layer, prop_labels_are_shifted, prop_residual_adds_the_unnormalised_input,
       prop_causal, prop_confident_logits_in_fp32, prop_realistic_size_in_fp32]

ZH = {
    "doc": """`gpt_forward(tokens, params, heads) -> (logits, loss)` 的性质：单个 block 的 pre-norm GPT 及其语言模型 loss。

约定：tokens 为 [B, T] 的 int64，T >= 2。`params` 是张量字典：wte [V, D]（token embedding，同时作为输出头：
logits = ... @ wte.T）、wpe [T_max, D]（可学习的位置向量）、LayerNorm 的 weight 和 bias：ln1_w、ln1_b、ln2_w、ln2_b、
lnf_w、lnf_b [D]，eps 为 1e-5；attention 投影 wq、wk、wv、wo [D, D]（y = x @ w，无 bias；`heads` 个头，每头宽 D/heads，
打分除以 sqrt(D/heads)，causal）；MLP 的 w1 [D, F]、b1 [F]、w2 [F, D]、b2 [D]，使用精确的（erf）GELU。Pre-norm：
h = h + Attn(LN1(h))；h = h + MLP(LN2(h))；然后 logits = LNf(h) @ wte.T，形状 [B, T, V]，dtype 与 params 相同。
`loss` 是位置 0..T-2 的 logits 对位置 1..T-1 的 token（label 左移一位）的平均交叉熵，为 0 维张量，至少在 float32 下
计算，并且绝不能对已经下溢的 softmax 取 log。

对照答案：PyTorch 自带的 `nn.TransformerEncoderLayer(norm_first=True, activation="gelu")`，加 causal mask、载入同样的
权重，再接 `F.layer_norm` 和对移位后 label 的 `F.cross_entropy`，全部在 fp64 下计算。""",
    "prop_matches_pytorch_encoder_layer": "词表大小、宽度、头数、MLP 大小、batch 和序列长度都不规整：logits 和 loss 等于 fp64 下 PyTorch 的 pre-norm TransformerEncoderLayer（带 causal mask）、最后的 LayerNorm、共享权重的输出头和移位后的交叉熵。",
    "prop_labels_are_shifted": "loss 用位置 t 的 logits 去预测位置 t+1 的 token：tokens [[1, 2, 3, 0]] 上它是 -log p(2 | 1)、-log p(3 | 1 2)、-log p(0 | 1 2 3) 的平均；拿位置 t 的 logits 对它自己的 token 打分（不移位）会得到另一个数。",
    "prop_residual_adds_the_unnormalised_input": "wo = 0 且 w2 = 0、b2 = 0 时两个子层都不贡献任何东西，block 就是恒等映射，logits 为 LNf(wte[tokens] + wpe) @ wte.T；如果把子层输出加到 LN(x) 上而不是 x 上，LN1 和 LN2（weight、bias 都不平凡）就会进入这条通路。",
    "prop_causal": "改动位置 t 之后的 token，位置 <= t 的 logits 不变。",
    "prop_confident_logits_in_fp32": "fp32 权重、embedding 很大（logits 分布跨度达数百），每个目标都是最不可能的 token：loss 很大但有限，与 fp64 对照答案相差不超过 1e-4。某个 logit 比最大值低约 104 时，log(softmax(z)) 会下溢成 log 0 = -inf。",
    "prop_realistic_size_in_fp32": "B = 2、T = 128、D = 256 分成 8 个头、MLP 1024、V = 2048、fp32：logits 和 loss 与 fp64 对照答案相差不超过 1e-4。",
    "gpt_forward": """`tokens` [B, T]（T >= 2）的 logits [B, T, V] 和平均 next-token 交叉熵（0 维张量）。

`params`：wte [V, D]（同时作为输出头）、wpe [T_max, D]，LayerNorm 的 ln1_w/ln1_b、ln2_w/ln2_b、lnf_w/lnf_b [D]
（eps 1e-5），attention 的 wq、wk、wv、wo [D, D]（y = x @ w，无 bias，`heads` 个头），MLP 的 w1 [D, F]、b1 [F]、
w2 [F, D]、b2 [D]，使用精确的 GELU。""",
}
