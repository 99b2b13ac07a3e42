"""`make gpu-check` (benchmarks/gpu_check.py): refuses in one line without CUDA; its dry run works on CPU.

The dry run drives every code path of the script (correctness checks, the fused log-prob benchmark in
its quick mode, bandwidth and FlashAttention timings, the results file) on CPU tensors in Triton's
interpreter at toy sizes; only the CUDA-specific calls (device name, allocator statistics, SDPA's flash
backend) are not reached.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from impls.scale.triton_support import HAVE_TRITON, WHY_NOT
from mianjing.paths import repo_root

ROOT = repo_root()
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(extra)
    return env


def test_refuses_without_cuda_in_one_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the refusal cannot be observed")
    results = ROOT / "benchmarks" / "results" / "kernels-cuda.json"
    before = results.stat().st_mtime_ns if results.exists() else None
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, cwd=tmp_path,
                          env=_env(CUDA_VISIBLE_DEVICES=""), timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu-check: no CUDA device"), proc.stderr
    assert "Traceback" not in proc.stderr
    after = results.stat().st_mtime_ns if results.exists() else None
    assert before == after, "the refusal must not write results"


@pytest.mark.skipif(not HAVE_TRITON, reason=WHY_NOT or "Triton unavailable")
def test_dry_run_drives_every_step_on_cpu(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path)], capture_output=True,
                          text=True, cwd=ROOT, env=_env(), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "kernels.json").read_text())
    checks = report["correctness"]
    assert len(checks) >= 11 and all(c["ok"] for c in checks), checks
    names = " ".join(c["check"] for c in checks)
    for what in ("fused log-prob/entropy triton", "fused log-prob/entropy torch", "GAE kernel", "FlashAttention"):
        assert what in names, names
    assert {r["kernel"].split()[0] for r in report["bandwidth"]} == {"GAE", "log-prob"}
    ops = json.loads((tmp_path / "ops_kernels.json").read_text())
    assert ops["correctness"] and all(c["ok"] for c in ops["correctness"]), ops["correctness"]
    names = " ".join(c["check"] for c in ops["correctness"])
    for what in ("matmul", "softmax online", "softmax fused", "sum of", "layernorm dx", "rmsnorm dw", "transpose"):
        assert what in names, names
    assert {r["kernel"].split()[0] for r in ops["benchmarks"]} == {"matmul", "softmax", "sum", "layernorm", "rmsnorm",
                                                                   "add", "transpose"}
    assert all(r["bytes_moved"] > 0 and r["fraction_of_datasheet"] is None for r in report["bandwidth"])
    assert len(report["flash_attention_vs_sdpa"]) == 2
    fused = json.loads((tmp_path / "fused_logprobs.json").read_text())
    assert fused["rows"][0][0].startswith("naive") and len(fused["rows"]) == 3
    assert not (tmp_path / "kernels-cuda.json").exists()
