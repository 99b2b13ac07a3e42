"""``mianjing gpu occupancy|inspect``: the table shows the calculator's numbers; bad arguments and kernels that do
not compile give the message (one line for arguments) and exit status 2, never a traceback."""

from __future__ import annotations

import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from impls.gpu.compiled import missing
from impls.gpu.occupancy import occupancy
from mianjing.calculators.gpu_cli import parse_size, run_inspect, run_occupancy
from mianjing.cli import app

runner = CliRunner()


def _text(fn, **kw) -> str:
    console = Console(record=True, width=200, color_system=None)
    fn(console=console, **kw)
    return console.export_text()


def test_occupancy_table_is_the_calculators():
    out = _text(run_occupancy, arch="sm_70", threads="320", regs="37", smem="0")
    occ = occupancy("sm_70", 320, 37)
    assert re.search(r"registers \(limit\)\s+12,800\s+4\b", out)
    assert f"occupancy {100 * occ.fraction:.1f}%" in out and "limited by registers" in out
    out = _text(run_occupancy, arch="sm_86", threads="256", regs="32", smem="99K")
    assert "1 blocks" in out and "shared memory" in out
    out = _text(run_occupancy, arch="sm_80", threads="2048", regs="32", smem="0")
    assert "does not launch: 2048 threads > 1024 per block" in out


def test_sizes():
    assert parse_size("--smem", "48K") == parse_size("--smem", "48KB") == parse_size("--smem", "48KiB") == 49152
    assert parse_size("--smem", "1.5K") == 1536 and parse_size("--smem", "0") == 0


@pytest.mark.parametrize("args, msg", [
    (["--arch", "sm_99"], "unknown architecture"),
    (["--threads", "abc"], "--threads must be an integer"),
    (["--regs", "-1"], "--regs must be between"),
    (["--smem", "12Q"], "--smem must be a size"),
    (["--smem", "0.3K"], "whole number of bytes"),
    (["--carveout", "150"], "--carveout must be between"),
])
def test_bad_occupancy_input_is_one_line(args, msg):
    res = runner.invoke(app, ["gpu", "occupancy", *args])
    assert res.exit_code == 2
    lines = [ln for ln in (res.stderr or res.output).splitlines() if ln.strip()]
    assert len(lines) == 1 and msg in lines[0] and "Traceback" not in res.output


@pytest.mark.parametrize("target, msg", [
    ("impls/gpu/probes.py", "expected FILE.py::kernel"),
    ("nope.py::k", "no such file"),
    ("impls/gpu/probes.py::nope", "no function named"),
])
def test_bad_inspect_target(target, msg):
    res = runner.invoke(app, ["gpu", "inspect", target])
    assert res.exit_code == 2 and msg in (res.stderr or res.output) and "Traceback" not in res.output


needs_compiler = pytest.mark.skipif(bool(missing()), reason=missing() or "")


@needs_compiler
def test_inspect_reports_what_the_compiler_made():
    out = _text(run_inspect, target="impls/gpu/probes.py::copy_kernel", arch="sm_90", constexprs=["BLOCK=1024"])
    assert re.search(r"global loads \(bits: count\)\s+128: 2", out) and "sm_90a" in out
    out = _text(run_inspect, target="impls/gpu/probes.py::copy_kernel", arch="sm_90", constexprs=["BLOCK=1024"],
                align=False)
    assert re.search(r"global loads \(bits: count\)\s+32: 8", out)
    out = _text(run_inspect, target="impls/gpu/probes.py::matmul_kernel", arch="sm_80", dtype="fp16",
                constexprs=["BM=64", "BN=64", "BK=32", "INPUT_PRECISION=tf32", "ACC=tl.float32"], sass=True)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in out and "HMMA.16816.F32" in out


@needs_compiler
def test_kernel_that_does_not_compile_gets_the_compilers_message(tmp_path):
    bad = tmp_path / "k.py"
    bad.write_text("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n"
                   "    tl.store(x_ptr + tl.arange(0, BLOCK), undefined_thing)\n", encoding="utf-8")
    res = runner.invoke(app, ["gpu", "inspect", f"{bad}::k", "--constexpr", "BLOCK=64"])
    assert res.exit_code == 2 and "undefined_thing" in (res.stderr or res.output) and "Traceback" not in res.output
    res = runner.invoke(app, ["gpu", "inspect", f"{bad}::k"])
    assert res.exit_code == 2 and "BLOCK needs a value" in (res.stderr or res.output)
    res = runner.invoke(app, ["gpu", "inspect", "impls/gpu/probes.py::copy_kernel", "--arg", "zzz=i32",
                              "--constexpr", "BLOCK=64"])
    assert res.exit_code == 2 and "zzz" in (res.stderr or res.output)
