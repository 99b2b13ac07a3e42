"""Reverse-mode autodiff at the tensor level: the recorded graph, and the chain rule of a residual MLP by hand.

PyTorch builds the graph while the forward runs (a "tape"): every op on a tensor that requires grad creates a
node (``grad_fn``) pointing at the nodes of its inputs (``next_functions``); ``backward`` walks those nodes
from the output in reverse topological order, each node turning the gradient of its output into gradients of
its inputs (a vector–Jacobian product). ``graph_nodes`` lists the recorded nodes that way.

``detach()`` returns a view of the same storage with no ``grad_fn`` (nothing is copied; in-place writes to it
are writes to the original and bump the shared version counter, which backward checks); ``torch.no_grad()``
records nothing.

A two-layer residual block y = x + relu(x W1) W2 (x [n, d], W1 [d, h], W2 [h, d]) with upstream gradient
G = ∂L/∂y, by the chain rule (``residual_mlp_backward``):

    H = x W1,  A = relu(H),  ∂L/∂W2 = Aᵀ G,  ∂L/∂A = G W2ᵀ,  ∂L/∂H = ∂L/∂A ⊙ 1[H > 0],
    ∂L/∂W1 = xᵀ ∂L/∂H,  ∂L/∂x = G + ∂L/∂H W1ᵀ      (the identity path adds G unchanged).
"""

from __future__ import annotations

import torch
from torch import Tensor


def graph_nodes(t: Tensor) -> list[str]:
    """Names of the backward nodes reachable from ``t.grad_fn``, outputs before inputs (a topological order
    of the recorded graph, the order backward may visit them)."""
    order: list = []
    seen: set = set()

    def visit(fn) -> None:
        if fn is None or fn in seen:
            return
        seen.add(fn)
        for child, _ in fn.next_functions:
            visit(child)
        order.append(fn)

    visit(t.grad_fn)
    return [type(fn).__name__ for fn in reversed(order)]


def residual_mlp(x: Tensor, w1: Tensor, w2: Tensor) -> Tensor:
    """y = x + relu(x W1) W2."""
    return x + torch.relu(x @ w1) @ w2


def residual_mlp_backward(x: Tensor, w1: Tensor, w2: Tensor, grad_out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(∂L/∂x, ∂L/∂W1, ∂L/∂W2) of ``residual_mlp`` given ∂L/∂y, by the chain rule above."""
    h = x @ w1
    a = torch.relu(h)
    d_w2 = a.transpose(-1, -2) @ grad_out
    d_h = (grad_out @ w2.transpose(-1, -2)) * (h > 0).to(h.dtype)
    d_w1 = x.transpose(-1, -2) @ d_h
    d_x = grad_out + d_h @ w1.transpose(-1, -2)
    return d_x, d_w1, d_w2
