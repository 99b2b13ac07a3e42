"""LoRA and QLoRA: the low-rank adapter, its merge, trainable-parameter counts, NF4 and double quantisation.

LoRA (Hu et al. 2021, §4.1): a frozen linear layer W [out, in] gets a trainable update ΔW = (α/r)·B·A with
A [r, in] and B [out, r]:

    y = x Wᵀ + b + (α/r) · dropout(x) Aᵀ Bᵀ.

As in PEFT, A is Kaiming-uniform (a = √5) and B is zero, so ΔW = 0 and the model starts exactly at the base
(``init="gaussian"`` draws A from N(0, 1/r) instead). ``init="b_random"`` swaps the roles and ``init="zeros"``
zeroes both, to show what each does to the first gradients: ∂L/∂B = (α/r)·gᵀ(xAᵀ) is 0 when A = 0 and
∂L/∂A = (α/r)·(gB)ᵀx is 0 when B = 0, so with both zero nothing ever moves. ``merge`` folds ΔW into W for
inference (no extra FLOPs); unmerged, each call adds 2·r·(in + out) FLOPs per token.
Trainable parameters per adapted module: r·(in + out); ``lora_params`` sums them over a model config.

QLoRA (Dettmers et al. 2023, §3): the frozen base is stored as 4-bit NormalFloat (NF4) codes in blocks of 64
with an absmax scale each, dequantised to BF16 for every matmul (storage type NF4, compute type BF16).
``nf4_codebook`` builds the 16 levels from normal quantiles as bitsandbytes does: 8 positive levels at
Φ⁻¹ of linspace(δ, ½, 9)[:-1], 7 negative at −Φ⁻¹ of linspace(δ, ½, 8)[:-1], and 0, with δ = 0.9677083,
divided by the largest so the range is [−1, 1]. Double quantisation quantises the fp32 absmax scales
again, in blocks of 256, to 8 bits after subtracting their mean: 32/64 = 0.5 bits per parameter of scales
become 8/64 + 32/(64·256) ≈ 0.127.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from impls.ml.counting import Decoder

NF4_OFFSET = 0.9677083
# QLoRA Appendix E / bitsandbytes: the NF4 levels as published
NF4_PUBLISHED = (-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                 -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                 0.7229568362236023, 1.0)


class LoRALinear(nn.Module):
    """A frozen ``base`` linear layer plus the trainable (α/r)·B·A; ``merge()`` returns a plain nn.Linear."""

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0, init: str = "kaiming"):
        super().__init__()
        if r < 1:
            raise ValueError(f"LoRA rank must be >= 1, got {r}")
        self.base, self.r, self.alpha = base, r, alpha
        self.scaling = alpha / r
        for p in base.parameters():
            p.requires_grad_(False)
        kw = {"device": base.weight.device, "dtype": base.weight.dtype}
        self.lora_A = nn.Parameter(torch.zeros(r, base.in_features, **kw))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, **kw))
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        if init == "kaiming":                       # PEFT's default
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        elif init == "gaussian":
            nn.init.normal_(self.lora_A, std=1 / r)
        elif init == "b_random":                    # A = 0, B random: the mirror image
            nn.init.kaiming_uniform_(self.lora_B, a=math.sqrt(5))
        elif init != "zeros":
            raise ValueError(f"init must be kaiming, gaussian, b_random or zeros, not {init!r}")

    def delta_weight(self) -> Tensor:
        """ΔW = (α/r)·B·A, [out, in]."""
        return self.scaling * (self.lora_B @ self.lora_A)

    def forward(self, x: Tensor) -> Tensor:
        return self.base(x) + self.scaling * ((self.dropout(x) @ self.lora_A.t()) @ self.lora_B.t())

    @torch.no_grad()
    def merge(self) -> nn.Linear:
        """W + ΔW (and the bias) in a new nn.Linear: the same function, no extra cost at inference."""
        out = nn.Linear(self.base.in_features, self.base.out_features, bias=self.base.bias is not None,
                        device=self.base.weight.device, dtype=self.base.weight.dtype)
        out.weight.copy_(self.base.weight + self.delta_weight().to(self.base.weight.dtype))
        if self.base.bias is not None:
            out.bias.copy_(self.base.bias)
        return out


def apply_lora(model: nn.Module, targets: tuple[str, ...], r: int, alpha: float, **kw) -> nn.Module:
    """Freeze ``model`` and wrap every nn.Linear whose attribute name is in ``targets`` (e.g. q_proj, v_proj)."""
    for p in model.parameters():
        p.requires_grad_(False)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if name in targets and isinstance(child, nn.Linear):
                setattr(parent, name, LoRALinear(child, r, alpha, **kw))
    return model


def trainable(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def module_shapes(cfg: Decoder) -> dict[str, tuple[int, int]]:
    """(in, out) of each linear layer of one block, by Hugging Face name."""
    d, q, kv, f = cfg.d, cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim, cfg.ffn
    shapes = {"q_proj": (d, q), "k_proj": (d, kv), "v_proj": (d, kv), "o_proj": (q, d), "up_proj": (d, f),
              "down_proj": (f, d)}
    if cfg.arch.mlp == "swiglu":
        shapes["gate_proj"] = (d, f)
    return shapes


def lora_params(cfg: Decoder, r: int, targets: tuple[str, ...]) -> int:
    """Trainable LoRA parameters: layers · Σ_targets r·(in + out)."""
    shapes = module_shapes(cfg)
    unknown = set(targets) - set(shapes)
    if unknown:
        raise ValueError(f"no module named {sorted(unknown)} in a {cfg.name} block; known: {sorted(shapes)}")
    return cfg.layers * sum(r * (shapes[t][0] + shapes[t][1]) for t in targets)


# ------------------------------------------------------------------------------------------- NF4
def nf4_codebook(offset: float = NF4_OFFSET) -> Tensor:
    """The 16 NF4 levels (fp64, ascending) from normal quantiles, normalised to [−1, 1] (the probabilities are
    spaced in fp32 as bitsandbytes' ``create_normal_map`` does, the quantiles taken in fp64)."""
    ndtri = torch.special.ndtri
    pos = ndtri(torch.linspace(offset, 0.5, 9, dtype=torch.float32)[:-1].double())
    neg = -ndtri(torch.linspace(offset, 0.5, 8, dtype=torch.float32)[:-1].double())
    v = torch.cat([pos, torch.zeros(1, dtype=torch.float64), neg])
    return torch.sort(v / v.abs().max()).values


def quantize_blockwise(w: Tensor, code: Tensor, block: int = 64) -> tuple[Tensor, Tensor]:
    """(indices uint8 [n_blocks, block], absmax fp32 [n_blocks]) of w flattened (zero-padded to whole blocks):
    each value divided by its block's absmax and rounded to the nearest code level."""
    flat = w.detach().reshape(-1).to(torch.float32)
    pad = (-flat.numel()) % block
    blocks = torch.cat([flat, flat.new_zeros(pad)]).view(-1, block)
    absmax = blocks.abs().amax(-1).clamp_min(torch.finfo(torch.float32).tiny)
    normed = blocks / absmax[:, None]
    mid = (code[1:] + code[:-1]).to(torch.float32) / 2                 # decision boundaries
    idx = torch.bucketize(normed, mid).to(torch.uint8)
    return idx, absmax


def dequantize_blockwise(idx: Tensor, absmax: Tensor, code: Tensor, shape: torch.Size,
                         dtype: torch.dtype = torch.bfloat16) -> Tensor:
    vals = code.to(torch.float32)[idx.long()] * absmax[:, None]
    n = math.prod(shape)
    return vals.reshape(-1)[:n].reshape(shape).to(dtype)


def double_quantize(absmax: Tensor, block: int = 256) -> tuple[Tensor, Tensor, Tensor]:
    """8-bit codes of (absmax − mean) in blocks of ``block`` with an fp32 scale each: (codes int8, scales, mean)."""
    mean = absmax.mean()
    x = absmax - mean
    pad = (-x.numel()) % block
    blocks = torch.cat([x, x.new_zeros(pad)]).view(-1, block)
    scale = blocks.abs().amax(-1).clamp_min(torch.finfo(torch.float32).tiny) / 127
    codes = torch.round(blocks / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return codes, scale, mean


def double_dequantize(codes: Tensor, scale: Tensor, mean: Tensor, n: int) -> Tensor:
    return (codes.to(torch.float32) * scale[:, None]).reshape(-1)[:n] + mean


def storage_bits(numel: int, block: int = 64, double: bool = False, block2: int = 256) -> float:
    """Bits per parameter of NF4 storage: 4 for the code, plus the scales (fp32, or 8-bit + fp32 per block2)."""
    n_blocks = math.ceil(numel / block)
    bits = 4 * numel
    if double:
        bits += 8 * n_blocks + 32 * math.ceil(n_blocks / block2) + 32     # codes, scales, mean
    else:
        bits += 32 * n_blocks
    return bits / numel


def qlora_forward(x: Tensor, idx: Tensor, absmax: Tensor, code: Tensor, shape: torch.Size, lora_a: Tensor,
                  lora_b: Tensor, scaling: float, compute_dtype: torch.dtype = torch.bfloat16) -> Tensor:
    """x Wᵀ + scaling·x Aᵀ Bᵀ with W dequantised from NF4 to ``compute_dtype`` and every matmul in that dtype."""
    w = dequantize_blockwise(idx, absmax, code, shape, compute_dtype)
    xc = x.to(compute_dtype)
    return xc @ w.t() + scaling * ((xc @ lora_a.to(compute_dtype).t()) @ lora_b.to(compute_dtype).t())
