"""BatchNorm vs LayerNorm for token activations: which statistics, dependence on the rest of the batch and on
padding, the bias before BN, and what RMSNorm saves.

Oracles: ``torch.nn.BatchNorm1d`` / ``nn.LayerNorm`` (train and eval), autograd for the bias gradient, and the
published Llama 3 8B parameter count.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch import nn

from impls.arch.norms import batch_norm_tokens, layer_norm
from impls.ml.counting import ARCHS, model, param_counts

F64 = torch.float64


def _x(b=4, t=6, c=8, seed=0):
    return torch.randn(b, t, c, generator=torch.Generator().manual_seed(seed), dtype=F64)


@pytest.mark.claim("norm.bn-nlp-independent")
def test_batchnorm_runs_on_tokens_but_couples_the_batch(evidence):
    x = _x()
    bn = nn.BatchNorm1d(8, affine=False, dtype=F64).train()
    ours = batch_norm_tokens(x)
    assert torch.allclose(ours, bn(x.transpose(1, 2)).transpose(1, 2), atol=1e-12)   # it works on sequences
    # what actually hurts: a sample's output depends on the other samples...
    x2 = x.clone()
    x2[1:] *= 3.0
    bn_shift = float((batch_norm_tokens(x2)[0] - ours[0]).abs().max())
    ln_shift = float((layer_norm(x2)[0] - layer_norm(x)[0]).abs().max())
    assert bn_shift > 0.1 and ln_shift == 0.0
    # ...and on how much padding the batch carries, unless padding is masked out of the statistics
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[1:, 3:] = False
    padded = x.masked_fill(~mask[..., None], 0.0)
    unmasked = batch_norm_tokens(padded)[0, :3]
    masked = batch_norm_tokens(padded, mask=mask)[0, :3]
    assert float((unmasked - masked).abs().max()) > 0.05
    # ...and training differs from inference (running statistics)
    bn_eval = nn.BatchNorm1d(8, affine=False, dtype=F64)
    bn_eval.train()(x.transpose(1, 2))
    assert not torch.allclose(bn_eval.eval()(x.transpose(1, 2)), bn(x.transpose(1, 2)), atol=1e-3)
    evidence["change of sample 0's output when the other samples are scaled by 3"] = {"BN": bn_shift, "LN": ln_shift}
    evidence["effect of unmasked padding on sample 0 under BN"] = float((unmasked - masked).abs().max())


@pytest.mark.claim("norm.bn-same-position")
def test_batchnorm_pools_all_positions_of_a_channel(evidence):
    x = _x(seed=1)
    bn = batch_norm_tokens(x)
    perm = torch.randperm(6, generator=torch.Generator().manual_seed(0))
    shuffled = batch_norm_tokens(x[:, perm])                             # reorder positions inside every sample
    assert torch.allclose(shuffled, bn[:, perm], atol=1e-12)             # same statistics: position plays no role
    # "normalise each position across samples" would be a different operation
    per_position = (x - x.mean(0, keepdim=True)) / (x.var(0, unbiased=False, keepdim=True) + 1e-5).sqrt()
    assert not torch.allclose(per_position, bn, atol=1e-2)
    evidence["BN statistics per channel over"] = "all B·T tokens (nn.BatchNorm1d on [B, C, T])"


@pytest.mark.claim("norm.ln-per-token")
def test_layernorm_is_per_token_and_the_same_in_eval(evidence):
    x = _x(seed=2)
    ln = nn.LayerNorm(8, elementwise_affine=False, dtype=F64)
    assert torch.allclose(ln.train()(x), layer_norm(x, eps=1e-5), atol=1e-12)
    assert torch.equal(ln.train()(x), ln.eval()(x))
    # each token alone: the same output token by token as in the batch
    for b in range(4):
        for t in range(6):
            assert torch.allclose(ln(x[b, t][None]), ln(x)[b, t][None], atol=1e-12)
    assert list(ln.buffers()) == []


@pytest.mark.claim("norm.bias-before-bn")
def test_a_bias_before_batchnorm_cancels(evidence):
    g = torch.Generator().manual_seed(0)
    lin = nn.Linear(5, 8, dtype=F64)
    bn = nn.BatchNorm1d(8, dtype=F64).train()
    x = torch.randn(32, 5, generator=g, dtype=F64)
    out = bn(lin(x))
    out.pow(3).sum().backward()
    assert float(lin.bias.grad.abs().max()) < 1e-10                      # the batch mean removes it: no gradient
    with torch.no_grad():
        lin.bias.add_(torch.randn(8, generator=g, dtype=F64))
    assert torch.allclose(bn(lin(x)), out, atol=1e-10)                   # any bias, the same output
    evidence["max |dL/d bias|"] = float(lin.bias.grad.abs().max())


@pytest.mark.claim("norm.rmsnorm-fewer-params")
def test_rmsnorm_saves_almost_no_parameters(evidence):
    llama = model("llama-3-8b")
    with_ln = replace(llama, arch=replace(ARCHS["llama"], norm="layernorm", bias=True))
    extra = param_counts(with_ln)["total"] - param_counts(llama)["total"]
    lin_biases = 32 * (4096 + 2 * 1024 + 4096 + 2 * 14336 + 4096)          # the linear layers' biases in that switch
    ln_bias = extra - lin_biases
    assert ln_bias == (2 * 32 + 1) * 4096                                   # one bias vector per norm
    share = ln_bias / param_counts(llama)["total"]
    evidence.quote("parameters RMSNorm saves in Llama-3-8B, %", quoted=0.0033, measured=100 * share, abs=0.00005)
