"""Decoder-only vs encoder-decoder: the rank of causal and bidirectional attention, why a KV cache works, and an
encoder-decoder that generates.

Oracles: determinants and ``torch.linalg.matrix_rank``, exact equality of a causal model's prefix outputs when
tokens are appended, and ``torch.nn.Transformer`` trained and decoded greedily.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from impls.ml.attention import causal_visible, masked_softmax
from impls.ml.counting import ARCHS, model, scaled_down
from impls.ml.transformer import build

F64 = torch.float64


@pytest.mark.claim("decoder-only.full-rank")
@given(st.integers(2, 24), st.integers(1, 8), st.integers(0, 10_000))
def test_causal_attention_is_always_full_rank(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, n, d, generator=g, dtype=F64)
    p = masked_softmax(q @ k.t() / d ** 0.5, causal_visible(n))
    assert torch.equal(p, torch.tril(p))                                   # lower triangular
    assert bool((torch.diagonal(p) > 0).all())                              # a positive diagonal: det = Π p_ii > 0
    assert float(torch.prod(torch.diagonal(p))) > 0


@pytest.mark.claim("decoder-only.full-rank")
def test_bidirectional_attention_is_not_low_rank_in_general(evidence):
    g = torch.Generator().manual_seed(0)
    n, d = 64, 8                                                            # far more tokens than head dims
    q, k = torch.randn(2, n, d, generator=g, dtype=F64)
    logits = q @ k.t() / d ** 0.5
    bi = torch.softmax(logits, -1)
    assert int(torch.linalg.matrix_rank(logits)) == d                       # the logits are low-rank (≤ d)...
    assert int(torch.linalg.matrix_rank(bi)) == n                           # ...the softmax of them is not
    # it can collapse in degenerate inputs, where the causal matrix cannot: identical tokens
    same = torch.zeros(n, n, dtype=F64)
    assert int(torch.linalg.matrix_rank(torch.softmax(same, -1))) == 1
    assert int(torch.linalg.matrix_rank(masked_softmax(same, causal_visible(n)))) == n
    sv = torch.linalg.svdvals(bi)
    evidence["bidirectional, n = 64, d = 8"] = {"rank of logits": d, "rank of attention": n,
                                                "condition number": float(sv[0] / sv[-1])}


@pytest.mark.claim("decoder-only.kv-cache-every-token")
def test_prefix_states_do_not_change_when_tokens_are_appended(evidence):
    cfg = scaled_down(replace(model("llama-3-8b"), arch=ARCHS["llama"]), context=16)
    net = build(cfg).double()
    g = torch.Generator().manual_seed(0)
    seq = torch.randint(0, cfg.vocab, (1, 12), generator=g)
    short, long = net(seq[:, :8]), net(seq)
    assert torch.allclose(short, long[:, :8], atol=1e-12)                   # causal: the cache stays valid
    # without the mask (an encoder), appending tokens changes every earlier position: nothing to cache
    x = torch.randn(1, 12, 16, generator=g, dtype=F64)
    enc = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True, dtype=F64).eval()
    assert not torch.allclose(enc(x[:, :8]), enc(x)[:, :8], atol=1e-3)
    # every position of a causal LM is a training target (T − 1 per sequence); a prompt masked out in SFT is not
    targets = seq[:, 1:]
    assert targets.numel() == seq.numel() - 1
    evidence["supervised positions per sequence of 12"] = {"causal LM pretraining": 11,
                                                            "BERT-style MLM at 15%": 0.15 * 12}


class _EncDec(nn.Module):
    """A one-layer ``nn.Transformer`` with learned positions; token 0 = BOS, 1 = EOS."""

    def __init__(self, vocab: int = 12, d: int = 32):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(16, d)
        self.tr = nn.Transformer(d, 2, 1, 1, 64, dropout=0.0, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        def embed(t):
            return self.emb(t) + self.pos(torch.arange(t.shape[1]))

        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.out(self.tr(embed(src), embed(tgt), tgt_mask=mask, tgt_is_causal=True))


@pytest.mark.claim("decoder-only.enc-dec-cannot-generate")
def test_an_encoder_decoder_generates(evidence):
    torch.manual_seed(0)
    vocab, length = 12, 6
    net = _EncDec(vocab)
    opt = torch.optim.Adam(net.parameters(), 3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(300):                                       # learn to write the input backwards, then EOS
        src = torch.randint(2, vocab, (64, length), generator=g)
        tgt = src.flip(1)
        dec_in = torch.cat([torch.zeros(64, 1, dtype=torch.long), tgt], 1)
        dec_out = torch.cat([tgt, torch.ones(64, 1, dtype=torch.long)], 1)
        loss = nn.functional.cross_entropy(net(src, dec_in).reshape(-1, vocab), dec_out.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.eval()
    src = torch.randint(2, vocab, (100, length), generator=g)
    out = torch.zeros(100, 1, dtype=torch.long)
    with torch.no_grad():
        for _ in range(length + 1):                            # autoregressive greedy decoding, token by token
            out = torch.cat([out, net(src, out)[:, -1].argmax(-1, keepdim=True)], 1)
    exact = float((out[:, 1:length + 1] == src.flip(1)).all(1).double().mean())
    assert exact > 0.9 and float((out[:, -1] == 1).double().mean()) > 0.9
    evidence["greedy decodes that reverse the input exactly"] = exact
