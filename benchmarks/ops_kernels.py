"""The kernels of impls/kernels on one device: correctness in fp32/fp16/bf16 against fp64, and time against the
PyTorch op (cuBLAS for the matmul), as a ratio and as a fraction of the device's datasheet HBM bandwidth
(memory-bound kernels: bytes moved stated) or Tensor-Core FLOP/s (the matmul).

Called by ``benchmarks/gpu_check.py`` (``make gpu-check``) after its own steps; writes
``benchmarks/results/ops_kernels-cuda.json`` (``ops_kernels.json`` in the dry run's folder). With ``dry=True`` the
same code runs on CPU tensors in Triton's interpreter at toy sizes (a test of this script, not a measurement):
no bf16 matmul there (the interpreter computes bf16 ``tl.dot`` wrongly, see kernels.interpreter.bf16).

Tolerances are the kernels' error bounds at these sizes, stated per dtype: the result's own rounding (half an ulp:
2^-11 for fp16, 2^-8 for bf16, relative) plus the fp32 accumulation (K or the row length times 2^-24, relative
to the sum of magnitudes), rounded up.
"""

from __future__ import annotations

import math

# Dense FP16/BF16 Tensor-Core FLOP/s (FP32 accumulate) by device-name fragment, most specific first. Sources: NVIDIA
# datasheets -- H200 and H100 SXM 989.4 TFLOPS (1,979 with sparsity), H100 PCIe 756, H100 NVL 835, A100 312, L40S 362,
# L4 121, A10 125; RTX 4090 165 (Ada whitepaper, FP16 with FP32 accumulate).
DATASHEET_TC = [
    ("H200", 989.4e12), ("H100 PCIe", 756e12), ("H100 NVL", 835e12), ("H100", 989.4e12), ("A100", 312e12),
    ("L40S", 362e12), ("L4", 121e12), ("A10", 125e12), ("RTX 4090", 165e12),
]


def datasheet_tensor_flops(name: str) -> float | None:
    for frag, flops in DATASHEET_TC:
        if frag.lower() in name.lower():
            return flops
    return None


def _err(got, want) -> float:
    return float((got.double().cpu() - want).abs().max())


def correctness(device, dry: bool, check) -> None:
    import torch

    from impls.kernels import matmul as MM
    from impls.kernels import norms as NM
    from impls.kernels import reduce as RD
    from impls.kernels import softmax as SM
    from impls.kernels import transpose as TR

    gen = torch.Generator().manual_seed(2)
    dtypes = [torch.float32, torch.float16, torch.bfloat16]
    print("kernels of impls/kernels: correctness", flush=True)
    half_ulp = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
    # matmul, against the fp64 product; ragged sizes
    M, N, K = (37, 45, 70) if dry else (1000, 1500, 2000)
    for dt in dtypes:
        if dry and dt == torch.bfloat16:
            continue
        a, b = torch.randn(M, K, generator=gen).to(dt), torch.randn(K, N, generator=gen).to(dt)
        want = a.double() @ b.double()
        mag = float((a.double().abs() @ b.double().abs()).max())
        c = MM.matmul_tiled(a.to(device), b.to(device), block_m=16 if dry else 128, block_n=16 if dry else 128,
                            block_k=16 if dry else 32)
        tol = 2 * (K * 2.0**-24 * mag + half_ulp[dt] * float(want.abs().max()))
        check(f"matmul {str(dt)[6:]} {M}x{K} @ {K}x{N}", _err(c, want), tol)
    # softmax, all three kernels
    R, D = (5, 300) if dry else (256, 5000)
    for dt in dtypes:
        x = (torch.randn(R, D, generator=gen) * 4).to(dt)
        want = torch.softmax(x.double(), -1)
        for variant in ("online", "three-pass") + (("fused",) if D <= SM.MAX_FUSED_BLOCK else ()):
            y = SM.softmax_rows(x.to(device), variant=variant)
            check(f"softmax {variant} {str(dt)[6:]} {R}x{D}", _err(y, want), 2 * (D * 2.0**-24 + 2 * half_ulp[dt]))
    # reduction
    n = 70001 if dry else 10_000_019
    for dt in dtypes:
        x = torch.randn(n, generator=gen).to(dt)
        want = math.fsum(x.double().tolist()) if dry else float(x.double().sum())
        s = float(RD.reduce_two_stage(x.to(device), "sum")[0])
        # the kernel's order: CHUNK/BLOCK additions per lane, a tree over the lanes, then the same over the partials
        depth = 2 * (RD.CHUNK // RD.BLOCK + math.ceil(math.log2(RD.BLOCK))) + math.ceil(n / RD.CHUNK / RD.BLOCK) + 2
        check(f"sum of {n} {str(dt)[6:]}", abs(s - want), depth * 2.0**-24 * float(x.double().abs().sum()))
        check(f"max of {n} {str(dt)[6:]}", abs(float(RD.reduce_two_stage(x.to(device), "max")[0]) - float(x.max())),
              0.0)
    # LayerNorm / RMSNorm forward and backward
    R, D = (6, 300) if dry else (4096, 4096)
    for dt in dtypes:
        x = (torch.randn(R, D, generator=gen) * 2 + 3).to(dt)
        w, bias = (1 + torch.randn(D, generator=gen) * 0.1).to(dt), torch.randn(D, generator=gen).to(dt)
        g = torch.randn(R, D, generator=gen).to(dt)
        for rms in (False, True):
            xs, ws = x.to(device).clone().requires_grad_(), w.to(device).clone().requires_grad_()
            bs = None if rms else bias.to(device).clone().requires_grad_()
            y = NM.rms_norm(xs, ws) if rms else NM.layer_norm(xs, ws, bs)
            y.backward(g.to(device))
            xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
            bd = None if rms else bias.double().requires_grad_()
            y0 = (torch.nn.functional.rms_norm(xd, (D,), wd, 1e-6) if rms
                  else torch.nn.functional.layer_norm(xd, (D,), wd, bd, 1e-5))
            y0.backward(g.double())
            name = "rmsnorm" if rms else "layernorm"
            check(f"{name} forward {str(dt)[6:]} {R}x{D}", _err(y, y0.detach()), 4 * half_ulp[dt] * float(y0.abs().max())
                  + 1e-4)
            check(f"{name} dx {str(dt)[6:]}", _err(xs.grad, xd.grad), 4 * half_ulp[dt] * float(xd.grad.abs().max()) + 1e-4)
            check(f"{name} dw {str(dt)[6:]} (rel. to max)", _err(ws.grad, wd.grad) / float(wd.grad.abs().max()),
                  4 * half_ulp[dt] + R * 2.0**-24)
    # transpose: exact
    for dt in dtypes:
        x = torch.randn(*((45, 70) if dry else (8191, 4099)), generator=gen).to(dt)
        check(f"transpose {str(dt)[6:]} {tuple(x.shape)}", float((TR.transpose_tiled(x.to(device)).cpu() != x.t()).sum()),
              0.0)


def benchmarks(device, dry: bool, clock, peak_bw: float | None, peak_tc: float | None) -> list:
    import torch

    from impls.kernels import matmul as MM
    from impls.kernels import norms as NM
    from impls.kernels import reduce as RD
    from impls.kernels import softmax as SM
    from impls.kernels import transpose as TR

    reps = 1 if dry else 10
    rows = []
    print("kernels of impls/kernels: time against the PyTorch op", flush=True)

    def row(name, t_ms, ref_ms, *, nbytes=None, flops=None, what=""):
        r = {"kernel": name, "triton_ms": round(t_ms, 4), "torch_ms": round(ref_ms, 4),
             "triton_over_torch": round(t_ms / ref_ms, 3)}
        if nbytes is not None:
            r |= {"bytes_moved": int(nbytes), "what_is_moved": what, "achieved_GB_s": round(nbytes / t_ms / 1e6, 1),
                  "fraction_of_datasheet_bandwidth": None if peak_bw is None else round(nbytes / (t_ms * 1e-3) / peak_bw, 3)}
        if flops is not None:
            r |= {"TFLOP_s": round(flops / t_ms / 1e9, 1),
                  "fraction_of_tensor_core_peak": None if peak_tc is None else round(flops / (t_ms * 1e-3) / peak_tc, 3)}
        rows.append(r)
        print(f"  {name}: Triton {t_ms:.3f} ms, torch {ref_ms:.3f} ms ({t_ms / ref_ms:.2f}x)", flush=True)

    # matmul: the autotune table, the fastest config, against cuBLAS
    S = 32 if dry else 8192
    dt = torch.float32 if dry else torch.float16
    a, b = torch.randn(S, S, device=device, dtype=dt), torch.randn(S, S, device=device, dtype=dt)
    configs = [(16, 16, 16, 8, 4, 2)] if dry else MM.CONFIGS
    best = min((clock.best(lambda c=c: MM.matmul_tiled(a, b, block_m=c[0], block_n=c[1], block_k=c[2], group_m=c[3],
                                                         num_warps=c[4], num_stages=c[5]), reps), c) for c in configs)
    row(f"matmul {S}^3 {str(dt)[6:]} (best of {len(configs)} configs: {best[1][:3]})", best[0],
        clock.best(lambda: a @ b, reps), flops=2.0 * S**3)
    # softmax: a row in registers, and long rows online
    for R, D in ((4, 300), (2, 5000)) if dry else ((32768, 4096), (4096, 32768)):
        x = torch.randn(R, D, device=device, dtype=torch.float32 if dry else torch.bfloat16)
        variant = "fused" if D <= SM.MAX_FUSED_BLOCK else "online"
        t = clock.best(lambda: SM.softmax_rows(x, variant=variant), reps)
        row(f"softmax {variant} {R}x{D} {str(x.dtype)[6:]}", t, clock.best(lambda: torch.softmax(x, -1), reps),
            nbytes=SM.bytes_moved(R, D, variant, x.element_size()),
            what=f"{'one' if variant == 'fused' else 'two'} read(s) and one write per element")
    # reduction
    n = 20_000 if dry else 1 << 28
    x = torch.randn(n, device=device)
    row(f"sum of {n} fp32", clock.best(lambda: RD.reduce_two_stage(x, "sum"), reps),
        clock.best(lambda: x.sum(), reps), nbytes=RD.bytes_moved(n, 4), what="every element read once, the partials")
    # norms
    R, D = (8, 300) if dry else (16384, 4096)
    x = torch.randn(R, D, device=device, dtype=torch.float32 if dry else torch.bfloat16)
    w, bias = torch.randn(D, device=device, dtype=x.dtype), torch.randn(D, device=device, dtype=x.dtype)
    r = torch.randn_like(x)
    row(f"layernorm forward {R}x{D}", clock.best(lambda: NM.norm_forward(x, w, bias), reps),
        clock.best(lambda: torch.nn.functional.layer_norm(x, (D,), w, bias), reps),
        nbytes=NM.bytes_moved(R, D, "layernorm", x.element_size(), weights_once=True), what="read x, write y, weights once")
    row(f"rmsnorm forward {R}x{D}", clock.best(lambda: NM.norm_forward(x, w, rms=True), reps),
        clock.best(lambda: torch.nn.functional.rms_norm(x, (D,), w), reps),
        nbytes=NM.bytes_moved(R, D, "rmsnorm", x.element_size(), weights_once=True), what="read x, write y, weights once")
    row(f"add + rmsnorm fused {R}x{D}", clock.best(lambda: NM.add_rms_norm(x, r, w), reps),
        clock.best(lambda: torch.nn.functional.rms_norm(x + r, (D,), w), reps),
        nbytes=NM.bytes_moved(R, D, "add+rmsnorm", x.element_size(), weights_once=True),
        what="read x and the residual, write h and y")
    # transpose
    M, N = (64, 96) if dry else (8192, 8192)
    x = torch.randn(M, N, device=device)
    row(f"transpose {M}x{N} fp32", clock.best(lambda: TR.transpose_tiled(x), reps),
        clock.best(lambda: x.t().contiguous(), reps), nbytes=TR.bytes_moved(M, N, 4), what="read once, write once")
    return rows


def run(device, dry: bool, clock, peak_bw: float | None, name: str, out, machine: str) -> list:
    """Correctness then benchmarks; writes ops_kernels[-cuda].json into ``out``; returns the correctness log."""
    import datetime
    import time

    from mianjing.report import write_json_atomic

    started = time.time()
    log: list = []

    def check(what, err, tol):
        ok = err <= tol
        log.append({"check": what, "max_err": err, "tol": tol, "ok": ok})
        print(f"  {'ok  ' if ok else 'FAIL'} {what}: max error {err:.3g} (tol {tol:.3g})", flush=True)

    correctness(device, dry, check)
    peak_tc = None if dry else datasheet_tensor_flops(name)
    bench = benchmarks(device, dry, clock, peak_bw, peak_tc)
    result = {
        "title": {"zh": "面试手写算子：GPU 正确性与对照 PyTorch 的速度", "en": "Interview kernels: GPU correctness and speed against PyTorch"},
        "machine": machine, "date": datetime.date.today().isoformat(),
        "command": "make gpu-check" + (" (python benchmarks/gpu_check.py --dry-run)" if dry else ""),
        "datasheet_bandwidth_B_s": peak_bw, "datasheet_tensor_core_flop_s": peak_tc,
        "correctness": log, "benchmarks": bench, "seconds": round(time.time() - started, 1),
    }
    write_json_atomic(out / ("ops_kernels.json" if dry else "ops_kernels-cuda.json"), result)
    return log
