"""Verifiers for qa/coding/transformer-block.yaml (catalog code.transformer-block).

Oracle: PyTorch's ``nn.TransformerEncoderLayer(norm_first=True)`` with a causal mask and the same weights
(verifiers/katas/transformer_block.py); for the label shift, two small trainings on a sequence whose next
token is a fixed function of the current one.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from impls.ml.gpt import gpt_forward
from verifiers.katas import transformer_block as kata

F64 = torch.float64


@pytest.mark.claim("coding.gpt.labels-shifted")
def test_logits_at_t_score_the_token_at_t_plus_one(evidence):
    kata.prop_labels_are_shifted(gpt_forward)
    kata.prop_matches_pytorch_encoder_layer(gpt_forward)
    m = kata.Model(7, 8, 2, 32, 8, 4)
    tokens = torch.tensor([[3, 1, 4, 1, 5, 2]])
    logits, loss = gpt_forward(tokens, m.params(), m.heads)
    by_hand = -sum(float(torch.log_softmax(logits[0, t], -1)[tokens[0, t + 1]]) for t in range(5)) / 5
    assert float(loss) == pytest.approx(by_hand, abs=1e-12)
    evidence["tokens [3, 1, 4, 1, 5, 2]"] = {"loss": float(loss), "mean of -log p(x[t+1] | x[..t]), t = 0..4": by_hand}


@pytest.mark.claim("coding.gpt.pre-norm-residual")
def test_pre_norm_adds_to_the_unnormalised_stream(evidence):
    kata.prop_residual_adds_the_unnormalised_input(gpt_forward)
    m = kata.Model(11, 12, 3, 48, 8, 9)
    p = m.params()
    tokens = m.tokens(2, 6, 0)
    logits, _ = gpt_forward(tokens, p, m.heads)
    want, _ = kata.oracle(tokens, p, m.heads)
    # the wrong wiring LN(x) + F(LN(x)) puts LN1(h0) where h0 should be on the residual path
    h = p["wte"][tokens] + p["wpe"][:6]
    gap = float((F.layer_norm(h, (12,), p["ln1_w"], p["ln1_b"], 1e-5) - h).abs().max())
    assert float((logits - want).abs().max()) < 1e-10 and gap > 0.1
    evidence["max |logits - PyTorch norm_first layer| (fp64)"] = float((logits - want).abs().max())
    evidence["max |LN1(h0) - h0| on the residual path"] = gap


def _bigram_data(n: int, t: int, v: int, seed: int) -> torch.Tensor:
    """Sequences whose next token is a fixed function (one permutation) of the current one; ``seed`` draws
    the first tokens only."""
    nxt = torch.randperm(v, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(seed)
    seq = torch.empty(n, t, dtype=torch.long)
    seq[:, 0] = torch.randint(0, v, (n,), generator=g)
    for i in range(1, t):
        seq[:, i] = nxt[seq[:, i - 1]]
    return seq


def _train(shift: bool, steps: int = 60, seed: int = 0) -> dict:
    torch.manual_seed(seed)
    v, t = 16, 12
    m = kata.Model(v, 32, 2, 64, t, seed, scale=0.5)
    params = {k: x.float().requires_grad_(True) for k, x in m.params().items()}
    opt = torch.optim.Adam(params.values(), lr=1e-2)
    train = _bigram_data(32, t, v, 1)
    for _ in range(steps):
        logits, loss = gpt_forward(train, params, m.heads)
        if not shift:
            loss = F.cross_entropy(logits.reshape(-1, v), train.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    test = _bigram_data(64, t, v, 2)
    with torch.no_grad():
        logits, _ = gpt_forward(test, params, m.heads)
        pred = logits[:, :-1].argmax(-1)
    return {"final training loss": float(loss.detach()), "next-token accuracy on new sequences":
            float((pred == test[:, 1:]).float().mean()), "copy accuracy": float((pred == test[:, :-1]).float().mean())}


@pytest.mark.claim("coding.gpt.no-shift-trains")
def test_without_the_shift_the_model_learns_to_copy(evidence):
    shifted, unshifted = _train(True), _train(False)
    assert shifted["next-token accuracy on new sequences"] > 0.95
    assert unshifted["final training loss"] < 0.05 and unshifted["copy accuracy"] > 0.95
    assert unshifted["next-token accuracy on new sequences"] < 0.2
    evidence.quote("unshifted: copy accuracy on new sequences", quoted=1.0,
                   measured=unshifted["copy accuracy"], abs=0.01)
    evidence.quote("unshifted: next-token accuracy on new sequences", quoted=0.0,
                   measured=unshifted["next-token accuracy on new sequences"], abs=0.02)
    evidence.quote("shifted: next-token accuracy on new sequences", quoted=0.99,
                   measured=shifted["next-token accuracy on new sequences"], abs=0.02)
    evidence["16 tokens, next = a fixed permutation of the current, 60 Adam steps"] = {
        "labels shifted": shifted, "labels not shifted": unshifted}
