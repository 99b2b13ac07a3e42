"""Autograd and graph capture checked on PyTorch itself: grad_fn chains, version counters, detach and no_grad,
the order backward runs in, trace vs script vs torch.compile on data-dependent control flow, and the chain rule
of a residual MLP by hand.

Oracles: ``torch.autograd.gradcheck`` (finite differences) and autograd itself for the hand-derived gradients;
the eager function for what trace/script/compile return; hook call order for the backward order.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from impls.ml.autograd import graph_nodes, residual_mlp, residual_mlp_backward

F64 = torch.float64


def branchy(x: torch.Tensor) -> torch.Tensor:
    if x.sum() > 0:
        return x * 2
    return x - 1


@pytest.mark.claim("autograd.trace-vs-script")
def test_trace_records_one_path_script_keeps_the_branch(evidence):
    pos, neg = torch.ones(3), -2 * torch.ones(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = torch.jit.trace(branchy, pos)
        scripted = torch.jit.script(branchy)
    kinds = {w.category.__name__ for w in caught}
    assert "TracerWarning" in kinds                                     # torch warns that the branch was frozen
    assert torch.equal(traced(pos), branchy(pos))
    assert not torch.equal(traced(neg), branchy(neg))                   # the recorded run: x * 2 even for x < 0
    assert torch.equal(scripted(neg), branchy(neg)) and torch.equal(scripted(pos), branchy(pos))
    assert "prim::If" in str(scripted.graph) and "prim::If" not in str(traced.graph)
    evidence["x = -2"] = {"eager": branchy(neg).tolist(), "trace": traced(neg).tolist(), "script": scripted(neg).tolist()}
    evidence["warnings"] = sorted(kinds)


@pytest.mark.claim("autograd.detach-copies")
def test_detach_shares_storage(evidence):
    x = torch.randn(4, requires_grad=True)
    y = x * 3
    d = y.detach()
    assert d.data_ptr() == y.data_ptr() and d.grad_fn is None and not d.requires_grad    # a view, no copy
    before = y._version
    d.zero_()                                                         # writes through to y
    assert torch.equal(y.detach(), torch.zeros(4)) and y._version == before + 1
    # a tensor saved for backward and then modified through its detached alias: backward refuses
    z = torch.randn(4, requires_grad=True)
    s = z.sigmoid()                                                   # sigmoid saves its output
    s.detach().mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        s.sum().backward()
    c = y.detach().clone()                                            # a copy is what clone() makes
    assert c.data_ptr() != y.data_ptr()
    evidence["detach"] = {"same data_ptr": True, "version after in-place write": y._version}


@pytest.mark.claim("autograd.tape-reverse-order")
def test_backward_runs_the_recorded_graph_in_reverse(evidence):
    x = torch.randn(3, requires_grad=True)
    calls = []
    a = x * 2
    a.register_hook(lambda g: calls.append("a"))
    b = a.exp()
    b.register_hook(lambda g: calls.append("b"))
    c = a.sin()                                                       # a diamond: a feeds b and c
    c.register_hook(lambda g: calls.append("c"))
    out = (b * c).sum()
    names = graph_nodes(out)
    assert names[0] == "SumBackward0" and names[-1] == "AccumulateGrad"
    muls = [i for i, n in enumerate(names) if n == "MulBackward0"]        # b*c (output side) and x*2 (input side)
    assert muls[0] < names.index("ExpBackward0") < muls[1] and muls[0] < names.index("SinBackward0") < muls[1]
    out.backward()
    assert set(calls[:2]) == {"b", "c"} and calls[2] == "a"           # a's gradient only after both consumers'
    # the graph is rebuilt on every forward: different branches record different nodes
    assert "MulBackward0" in graph_nodes(branchy(torch.ones(2, requires_grad=True)))
    assert "SubBackward0" in graph_nodes(branchy(-torch.ones(2, requires_grad=True)))
    # no_grad records nothing
    with torch.no_grad():
        n = x * 2
    assert n.grad_fn is None and not n.requires_grad
    evidence["recorded nodes"] = names
    evidence["hook order"] = calls


@pytest.mark.claim("autograd.compile-is-trace")
def test_torch_compile_keeps_both_branches(evidence):
    import torch._dynamo as dynamo

    dynamo.reset()
    compiled = torch.compile(branchy, backend="eager")               # Dynamo capture, no code generation
    pos, neg = torch.ones(3), -2 * torch.ones(3)
    assert torch.equal(compiled(pos), branchy(pos)) and torch.equal(compiled(neg), branchy(neg))
    explained = dynamo.explain(branchy)(pos)
    assert explained.graph_break_count >= 1                           # the data-dependent `if` breaks the graph
    evidence["dynamo on the branch"] = {"graphs": explained.graph_count, "graph breaks": explained.graph_break_count}
    dynamo.reset()


@pytest.mark.claim("autograd.residual-chain-rule")
@given(st.integers(1, 5), st.integers(1, 6), st.integers(1, 7), st.integers(0, 10_000))
def test_residual_mlp_backward_by_hand(n, d, h, seed):
    g = torch.Generator().manual_seed(seed)
    x, w1, w2 = (torch.randn(*s, generator=g, dtype=F64, requires_grad=True) for s in ((n, d), (d, h), (h, d)))
    up = torch.randn(n, d, generator=g, dtype=F64)
    residual_mlp(x, w1, w2).backward(up)
    mine = residual_mlp_backward(x.detach(), w1.detach(), w2.detach(), up)
    for got, ref in zip(mine, (x.grad, w1.grad, w2.grad)):
        assert torch.allclose(got, ref, atol=1e-12)


@pytest.mark.claim("autograd.residual-chain-rule")
def test_residual_mlp_against_finite_differences():
    g = torch.Generator().manual_seed(0)
    x, w1, w2 = (torch.randn(*s, generator=g, dtype=F64, requires_grad=True) for s in ((3, 4), (4, 5), (5, 4)))
    assert torch.autograd.gradcheck(residual_mlp, (x, w1, w2))
    up = torch.ones(3, 4, dtype=F64)
    dx, _, _ = residual_mlp_backward(x.detach(), w1.detach(), torch.zeros(5, 4, dtype=F64), up)
    assert torch.equal(dx, up)                                        # W2 = 0: the identity path passes G through
