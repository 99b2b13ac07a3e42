"""What kernels become, with the real compiler as the oracle: Triton → PTX → ptxas → cubin → SASS, for sm_80/sm_90.

The readers of impls/gpu/compiled.py are checked on hand-written PTX/SASS/report text first; on real
kernels, two independent readings must agree (ptxas's register report with cuobjdump's, the PTX's
vector loads with the SASS's ``LDG.E.128``). All compiles of this file go to one worker process and
are cached (build/cache/compiled), so a warm run reads files only.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter

import pytest

from impls.gpu import compiled as C
from impls.gpu.project_kernels import KERNELS
from impls.inference.roofline import GPUS

# a cold compile cache (a fresh clone, or a mutated kernel) compiles every kernel here first: minutes on a
# loaded 2-core machine, more than the 300 s a verifier gets by default
pytestmark = pytest.mark.timeout(900)

P = "impls/gpu/probes.py"
COPY32 = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}
MM_ARGS = ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")
MM_ALIGNED = ("a_ptr", "b_ptr", "c_ptr", "stride_am", "stride_bk", "stride_cm", "K")


def _mm_sig(a: str, c: str) -> dict:
    return {"a_ptr": f"*{a}", "b_ptr": f"*{a}", "c_ptr": f"*{c}", **{k: "i32" for k in MM_ARGS}}


def _mm(a, c, arch, precision="tf32", acc="tl.float32", **kw):
    ce = {"BM": 64, "BN": 64, "BK": 32, "INPUT_PRECISION": precision, "ACC": acc} | kw.pop("ce", {})
    return C.Request.make(P, "matmul_kernel", _mm_sig(a, c), ce, arch=arch, aligned=kw.pop("aligned", MM_ALIGNED), **kw)


REQ = {
    "copy.none": C.Request.make(P, "copy_kernel", COPY32, {"BLOCK": 1024}, arch=90),
    "copy.ptrs": C.Request.make(P, "copy_kernel", COPY32, {"BLOCK": 1024}, arch=90, aligned=("x_ptr", "y_ptr")),
    "copy.all": C.Request.make(P, "copy_kernel", COPY32, {"BLOCK": 1024}, arch=90, aligned=("x_ptr", "y_ptr", "n")),
    "copy.all80": C.Request.make(P, "copy_kernel", COPY32, {"BLOCK": 1024}, arch=80, aligned=("x_ptr", "y_ptr", "n")),
    "gather": C.Request.make(P, "gather_kernel", COPY32 | {"stride": "i32"}, {"BLOCK": 1024}, arch=90,
                             aligned=("x_ptr", "y_ptr", "n", "stride")),
    "rowsum": C.Request.make(P, "row_sum_kernel", {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 1024},
                             arch=90, aligned=("x_ptr", "n")),
    "mm.fp16.80": _mm("fp16", "fp32", 80),
    "mm.fp16.90": _mm("fp16", "fp32", 90),
    "mm.bf16.80": _mm("bf16", "fp32", 80),
    "mm.fp32.80": _mm("fp32", "fp32", 80),
    "mm.fp32.90": _mm("fp32", "fp32", 90),
    "mm.fp32ieee.80": _mm("fp32", "fp32", 80, precision="ieee"),
    "mm.i8.80": _mm("i8", "i32", 80, acc="tl.int32"),
    "mm.fp8.90": _mm("fp8e4nv", "fp32", 90),
    "mm.ragged.80": _mm("fp16", "fp32", 80, aligned=()),
    "mm.big.86": _mm("fp16", "fp16", 86, precision="ieee", ce={"BM": 128, "BN": 128, "BK": 64}, num_warps=8,
                     num_stages=4),
    "fa.90": KERNELS["flash_attention"].request(90),
    "fa.80": KERNELS["flash_attention"].request(80),
    "fa.80.maxnreg64": C.Request.make(KERNELS["flash_attention"].path, KERNELS["flash_attention"].name,
                                      KERNELS["flash_attention"].signature, KERNELS["flash_attention"].constexprs,
                                      arch=80, aligned=KERNELS["flash_attention"].aligned, options={"maxnreg": 64}),
}


@pytest.fixture(scope="module")
def built(compiler):
    return dict(zip(REQ, compiler(list(REQ.values()))))


# ---------------------------------------------------------------------------------------------------------------
# the readers, on text written by hand

PTX_SAMPLE = """
//  ld.global.v4.b32 in a comment is not an instruction
	@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
	ld.global.L1::evict_last.v2.b32 { %r5, %r6 }, [ %rd2 + 0 ];
	ld.global.b16 %rs1, [ %rd3 + 0 ];
	@%p2 st.global.v4.b32 [ %rd4 + 0 ], { %r1, %r2, %r3, %r4 };
	st.global.b32 [ %rd5 + 0 ], %r7;
	cp.async.cg.shared.global [ %r55 + 0 ], [ %rd12 + 0 ], 0x10, %r60;
	cp.async.ca.shared.global [ %r56 + 0 ], [ %rd13 + 0 ], 8, %r61;
	cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];
	cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r2, %r3}], [%r1];
	cp.async.commit_group;
	red.global.add.f32 [ %rd6 + 0 ], %f1;
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f5, %f6, %f7, %f8};
	mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32 {%r1, %r2, %r3, %r4}, {%r5, %r6, %r7, %r8}, {%r9, %r10}, {%r1, %r2, %r3, %r4};
	wgmma.mma_async.sync.aligned.m64n128k16.f32.e4m3.e4m3 {%f1}, %rd1, %rd2, p, 1, 1;
	wgmma.fence.sync.aligned;
"""


@pytest.mark.claim("gpu.vector-loads.alignment-and-tail")
def test_ptx_reader_counts_each_form_once():
    loads, stores = C.parse_memory_ops(PTX_SAMPLE)
    assert loads == Counter({C.MemOp("ld.global", 128): 1, C.MemOp("ld.global", 64): 1, C.MemOp("ld.global", 16): 1,
                             C.MemOp("cp.async", 128): 1, C.MemOp("cp.async", 64): 1,
                             C.MemOp("cp.async.bulk", 0): 1})
    assert stores == Counter({C.MemOp("st.global", 128): 1, C.MemOp("st.global", 32): 1,
                              C.MemOp("red.global", 32): 1, C.MemOp("cp.async.bulk", 0): 1})
    mmas = C.parse_tensor_core_ops(PTX_SAMPLE)
    got = {(m.family, m.m, m.n, m.k, m.a, m.b, m.acc) for m in mmas}
    assert got == {("mma.sync", 16, 8, 16, "bf16", "bf16", "f32"), ("mma.sync", 16, 8, 32, "s8", "s8", "s32"),
                   ("wgmma", 64, 128, 16, "e4m3", "e4m3", "f32")}


@pytest.mark.claim("gpu.local-memory.off-chip")
def test_report_readers():
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_80'\nptxas info    : Function properties for k\n"
           "    320 bytes stack frame, 620 bytes spill stores, 488 bytes spill loads\n"
           "ptxas info    : Used 64 registers, used 1 barriers, 480 bytes cmem[0]\n")
    assert C.parse_ptxas_report(log) == {"registers": 64, "stack": 320, "spill_stores": 620, "spill_loads": 488,
                                         "barriers": 1}
    usage = "Resource usage:\n Common:\n  GLOBAL:11\n Function other:\n  REG:9 STACK:0 SHARED:0 LOCAL:0\n" \
            " Function k:\n  REG:136 STACK:8 SHARED:1024 LOCAL:4 CONSTANT[0]:656\n"
    assert C.parse_resource_usage(usage, "k") == {"REG": 136, "STACK": 8, "SHARED": 1024, "LOCAL": 4, "CONSTANT[0]": 656}
    assert C.parse_resource_usage(usage, "missing") == {}
    sass = ("        /*0110*/              @!P0 LDG.E.128 R4, desc[UR4][R8.64] ;\n"
            "        /*0120*/                   HMMA.16816.F32 R4, R8, R12, R4 ;\n"
            "        /*0130*/               @P1 EXIT ;\n        /*0140*/                   STL [R1+0x4], R2 ;\n")
    assert C.parse_sass_opcodes(sass) == Counter({"LDG.E.128": 1, "HMMA.16816.F32": 1, "EXIT": 1, "STL": 1})


@pytest.mark.claim("gpu.ptx.virtual-isa")
def test_missing_tools_is_one_line(monkeypatch):
    monkeypatch.setattr(C.importlib.util, "find_spec", lambda name: None)
    why = C.missing()
    assert why and "\n" not in why and "Triton" in why
    monkeypatch.undo()
    monkeypatch.setattr(C, "tools", lambda: {"ptxas": "x", "ptxas-blackwell": "y"})
    why = C.missing(sass=True)
    assert why and "\n" not in why and "nvdisasm" in why and "pip install" in why
    assert C.missing(sass=False) is None


@pytest.mark.claim("gpu.ptx.virtual-isa")
def test_cache_serves_without_the_compiler(compiler, tmp_path, monkeypatch):
    req = REQ["copy.all"]
    first = compiler([req])[0]
    key = req.key()
    files = list(C.cache_dir().glob(f"{key}.*"))
    assert {f.suffix for f in files} >= {".json", ".ptx", ".sass", ".cubin"}
    for f in files:
        (tmp_path / f.name).write_bytes(f.read_bytes())
    monkeypatch.setenv("MIANJING_COMPILE_CACHE", str(tmp_path))
    monkeypatch.setattr(C, "missing", lambda sass=True: "tools gone")  # a cache hit must not need them
    monkeypatch.setattr(C, "tools", lambda: {})
    again = compiler([req])[0]
    assert (again.registers, again.ptx, again.cubin) == (first.registers, first.ptx, first.cubin)
    (tmp_path / f"{key}.json").unlink()                                 # a miss now says what is missing
    with pytest.raises(RuntimeError, match="tools gone"):
        compiler([req])


@pytest.mark.claim("gpu.ptx.virtual-isa")
def test_compile_error_is_the_compilers_message(compiler, tmp_path):
    bad = tmp_path / "bad_kernel.py"
    bad.write_text("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n"
                   "    tl.store(x_ptr + tl.arange(0, BLOCK), undefined_name)\n", encoding="utf-8")
    with pytest.raises(C.CompileError, match="undefined_name"):
        compiler([C.Request.make(bad, "k", {"x_ptr": "*fp32"}, {"BLOCK": 64})])
    with pytest.raises(C.CompileError, match="constexpr BLOCK needs a value"):
        compiler([C.Request.make(bad, "k", {"x_ptr": "*fp32"}, {}, arch=80)])
    with pytest.raises(C.CompileError, match="no function named"):
        C.kernel_params(bad, "nope")


@pytest.mark.claim("gpu.ptx.virtual-isa")
def test_two_readers_agree_on_every_kernel(built):
    for key, c in built.items():
        assert c.registers == c.resource_usage["REG"], key               # ptxas -v vs cuobjdump
        assert c.stack == c.resource_usage["STACK"], key
        sass = c.sass_opcodes()
        ptx_v4 = sum(n for op, n in c.loads.items() if op.kind == "ld.global" and op.bits == 128)
        assert sum(n for op, n in sass.items() if op.startswith("LDG.E.128")) == ptx_v4, key
        assert c.target == (f"sm_{c.arch}a" if c.arch == 90 else f"sm_{c.arch}"), key


# ---------------------------------------------------------------------------------------------------------------
# coalescing-vectorized


@pytest.mark.claim("gpu.vector-loads.fewer-instructions")
def test_float4_is_one_instruction_for_four_floats(built, evidence):
    vec, scalar = built["copy.all"], built["copy.ptrs"]
    # the same 1024 floats per block, 8 per thread: two 128-bit loads or eight 32-bit loads per thread
    assert vec.load_widths() == {128: 2} and vec.store_widths() == {128: 2}
    assert scalar.load_widths() == {32: 8} and scalar.store_widths() == {32: 8}
    sv, ss = vec.sass_opcodes(), scalar.sass_opcodes()
    assert sv["LDG.E.128"] == 2 and ss["LDG.E"] == 8 and "LDG.E.128" not in ss
    assert sum(sv.values()) < sum(ss.values())  # fewer instructions in all, not only memory ones
    evidence["sass_instructions"] = {"float4": sum(sv.values()), "scalar": sum(ss.values())}
    evidence["registers"] = {"float4": vec.registers, "scalar": scalar.registers}


@pytest.mark.claim("gpu.vector-loads.alignment-and-tail")
def test_vector_access_needs_alignment_and_no_ragged_tail(built, evidence):
    # 16-byte-aligned pointers and n a multiple of 16: vectorised; drop either and every access is scalar
    assert built["copy.all"].load_widths() == {128: 2}
    assert built["copy.all80"].load_widths() == {128: 2}
    assert built["copy.ptrs"].load_widths() == {32: 8}   # n unknown: the mask can end inside a float4
    assert built["copy.none"].load_widths() == {32: 8}
    assert built["gather"].load_widths() == {32: 8}      # a run-time stride: nothing to vectorise
    evidence["load_bits_per_instruction"] = {k: built[k].load_widths() for k in ("copy.all", "copy.ptrs", "copy.none",
                                                                                  "gather")}


# ---------------------------------------------------------------------------------------------------------------
# tensor cores, PTX and SASS


def _mma(c):
    (m,) = {(x.family, x.m, x.n, x.k, x.a, x.b, x.acc) for x in c.tensor_core}
    return m


@pytest.mark.claim("gpu.tensor-core.mma-per-instruction")
def test_one_mma_instruction_is_a_16x8x16_matrix_product(built, evidence):
    fam, m, n, k, a, b, acc = _mma(built["mm.fp16.80"])
    assert (fam, m, n, k, a, b, acc) == ("mma.sync", 16, 8, 16, "f16", "f16", "f32")
    assert "HMMA.16816.F32" in built["mm.fp16.80"].sass_opcodes()
    flops = 2 * m * n * k                              # one warp instruction: 4096 FLOPs
    a100 = GPUS["A100-SXM-80GB"]
    ratio = a100.peak_flops / 19.5e12                  # dense FP16 Tensor Core vs FP32 CUDA cores, A100 datasheet
    evidence["flops_per_mma_sync"] = flops
    evidence.quote("A100 Tensor Core / FP32 CUDA-core peak", quoted=16, measured=ratio, abs=0.5)
    assert flops == 4096


@pytest.mark.claim("gpu.tensor-core.not-only-fp16")
def test_tensor_cores_take_bf16_tf32_int8_fp8(built, evidence):
    seen = {key: _mma(built[key]) for key in ("mm.bf16.80", "mm.fp32.80", "mm.i8.80", "mm.fp8.90")}
    assert seen["mm.bf16.80"][4:] == ("bf16", "bf16", "f32")
    assert seen["mm.fp32.80"][1:] == (16, 8, 8, "tf32", "tf32", "f32")
    assert seen["mm.i8.80"][1:] == (16, 8, 32, "s8", "s8", "s32")
    assert seen["mm.fp8.90"][0] == "wgmma" and seen["mm.fp8.90"][4:] == ("e4m3", "e4m3", "f32")
    evidence["instructions"] = {k: built[k].tensor_core[0].instruction for k in seen}


@pytest.mark.claim("gpu.tensor-core.fp32-dot-is-tf32")
def test_fp32_dot_is_tf32_unless_told(built, evidence):
    for key in ("mm.fp32.80", "mm.fp32.90"):
        assert {x.a for x in built[key].tensor_core} == {"tf32"}, key
    ieee = built["mm.fp32ieee.80"]
    assert ieee.tensor_core == () and "FFMA" in ieee.sass_opcodes()    # input_precision="ieee": CUDA-core FMAs
    evidence["fp32_default"] = built["mm.fp32.80"].tensor_core[0].instruction


@pytest.mark.claim("gpu.tensor-core.how-to-use")
def test_same_dot_is_mma_sync_on_ampere_and_wgmma_on_hopper(built, evidence):
    a, h = built["mm.fp16.80"], built["mm.fp16.90"]
    assert _mma(a)[0] == "mma.sync" and not re.search(r"\bwgmma", a.ptx)
    assert _mma(h)[0] == "wgmma" and "wgmma.fence" in h.ptx and "wgmma.wait_group" in h.ptx
    assert any(op.startswith("HGMMA") for op in h.sass_opcodes())
    assert any(op.startswith("HMMA") for op in a.sass_opcodes())
    evidence["sm_80"] = a.tensor_core[0].instruction
    evidence["sm_90"] = h.tensor_core[0].instruction


@pytest.mark.claim("gpu.tensor-core.dims-multiple")
def test_ragged_sizes_still_use_tensor_cores(built, evidence):
    # M, N, K are run-time values with no divisibility known: edge tiles are masked and padded with 0
    rag = built["mm.ragged.80"]
    assert _mma(rag)[:4] == ("mma.sync", 16, 8, 16)
    assert rag.load_widths().get(128, 0) == 0          # but the loads lose their 128-bit vectors
    assert built["mm.fp16.80"].load_widths().get(128, 0) > 0
    evidence["ragged_loads"] = rag.load_widths()
    evidence["aligned_loads"] = built["mm.fp16.80"].load_widths()


@pytest.mark.claim("gpu.ptx.virtual-isa")
def test_one_ptx_source_two_machine_codes(built, evidence):
    a, h = built["copy.all80"], built["copy.all"]
    assert re.search(r"^\s*\.target\s+sm_80\b", a.ptx, re.M) and re.search(r"^\s*\.target\s+sm_90a\b", h.ptx, re.M)
    strip = lambda ptx: re.sub(r"^\s*\.(target|version)\s.*$", "", ptx, flags=re.M)  # noqa: E731
    assert strip(a.ptx) == strip(h.ptx)               # the same virtual-ISA program...
    assert a.cubin != h.cubin and a.sass != h.sass     # ...assembled by ptxas into different machine code
    evidence["registers"] = {"sm_80": a.registers, "sm_90": h.registers}


@pytest.mark.claim("gpu.ptx.runs-anywhere")
def test_ptx_must_be_assembled_for_a_target_that_supports_it(built, evidence):
    ptx = built["mm.fp16.90"].ptx                      # wgmma: sm_90a only
    ptxas = C.tools()["ptxas-blackwell"]
    import tempfile
    from pathlib import Path

    retargeted = re.sub(r"^(\s*\.target\s+)sm_90a", r"\1sm_80", ptx, flags=re.M)
    with tempfile.TemporaryDirectory() as d:
        runs = {}
        for label, text, gpu in (("sm_90a", ptx, "sm_90a"), ("sm_80", ptx, "sm_80"), ("retargeted", retargeted, "sm_80")):
            src = Path(d) / f"{label}.ptx"
            src.write_text(text, encoding="utf-8")
            runs[label] = subprocess.run([str(ptxas), f"--gpu-name={gpu}", str(src), "-o", str(src.with_suffix(".o"))],
                                         capture_output=True, text=True)
    assert runs["sm_90a"].returncode == 0
    no, re80 = runs["sm_80"], runs["retargeted"]
    assert no.returncode != 0 and ".target" in no.stderr            # PTX names its target; older GPUs refuse it
    assert re80.returncode != 0 and "'wgmma" in re80.stderr and "not supported on .target 'sm_80'" in re80.stderr
    evidence["ptxas_for_sm_80"] = no.stderr.strip().splitlines()[0]
    evidence["ptxas_retargeted"] = re80.stderr.strip().splitlines()[0]


# ---------------------------------------------------------------------------------------------------------------
# memory hierarchy


@pytest.mark.claim("gpu.registers.private-per-thread")
def test_a_reduction_reads_other_lanes_registers(built, evidence):
    c = built["rowsum"]
    assert re.search(r"\bshfl\.sync\.bfly\.b32\b", c.ptx)          # lane i reads lane i^k's register
    assert "SHFL.BFLY" in c.sass_opcodes()
    assert "BAR.SYNC.DEFER_BLOCKING" in c.sass_opcodes()            # and across warps via shared memory
    evidence["shuffles_in_sass"] = c.sass_opcodes()["SHFL.BFLY"]


@pytest.mark.claim("gpu.local-memory.off-chip")
def test_spills_go_to_local_memory_which_cannot_fit_on_chip(built, evidence):
    c = built["fa.80.maxnreg64"]
    assert c.registers <= 64 and c.spill_stores > 0 and c.stack > 0
    ops = c.sass_opcodes()
    assert any(o.startswith("STL") for o in ops) and any(o.startswith("LDL") for o in ops)
    # local memory is per thread: at full residency the stack frames of one SM alone exceed its SRAM
    per_sm = c.stack * 2048
    assert per_sm > 256 * 1024
    evidence["stack_bytes_per_thread"] = c.stack
    evidence["spill_stores"] = c.spill_stores
    evidence.quote("stack frames per SM at 2048 threads (KB)", quoted=640, measured=per_sm / 1024, abs=0.5)


# ---------------------------------------------------------------------------------------------------------------
# occupancy of compiled kernels


@pytest.mark.claim("gpu.rtx3090.smem-per-block")
def test_triton_kernels_use_more_than_48kb_on_sm86(built, evidence):
    from impls.gpu.occupancy import occupancy

    c = built["mm.big.86"]
    assert c.shared > 48 * 1024                        # dynamic shared memory, opted in at launch
    occ = occupancy("sm_86", c.threads, c.registers, c.shared + c.static_shared)
    assert occ.blocks >= 1
    evidence["shared_bytes"] = c.shared
    evidence.quote("shared memory per block (KB)", quoted=64, measured=c.shared / 1024, abs=0)
