"""RoPE's relative-position property and its limits; RMSNorm vs LayerNorm; Pre-LN vs Post-LN at init.

RoPE is checked against rotation matrices built here from cos/sin (not the module's pair
layout), by hypothesis over positions and vectors. The extrapolation count is redone by brute
force: the angles each frequency pair reaches, enumerated distance by distance.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given
from hypothesis import strategies as st

from impls.arch.norms import Stack, layer_grad_norms, layer_norm, rms_norm
from impls.arch.rope import frequencies, rope, scores, unseen_rotation_pairs

vectors = st.lists(st.floats(-3, 3, allow_nan=False, width=32), min_size=8, max_size=8)
positions = st.integers(0, 5000)


def _rotation(d: int, pos: int, base: float = 10000.0) -> torch.Tensor:
    """Block-diagonal 2×2 rotations by pos·θ_i on the pairs (2i, 2i+1)."""
    r = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        ang = pos * base ** (-2 * i / d)
        c, s = math.cos(ang), math.sin(ang)
        r[2 * i, 2 * i], r[2 * i, 2 * i + 1], r[2 * i + 1, 2 * i], r[2 * i + 1, 2 * i + 1] = c, -s, s, c
    return r


@pytest.mark.claim("rope.relative-position")
@given(q=vectors, k=vectors, m=positions, n=positions, shift=positions)
def test_score_depends_on_distance_only(q, k, m, n, shift):
    q, k = torch.tensor([q], dtype=torch.float64), torch.tensor([k], dtype=torch.float64)
    pos = lambda p: torch.tensor([p])  # noqa: E731
    s0 = scores(q, k, pos(m), pos(n))
    assert torch.allclose(s0, scores(q, k, pos(m + shift), pos(n + shift)), atol=1e-9, rtol=0)
    # ⟨R(m)q, R(n)k⟩ = qᵀ R(n-m) k with R built independently here
    assert torch.allclose(s0, q @ _rotation(8, n - m) @ k.t(), atol=1e-9, rtol=0)
    for layout in ("interleaved", "halves"):
        assert torch.allclose(scores(q, k, pos(m), pos(n), layout=layout),
                              scores(q, k, pos(m + shift), pos(n + shift), layout=layout), atol=1e-9, rtol=0)


@pytest.mark.claim("rope.extrapolation")
@given(x=vectors, p=positions, scale=st.sampled_from([2.0, 4.0, 8.0]))
def test_position_interpolation_divides_positions(x, p, scale):
    """rope(·, scale=s) is position interpolation: the rotation of position p/s, built here independently."""
    x = torch.tensor([x], dtype=torch.float64)
    got = rope(x, torch.tensor([p]), scale=scale)
    r = torch.zeros(8, 8, dtype=torch.float64)
    for i in range(4):
        ang = (p / scale) * 10000.0 ** (-2 * i / 8)
        c, s = math.cos(ang), math.sin(ang)
        r[2 * i, 2 * i], r[2 * i, 2 * i + 1], r[2 * i + 1, 2 * i], r[2 * i + 1, 2 * i + 1] = c, -s, s, c
    assert torch.allclose(got, x @ r.t(), atol=1e-9, rtol=0)


@pytest.mark.claim("rope.no-parameters")
@given(x=vectors, p=positions)
def test_rope_is_a_fixed_rotation(x, p):
    x = torch.tensor([x], dtype=torch.float64)
    y = rope(x, torch.tensor([p]))
    assert torch.allclose(y, x @ _rotation(8, p).t(), atol=1e-9, rtol=0)        # determined by (position, base)
    assert torch.allclose(y.norm(), x.norm(), atol=1e-9, rtol=0)                # a rotation: nothing learned rescales it


@pytest.mark.claim("rope.no-parameters")
@pytest.mark.parametrize("layout", ["interleaved", "halves"])
def test_nothing_to_train(layout, evidence):
    """RoPE at a position is a fixed linear map of x: its Jacobian is the same for every input, an orthogonal
    matrix (for the interleaved layout the block rotation built here), and no bias (RoPE(0) = 0). Anything
    trainable -- a learned table, a scale, an offset -- would have to show up in that map."""
    gen = torch.Generator().manual_seed(4)
    pos = torch.tensor([7, 300, 4095])
    jac = []
    for _ in range(2):
        x = torch.randn(3, 8, generator=gen, dtype=torch.float64)
        j = torch.autograd.functional.jacobian(lambda t: rope(t, pos, layout=layout), x)     # [3, 8, 3, 8]
        jac.append(torch.stack([j[i, :, i, :] for i in range(3)]))
        assert torch.allclose(rope(x, pos, layout=layout), torch.einsum("nij,nj->ni", jac[-1], x), atol=1e-12, rtol=0)
        assert float(j.abs().sum() - torch.stack([j[i, :, i, :] for i in range(3)]).abs().sum()) == 0  # rows apart
    assert torch.allclose(jac[0], jac[1], atol=1e-12, rtol=0)                                           # input-independent
    eye = torch.eye(8, dtype=torch.float64).expand(3, 8, 8)
    assert torch.allclose(jac[0] @ jac[0].transpose(-1, -2), eye, atol=1e-12, rtol=0)                   # a rotation
    # the pair layout: interleaved rotates (2i, 2i+1); halves rotates (i, i + d/2), i.e. the same block rotation
    # seen through the permutation that puts dimension i + d/2 next to dimension i
    perm = torch.arange(8) if layout == "interleaved" else torch.tensor([0, 4, 1, 5, 2, 6, 3, 7])
    for i, p in enumerate(pos):
        r = _rotation(8, int(p))
        want = torch.empty_like(r)
        want[perm[:, None], perm[None, :]] = r
        assert torch.allclose(jac[0][i], want, atol=1e-12, rtol=0), (layout, int(p))
    assert torch.equal(rope(torch.zeros(3, 8, dtype=torch.float64), pos, layout=layout), torch.zeros(3, 8, dtype=torch.float64))
    evidence["learned absolute table for 4096 positions, d=128"] = 4096 * 128
    evidence[f"rope trainable parameters ({layout})"] = 0


def _unseen_brute_force(d: int, train: int, test: int, base: float, scale: float = 1.0) -> int:
    """Pairs whose angle at some test distance lies more than θ_i beyond every training angle."""
    count = 0
    for i in range(d // 2):
        theta = base ** (-2 * i / d)
        trained = [(dist * theta) % (2 * math.pi) for dist in range(train)]
        full_circle = (train - 1) * theta >= 2 * math.pi
        if full_circle:
            continue
        hi = max(trained)
        if any((dist / scale) * theta > hi + theta for dist in range(train, test)):
            count += 1
    return count


@pytest.mark.claim("rope.extrapolation")
def test_long_distances_reach_unseen_angles(evidence):
    got = unseen_rotation_pairs(128, 4096, 8192)
    assert got["unseen_pairs"] > 0
    assert _unseen_brute_force(128, 4096, 8192, 10000.0) == got["unseen_pairs"]
    pi = unseen_rotation_pairs(128, 4096, 8192, scale=2.0)             # position interpolation
    assert pi["unseen_pairs"] == 0 == _unseen_brute_force(128, 4096, 8192, 10000.0, scale=2.0)
    assert unseen_rotation_pairs(128, 4096, 4096)["unseen_pairs"] == 0
    # what RoPE does give: a window of trained length scores the same at any absolute offset
    torch.manual_seed(0)
    q, k = torch.randn(64, 128, dtype=torch.float64), torch.randn(64, 128, dtype=torch.float64)
    near, far = torch.arange(64), torch.arange(64) + 100_000
    assert torch.allclose(scores(q, k, near, near), scores(q, k, far, far), atol=1e-6, rtol=0)
    evidence.quote("pairs with unseen angles", 18, got["unseen_pairs"], abs=0)
    evidence.quote("pairs in all", 64, got["pairs"], abs=0)
    theta = frequencies(128)
    wavelengths = (2 * math.pi / theta)
    evidence["counterexample"] = {"d": 128, "base": 10000, "train_len": 4096, "test_len": 8192,
                                  "pairs_with_unseen_angles": got["unseen_pairs"], "of_pairs": got["pairs"],
                                  "max_radians_beyond_training": got["max_excess_rad"],
                                  "pairs_with_wavelength_over_4096": int((wavelengths > 4096).sum()),
                                  "with_position_interpolation": pi["unseen_pairs"]}


floats = st.lists(st.floats(-5, 5, allow_nan=False, width=32), min_size=4, max_size=16)


@pytest.mark.claim("norm.rmsnorm-definition")
@given(x=floats, alpha=st.floats(0.1, 10), c=st.floats(-3, 3))
def test_rmsnorm_invariances(x, alpha, c):
    x = torch.tensor(x, dtype=torch.float64)
    assume(float(x.std(unbiased=False)) >= 1e-3)            # a near-constant row: LN divides by ~0
    w = torch.linspace(0.5, 1.5, x.numel(), dtype=torch.float64)
    eps = 1e-6
    assert torch.allclose(rms_norm(x, w, eps), F.rms_norm(x, (x.numel(),), w, eps), atol=1e-9, rtol=0)   # torch's own
    centred = x - x.mean()
    assert torch.allclose(rms_norm(centred, w, eps), layer_norm(x, w, None, eps), atol=1e-6, rtol=0)   # LN = RMSNorm of x - mean
    assert torch.allclose(rms_norm(alpha * x, w, 0.0), rms_norm(x, w, 0.0), atol=1e-9, rtol=0)        # re-scaling invariant
    assert torch.allclose(layer_norm(x + c, w, None, 0.0), layer_norm(x, w, None, 0.0), atol=1e-6, rtol=0)


@pytest.mark.claim("norm.rmsnorm-definition")
def test_rmsnorm_is_not_shift_invariant(evidence):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    a, b = rms_norm(x + 10.0, eps=0.0), rms_norm(x, eps=0.0)
    assert (a - b).abs().max() > 0.5
    assert torch.allclose(layer_norm(x + 10.0, eps=0.0), layer_norm(x, eps=0.0), rtol=0, atol=1e-12)
    evidence["counterexample"] = {"x": x.tolist(), "rms(x)": b.tolist(), "rms(x+10)": a.tolist()}


@pytest.mark.claim("norm.preln-warmup")
@pytest.mark.parametrize("post_ln", [True, False])
def test_blocks_are_wired_as_their_formulas(post_ln):
    """Post-LN: x -> LN(x + F(x)) for each sub-layer; Pre-LN: x -> x + F(LN(x)), with a final LN on the stack.
    Written out here from the block's own sub-layers, so a mis-wired block cannot pass."""
    torch.manual_seed(0)
    stack = Stack(2, 16, 4, post_ln).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    h = x
    for blk in stack.blocks:
        attn = lambda t, b=blk: b.attn(t, t, t, need_weights=False)[0]  # noqa: E731
        mlp = lambda t, b=blk: b.fc2(torch.relu(b.fc1(t)))  # noqa: E731
        if post_ln:
            h = blk.ln1(h + attn(h))
            h = blk.ln2(h + mlp(h))
        else:
            h = h + attn(blk.ln1(h))
            h = h + mlp(blk.ln2(h))
    want = h if post_ln else torch.nn.functional.layer_norm(h, (16,), stack.final.weight, stack.final.bias, stack.final.eps)
    assert torch.allclose(stack(x), want, atol=1e-12, rtol=0)


@pytest.mark.claim("norm.preln-warmup")
def test_gradient_norms_at_init(evidence):
    kw = {"d": 64, "heads": 4, "seq": 8, "batch": 4, "seeds": (0, 1, 2)}
    pre = {L: layer_grad_norms(L, False, **kw) for L in (4, 16)}
    post = {L: layer_grad_norms(L, True, **kw) for L in (4, 16)}
    # Post-LN: the top layers get the largest gradients; Pre-LN: the top layers the smallest
    assert post[16][-1] > post[16][0] and pre[16][-1] < pre[16][0]
    assert post[16][-1] > 2 * pre[16][-1]
    # Pre-LN's last-layer gradient shrinks with depth (about 1/sqrt(L)); Post-LN's does not
    assert pre[16][-1] < 0.75 * pre[4][-1]
    assert post[16][-1] > 0.9 * post[4][-1]
    # and Pre-LN is not even across layers in this toy: its gradients fall from the first layer to the last
    assert pre[16][0] > 2 * pre[16][-1] and all(a > b for a, b in zip(pre[16][::3], pre[16][3::3]))
    evidence.quote("Pre-LN last-layer gradient, L=16 over L=4", 0.5, pre[16][-1] / pre[4][-1], abs=0.1)
    evidence.quote("Pre-LN first-layer over last-layer gradient, L=16", 2.5, pre[16][0] / pre[16][-1], digits=1)
    evidence["last-layer grad norm"] = {"pre L=4": pre[4][-1], "pre L=16": pre[16][-1],
                                        "post L=4": post[4][-1], "post L=16": post[16][-1]}
    evidence["per-layer, L=16"] = {"pre": pre[16], "post": post[16]}
