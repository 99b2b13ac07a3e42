"""CUDA runtime claims: what a fence compiles to (ptxas on hand-written PTX), what CUDA graphs save
(a model over the roofline step time; measured on a GPU by the CUDA-only tests, run by make gpu-check)."""

from __future__ import annotations

import pytest
import torch

from impls.gpu import compiled as C
from impls.inference import roofline as R
from impls.inference.kv_cache import preset

FENCE_PTX = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry publish(.param .u64 data, .param .u64 flag)
{
	.reg .b64 %rd<3>;
	.reg .b32 %r<2>;
	ld.param.u64 %rd1, [data];
	ld.param.u64 %rd2, [flag];
	mov.u32 %r1, 1;
	st.global.u32 [%rd1], %r1;
	SYNC;
	st.global.u32 [%rd2], %r1;
	ret;
}
"""


@pytest.mark.claim("gpu.threadfence.not-barrier")
def test_threadfence_is_a_memory_fence_not_a_barrier(evidence):
    why = C.missing(sass=True)
    if why:
        pytest.skip(why)
    fence = C.parse_sass_opcodes(C.disassemble(C.assemble(FENCE_PTX.replace("SYNC", "membar.gl"), "sm_80")[0]))
    bar = C.parse_sass_opcodes(C.disassemble(C.assemble(FENCE_PTX.replace("SYNC", "bar.sync 0"), "sm_80")[0]))
    # __threadfence() is membar.gl: it orders this thread's writes; nothing in it waits for another thread
    assert "MEMBAR.SC.GPU" in fence and not any(op.startswith("BAR") for op in fence)
    # __syncthreads() is bar.sync: a barrier, and only for the threads of one block
    assert "BAR.SYNC.DEFER_BLOCKING" in bar and not any(op.startswith("MEMBAR") for op in bar)
    evidence["sass"] = {"membar.gl": sorted(o for o in fence if "BAR" in o), "bar.sync": sorted(o for o in bar if "BAR" in o)}


def _graph_gain(batch, launch_us, kernels=16 * 32, graph_launch_us=10.0, gpu=R.GPUS["H100-SXM"]):
    """Eager decode step vs replaying one captured graph (Llama-3-8B, context 2048, one H100): the host issues
    ``kernels`` launches (16 ops in each of 32 layers) (or one graph launch) while the GPU runs the step; the step takes the longer of the two."""
    gpu_s = R.step_cost(preset("llama-3-8b"), batch=batch, new=1, context=2048).time(gpu)
    eager = max(kernels * launch_us * 1e-6, gpu_s)
    graph = max(graph_launch_us * 1e-6, gpu_s)
    return eager / graph


@pytest.mark.claim("gpu.cuda-graph.large-batch")
def test_graph_gain_shrinks_with_batch(evidence):
    batches = (1, 4, 16, 64, 256, 1024)
    for launch_us in (5.0, 10.0, 20.0):               # host cost of one eager op (framework + driver), swept
        gains = [_graph_gain(b, launch_us) for b in batches]
        assert all(a >= b for a, b in zip(gains, gains[1:])), gains   # never grows with the batch
        assert gains[-1] == pytest.approx(1.0)                        # large batch: the GPU hides the host
        if launch_us >= 10:
            assert gains[0] > 1.0                                     # small batch: the host is the bottleneck
        evidence[f"{launch_us} us per op"] = dict(zip(batches, gains))


def _tiny_step(x, w):
    for _ in range(32):
        x = torch.tanh(x @ w) + x
    return x


@pytest.mark.cuda
@pytest.mark.claim("gpu.cuda-graph.saves-cpu-dispatch")
def test_graph_replay_beats_eager_launches(evidence):
    x = torch.randn(8, 256, device="cuda")
    w = torch.randn(256, 256, device="cuda") / 16
    for _ in range(3):
        _tiny_step(x, w)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        _tiny_step(x, w)
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            out = _tiny_step(x, w)
    torch.cuda.synchronize()

    def timed(fn, n=200):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / n

    eager, replay = timed(lambda: _tiny_step(x, w)), timed(g.replay)
    assert torch.allclose(out, _tiny_step(x, w), atol=1e-5)
    assert replay < eager / 1.5
    evidence["ms_per_step"] = {"eager": eager, "graph": replay}


@pytest.mark.cuda
@pytest.mark.claim("gpu.cuda-graph.kernels-faster")
def test_graph_does_not_speed_up_a_long_kernel(evidence):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):                          # warm up cuBLAS (workspace, heuristics) before capture
        for _ in range(2):
            a @ a
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c = a @ a
    times = {}
    for name, fn in (("eager", lambda: a @ a), ("graph", g.replay)):
        for _ in range(3):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            fn()
        end.record()
        torch.cuda.synchronize()
        times[name] = start.elapsed_time(end) / 20
    assert c.shape == a.shape
    assert abs(times["graph"] - times["eager"]) < 0.05 * times["eager"]   # the same kernel, the same time
    evidence["ms_per_matmul"] = times
