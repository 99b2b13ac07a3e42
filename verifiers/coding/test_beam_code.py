"""Verifiers for qa/coding/beam-search-decoding.yaml (catalog code.beam-search).

Oracles: exhaustive enumeration of every sequence of small tables, greedy written out, and tables whose
answer is known by construction (verifiers/katas/beam_search.py).
"""

from __future__ import annotations

import math

import pytest
import torch

from impls.ml.decoding import beam_search_table, greedy_table
from verifiers.katas import beam_search as kata

F64 = torch.float64


@pytest.mark.claim("coding.beam.wider-never-worse")
def test_a_wider_beam_can_return_a_worse_sequence(evidence):
    kata.prop_wider_beam_can_be_worse(beam_search_table)
    kata.prop_wide_beam_is_exhaustive(beam_search_table)
    table = kata.greedy_beats_beam_table()
    widths = {w: beam_search_table(table, w, eos_id=0)[0] for w in (1, 2, 3)}
    g = greedy_table(table, eos_id=0)
    assert widths[1].tokens == g.tokens
    assert greedy_table(kata.finished_table(), eos_id=0).tokens == (0,)        # greedy stops at its EOS
    assert widths[2].logprob < widths[1].logprob - 1.0 and widths[3].logprob == pytest.approx(widths[1].logprob)
    evidence.quote("greedy's (width 1) probability", quoted=0.22, measured=math.exp(widths[1].logprob), digits=2)
    evidence.quote("width 2's probability", quoted=0.016, measured=math.exp(widths[2].logprob), digits=3)
    evidence["counterexample"] = {f"width {w}": [list(h.tokens), math.exp(h.logprob)] for w, h in widths.items()}


@pytest.mark.claim("coding.beam.log-space")
def test_products_of_probabilities_underflow(evidence):
    kata.prop_long_sequences_keep_log_space(beam_search_table)
    found = {}
    for dtype in (torch.float64, torch.float32):
        prod, n, left_normal, stuck = torch.tensor(1.0, dtype=dtype), 0, None, None
        while stuck is None and n < 5000:                   # multiply by 0.6 until the product stops changing
            nxt = prod * 0.6
            n += 1
            if left_normal is None and float(nxt) < torch.finfo(dtype).tiny:
                left_normal = n
            if float(nxt) == float(prod):
                stuck = n
            prod = nxt
        found[str(dtype)] = {"below the normal range after": left_normal, "stuck at": float(prod), "from token": stuck}
    assert found["torch.float64"]["stuck at"] == 2.0 ** -1074 and found["torch.float32"]["stuck at"] == 2.0 ** -149
    evidence.quote("tokens of 0.6 until a float64 product leaves the normal range", quoted=1387,
                   measured=found["torch.float64"]["below the normal range after"], abs=0)
    evidence.quote("token from which the float64 product no longer changes", quoted=1458,
                   measured=found["torch.float64"]["from token"], abs=0)
    evidence.quote("the same in float32", quoted=203, measured=found["torch.float32"]["from token"], abs=0)
    evidence["repeated products of 0.6"] = found
    # on lanes_table the product search loses lane b; sums of logs keep it
    hyp = beam_search_table(kata.lanes_table(), 2)[0]
    assert hyp.tokens == (2,) * kata.LANES
    evidence["lanes_table (T = 1500), width 2"] = {"returned": "token 2 x 1500", "logprob": hyp.logprob,
                                                   "product of its probabilities in float64": math.exp(hyp.logprob)}


@pytest.mark.claim("coding.beam.single-live-initial-beam")
def test_k_copies_of_the_empty_prefix_collapse_the_beam(evidence):
    kata.prop_hypotheses_are_distinct(beam_search_table)
    # step 1 from k identical prefixes: the top-k extensions are k copies of the best token
    v, k = 4, 3
    table = torch.log_softmax(torch.tensor([[[2.0, 1.0, 0.5, 0.0]] * v, [[0.0, 0.0, 0.0, 0.0]] * v], dtype=F64), -1)
    first = table[0, 0]
    copies = sorted(((float(first[tok]), b, tok) for b in range(k) for tok in range(v)), key=lambda c: (-c[0], c[1]))
    beam_copies = [(tok,) for _, _, tok in copies[:k]]
    beam_one = [(tok,) for tok in torch.argsort(first, descending=True, stable=True)[:k].tolist()]
    assert beam_copies == [(0,), (0,), (0,)] and beam_one == [(0,), (1,), (2,)]
    got = [h.tokens for h in beam_search_table(table, k)]
    assert len(set(got)) == len(got) == k
    evidence["counterexample"] = {"beam after step 1 from 3 copies of the empty prefix": beam_copies,
                                  "from one live empty prefix": beam_one, "returned (width 3)": got}


def test_the_reference_passes_every_beam_property():
    for prop in kata.ALL:
        prop(beam_search_table)


def test_an_eos_ranked_below_the_width_is_dropped_as_in_hugging_face():
    """Width 2. Step 1: a 0.5, b 0.3, EOS 0.2. Step 2: after a, EOS 0.5 and c 0.5; after b, EOS 0.6 and d 0.4.
    Ranked: (a, EOS) 0.25, (a, c) 0.25, (b, EOS) 0.18, (b, d) 0.12: (b, EOS) ranks third, beyond the width,
    and HF's BeamSearchScorer drops it; the search goes on and (a, c, EOS) finishes second."""
    v = 5                                                         # 0 EOS, 1 a, 2 b, 3 c, 4 d
    p = torch.full((3, v, v), 0.2, dtype=F64)
    p[0, 0] = torch.tensor([0.2, 0.5, 0.3, 0.0, 0.0], dtype=F64)
    p[1, 1] = torch.tensor([0.5, 0.0, 0.0, 0.5, 0.0], dtype=F64)
    p[1, 2] = torch.tensor([0.6, 0.0, 0.0, 0.0, 0.4], dtype=F64)
    p[2, 3] = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0], dtype=F64)
    p[2, 4] = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0], dtype=F64)
    got = [h.tokens for h in beam_search_table(p.log(), 2, eos_id=0)]
    assert got == [(1, 0), (1, 3, 0)]
