"""Count the activation bytes a real transformer layer saves for backward.

``TransformerLayer`` is the GPT/Megatron layer that Korthikanti et al. (2022, §4.1) analyse:
pre-LayerNorm self-attention with softmax dropout, output projection with dropout and a
residual, then pre-LayerNorm MLP (h → 4h → GELU → h) with dropout and a residual. Input is
``[s, b, h]``.

``saved_activation_bytes(layer, x)`` runs the forward pass under
``torch.autograd.graph.saved_tensors_hooks`` and sums the bytes of the distinct storages autograd
keeps, leaving out the parameters. Per-token statistics (LayerNorm mean and rstd, ``s·b``
elements each) and 0-dim scalars are reported apart, since Eq. (1),
``sbh(34 + 5as/h)``, counts only the tensors that scale with ``h`` or ``s²``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class TransformerLayer(nn.Module):
    """x + Drop(Proj(Attn(LN1(x)))), then + Drop(FC2(GELU(FC1(LN2(·))))); attention with dropout on
    softmax(QKᵀ/√d)."""

    def __init__(self, hidden: int, heads: int, dropout: float = 0.1):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
        self.heads, self.p = heads, dropout
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3:
            raise ValueError(f"expected [s, b, h], got shape {tuple(x.shape)}")
        s, b, h = x.shape
        a, d = self.heads, h // self.heads
        qkv = self.qkv(self.ln1(x)).view(s, b, 3, a, d).permute(2, 1, 3, 0, 4).contiguous()  # [3, b, a, s, d]
        q, k, v = qkv[0], qkv[1], qkv[2]
        probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * d**-0.5, dim=-1)
        probs = F.dropout(probs, self.p, self.training)
        ctx = torch.matmul(probs, v).permute(2, 0, 1, 3).reshape(s, b, h)
        x = x + F.dropout(self.proj(ctx), self.p, self.training)
        y = self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x + F.dropout(y, self.p, self.training)


def saved_activation_bytes(module: nn.Module, *inputs: torch.Tensor) -> dict[str, int]:
    """Bytes of the distinct non-parameter storages autograd saves during ``module(*inputs)``."""
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    seen: dict[int, tuple[int, int]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        if st.data_ptr() not in params and st.data_ptr() not in seen:
            seen[st.data_ptr()] = (st.nbytes(), t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = module(*inputs)
    n_tokens = inputs[0].shape[0] * inputs[0].shape[1] if inputs[0].dim() >= 2 else -1
    main = sum(nb for nb, n in seen.values() if n > 1 and n != n_tokens)
    per_token = sum(nb for nb, n in seen.values() if n == n_tokens)
    scalars = sum(nb for nb, n in seen.values() if n <= 1)
    del out
    return {"activations": main, "per_token_stats": per_token, "scalars": scalars}


def dropout_mask_bytes_per_element(dtype: torch.dtype, device: torch.device | str = "cpu") -> float:
    """Bytes per element that dropout alone keeps for backward on this device and dtype."""
    x = torch.randn(4, 4, 132, device=device, dtype=dtype, requires_grad=True)
    got = saved_activation_bytes(nn.Dropout(0.1), x)
    return got["activations"] / x.numel()
