"""Measured: the bytes a real transformer layer saves for backward against Korthikanti Eq. (1).

Autograd's saved tensors are counted (distinct storages, parameters excluded) for a GPT-style
layer in 16-bit. The dropout mask size ``m`` is measured separately on a lone ``nn.Dropout``;
the layer total must then equal ``sbh(32 + 2m) + as²b(4 + m)`` exactly, which is
``sbh(34 + 5as/h)`` when ``m = 1`` (a 1-byte mask, as CUDA's fused dropout keeps). Eager CPU
dropout keeps its scaled noise in the activation dtype instead, ``m = 2``.
"""

from __future__ import annotations

import pytest
import torch

from impls.distributed.activations import TransformerLayer, dropout_mask_bytes_per_element, saved_activation_bytes
from impls.distributed.memory import activation_bytes_num

CONFIGS = [(16, 2, 32, 4), (9, 3, 24, 3), (33, 1, 48, 6)]  # (s, b, h, a)


@pytest.mark.claim("zero.activation-memory-eq1")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_saved_tensors_match_eq1(dtype, device, evidence):
    m = dropout_mask_bytes_per_element(dtype, device)
    assert m in (1.0, 2.0), m
    rows = []
    for s, b, h, a in CONFIGS:
        torch.manual_seed(0)
        layer = TransformerLayer(h, a).to(device=device, dtype=dtype).train()
        x = torch.randn(s, b, h, device=device, dtype=dtype, requires_grad=True)
        got = saved_activation_bytes(layer, x)
        want = activation_bytes_num(s, b, h, a, dropout_mask_bytes=m)
        assert got["activations"] == want, (s, b, h, a, m, got, want)
        eq1 = s * b * h * (34 + 5 * a * s / h)
        if m == 1:
            assert got["activations"] == eq1
        else:  # each of the three masks costs (m - 1) more bytes per element
            assert got["activations"] - eq1 == (m - 1) * (2 * s * b * h + a * s * s * b)
        rows.append({"s": s, "b": b, "h": h, "a": a, "measured": got["activations"], "eq1_m1": eq1,
                     "layernorm_stats_bytes": got["per_token_stats"]})
    evidence[str(dtype).removeprefix("torch.") + f"@{device.type}"] = {"dropout_mask_bytes": m, "layers": rows}


@pytest.mark.claim("zero.activation-memory-eq1")
def test_probe_sorts_saved_tensors_by_kind():
    """The probe's three buckets, on a module whose saved tensors are known: ``x * s`` with a 0-dim
    ``s`` saves x (the activation) and s (a scalar); a LayerNorm saves its input plus per-token mean
    and rstd; parameters are never counted."""

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.s = torch.tensor(3.0, requires_grad=True)
            self.ln = torch.nn.LayerNorm(8)

        def forward(self, x):
            return self.ln(x) * self.s

    x = torch.randn(5, 2, 8, requires_grad=True)
    got = saved_activation_bytes(Scaled(), x)
    # LayerNorm input x and its output (saved by the multiply): 2 * 80 fp32; mean and rstd: 2 * 10 fp32; s: 4 bytes
    assert got == {"activations": 2 * 80 * 4, "per_token_stats": 2 * 10 * 4, "scalars": 4}, got
