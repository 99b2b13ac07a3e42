"""This project's Triton kernels, compiled as their wrappers launch them, fed into the occupancy model."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from impls.gpu.occupancy import occupancy
from impls.gpu.project_kernels import KERNELS
from impls.inference import flash_attention_triton as fa

# a cold compile cache (a fresh clone, or a mutated kernel) compiles every kernel here first: minutes on a
# loaded 2-core machine, more than the 300 s a verifier gets by default
pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]


def _launch_keywords(module, kernel):
    """Keyword arguments of every ``kernel[grid](...)`` launch in the module's source."""
    tree = ast.parse(inspect.getsource(module))
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == kernel):
            out.append({k.arg for k in node.keywords})
    return out


@pytest.mark.claim("fa.triton-kernel.h100-warps-per-sm")
def test_spec_is_how_the_wrapper_launches():
    spec = KERNELS["flash_attention"]
    launches = _launch_keywords(fa, spec.name)
    assert launches and all("num_warps" not in k and "num_stages" not in k for k in launches)  # Triton's 4 and 3
    assert (spec.constexprs["BLOCK_M"], spec.constexprs["BLOCK_N"]) == (fa.BLOCK_M, fa.BLOCK_N)
    assert spec.request(90).num_warps == 4 and spec.request(90).num_stages == 3


@pytest.mark.claim("fa.triton-kernel.h100-warps-per-sm")
def test_flash_attention_warps_per_sm_on_h100(compiler, evidence):
    spec = KERNELS["flash_attention"]
    h100, a100 = compiler([spec.request(90), spec.request(80)])
    assert {m.family for m in h100.tensor_core} == {"wgmma"} and h100.spill_stores == 0
    # the cubin's 1 KB on sm_90 is the per-block reserve, not data of the kernel's: ptxas reports no shared memory
    # of its own ("N bytes smem"), and every shared access is addressed from 0x400, past that first kilobyte
    assert h100.static_shared == 1024 and "bytes smem" not in h100.ptxas_log
    assert re.search(r"UMOV (UR\d+), 0x400 ;", h100.sass)
    occ = occupancy("sm_90", h100.threads, h100.registers, h100.shared)  # the model adds the 1 KB reserve itself
    evidence.quote("tile (BLOCK_M = BLOCK_N = BLOCK_D)", quoted=64, measured=spec.constexprs["BLOCK_M"], abs=0)
    assert spec.constexprs["BLOCK_N"] == spec.constexprs["BLOCK_D"] == 64
    evidence.quote("registers per thread", quoted=128, measured=h100.registers, abs=0)
    evidence.quote("dynamic shared memory per block (KB)", quoted=56, measured=h100.shared / 1024, abs=0)
    evidence["limits"] = occ.limits
    # both limits land on exactly 4 blocks: 4 x 4 warps x 32 x 128 = 65,536 registers, 4 x (56 + 1) KB = 228 KB
    assert occ.limits["registers"] == occ.limits["shared memory"] == occ.blocks == 4 and occ.warps == 16
    assert set(occ.limited_by) == {"registers", "shared memory"}
    assert 4 * 4 * 32 * h100.registers == 65536 and 4 * (h100.shared + 1024) == 228 * 1024
    evidence.quote("H100 occupancy (%)", quoted=25, measured=100 * occ.fraction, abs=0)
    # a little more of either resource costs a block: 8 more registers per thread (the allocation step), or the
    # cubin's kilobyte counted on top of the reserve
    assert occupancy("sm_90", h100.threads, h100.registers + 8, h100.shared).blocks == 3
    assert occupancy("sm_90", h100.threads, h100.registers, h100.shared + h100.static_shared).blocks == 3
    a = occupancy("sm_80", a100.threads, a100.registers, a100.shared + a100.static_shared)
    assert a.warps == 8 and a.limited_by == ["registers"]
    evidence["a100"] = {"registers": a100.registers, "warps_per_sm": a.warps}


@pytest.mark.claim("kernels.flash-attention-triton.equals-naive")
def test_fp32_inputs_multiply_in_fp32_when_compiled(compiler, evidence):
    """The 2e-5 claim is for fp32 inputs: the wrapper's default precision compiles the two dots to CUDA-core
    FMAs on sm_80 and sm_90 (no TF32 Tensor-Core instruction), and asking for "tf32" gives TF32 mma/wgmma.
    The interpreter multiplies in fp32 whatever it is told, so only the compiler can show this."""
    import inspect as _inspect

    from impls.gpu.compiled import Request

    spec = KERNELS["flash_attention"]
    default = _inspect.signature(fa.flash_attention_triton).parameters["precision"].default
    fp32 = {k: ("*fp32" if v == "*fp16" else v) for k, v in spec.signature.items()}

    def req(arch, precision):
        return Request.make(spec.path, spec.name, fp32, {**spec.constexprs, "PRECISION": precision}, arch=arch,
                            num_warps=4, num_stages=3, aligned=spec.aligned)

    ieee80, ieee90, tf80 = compiler([req(80, default), req(90, default), req(80, "tf32")])
    for c in (ieee80, ieee90):
        assert c.tensor_core == () and "FFMA" in c.sass_opcodes(), c.tensor_core
    assert {(m.a, m.b) for m in tf80.tensor_core} == {("tf32", "tf32")}
    evidence["default_precision"] = default
    evidence["tf32_instruction"] = tf80.tensor_core[0].instruction
