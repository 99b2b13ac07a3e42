"""``mianjing plan``: its memory figures are the ZeRO and activation calculators', a layout that cannot
fit says why, bad input is one line and exit 2."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from impls.distributed.memory import activation_bytes_num
from impls.inference.kv_cache import parameter_count, preset
from mianjing.paths import repo_root

ROOT = repo_root()
CFG = preset("llama-3-70b")
LINE = re.compile(r"^\s*(\d+)\. (dp\d+ tp\d+ pp\d+(?: cp\d+)?(?: v\d+)?)\s+b=(\d+) recompute=(\w+)\s+([\d.,]+) GB "
                  r"\(states ([\d.,]+) \+ activations ([\d.,]+)\)")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mianjing.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def _zero_gb(params: float, gpus: int, stage: str) -> float:
    """GB per device that ``mianjing zero`` prints for ``stage``."""
    out = _cli("zero", "--params", f"{params:.6e}", "--gpus", str(gpus)).stdout
    row = next(line for line in out.splitlines() if line.startswith(f"│ {stage} "))
    return float(row.split("│")[3].strip().replace(",", ""))


@pytest.fixture(scope="module")
def plan_70b() -> str:
    res = _cli("plan", "--model", "llama-3-70b", "--gpus", "64", "--gpus-per-node", "8", "--seq", "8192", "--top", "20")
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_memory_figures_are_the_calculators(plan_70b):
    rows = [LINE.match(line) for line in plan_70b.splitlines()]
    rows = [r for r in rows if r]
    assert len(rows) == 20
    h, v, layers = CFG.hidden_size, CFG.vocab_size, CFG.n_layers
    per_layer = (parameter_count(CFG) - 2 * v * h - h) / layers      # embedding, head and final norm apart
    checked = 0
    for r in rows:
        dims = dict(re.findall(r"(dp|tp|pp|cp|v)(\d+)", r.group(2)))
        d, t, p, c = (int(dims.get(k, 1)) for k in ("dp", "tp", "pp", "cp"))
        if p == 1 or "v" in dims or r.group(4) != "selective":
            continue
        first = (layers // p * per_layer + v * h) / t                  # the first stage: its layers + embedding
        assert float(r.group(6)) == pytest.approx(_zero_gb(first, d * c, "ZeRO-1"), abs=0.051)
        acts = activation_bytes_num(8192 // c, int(r.group(3)), h, CFG.n_heads, t,
                                    "tensor+sequence" if t > 1 else "none", "selective", 0) * (layers // p) * p
        assert float(r.group(7)) == pytest.approx(acts / 1e9, abs=0.051)   # p micro-batches in flight (1F1B)
        assert float(r.group(5)) == pytest.approx(float(r.group(6)) + float(r.group(7)), abs=0.11)
        checked += 1
    assert checked >= 3
    steps = [float(x) for x in re.findall(r"step ([\d.]+) s", plan_70b)]
    assert steps == sorted(steps)                                       # fastest first


def test_a_layout_that_cannot_fit_says_why():
    res = _cli("plan", "--model", "llama-3-70b", "--gpus", "8", "--top", "30")
    assert res.returncode == 0, res.stderr
    assert "no layout fits" in res.stdout
    why = [line for line in res.stdout.splitlines() if "needs" in line]
    assert why and all("> 72 GB usable" in line for line in why)
    tp8 = next(line for line in why if line.strip().startswith("dp1 tp8 pp1:"))
    states = float(re.search(r"model states ([\d.,]+) GB", tp8).group(1).replace(",", ""))
    assert states == pytest.approx(_zero_gb(parameter_count(CFG) / 8, 1, "DP"), abs=0.051)   # 16 B/param, nothing sharded
    parts = [float(x.replace(",", "")) for x in re.findall(r"([\d.,]+) GB", tp8.split("(")[1])]
    total = float(re.search(r"needs ([\d.,]+) GB", tp8).group(1).replace(",", ""))
    assert total == pytest.approx(sum(parts), abs=0.11)


@pytest.mark.parametrize("args, flag", [
    (["--model", "gpt-9", "--gpus", "64"], "--model"),
    (["--model", "deepseek-v2", "--gpus", "64"], "--model"),
    (["--model", "llama-3-70b", "--gpus", "63"], "--gpus"),
    (["--model", "llama-3-70b", "--gpus", "0"], "--gpus"),
    (["--model", "llama-3-70b", "--gpus", "64", "--zero", "4"], "--zero"),
    (["--model", "llama-3-70b", "--gpus", "64", "--seq", "-1"], "--seq"),
    (["--model", "llama-3-70b", "--gpus", "64", "--batch", "x"], "--batch"),
    (["--model", "llama-3-70b", "--gpus", "64", "--gpus-per-node", "0"], "--gpus-per-node"),
    (["--model", "llama-3-70b", "--gpus", "64", "--cluster", "tpu"], "--cluster"),
    (["--model", "llama-3-70b", "--gpus", "64", "--top", "0"], "--top"),
])
def test_bad_input_is_one_line(args, flag):
    res = _cli("plan", *args)
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and flag in lines[0], res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""


def test_zero_stage_and_node_size_reach_the_plan():
    """--zero 3 shards the model states over dp·cp as `mianjing zero` does; --gpus-per-node decides which
    link a group crosses (tp8 is NVLink inside an 8-GPU node, InfiniBand across 4-GPU nodes)."""
    eight = _cli("plan", "--model", "llama-3-70b", "--gpus", "16", "--zero", "3", "--top", "10")
    four = _cli("plan", "--model", "llama-3-70b", "--gpus", "16", "--zero", "3", "--gpus-per-node", "4", "--top", "10")
    assert eight.returncode == four.returncode == 0, (eight.stderr, four.stderr)
    rows = [r for r in map(LINE.match, eight.stdout.splitlines()) if r]
    assert rows
    for r in rows:
        dims = dict(re.findall(r"(dp|tp|pp|cp|v)(\d+)", r.group(2)))
        d, t, p, c = (int(dims.get(k, 1)) for k in ("dp", "tp", "pp", "cp"))
        if p == 1:
            assert float(r.group(6)) == pytest.approx(_zero_gb(parameter_count(CFG) / t, d * c, "ZeRO-3"), abs=0.051)
    line8 = next(x for x in eight.stdout.splitlines() if "dp1 tp8 pp1 cp2 " in x)
    line4 = next(x for x in four.stdout.splitlines() if "dp1 tp8 pp1 cp2 " in x)
    assert "[tp NVLink" in line8 and "[tp IB" in line4, (line8, line4)
