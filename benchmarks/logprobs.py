"""Token log-probs for a 152k vocabulary: chunked (impls/rl/logprobs.py) vs the full computation.

The full computation forms all [B, T, V] logits, runs log_softmax and gathers; the chunked one
goes from the hidden states and the LM-head weight, ``chunk`` sequence positions at a time.
Peak memory: on CUDA the caching allocator's max_memory_allocated; on CPU the resident-set
high-water mark (VmHWM, reset just before the call) of a fresh subprocess that runs the
computation once, minus its resident set just before the call. Blocks this large go straight to
mmap/munmap, so the resident set follows the live tensors (tracemalloc cannot see torch's
allocations, and ru_maxrss inherits the parent's high-water mark across fork/exec).
Usage:  python benchmarks/logprobs.py [--device cuda] [--backward] [--quick]
Writes benchmarks/results/logprobs.json.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from mianjing.report import write_json_atomic  # noqa: E402

from impls.rl.logprobs import token_logprobs  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from gae_scan import machine  # noqa: E402


def make_inputs(B: int, T: int, H: int, V: int, device: torch.device, backward: bool):
    """Fixed-seed inputs, created without transient copies (so a CPU RSS baseline is clean)."""
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(B, T, H, generator=gen).to(device)
    W = torch.randn(V, H, generator=gen).to(device)
    W.mul_(2.0 / H**0.5)  # logits with a spread of a few units, like an LM head
    y = torch.randint(0, V, (B, T), generator=gen).to(device)
    if backward:
        h.requires_grad_()
        W.requires_grad_()
    return h, W, y


def compute(kind: str, h, W, y, backward: bool):
    """kind = 'full' or 'chunk<N>'."""
    with torch.set_grad_enabled(backward):
        if kind == "full":
            lp = torch.log_softmax(F.linear(h, W).float(), dim=-1).gather(-1, y.unsqueeze(-1)).squeeze(-1)
        else:
            lp = token_logprobs(h, y, lm_head=W, chunk_size=int(kind[5:]))
        if backward:
            lp.sum().backward()
            h.grad = W.grad = None
        return lp.detach()


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak_rss() -> bool:
    """Reset this process's resident-set high-water mark (VmHWM; Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure_in_subprocess(kind: str, args) -> int:
    """Peak bytes of one run of ``kind`` in a fresh CPU process (VmHWM after - VmRSS before)."""
    cmd = [sys.executable, __file__, "--_measure", kind, "--B", str(args.B), "--T", str(args.T), "--H", str(args.H),
           "--V", str(args.V)] + (["--backward"] if args.backward else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return int(json.loads(out.strip().splitlines()[-1])["peak_bytes"])


def _measure_child(args) -> None:
    torch.set_num_threads(max(1, torch.get_num_threads()))
    h, W, y = make_inputs(args.B, args.T, args.H, args.V, torch.device("cpu"), args.backward)
    # initialise the math libraries (thread pools, workspaces) on a tiny slice first, so that their
    # one-off growth of the resident set is not charged to the measured call
    compute(args._measure, h[:, :16].detach(), W[:1024].detach(), y[:, :16].clamp(max=1023), False)
    gc.collect()
    # VmHWM belongs to this process's own address space (ru_maxrss would also carry the parent's
    # high-water mark across fork/exec); reset it so that setup does not count either.
    reset_peak_rss()
    before = _status_kib("VmRSS")
    compute(args._measure, h, W, y, args.backward)
    peak = _status_kib("VmHWM")
    print(json.dumps({"peak_bytes": max(0, peak - before) * 1024}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--V", type=int, default=152064)
    ap.add_argument("--H", type=int, default=None, help="hidden size (default 64 on CPU, 4096 on CUDA)")
    ap.add_argument("--chunks", default="256,512,1024")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--backward", action="store_true", help="time forward + backward (checkpointed chunks)")
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "logprobs.json"))
    ap.add_argument("--_measure", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    device = torch.device(args.device)
    if args.H is None:
        args.H = 4096 if device.type == "cuda" else 64
    if args.quick:
        args.T, args.V, args.chunks = 512, 8192, "64,128"
    if args._measure:
        _measure_child(args)
        return

    kinds = ["full"] + [f"chunk{c}" for c in args.chunks.split(",")]
    h, W, y = make_inputs(args.B, args.T, args.H, args.V, device, args.backward)
    ref = compute("full", h, W, y, args.backward)
    results = {k: [] for k in kinds}
    diffs = {"full": 0.0}
    for k in kinds[1:]:
        diffs[k] = float((compute(k, h, W, y, args.backward) - ref).abs().max())
    for _ in range(args.reps):  # interleaved, so machine load hits every variant alike
        for k in kinds:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            compute(k, h, W, y, args.backward)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            results[k].append((time.perf_counter() - t0) * 1e3)
    peaks = {}
    for k in kinds:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            base = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            compute(k, h, W, y, args.backward)
            torch.cuda.synchronize(device)
            peaks[k] = torch.cuda.max_memory_allocated(device) - base
        else:
            peaks[k] = measure_in_subprocess(k, args)  # builds its own inputs from the same seed
    t_full, p_full = min(results["full"]), peaks["full"]
    rows = []
    print(f"{'variant':>10} {'peak MiB':>9} {'peak/full':>9} {'ms':>9} {'time/full':>9} {'max |diff|':>11}")
    for k in kinds:
        t = min(results[k])
        row = [k if k == "full" else f"chunk {k[5:]}", round(peaks[k] / 2**20, 1), round(peaks[k] / p_full, 3),
               round(t, 1), round(t / t_full, 2), float(f"{diffs[k]:.2e}")]
        rows.append(row)
        print(f"{row[0]:>10} {row[1]:>9} {row[2]:>9} {row[3]:>9} {row[4]:>9} {row[5]:>11}")
    meter_en = ("CUDA max_memory_allocated" if device.type == "cuda"
                else "resident-set high-water mark (VmHWM, reset before the call) of a fresh subprocess, minus its RSS before the call")
    meter_zh = "CUDA max_memory_allocated" if device.type == "cuda" else "独立子进程在调用前重置常驻内存高水位（VmHWM），调用后高水位减去调用前的常驻内存"
    mode_en = "forward + backward (chunks checkpointed)" if args.backward else "forward"
    mode_zh = "前向 + 反向（分块 checkpoint 重算）" if args.backward else "仅前向"
    result = {
        "title": {"zh": "大词表 token 对数概率：分块 vs 整块", "en": "Token log-probs for a large vocabulary: chunked vs full"},
        "machine": machine(device),
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/logprobs.py" + (f" --device {args.device}" if device.type != "cpu" else "")
        + (" --backward" if args.backward else ""),
        "columns": ["variant", "peak memory (MiB)", "peak / full", "time (ms)", "time / full", "max |Δ log p|"],
        "rows": rows,
        "notes": {
            "zh": f"B={args.B}, T={args.T}, V={args.V}, H={args.H}（CPU 上用较小的隐藏维度以控制时间），fp32，{mode_zh}。"
            f"整块：先算出全部 [B,T,V] logits，再 log_softmax 和 gather；分块：从隐藏状态和 LM head 权重出发，"
            f"每次处理 chunk 个位置，逐块算 logits、log_softmax 与 gather。内存计量：{meter_zh}。"
            f"时间为同一进程内交替运行 {args.reps} 次的最小值（机器为共享）。",
            "en": f"B={args.B}, T={args.T}, V={args.V}, H={args.H} (a small hidden size on CPU to keep the run "
            f"short), fp32, {mode_en}. Full: all [B,T,V] logits, then log_softmax and gather. Chunked: from the "
            f"hidden states and the LM-head weight, chunk positions at a time: logits, log_softmax and gather per chunk. "
            f"Memory: {meter_en}. Times: best of {args.reps} interleaved runs in one process (the machine is shared).",
        },
    }
    write_json_atomic(Path(args.out), result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
