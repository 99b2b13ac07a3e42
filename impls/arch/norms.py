"""RMSNorm and LayerNorm, and a Pre-LN / Post-LN transformer stack to compare at initialisation.

RMSNorm (Zhang & Sennrich 2019, arXiv 1910.07467, Eq. 4): ``x / RMS(x) · g`` with
RMS(x) = sqrt(mean(x²) + ε): LayerNorm without subtracting the mean and without the bias. It is
invariant to re-scaling the input (x → αx, α > 0) but not to shifting it (x → x + c·1), while
LayerNorm is invariant to both; on a zero-mean input the two coincide.

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
    """(x - mean) / sqrt(var + eps) · weight + bias (biased variance, as LayerNorm)."""
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    y = (x - mu) * torch.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


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
