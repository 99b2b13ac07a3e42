"""Operator fusion: what fusing saves (launches and bytes, counted by the meter), what it does not (FLOPs: the
exponentials a softmax evaluates, counted), what it costs (registers and occupancy of the compiled kernel), and
what torch.compile's stack is made of, observed in this torch.

Oracles: the interpreter meter (loads, stores, ``tl.exp`` elements); ptxas's register report and the occupancy
calculator; torch.compile with a recording backend, AOTAutograd's split, Inductor's configuration.
"""

from __future__ import annotations

import pytest
import torch

from impls.gpu.occupancy import occupancy

triton = pytest.importorskip("triton", reason="Triton has wheels for Linux x86-64/aarch64 only")

from impls.kernels import norms as NM  # noqa: E402
from impls.kernels import softmax as S  # noqa: E402
from verifiers.kernels.meter import Meter  # noqa: E402


def _softmax_metered(x: torch.Tensor, variant: str, block: int = 64) -> Meter:
    y = torch.empty_like(x)
    kernel = {"fused": S.softmax_kernel, "online": S.softmax_online_kernel,
              "three-pass": S.softmax_three_pass_kernel}[variant]
    blk = triton.next_power_of_2(x.shape[1]) if variant == "fused" else block
    with Meter(x=x, y=y) as m:
        kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=blk)
    assert torch.allclose(y.double(), torch.softmax(x.double(), -1), rtol=1e-5, atol=1e-12)
    return m


@pytest.mark.claim("fusion.fewer-round-trips")
def test_fusing_the_residual_add_into_the_norm(device, evidence):
    if device.type != "cpu":
        pytest.skip("the meter reads Triton's interpreter")
    N, D = 4, 256
    x, r, w = torch.randn(N, D), torch.randn(N, D), torch.randn(D)
    counts = {}
    for fused in (True, False):
        h, y, rstd, mean = torch.empty(N, D), torch.empty(N, D), torch.empty(N), torch.empty(N)
        launches = 0
        with Meter(x=x, r=r, w=w, h=h, y=y, rstd=rstd, mean=mean) as m:
            if fused:
                NM.add_rms_norm_kernel[(N,)](x, r, w, h, y, rstd, D, D, 1e-6, BLOCK=256)
                launches = 1
            else:
                NM.add_kernel[(4,)](x, r, h, N * D, BLOCK=256)
                NM.norm_fwd_kernel[(N,)](h, w, w, y, mean, rstd, D, D, D, 1e-6, RMS=True, HAS_BIAS=False, BLOCK=256)
                launches = 2
        counts["fused" if fused else "unfused"] = {
            "launches": launches, "activation passes": sum(m.loads[k] + m.stores[k] for k in "xrhy") / (N * D)}
    assert counts["fused"]["launches"] < counts["unfused"]["launches"]
    assert counts["fused"]["activation passes"] == 4 and counts["unfused"]["activation passes"] == 5
    evidence["add_then_rmsnorm"] = counts


@pytest.mark.claim("fusion.fewer-flops")
def test_fusion_keeps_or_adds_arithmetic(device, evidence):
    if device.type != "cpu":
        pytest.skip("the meter reads Triton's interpreter")
    R, D = 2, 4096  # long rows: the online kernel's final combine (one exp per lane) is 1/64 of an element
    x = torch.randn(R, D)
    exps = {v: _softmax_metered(x, v).exps / (R * D) for v in ("fused", "three-pass", "online")}
    evidence["exp_per_element"] = exps
    assert exps["fused"] == 1.0 and exps["three-pass"] == 2.0  # the three-pass version recomputes e^(x-m)
    evidence.quote("exponentials, online over three-pass", quoted=1.5, measured=exps["online"] / exps["three-pass"],
                   abs=0.01)
    # fusing the add into the norm: the same additions, squares and sums as the pair it replaces
    N, D = 3, 128
    a, r, w = torch.randn(N, D), torch.randn(N, D), torch.randn(D)
    y1, h1 = NM.add_rms_norm(a, r, w, fused=True)
    y2, h2 = NM.add_rms_norm(a, r, w, fused=False)
    assert torch.equal(h1, h2) and torch.equal(y1, y2)  # the same operations in the same order


@pytest.mark.claim("fusion.costs")
def test_a_row_held_in_registers_costs_occupancy(built, evidence):
    fused, online = built["softmax.fused16k.80"], built["softmax.online.80"]
    of = occupancy("sm_80", fused.threads, fused.registers, fused.shared)
    oo = occupancy("sm_80", online.threads, online.registers, online.shared)
    evidence["softmax_row_16384_sm80"] = {
        "whole row in registers": {"registers": fused.registers, "warps_per_sm": of.warps, "limited_by": of.limited_by},
        "online, 1024 at a time": {"registers": online.registers, "warps_per_sm": oo.warps,
                                   "limited_by": oo.limited_by}}
    assert fused.registers > 4 * online.registers and of.warps < oo.warps
    evidence.quote("warps per SM, 16384-float row in registers", quoted=8, measured=of.warps, abs=0)
    evidence.quote("warps per SM, online kernel", quoted=48, measured=oo.warps, abs=0)
    spill = built["norm.warp8192.80"]
    assert spill.spill_stores > 0  # one warp holding an 8192-float row: the compiler spills to local memory
    evidence["one_warp_8192_rmsnorm_spill_bytes"] = spill.spill_stores


@pytest.mark.claim("fusion.torch-compile-stack")
def test_torch_compile_is_dynamo_then_a_backend(evidence):
    import torch._dynamo
    import torch._inductor.config as inductor_config
    from torch._dynamo.backends.common import aot_autograd

    graphs, fw, bw = [], [], []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x):
        return torch.relu(x) * 2 + 1

    torch._dynamo.reset()
    out = torch.compile(f, backend=record)(torch.randn(8))
    assert graphs and out.shape == (8,)
    ops = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert torch.relu in ops or torch.nn.functional.relu in ops  # Dynamo captured an FX graph of the Python

    def fw_compiler(gm, _):
        fw.append(gm)
        return gm.forward

    def bw_compiler(gm, _):
        bw.append(gm)
        return gm.forward

    torch._dynamo.reset()
    x = torch.randn(8, requires_grad=True)
    torch.compile(f, backend=aot_autograd(fw_compiler=fw_compiler, bw_compiler=bw_compiler))(x).sum().backward()
    assert fw and bw and x.grad is not None  # AOTAutograd traced the backward ahead of time, as a second graph
    torch._dynamo.reset()
    backends = {"cpu": inductor_config.cpu_backend, "cuda": inductor_config.cuda_backend}
    assert backends == {"cpu": "cpp", "cuda": "triton"}, backends  # Triton only for GPU code by default
    evidence["inductor_backends"] = backends
    evidence["graphs"] = {"dynamo": len(graphs), "aot forward": len(fw), "aot backward": len(bw)}
