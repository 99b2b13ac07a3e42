"""Verifiers for the fused linear log-prob / entropy entry (qa/scale/fused-logprob-entropy.yaml).

Oracles: the two-pass fp64 ``log_softmax`` of the full logits and the entropy of
``torch.distributions.Categorical`` (the log-probs / entropies), autograd through that naive
computation (the gradients), exact byte arithmetic and :class:`LiveTensorBytes` (memory), and
a dispatch mode that sees every aten matmul (matmul FLOPs; torch's FlopCounterMode skips the
in-place ``addmm_``). The Triton kernels run in Triton's CPU
interpreter on the CPU device (``verifiers/conftest.py``), compiled on CUDA.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from impls.rl.logprobs import peak_memory_bytes
from impls.scale import fused_logprobs as FL
from impls.scale.triton_support import HAVE_TRITON, WHY_NOT

needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason=WHY_NOT or "Triton unavailable")
IGNORE = -100


# ---------------------------------------------------------------- oracles
def naive_logprobs_entropy(z: torch.Tensor, y: torch.Tensor, temperature: float):
    """Two-pass reference on the full [N, V] logits, fp64: log_softmax + gather, Categorical entropy."""
    x = z.double() / temperature
    lp = torch.log_softmax(x, dim=-1).gather(-1, y.clamp(min=0)[:, None])[:, 0]
    lp = torch.where(y == IGNORE, 0.0, lp)
    return lp, torch.distributions.Categorical(logits=x).entropy()


def naive_grads(h, W, y, g, g_ent, temperature):
    """dH, dW by autograd through the full-logits computation (fp64)."""
    h = h.detach().double().requires_grad_()
    W = W.detach().double().requires_grad_()
    lp, ent = naive_logprobs_entropy(h @ W.T, y, temperature)
    (lp * g.double() + ent * g_ent.double()).sum().backward()
    return h.grad, W.grad


def _targets(gen, N, V, p_ignore=0.2):
    y = torch.randint(0, V, (N,), generator=gen)
    return torch.where(torch.rand(N, generator=gen) < p_ignore, IGNORE, y)


# ---------------------------------------------------------------- single pass
class ColumnCounter:
    """Logits that record which columns each read touches (duck-types what ``online_logprobs`` reads)."""

    def __init__(self, z: torch.Tensor) -> None:
        self.z, self.shape, self.device, self.dtype = z, z.shape, z.device, z.dtype
        self.reads = torch.zeros(z.shape[1], dtype=torch.int64)

    def dim(self) -> int:
        return self.z.dim()

    def __getitem__(self, idx):
        rows, cols = idx
        assert rows == slice(None), idx
        self.reads[cols] += 1
        return self.z[:, cols]


@pytest.mark.claim("kernels.softmax-needs-two-passes")
def test_one_pass_reads_each_logit_once(evidence):
    """Counterexample: log-probs and entropy from a single streaming pass, each logit read exactly once."""
    gen = torch.Generator().manual_seed(3)
    N, V, block = 6, 1000, 96  # 1000 = 10 blocks of 96 + 40: the last block is ragged
    z = torch.randn(N, V, generator=gen, dtype=torch.float64) * 8
    z[:, -3] += 60.0  # the maximum sits in the last block: every earlier block must be rescaled
    y = _targets(gen, N, V)
    counter = ColumnCounter(z)
    lp, ent = FL.online_logprobs(counter, y, block_size=block, temperature=0.9)
    want_lp, want_ent = naive_logprobs_entropy(z, y, 0.9)
    assert torch.equal(counter.reads, torch.ones(V, dtype=torch.int64)), counter.reads
    err = max(float((lp - want_lp).abs().max()), float((ent - want_ent).abs().max()))
    assert err < 1e-12, err
    evidence["counterexample"] = {
        "V": V, "block": block, "passes_over_logits": 1, "reads_per_logit": 1,
        "max_abs_err_vs_two_pass_fp64": err,
    }


# ---------------------------------------------------------------- online softmax == two-pass
@st.composite
def logit_cases(draw, max_rows: int = 6, max_v: int = 300):
    N = draw(st.integers(1, max_rows))
    V = draw(st.integers(1, max_v))
    block = draw(st.sampled_from([1, 3, 16, 32, 64, 100]))
    temperature = draw(st.sampled_from([1.0, 0.6, 1.7]))
    scale = draw(st.sampled_from([1.0, 10.0, 100.0]))
    offset = draw(st.sampled_from([0.0, -50.0, 1000.0]))
    seed = draw(st.integers(0, 2**31 - 1))
    return N, V, block, temperature, scale, offset, seed


def _case_tensors(N, V, scale, offset, seed, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    z = (torch.randn(N, V, generator=gen, dtype=torch.float64) * scale + offset).to(dtype)
    return z, _targets(gen, N, V)


@pytest.mark.claim("kernels.online-softmax.matches-two-pass")
def test_online_softmax_pytorch_loop_matches_two_pass(evidence):
    worst = {"fp64": 0.0, "n": 0}

    @given(logit_cases())
    def check(case):
        N, V, block, tau, scale, offset, seed = case
        z, y = _case_tensors(N, V, scale, offset, seed)
        lp, ent = FL.online_logprobs(z, y, block_size=block, temperature=tau)
        want_lp, want_ent = naive_logprobs_entropy(z, y, tau)
        tol = 1e-12 * max(1.0, (scale + abs(offset)) / tau)
        e = max(float((lp - want_lp).abs().max()), float((ent - want_ent).abs().max()))
        assert e <= tol, (case, e)
        worst["fp64"] = max(worst["fp64"], e)
        worst["n"] += 1

    check()
    evidence["examples"] = worst["n"]
    evidence["max_abs_err_fp64"] = worst["fp64"]


@needs_triton
@pytest.mark.claim("kernels.online-softmax.matches-two-pass")
def test_online_softmax_triton_kernel_matches_two_pass(evidence, device):
    from impls.scale.fused_logprobs_triton import chunk_forward

    worst = {"fp64": 0.0, "fp32": 0.0, "n": 0}

    @settings(max_examples=min(settings().max_examples, 15))
    @given(logit_cases(max_v=200), st.sampled_from([16, 32, 64]))
    def check(case, block_v):
        N, V, _, tau, scale, offset, seed = case
        for dtype in ((torch.float32,) if device.type == "cuda" else (torch.float64, torch.float32)):
            z, y = _case_tensors(N, V, scale, offset, seed, dtype)
            lp, ent, lse = chunk_forward(z.to(device), y.to(device), temperature=tau, block_v=block_v)
            want_lp, want_ent = naive_logprobs_entropy(z, y, tau)
            want_lse = torch.logsumexp(z.double() / tau, -1)
            mag = max(1.0, (scale + abs(offset)) / tau)
            tol = (1e-12 if dtype == torch.float64 else 2e-6) * mag
            e = max(float((lp.cpu().double() - want_lp).abs().max()), float((ent.cpu().double() - want_ent).abs().max()),
                    float((lse.cpu().double() - want_lse).abs().max()))
            assert e <= tol, (case, block_v, dtype, e)
            key = "fp64" if dtype == torch.float64 else "fp32"
            worst[key] = max(worst[key], e / mag)
        worst["n"] += 1

    check()
    evidence["examples"] = worst["n"]
    evidence["max_err_over_logit_magnitude"] = {"fp64": worst["fp64"], "fp32": worst["fp32"]}


# ---------------------------------------------------------------- gradients
@st.composite
def grad_cases(draw):
    N = draw(st.integers(1, 40))
    H = draw(st.integers(1, 12))
    V = draw(st.integers(2, 120))
    chunk = draw(st.integers(1, 48))
    temperature = draw(st.sampled_from([1.0, 0.7, 1.3]))
    seed = draw(st.integers(0, 2**31 - 1))
    return N, H, V, chunk, temperature, seed


def _grad_inputs(N, H, V, seed, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(N, H, generator=gen, dtype=torch.float64) * 2
    W = torch.randn(V, H, generator=gen, dtype=torch.float64) * (2 / math.sqrt(H))
    y = _targets(gen, N, V)
    g = torch.randn(N, generator=gen, dtype=torch.float64)
    g_ent = torch.randn(N, generator=gen, dtype=torch.float64)
    return h.to(dtype), W.to(dtype), y, g.to(dtype), g_ent.to(dtype)


def _fused_grads(h, W, y, g, g_ent, **kw):
    h = h.detach().clone().requires_grad_()
    W = W.detach().clone().requires_grad_()
    lp, ent = FL.fused_linear_logprobs(h, W, y, **kw)
    (lp * g + ent * g_ent).sum().backward()
    return lp.detach(), ent.detach(), h.grad, W.grad


@pytest.mark.claim("kernels.fused-logprob.grad-exact")
def test_fused_gradients_equal_autograd_fp64(evidence, device):
    """torch backend + the standalone chunked backward: outputs and dH, dW equal autograd to 1e-10 (fp64)."""
    worst = {"out": 0.0, "grad": 0.0, "n": 0}

    @given(grad_cases())
    def check(case):
        N, H, V, chunk, tau, seed = case
        h, W, y, g, g_ent = _grad_inputs(N, H, V, seed)
        want_lp, want_ent = naive_logprobs_entropy(h @ W.T, y, tau)
        want_dh, want_dw = naive_grads(h, W, y, g, g_ent, tau)
        lp, ent, dh, dw = _fused_grads(h.to(device), W.to(device), y.to(device), g.to(device), g_ent.to(device),
                                       temperature=tau, chunk_size=chunk)
        dh2, dw2 = FL.fused_logprob_backward(h.to(device), W.to(device), y.to(device), g.to(device),
                                             g_ent.to(device), temperature=tau, chunk_size=chunk)
        e_out = max(float((lp.cpu() - want_lp).abs().max()), float((ent.cpu() - want_ent).abs().max()))
        e_grad = max(float((x.cpu() - w).abs().max()) for x, w in ((dh, want_dh), (dw, want_dw), (dh2, want_dh),
                                                                   (dw2, want_dw)))
        assert e_out <= 1e-10 and e_grad <= 1e-10, (case, e_out, e_grad)
        worst["out"] = max(worst["out"], e_out)
        worst["grad"] = max(worst["grad"], e_grad)
        worst["n"] += 1

    check()
    evidence["examples"] = worst["n"]
    evidence["max_abs_err_outputs"] = worst["out"]
    evidence["max_abs_err_dH_dW"] = worst["grad"]


@needs_triton
@pytest.mark.claim("kernels.fused-logprob.grad-exact")
def test_fused_gradients_triton_backend(evidence, device):
    """Triton backend (forward statistics + in-place logit gradient kernels): fp64 to 1e-10 in the
    interpreter; fp32 on CUDA to 1e-4 relative to the gradient's scale."""
    worst = {"grad": 0.0, "n": 0}
    dtype = torch.float32 if device.type == "cuda" else torch.float64

    @settings(max_examples=min(settings().max_examples, 12))
    @given(grad_cases(), st.sampled_from([16, 32]))
    def check(case, block_v):
        N, H, V, chunk, tau, seed = case
        chunk = max(chunk, 4)  # fewer interpreted launches; chunk edges are covered by the PyTorch-backend test
        h, W, y, g, g_ent = _grad_inputs(N, H, V, seed, dtype)
        want_lp, want_ent = naive_logprobs_entropy(h.double() @ W.double().T, y, tau)
        want_dh, want_dw = naive_grads(h, W, y, g, g_ent, tau)
        lp, ent, dh, dw = _fused_grads(h.to(device), W.to(device), y.to(device), g.to(device), g_ent.to(device),
                                       temperature=tau, chunk_size=chunk, backend="triton", block_v=block_v)
        if dtype == torch.float64:
            tol_out, tol_grad = 1e-10, 1e-10
        else:
            tol_out, tol_grad = 1e-4, 1e-4 * max(1.0, float(want_dw.abs().max()), float(want_dh.abs().max()))
        e_out = max(float((lp.cpu().double() - want_lp).abs().max()), float((ent.cpu().double() - want_ent).abs().max()))
        e_grad = max(float((dh.cpu().double() - want_dh).abs().max()), float((dw.cpu().double() - want_dw).abs().max()))
        assert e_out <= tol_out and e_grad <= tol_grad, (case, block_v, e_out, e_grad)
        worst["grad"] = max(worst["grad"], e_grad)
        worst["n"] += 1

    check()
    evidence["examples"] = worst["n"]
    evidence["dtype"] = str(dtype)
    evidence["max_abs_err_dH_dW"] = worst["grad"]


# ---------------------------------------------------------------- memory
def _peak(kind: str, N: int, H: int, V: int, chunk: int, device) -> tuple[int, int]:
    """(peak bytes of forward + backward, bytes of the gradients dH + dW it creates).

    ``LiveTensorBytes`` also counts a view of an input made inside the call (``W.T``) as a new storage,
    so up to the inputs' size again is charged to both variants; the bounds below allow for it.
    """
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(N, H, generator=gen).to(device).requires_grad_()
    W = (torch.randn(V, H, generator=gen) / math.sqrt(H)).to(device).requires_grad_()
    y = _targets(gen, N, V).to(device)
    g = torch.randn(N, generator=gen).to(device)

    def run():
        if kind == "naive":
            z = h @ W.T
            lp = torch.where(y == IGNORE, 0.0, torch.log_softmax(z, -1).gather(-1, y.clamp(min=0)[:, None])[:, 0])
            ent = torch.logsumexp(z, -1) - (torch.softmax(z, -1) * z).sum(-1)  # verl's entropy_from_logits
        else:
            lp, ent = FL.fused_linear_logprobs(h, W, y, chunk_size=chunk)
        (lp * g + 0.01 * ent).sum().backward()

    run()  # warm-up (one-off library workspaces)
    h.grad = W.grad = None
    _, peak = peak_memory_bytes(run, device)
    return peak, (h.numel() + W.numel()) * 4


@pytest.mark.claim("kernels.naive-logprob-memory")
def test_naive_logprob_holds_several_full_logit_copies(evidence, device):
    # the arithmetic of the claim: one fp32 copy of N x V logits at N = 4096, V = 152064
    copy_bytes = 4096 * 152064 * 4
    assert copy_bytes == 2_491_416_576
    evidence.quote("GB per fp32 [N, V] copy at N=4096, V=152064", quoted=2.49, measured=copy_bytes / 1e9, digits=2)
    N, H, V = 256, 32, 4096
    peak, grads = _peak("naive", N, H, V, 0, device)
    copies = (peak - grads) / (N * V * 4)
    # logits, log_softmax and softmax saved for the backward, softmax * z, the gradients flowing back
    evidence.quote("full [N, V] copies alive at the peak (about)", quoted=6, measured=copies, abs=0.5)
    evidence["meter"] = "CUDA max_memory_allocated" if device.type == "cuda" else "LiveTensorBytes"


@pytest.mark.claim("kernels.fused-logprob.memory-bounded")
def test_fused_peak_set_by_chunk_not_by_tokens(evidence, device):
    H, V, chunk = 32, 4096, 32
    rows = {}
    for N in (256, 512):
        peak, grads = _peak("fused", N, H, V, chunk, device)
        naive, _ = _peak("naive", N, H, V, chunk, device)
        rows[N] = {"peak_MiB": peak / 2**20, "grads_MiB": grads / 2**20, "naive_MiB": naive / 2**20,
                   "beyond_grads_over_chunk_buffer": (peak - 2 * grads) / (chunk * V * 4), "over_naive": peak / naive}
    for N, r in rows.items():
        # beyond the gradients (and the inputs' views, the same size): two [chunk, V] buffers, O(N + chunk) vectors
        assert r["beyond_grads_over_chunk_buffer"] <= 2.2, (N, r)
        assert r["over_naive"] <= 1 / 8, (N, r)
    # doubling the tokens leaves the part beyond the gradients unchanged (within 10%)
    a, b = (rows[n]["beyond_grads_over_chunk_buffer"] for n in (256, 512))
    assert abs(b - a) <= 0.1 * a, rows
    evidence["rows"] = {str(k): {kk: round(vv, 3) for kk, vv in v.items()} for k, v in rows.items()}


# ---------------------------------------------------------------- cost of recomputation
class MatmulFlops(TorchDispatchMode):
    """2 m k n FLOPs for every aten mm / addmm / bmm / baddbmm (any overload: out=, in-place) it sees."""

    def __init__(self) -> None:
        super().__init__()
        self.flops = 0
        self.ops: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in ("mm", "addmm", "addmm_", "bmm", "baddbmm", "baddbmm_"):
            a, b = (args[0], args[1]) if name in ("mm", "bmm") else (args[1], args[2])
            f = 2 * a.shape[-2] * a.shape[-1] * b.shape[-1] * (a.shape[0] if a.dim() == 3 else 1)
            self.flops += f
            self.ops[name] = self.ops.get(name, 0) + f
        return func(*args, **(kwargs or {}))


def _mm_flops(kind: str, N: int, H: int, V: int, chunk: int) -> int:
    gen = torch.Generator().manual_seed(1)
    h = torch.randn(N, H, generator=gen, requires_grad=True)
    W = torch.randn(V, H, generator=gen, requires_grad=True)
    y = _targets(gen, N, V)
    with MatmulFlops() as fc:
        if kind == "naive":
            lp, ent = naive_logprobs_entropy(h.float() @ W.float().T, y, 1.0)
        else:
            lp, ent = FL.fused_linear_logprobs(h, W, y, chunk_size=chunk)
        (lp.float().sum() + ent.float().sum()).backward()
    return fc.flops


@pytest.mark.claim("kernels.fused-logprob.recompute-cost")
def test_recompute_costs_one_more_logits_matmul(evidence):
    N, H, V = 96, 16, 200
    gemm = 2 * N * V * H  # one [N, H] x [H, V] product
    naive = _mm_flops("naive", N, H, V, 0)
    fused = {c: _mm_flops("fused", N, H, V, c) for c in (7, 32, 96)}
    assert naive == 3 * gemm, (naive, gemm)  # logits, dH, dW
    for c, f in fused.items():
        assert f == 4 * gemm, (c, f, gemm)  # + the recomputed logits, whatever the chunk
    evidence.quote("matmul FLOPs, fused over naive", quoted=4 / 3, measured=fused[32] / naive, rel=1e-12)
    evidence["gemm_flops"] = gemm
    evidence["naive_mm_flops"] = naive
    evidence["fused_mm_flops_by_chunk"] = fused


# ---------------------------------------------------------------- the katas' properties, on the references
@pytest.mark.claim("kernels.online-softmax.matches-two-pass")
def test_online_logprobs_kata_properties_hold_for_the_reference():
    from verifiers.katas import online_logprobs as kata

    for prop in kata.ALL:
        prop(FL.online_logprobs)


@pytest.mark.claim("kernels.fused-logprob.grad-exact")
def test_fused_backward_kata_properties_hold_for_the_reference():
    from verifiers.katas import fused_logprob_backward as kata

    for prop in kata.ALL:
        prop(FL.fused_logprob_backward)
