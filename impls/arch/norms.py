"""RMSNorm and LayerNorm, and a Pre-LN / Post-LN transformer stack to compare at initialisation.

RMSNorm (Zhang & Sennrich 2019, arXiv 1910.07467, Eq. 4): ``x / RMS(x) · g`` with
RMS(x) = sqrt(mean(x²) + ε): LayerNorm without subtracting the mean and without the bias. It is
invariant to re-scaling the input (x → αx, α > 0) but not to shifting it (x → x + c·1), while
LayerNorm is invariant to both; on a zero-mean input the two coincide. Both add ε inside the square root
(so an all-zero row, a padding token, gives 0 instead of 0/0) and use the biased variance (divide by N, as
a normaliser of the row it has, not an estimate of a population). Half-precision inputs are normalised in
fp32 and returned in their dtype: in bf16 the mean of a row near 32 is rounded by up to 0.125, in fp16
x² rounds to 0 below about 1.7e-4 and overflows above 256.

One pass over a row (a warp or a block walking it, a CPU with only add and multiply): Welford's update
(``welford``) keeps (n, mean, M2) with M2 = Σ(x − mean)²; two partial results, e.g. of two warps, merge
with Chan, Golub and LeVeque's pairwise formula (``chan_merge``): δ = mean_b − mean_a,
mean = mean_a + δ·n_b/n, M2 = M2_a + M2_b + δ²·n_a·n_b/n. In exact arithmetic both equal the two-pass
mean and Σ(x − mean)², in any split; ``E[x²] − E[x]²`` in one pass is the same in exact arithmetic but
cancels catastrophically in floating point when the mean is large against the spread.

Pre-LN vs Post-LN (Xiong et al. 2020, arXiv 2002.04745): Post-LN computes LN(x + F(x)), Pre-LN
x + F(LN(x)). At initialisation the gradient of the last layers' weights is large in Post-LN
(their Theorem 1: O(d·sqrt(ln d)), independent of depth L) and O(d·sqrt(ln d / L)) in Pre-LN;
``layer_grad_norms`` measures it per layer on a small stack.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(mean(x², last dim) + eps) · weight, computed in fp32 at least."""
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight
    return y.to(x.dtype)


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
               eps: float = 1e-6) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) · weight + bias over the last dimension (biased variance, eps inside the
    square root, two passes), computed in fp32 at least and returned in x's dtype."""
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    mu = xf.mean(-1, keepdim=True)
    var = (xf - mu).pow(2).mean(-1, keepdim=True)
    y = (xf - mu) * torch.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y.to(x.dtype)


def welford(xs, start=(0, 0.0, 0.0)):
    """(n, mean, M2) of the values ``xs`` after ``start``, one value at a time (Welford 1962):
    n += 1; δ = x − mean; mean += δ/n; M2 += δ·(x − mean). Plain arithmetic: works on floats and Fractions."""
    n, mean, m2 = start
    for x in xs:
        n += 1
        delta = x - mean
        mean = mean + delta / n
        m2 = m2 + delta * (x - mean)
    return n, mean, m2


def chan_merge(a, b):
    """Merge two partial (n, mean, M2) (Chan, Golub & LeVeque 1979): δ = mean_b − mean_a,
    mean = mean_a + δ·n_b/n, M2 = M2_a + M2_b + δ²·n_a·n_b/n."""
    na, mean_a, m2a = a
    nb, mean_b, m2b = b
    if na == 0:
        return b
    if nb == 0:
        return a
    n = na + nb
    delta = mean_b - mean_a
    return n, mean_a + delta * nb / n, m2a + m2b + delta * delta * na * nb / n


class Block(nn.Module):
    """Self-attention + ReLU MLP sub-layers, each wrapped Pre-LN or Post-LN."""

    def __init__(self, d: int, heads: int, post_ln: bool):
        super().__init__()
        self.post_ln = post_ln
        self.attn = nn.MultiheadAttention(d, heads, bias=False, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        for lin in (self.fc1, self.fc2):
            nn.init.xavier_normal_(lin.weight)
            nn.init.zeros_(lin.bias)

    def _attn(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, x, x, need_weights=False)[0]

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.post_ln:
            x = self.ln1(x + self._attn(x))
            return self.ln2(x + self._mlp(x))
        x = x + self._attn(self.ln1(x))
        return x + self._mlp(self.ln2(x))


class Stack(nn.Module):
    """L blocks; Pre-LN adds the final LayerNorm that Pre-LN models put before the output."""

    def __init__(self, layers: int, d: int, heads: int, post_ln: bool):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, heads, post_ln) for _ in range(layers))
        self.final = nn.Identity() if post_ln else nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for blk in self.blocks:
            x = blk(x)
        return self.final(x)


def layer_grad_norms(layers: int, post_ln: bool, d: int = 64, heads: int = 4, seq: int = 16, batch: int = 8,
                     vocab: int = 50, seeds: tuple[int, ...] = (0, 1, 2)) -> list[float]:
    """Mean over ``seeds`` of ‖∂loss/∂W‖_F of each block's last MLP weight at initialisation.

    Loss: cross-entropy of a random-target token prediction through a fresh linear head.
    """
    out = torch.zeros(layers, dtype=torch.float64)
    for seed in seeds:
        torch.manual_seed(seed)
        net = Stack(layers, d, heads, post_ln).double()
        head = nn.Linear(d, vocab, bias=False).double()
        x = torch.randn(batch, seq, d, dtype=torch.float64)
        y = torch.randint(0, vocab, (batch, seq))
        F.cross_entropy(head(net(x)).flatten(0, 1), y.flatten()).backward()
        out += torch.stack([blk.fc2.weight.grad.norm() for blk in net.blocks])
    return (out / len(seeds)).tolist()


def batch_norm_tokens(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                      mask: torch.Tensor | None = None, eps: float = 1e-5) -> torch.Tensor:
    """BatchNorm in training mode for token activations x [B, T, C]: each channel is normalised with the mean
    and (biased) variance over every real token of the batch — all samples and all positions, as
    ``nn.BatchNorm1d`` does on [B, C, T]. ``mask`` [B, T] (True = real token) leaves padding out of the
    statistics (padded positions are normalised with the same statistics). Compare ``layer_norm``, whose
    statistics are each token's own, over C."""
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    w = torch.ones(x.shape[:-1], dtype=xf.dtype, device=x.device) if mask is None else mask.to(xf.dtype)
    n = w.sum()
    mean = (xf * w[..., None]).sum((0, 1)) / n
    var = ((xf - mean).pow(2) * w[..., None]).sum((0, 1)) / n
    y = (xf - mean) * torch.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y.to(x.dtype)
