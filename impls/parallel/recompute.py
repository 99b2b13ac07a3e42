"""Activation recomputation of one GPT layer: none, selective (attention core) or full.

Korthikanti et al. 2022 (arXiv 2205.05198), §5. The layer is
``impls.distributed.activations.TransformerLayer``, whose saved activations are
``sbh(34 + 5as/h)`` bytes with 16-bit activations and 1-byte dropout masks (Eq. 1).

* selective: the attention core (QKᵀ, softmax, softmax dropout, ·V) runs inside a checkpoint, so
  its 5as²b bytes (softmax output, dropout mask, dropout output) are recomputed in backward from
  Q, K, V, which are kept: 34sbh remain. Extra forward work: the two batched matmuls, 4bs²h FLOPs.
* full: the whole layer runs inside a checkpoint; only its input (2sbh) is kept and the layer's
  forward runs again in backward: one more forward on top of forward + backward (= 3 forwards).

Checkpoints are the reentrant kind (``use_reentrant=True``), as Megatron's, so the tensors the
checkpoint keeps pass through ``saved_tensors_hooks`` and :func:`saved_activation_bytes` sees them.
``SDPALayer`` is the same layer with ``scaled_dot_product_attention`` (no attention dropout):
like FlashAttention it keeps Q, K, V, the output and one log-sum-exp per row, nothing of size s².
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

from impls.distributed.activations import TransformerLayer


class SelectiveRecomputeLayer(TransformerLayer):
    """TransformerLayer whose attention core is recomputed in backward."""

    def _core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5, dim=-1)
        return torch.matmul(F.dropout(probs, self.p, self.training), v)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s, b, h = x.shape
        a, d = self.heads, h // self.heads
        qkv = self.qkv(self.ln1(x)).view(s, b, 3, a, d).permute(2, 1, 3, 0, 4).contiguous()
        ctx = checkpoint(self._core, qkv[0], qkv[1], qkv[2], use_reentrant=True)
        ctx = ctx.permute(2, 0, 1, 3).reshape(s, b, h)
        x = x + F.dropout(self.proj(ctx), self.p, self.training)
        y = self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x + F.dropout(y, self.p, self.training)


class FullRecompute(nn.Module):
    """Runs ``layer`` inside one checkpoint: keeps the input, re-runs the forward in backward."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.layer, x, use_reentrant=True)


class SDPALayer(TransformerLayer):
    """TransformerLayer with fused scaled-dot-product attention (no dropout on the probabilities)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s, b, h = x.shape
        a, d = self.heads, h // self.heads
        qkv = self.qkv(self.ln1(x)).view(s, b, 3, a, d).permute(2, 1, 3, 0, 4).contiguous()
        ctx = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2]).permute(2, 0, 1, 3).reshape(s, b, h)
        x = x + F.dropout(self.proj(ctx), self.p, self.training)
        y = self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x + F.dropout(y, self.p, self.training)


def step_flops(module: nn.Module, x: torch.Tensor) -> dict[str, int]:
    """Matmul FLOPs of ``module(x)`` forward and of forward + backward (x requires grad)."""
    x = x.detach().requires_grad_(True)
    with FlopCounterMode(display=False) as fwd:
        out = module(x)
    with FlopCounterMode(display=False) as bwd:
        out.float().square().sum().backward()
    return {"forward": fwd.get_total_flops(), "step": fwd.get_total_flops() + bwd.get_total_flops()}


def model_flops_per_layer(s: int, b: int, h: int) -> int:
    """Korthikanti's model FLOPs of one layer, forward + backward: 72bsh² + 12bs²h (= 72bsh²(1 + s/6h))."""
    return 72 * b * s * h * h + 12 * b * s * s * h
