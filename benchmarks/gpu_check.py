"""`make gpu-check`: every Triton kernel's correctness checks and benchmarks on one CUDA device.

Runs, in this order, and writes what it measured as it goes:
  1. correctness at realistic sizes against PyTorch references (fused log-prob/entropy forward + backward
     in fp32 and bf16, the GAE kernel against the loop, FlashAttention forward against SDPA's math backend);
  2. the fused log-prob/entropy benchmark (benchmarks/fused_logprobs.py --device cuda, with Liger-Kernel's
     fused linear cross-entropy when `liger-kernel` is installed) -> benchmarks/results/fused_logprobs-cuda.json;
  3. achieved HBM bandwidth of the GAE kernel and of the log-prob kernels (bytes moved stated, as a fraction
     of the device's datasheet bandwidth), and FlashAttention forward against SDPA's flash backend
     -> benchmarks/results/kernels-cuda.json;
  4. the interview kernels of impls/kernels (matmul, softmax, reduction, LayerNorm/RMSNorm, transpose): correctness
     in fp32/fp16/bf16 and time against the PyTorch op (cuBLAS for the matmul), as a fraction of the datasheet
     bandwidth or Tensor-Core FLOP/s (benchmarks/ops_kernels.py) -> benchmarks/results/ops_kernels-cuda.json.
On a machine without CUDA it refuses with one line (exit 2) and writes nothing. ``--dry-run`` runs the same
code paths on CPU in Triton's interpreter at toy sizes (a test of this script, not a measurement) and
writes to ``--out`` (default: a temporary folder).
Usage:  python benchmarks/gpu_check.py [--dry-run] [--out DIR] [--skip-fused-bench]
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Datasheet HBM bandwidth (bytes/s) by device-name fragment, most specific first. Sources: NVIDIA's
# H200 (4.8 TB/s), H100 SXM5 (3.35 TB/s) / NVL (3.9 TB/s) / PCIe (2.0 TB/s), A100 80GB SXM (2,039 GB/s) / PCIe (1,935 GB/s),
# A100 40GB (1,555 GB/s), L40S (864 GB/s), L4 (300 GB/s), A10 (600 GB/s) datasheets; RTX 4090 (1,008 GB/s).
DATASHEET_BW = [
    ("H200", 4.8e12), ("H100 PCIe", 2.0e12), ("H100 NVL", 3.9e12), ("H100", 3.35e12), ("A100-SXM4-80GB", 2.039e12),
    ("A100 80GB PCIe", 1.935e12), ("A100-PCIE-80GB", 1.935e12), ("A100", 1.555e12), ("L40S", 0.864e12),
    ("L4", 0.3e12), ("A10", 0.6e12), ("RTX 4090", 1.008e12),
]


def refuse_without_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        print("gpu-check: no CUDA device here (torch.cuda.is_available() is False); nothing was run. "
              "Run it on a GPU machine with a CUDA build of torch (see README), or use --dry-run.", file=sys.stderr)
        sys.exit(2)


def datasheet_bandwidth(name: str) -> float | None:
    for frag, bw in DATASHEET_BW:
        if frag.lower() in name.lower():
            return bw
    return None


class Clock:
    """Best-of-n wall time in ms, synchronising the device around each run."""

    def __init__(self, device):
        self.device = device

    def sync(self) -> None:
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def best(self, fn, reps: int) -> float:
        fn()
        self.sync()
        out = []
        for _ in range(reps):
            self.sync()
            t0 = time.perf_counter()
            fn()
            self.sync()
            out.append((time.perf_counter() - t0) * 1e3)
        return min(out)


def check(name: str, err: float, tol: float, log: list) -> None:
    ok = err <= tol
    log.append({"check": name, "max_err": err, "tol": tol, "ok": ok})
    print(f"  {'ok  ' if ok else 'FAIL'} {name}: max error {err:.3g} (tol {tol:.3g})", flush=True)


def correctness(device, dry: bool) -> list:
    import torch

    from impls.inference.flash_attention_triton import flash_attention_triton
    from impls.rl.gae import gae
    from impls.rl.gae_triton import gae_triton
    from impls.scale.fused_logprobs import fused_linear_logprobs

    log: list = []
    gen = torch.Generator().manual_seed(0)
    print("correctness", flush=True)
    # fused log-prob + entropy, forward and backward, against autograd through the full logits
    N, H, V = (37, 16, 300) if dry else (2048, 1024, 32000)
    for dtype, tol in ((torch.float32, 2e-3), (torch.bfloat16, 5e-2)):
        h = (torch.randn(N, H, generator=gen)).to(device, dtype)
        W = (torch.randn(V, H, generator=gen) / H**0.5).to(device, dtype)
        y = torch.randint(0, V, (N,), generator=gen).to(device)
        y[::13] = -100
        g = torch.randn(N, generator=gen).to(device)
        hr, Wr = h.float().requires_grad_(), W.float().requires_grad_()
        z = hr @ Wr.T / 0.9
        ls = torch.log_softmax(z, -1)
        lp_ref = torch.where(y == -100, 0.0, ls.gather(1, y.clamp(min=0)[:, None])[:, 0])
        ent_ref = -(ls.exp() * ls).sum(-1)
        (lp_ref * g + 0.1 * ent_ref).sum().backward()
        for backend in ("torch", "triton"):
            hh, WW = h.detach().clone().requires_grad_(), W.detach().clone().requires_grad_()
            lp, ent = fused_linear_logprobs(hh, WW, y, temperature=0.9, chunk_size=16 if dry else 512, backend=backend,
                                            block_v=64 if dry else None)
            (lp * g + 0.1 * ent).sum().backward()
            err_out = max(float((lp.detach() - lp_ref).abs().max()), float((ent.detach() - ent_ref).abs().max()))
            rel = lambda a, b: float((a.float() - b).abs().max() / b.abs().max().clamp_min(1e-30))  # noqa: E731
            check(f"fused log-prob/entropy {backend} {str(dtype)[6:]} outputs", err_out, tol, log)
            check(f"fused log-prob/entropy {backend} {str(dtype)[6:]} dH, dW (rel. to max)",
                  max(rel(hh.grad, hr.grad), rel(WW.grad, Wr.grad)), tol, log)
    # GAE kernel against the per-timestep loop (right padding: the conventions coincide)
    B, T = (3, 50) if dry else (256, 4096)
    r = torch.randn(B, T, generator=gen).to(device)
    v = torch.randn(B, T, generator=gen).to(device)
    lengths = torch.randint(T // 2, T + 1, (B,), generator=gen)
    m = (torch.arange(T)[None, :] < lengths[:, None]).to(device)
    a_ref, r_ref = gae(r.double(), v.double(), m.double(), 0.99, 0.95)
    a, ret = gae_triton(r, v, m, 0.99, 0.95, block_t=16 if dry else 128)
    check("GAE kernel vs loop (fp32, rel. to max)", float((a.double() - a_ref).abs().max() / a_ref.abs().max()), 1e-5, log)
    # FlashAttention forward against SDPA's math backend in fp32
    Bq, Hh, S, D = (1, 2, 40, 16) if dry else (2, 8, 2048, 128)
    dt = torch.float32 if dry else torch.float16
    q, k, vv = (torch.randn(Bq, Hh, S, D, generator=gen).to(device, dt) for _ in range(3))
    for causal in (False, True):
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), vv.float(), is_causal=causal)
        o = flash_attention_triton(q, k, vv, causal=causal, block_m=16 if dry else 64, block_n=16 if dry else 64)
        check(f"FlashAttention forward causal={causal} ({str(dt)[6:]})", float((o.float() - ref).abs().max()),
              1e-4 if dry else 5e-3, log)
    return log


def bandwidth(device, dry: bool, clock: Clock, peak_bw: float | None) -> list:
    import torch

    from impls.rl.gae_triton import gae_triton
    from impls.scale import fused_logprobs_triton as K

    rows = []
    reps = 1 if dry else 10
    gen = torch.Generator().manual_seed(1)
    print("bandwidth", flush=True)

    def row(name, nbytes, ms, what):
        gbs = nbytes / (ms * 1e-3) / 1e9
        frac = None if peak_bw is None else round(nbytes / (ms * 1e-3) / peak_bw, 3)
        rows.append({"kernel": name, "bytes_moved": int(nbytes), "what_is_moved": what, "time_ms": round(ms, 4),
                     "achieved_GB_s": round(gbs, 1), "fraction_of_datasheet": frac})
        print(f"  {name}: {nbytes / 1e9:.3f} GB in {ms:.3f} ms = {gbs:.0f} GB/s"
              + ("" if frac is None else f" ({frac:.0%} of datasheet)"), flush=True)

    B, T = (4, 64) if dry else (4096, 8192)
    r = torch.randn(B, T, generator=gen).to(device)
    v = torch.randn(B, T, generator=gen).to(device)
    m = torch.ones(B, T, dtype=torch.bool, device=device)
    d = torch.zeros(B, T, dtype=torch.bool, device=device)
    ms = clock.best(lambda: gae_triton(r, v, m, 0.99, 0.95, dones=d), reps)
    row(f"GAE kernel B={B} T={T}", B * T * (4 + 4 + 1 + 1 + 4 + 4), ms,
        "reads rewards, values (fp32), mask, dones (1 byte each); writes advantages, returns (fp32)")
    N, V = (8, 300) if dry else (4096, 152064)
    z = torch.randn(N, V, generator=gen).to(device)
    y = torch.randint(0, V, (N,), generator=gen).to(device)
    kw = {"block_v": 64} if dry else {}
    ms = clock.best(lambda: K.chunk_forward(z, y, **kw), reps)
    row(f"log-prob forward kernel N={N} V={V}", N * V * 4, ms, "reads the fp32 logits once (per-row outputs negligible)")
    lp, ent, lse = K.chunk_forward(z, y, **kw)
    g = torch.randn(N, device=device)
    zz = z.clone()
    ms = clock.best(lambda: K.chunk_backward_(zz, y, lse, ent, g, g, **kw), reps)
    row(f"log-prob backward kernel N={N} V={V}", 2 * N * V * 4, ms, "reads the fp32 logits, writes dL/dz in place")
    return rows


def flash_vs_sdpa(device, dry: bool, clock: Clock) -> list:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from impls.inference.flash_attention_triton import flash_attention_triton

    rows = []
    print("FlashAttention forward vs SDPA flash backend", flush=True)
    shapes = [(1, 2, 64, 16)] if dry else [(4, 16, 4096, 128), (1, 32, 16384, 128)]
    dt = torch.float32 if dry else torch.bfloat16
    backend = SDPBackend.MATH if dry else SDPBackend.FLASH_ATTENTION
    for B, Hh, S, D in shapes:
        q, k, v = (torch.randn(B, Hh, S, D, device=device, dtype=dt) for _ in range(3))
        for causal in (False, True):
            def sdpa():
                with sdpa_kernel(backend):
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

            kw = {"block_m": 16, "block_n": 16} if dry else {}
            t_ref = clock.best(sdpa, 1 if dry else 10)
            t_tri = clock.best(lambda: flash_attention_triton(q, k, v, causal=causal, **kw), 1 if dry else 10)
            flops = 4 * B * Hh * S * S * D / (2 if causal else 1)
            rows.append({"shape": [B, Hh, S, D], "causal": causal, "dtype": str(dt)[6:],
                         "sdpa_backend": backend.name, "sdpa_ms": round(t_ref, 4), "triton_ms": round(t_tri, 4),
                         "triton_over_sdpa": round(t_tri / t_ref, 3), "triton_TFLOP_s": round(flops / t_tri / 1e9, 1)})
            print(f"  {B}x{Hh}x{S}x{D} causal={causal}: SDPA {t_ref:.3f} ms, Triton {t_tri:.3f} ms "
                  f"({t_tri / t_ref:.2f}x)", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="CPU + Triton interpreter, toy sizes: tests this script")
    ap.add_argument("--out", default=None, help="results folder (default benchmarks/results; a temp folder with --dry-run)")
    ap.add_argument("--skip-fused-bench", action="store_true", help="skip benchmarks/fused_logprobs.py")
    args = ap.parse_args()
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
    else:
        refuse_without_cuda()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch

    from gae_scan import machine
    from mianjing.report import write_json_atomic

    out = Path(args.out) if args.out else (Path(tempfile.mkdtemp(prefix="gpu-check-dry-")) if args.dry_run
                                          else ROOT / "benchmarks" / "results")
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cpu" if args.dry_run else "cuda")
    name = "CPU (dry run)" if args.dry_run else torch.cuda.get_device_name(device)
    peak_bw = None if args.dry_run else datasheet_bandwidth(name)
    started = time.time()
    clock = Clock(device)
    log = correctness(device, args.dry_run)
    fused_rc = None
    if not args.skip_fused_bench:
        cmd = [sys.executable, str(ROOT / "benchmarks" / "fused_logprobs.py"), "--device", device.type,
               "--out", str(out / f"fused_logprobs{'' if args.dry_run else '-cuda'}.json")]
        cmd += ["--quick"] if args.dry_run else ["--liger"]
        print("$ " + " ".join(cmd[1:]), flush=True)
        fused_rc = subprocess.run(cmd, cwd=ROOT).returncode
    bw = bandwidth(device, args.dry_run, clock, peak_bw)
    fa = flash_vs_sdpa(device, args.dry_run, clock)
    result = {
        "title": {"zh": "Triton 内核：GPU 正确性、带宽与 FlashAttention", "en": "Triton kernels: GPU correctness, bandwidth, FlashAttention"},
        "machine": machine(device) if not args.dry_run else "CPU dry run (Triton interpreter, toy sizes; not a measurement)",
        "date": datetime.date.today().isoformat(),
        "command": "make gpu-check" + (" (python benchmarks/gpu_check.py --dry-run)" if args.dry_run else ""),
        "datasheet_bandwidth_B_s": peak_bw,
        "correctness": log,
        "bandwidth": bw,
        "flash_attention_vs_sdpa": fa,
        "fused_logprobs_benchmark_rc": fused_rc,
        "seconds": round(time.time() - started, 1),
    }
    path = out / ("kernels.json" if args.dry_run else "kernels-cuda.json")
    write_json_atomic(path, result)
    import ops_kernels

    log = log + ops_kernels.run(device, args.dry_run, clock, peak_bw, name, out, result["machine"])
    failed = [c["check"] for c in log if not c["ok"]]
    print(f"wrote {path}; {len(log) - len(failed)}/{len(log)} correctness checks passed"
          + (f"; FAILED: {', '.join(failed)}" if failed else "") + f"; {result['seconds']} s", flush=True)
    sys.exit(1 if failed or fused_rc not in (None, 0) else 0)


if __name__ == "__main__":
    main()
