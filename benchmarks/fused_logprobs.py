"""Fused linear log-prob + entropy (impls/scale/fused_logprobs.py) vs the naive [N, V] computation, forward + backward.

Both compute token log-probs and entropies from hidden states [N, H] and the LM-head weight [V, H], and
back-propagate a loss  sum_i g_i log pi(y_i) + g'_i H_i  (fixed random g, g') into dH and dW.
Naive: verl's unfused path -- all [N, V] logits, log_softmax + gather for the log-prob,
logsumexp(z) - sum softmax(z) * z for the entropy, autograd for the backward.
Fused: chunks of rows; the backward recomputes each chunk's logits (4 matmuls instead of 3).
Peak memory as benchmarks/logprobs.py measures it: on CUDA the caching allocator's
max_memory_allocated; on CPU the resident-set high-water mark (VmHWM, reset just before the call) of a
fresh subprocess that runs the computation once, minus its resident set just before the call.
Both count the gradients dH and dW the call creates.
Usage:  python benchmarks/fused_logprobs.py [--device cuda] [--H 896] [--quick]
Writes benchmarks/results/fused_logprobs.json (benchmarks/results/fused_logprobs-cuda.json on CUDA).
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
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402

from mianjing.report import write_json_atomic  # noqa: E402

from impls.scale.fused_logprobs import fused_linear_logprobs  # noqa: E402
from gae_scan import machine  # noqa: E402
import logprobs as rss  # noqa: E402  (the resident-set meter of the log-prob benchmark)

TARGET_MEMORY, TARGET_TIME = 1 / 8, 1.3  # the bar on CPU: peak <= 1/8 of naive, time <= 1.3x naive


def make_inputs(N: int, H: int, V: int, device: torch.device):
    """Fixed-seed inputs, created without transient copies (so a CPU RSS baseline is clean)."""
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(N, H, generator=gen).to(device)
    W = torch.randn(V, H, generator=gen).to(device)
    W.mul_(2.0 / H**0.5)  # logits with a spread of a few units, like an LM head
    y = torch.randint(0, V, (N,), generator=gen).to(device)
    y[:: 17] = -100  # some ignored targets (prompt / padding tokens)
    g = torch.randn(N, generator=gen).to(device)
    g_ent = (0.01 * torch.randn(N, generator=gen)).to(device)
    h.requires_grad_()
    W.requires_grad_()
    return h, W, y, g, g_ent


def naive(h, W, y, temperature: float = 1.0):
    """verl's unfused path: full logits, log_softmax + gather, entropy = logsumexp - sum softmax * z."""
    z = (h @ W.T).float()
    if temperature != 1.0:
        z = z / temperature
    lp = torch.log_softmax(z, dim=-1).gather(-1, y.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    lp = torch.where(y == -100, 0.0, lp)
    ent = torch.logsumexp(z, dim=-1) - (torch.softmax(z, dim=-1) * z).sum(-1)
    return lp, ent


def compute(kind: str, h, W, y, g, g_ent):
    """kind = 'naive', 'chunk<N>' (PyTorch backend) or 'triton<N>'; forward + backward, grads dropped."""
    if kind == "naive":
        lp, ent = naive(h, W, y)
    elif kind == "liger":
        return liger(h, W, y, g, g_ent)
    else:
        backend = "triton" if kind.startswith("triton") else "torch"
        lp, ent = fused_linear_logprobs(h, W, y, chunk_size=int(kind.lstrip("chunktriton")), backend=backend)
    (lp * g + ent * g_ent).sum().backward()
    h.grad = W.grad = None
    return lp.detach(), ent.detach()


def liger(h, W, y, g, g_ent):  # pragma: no cover - needs CUDA and liger-kernel
    """Liger-Kernel's fused linear cross-entropy (log-prob only: it has no entropy output), g = 1 on every
    kept token. A like-for-like reference point for the log-prob half, not the same loss."""
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

    loss = liger_fused_linear_cross_entropy(h, W, y, reduction="sum")
    loss.backward()
    h.grad = W.grad = None
    return None, None


def _measure_child(args) -> None:
    h, W, y, g, g_ent = make_inputs(args.N, args.H, args.V, torch.device("cpu"))
    # initialise the math libraries on a tiny slice first, so their one-off growth is not charged
    hs, Ws = h[:16].detach().requires_grad_(), W[:1024].detach().requires_grad_()
    compute(args._measure, hs, Ws, y[:16].clamp(max=1023), g[:16], g_ent[:16])
    del hs, Ws
    gc.collect()
    rss.reset_peak_rss()
    before = rss._status_kib("VmRSS")
    compute(args._measure, h, W, y, g, g_ent)
    peak = rss._status_kib("VmHWM")
    print(json.dumps({"peak_bytes": max(0, peak - before) * 1024}))


def measure_in_subprocess(kind: str, args) -> int:
    cmd = [sys.executable, __file__, "--_measure", kind, "--N", str(args.N), "--H", str(args.H), "--V", str(args.V)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return int(json.loads(out.strip().splitlines()[-1])["peak_bytes"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--N", type=int, default=4096, help="tokens (rows)")
    ap.add_argument("--V", type=int, default=152064, help="vocabulary (Qwen2.5's 152,064)")
    ap.add_argument("--H", type=int, default=None, help="hidden size (default 896 on CPU, 3584 on CUDA)")
    ap.add_argument("--chunks", default=None, help="row chunk sizes (default 256,512 on CPU; 1024,2048 on CUDA)")
    ap.add_argument("--liger", action="store_true", help="also time Liger-Kernel's fused linear CE (CUDA only)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--_measure", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.H is None:
        args.H = 3584 if cuda else 896
    if args.chunks is None:
        args.chunks = "1024,2048" if cuda else "256,512"
    if args.quick:
        args.N, args.V, args.H, args.chunks, args.reps = 512, 8192, 64, "64,128", 1
    if args._measure:
        _measure_child(args)
        return
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"fused_logprobs{'-cuda' if cuda else ''}.json"

    kinds = ["naive"] + [f"chunk{c}" for c in args.chunks.split(",")]
    if cuda:
        kinds += [f"triton{c}" for c in args.chunks.split(",")]
        if args.liger:
            try:
                import liger_kernel.transformers.functional  # noqa: F401
                kinds.append("liger")
            except ImportError as exc:
                print(f"note: Liger-Kernel not installed ({exc}); its row is left out (pip install '.[gpu]')")
    h, W, y, g, g_ent = make_inputs(args.N, args.H, args.V, device)
    ref_lp, ref_ent = compute("naive", h, W, y, g, g_ent)
    diffs = {"naive": (0.0, 0.0)}
    for k in kinds[1:]:
        lp, ent = compute(k, h, W, y, g, g_ent)
        diffs[k] = (float((lp - ref_lp).abs().max()), float((ent - ref_ent).abs().max())) if lp is not None else None
    times = {k: [] for k in kinds}
    for _ in range(args.reps):  # interleaved, so machine load hits every variant alike
        for k in kinds:
            if cuda:
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            compute(k, h, W, y, g, g_ent)
            if cuda:
                torch.cuda.synchronize(device)
            times[k].append((time.perf_counter() - t0) * 1e3)
    peaks = {}
    for k in kinds:
        if cuda:
            torch.cuda.synchronize(device)
            base = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            compute(k, h, W, y, g, g_ent)
            torch.cuda.synchronize(device)
            peaks[k] = torch.cuda.max_memory_allocated(device) - base
        else:
            peaks[k] = measure_in_subprocess(k, args)
    t0, p0 = min(times["naive"]), peaks["naive"]
    rows = []
    print(f"{'variant':>12} {'peak MiB':>9} {'peak/naive':>10} {'ms':>9} {'time/naive':>10} {'max|dlogp|':>11} {'max|dent|':>9}")
    for k in kinds:
        t = min(times[k])
        d = diffs[k]
        name = {"naive": "naive [N,V]", "liger": "Liger FLCE"}.get(k, f"{'triton' if k.startswith('triton') else 'fused'} {k.lstrip('chunktriton')}")
        row = [name, round(peaks[k] / 2**20, 1), round(peaks[k] / p0, 3), round(t, 1), round(t / t0, 3),
               None if d is None else float(f"{d[0]:.2e}"), None if d is None else float(f"{d[1]:.2e}")]
        rows.append(row)
        print(f"{row[0]:>12} {row[1]:>9} {row[2]:>10} {row[3]:>9} {row[4]:>10} {row[5]!s:>11} {row[6]!s:>9}")
    fused = [r for r in rows[1:] if r[0].startswith("fused")]
    met = [r[0] for r in fused if r[2] <= TARGET_MEMORY and r[4] <= TARGET_TIME]
    print(f"target (peak <= 1/8 of naive and time <= {TARGET_TIME}x naive): "
          + (f"met by {', '.join(met)}" if met else "NOT met"))
    meter_en = ("CUDA max_memory_allocated" if cuda else
                "resident-set high-water mark (VmHWM, reset before the call) of a fresh subprocess, minus its RSS before the call")
    meter_zh = "CUDA max_memory_allocated" if cuda else "独立子进程在调用前重置常驻内存高水位（VmHWM），调用后高水位减去调用前的常驻内存"
    logits_gib = args.N * args.V * 4 / 2**30
    result = {
        "title": {"zh": "融合 linear + 对数概率/熵：前向 + 反向的峰值内存与时间",
                  "en": "Fused linear log-prob + entropy: peak memory and time, forward + backward"},
        "machine": machine(device),
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/fused_logprobs.py" + (f" --device {args.device}" if cuda else "")
        + (f" --H {args.H}" if args.H != (3584 if cuda else 896) else ""),
        "columns": ["variant", "peak memory (MiB)", "peak / naive", "time (ms)", "time / naive",
                    "max |Δ log p|", "max |Δ entropy|"],
        "rows": rows,
        "targets": {"peak_over_naive_max": TARGET_MEMORY, "time_over_naive_max": TARGET_TIME, "met_by": met},
        "params": {"N": args.N, "V": args.V, "H": args.H, "dtype": "fp32", "reps": args.reps},
        "notes": {
            "zh": f"N={args.N} 个 token，V={args.V}，H={args.H}"
            + ("（Qwen2.5-0.5B 的隐藏维度；7B 的 3584 在这台共享的 23 GB 机器上朴素版就需要十几 GB，单次要几分钟）" if not cuda and args.H == 896 else "")
            + f"，fp32，前向 + 反向（损失 Σ g·log π + g'·H，g、g' 为固定随机数，每 17 个 token 有一个 ignore_index）。"
            f"朴素版：先算出全部 [N,V] logits（单份 {logits_gib:.2f} GiB），log_softmax+gather 求对数概率，logsumexp − Σ softmax·z 求熵（verl 的非融合写法），autograd 反向。"
            f"融合版：按行分块，前向每行只保留 lse 和熵，反向逐块重算 logits 并原地变成 ∂L/∂z，再累加 dH、dW（4 次矩阵乘而朴素版 3 次）。"
            f"两者都计入调用中新建的梯度 dH、dW。内存计量：{meter_zh}。时间为同一进程内交替运行 {args.reps} 次的最小值（机器为共享）。",
            "en": f"N={args.N} tokens, V={args.V}, H={args.H}"
            + (" (Qwen2.5-0.5B's hidden size; the 7B's 3584 would need well over 10 GB for the naive run on this shared 23 GB machine and minutes per run)" if not cuda and args.H == 896 else "")
            + f", fp32, forward + backward of the loss sum g*log pi + g'*H (fixed random g, g'; every 17th target is ignore_index). "
            f"Naive: all [N,V] logits ({logits_gib:.2f} GiB per copy), log_softmax + gather for the log-prob, logsumexp - sum softmax*z "
            f"for the entropy (verl's unfused path), autograd backward. Fused: row chunks; the forward keeps lse and entropy per row, the "
            f"backward recomputes each chunk's logits, turns them in place into dL/dz and accumulates dH and dW (4 matmuls against the naive 3). "
            f"Both count the dH and dW the call creates. Memory: {meter_en}. Times: best of {args.reps} interleaved runs in one process "
            f"(the machine is shared).",
        },
    }
    write_json_atomic(out, result)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
