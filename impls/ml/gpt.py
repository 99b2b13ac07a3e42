"""A one-block GPT written out: embeddings, a pre-norm decoder block, the tied output head and the
next-token loss (GPT-2's layout, Radford et al. 2019, §2.3: LayerNorm moved to the input of each sub-block
and a final LayerNorm before the head).

    h0 = wte[tokens] + wpe[0..T−1]
    h1 = h0 + Attn(LN1(h0))                causal multi-head attention (``impls/ml/mha.py``)
    h2 = h1 + MLP(LN2(h1)),  MLP(u) = GELU(u W1 + b1) W2 + b2     (exact erf GELU)
    logits = LNf(h2) · wteᵀ                the head shares the token embedding
    loss = mean over b, t < T−1 of −log softmax(logits[b, t])[tokens[b, t+1]]

The residual adds each sub-layer's output to the *un-normalised* stream (x + F(LN(x)), not LN(x) + F(LN(x))):
the stream keeps its scale from layer to layer and the identity path carries the gradient straight down.
The logits at position t are scored against the token at t+1: without the shift the target is an input the
causal model already sees, and copying it through the residual stream drives the loss to 0 without
learning anything about the next token. The loss is a log-softmax (log-sum-exp with the max taken out),
never ``log(softmax(z))``, which is log 0 = −inf in fp32 once a target's logit is about 104 below the max.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from impls.arch.norms import layer_norm
from impls.ml.mha import mha

LN_EPS = 1e-5
PARAMS = ("wte", "wpe", "ln1_w", "ln1_b", "wq", "wk", "wv", "wo", "ln2_w", "ln2_b", "w1", "b1", "w2", "b2",
          "lnf_w", "lnf_b")


def gpt_forward(tokens: Tensor, params: dict[str, Tensor], heads: int) -> tuple[Tensor, Tensor]:
    """Logits [B, T, V] and the mean next-token cross-entropy (a 0-d tensor) of ``tokens`` [B, T] (T >= 2).

    ``params``: wte [V, D] (also the output head), wpe [T_max, D], LayerNorms ln1_w/ln1_b, ln2_w/ln2_b,
    lnf_w/lnf_b [D] (eps 1e-5), attention wq, wk, wv, wo [D, D] (y = x @ w, no bias, ``heads`` heads),
    MLP w1 [D, F], b1 [F], w2 [F, D], b2 [D] with the exact GELU."""
    p = params
    t = tokens.shape[1]
    h = p["wte"][tokens] + p["wpe"][:t]
    a = layer_norm(h, p["ln1_w"], p["ln1_b"], LN_EPS)
    h = h + mha(a, p["wq"], p["wk"], p["wv"], p["wo"], heads, causal=True)
    m = layer_norm(h, p["ln2_w"], p["ln2_b"], LN_EPS)
    h = h + F.gelu(m @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    logits = layer_norm(h, p["lnf_w"], p["lnf_b"], LN_EPS) @ p["wte"].t()
    z = logits[:, :-1].to(torch.promote_types(logits.dtype, torch.float32))
    loss = F.cross_entropy(z.reshape(-1, z.shape[-1]), tokens[:, 1:].reshape(-1))
    return logits, loss
