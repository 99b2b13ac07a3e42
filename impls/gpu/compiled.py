r"""Compile a Triton kernel for an NVIDIA GPU that is not there, and read what it became.

    from impls.gpu.compiled import compile_kernel
    c = compile_kernel("impls/gpu/probes.py", "copy_kernel",
                       signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"},
                       constexprs={"BLOCK": 1024}, arch=90, aligned=("x_ptr", "y_ptr"))
    c.registers, c.shared, c.spill_stores      # 18, 0, 0   registers/thread, bytes/block, bytes/thread
    c.load_widths()                             # {128: 2}   two 128-bit (ld.global.v4.b32) loads per thread
    c.tensor_core                               # ()         mma.sync / wgmma instructions, parsed
    c.ptx, c.sass                               # the code itself

How. ``triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", arch, 32))``
lowers the kernel to PTX and assembles it with the ``ptxas`` Triton bundles into a cubin; no driver and
no GPU take part. ``attrs`` carries what Triton's launcher would specialise on at run time: a parameter
named in ``aligned`` is known divisible by 16 (a 16-byte-aligned pointer, an integer multiple of 16),
which is what lets the compiler emit 128-bit vector accesses. The facts come from three readers that
do not share code: ptxas's own report (``-v``: registers, stack frame, spill bytes), ``cuobjdump
--dump-resource-usage`` on the cubin (registers, static shared memory, local memory), and the text of
the PTX and of the SASS (``nvdisasm``). Triton's ``CompiledKernel.n_regs`` is filled in only when a
driver loads the cubin, so it is not available here; ``metadata.shared`` (the dynamic shared memory
the launch asks for) is, and is used as is.

Tools. Triton 3.9.0 bundles ptxas 12.9.86 (for sm < 90), ptxas 13.4.59 (``ptxas-blackwell``, which it
uses for sm_90 too) and cuobjdump / nvdisasm 13.1.80. The disassemblers come first from NVIDIA's PyPI
packages ``nvidia-cuda-cuobjdump`` / ``nvidia-cuda-nvdisasm`` 13.4.49, pinned in pyproject.toml: the
CUDA 13.4.0 release of the ptxas that builds the sm_90 cubins (no 13.1 or 12.9 build of them is on
PyPI), falling back to Triton's own copies.

Isolation. Each batch of compiles runs in one child process (``python -m impls.gpu.compiled``) with
``TRITON_INTERPRET`` unset: where Triton's CPU interpreter is on, as in ``make test``, ``@triton.jit``
returns interpreted functions (Triton's own ``tl.max``/``tl.sum`` included) that the compiler cannot
lower. The child loads the kernel's file afresh, so any ``@triton.jit`` function in a module of this
repository (or a file given to ``mianjing gpu inspect``) can be compiled.

Cache. Raw outputs (PTX, SASS, cubin, the two reports) go to ``build/cache/compiled/<key>.*``
(``$MIANJING_COMPILE_CACHE`` overrides), key = SHA-256 of the kernel's file, every module of this
repository it imports, the request and the tool versions; parsing happens on every load, so a better
parser needs no recompile. A cold compile costs about 0.5-4 s per kernel; a cached one a file read.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

__all__ = [
    "ARCHS", "CompileError", "Compiled", "KernelParam", "MemOp", "MMA", "Request",
    "compile_kernel", "compile_many", "kernel_params", "infer_signature", "missing", "tools", "assemble", "disassemble",
    "parse_ptxas_report", "parse_resource_usage", "parse_memory_ops", "parse_tensor_core_ops", "parse_sass_opcodes",
]

ROOT = Path(__file__).resolve().parents[2]
ARCHS = (80, 90)  # the targets the verifiers compile for (sm_80 = A100, sm_90 = H100/H200)
CUDA_TOOLS = ("ptxas", "ptxas-blackwell", "cuobjdump", "nvdisasm")
PIP_HINT = "pip install nvidia-cuda-nvdisasm==13.4.49 nvidia-cuda-cuobjdump==13.4.49"
_FORMAT = 1  # bump when the raw record layout changes


class CompileError(RuntimeError):
    """The kernel did not compile; the message is the compiler's (first lines)."""


# --------------------------------------------------------------------------------------------------
# Which tools are here


def _package_dirs(name: str) -> list[Path]:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def tools() -> dict[str, Path]:
    """Paths of the CUDA tools found: the PyPI ``nvidia-cuda-*`` packages first, then Triton's bundled copies."""
    found: dict[str, Path] = {}
    candidates = [d / sub / "bin" for d in _package_dirs("nvidia") for sub in ("cu13", "cu12")]
    candidates += [d / "backends" / "nvidia" / "bin" for d in _package_dirs("triton")]
    for name in CUDA_TOOLS:
        for folder in candidates:
            if (folder / name).is_file() and os.access(folder / name, os.X_OK):
                found[name] = folder / name
                break
    return found


def missing(sass: bool = True) -> str | None:
    """One line saying what is missing to compile (and, with ``sass``, to disassemble), or None."""
    if importlib.util.find_spec("triton") is None:
        return ("Triton is not installed (wheels exist for Linux x86-64/aarch64 only): "
                "the compiled-code checks need triton==3.9.0")
    have = tools()
    lack = [t for t in ("ptxas", "ptxas-blackwell") if t not in have]
    if lack:
        return f"this Triton wheel ships no {' / '.join(lack)}: cannot assemble PTX for sm_80/sm_90"
    if sass:
        lack = [t for t in ("cuobjdump", "nvdisasm") if t not in have]
        if lack:
            return f"no CUDA disassembler ({', '.join(lack)}): {PIP_HINT}"
    return None


def _tool_version(path: Path) -> str:
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    m = re.search(r"V(\d+\.\d+\.\d+)", out)
    return m.group(1) if m else "?"


_VERSIONS: dict[str, str] = {}


def _versions() -> dict[str, str]:
    if not _VERSIONS:
        from importlib import metadata

        try:
            _VERSIONS["triton"] = metadata.version("triton")
        except metadata.PackageNotFoundError:
            _VERSIONS["triton"] = "-"
        for name, path in sorted(tools().items()):
            _VERSIONS[name] = f"{path.parent.parent.name}:{_tool_version(path)}"
    return dict(_VERSIONS)


# --------------------------------------------------------------------------------------------------
# What to compile


@dataclass(frozen=True)
class KernelParam:
    name: str
    constexpr: bool


def kernel_params(path: str | Path, name: str) -> list[KernelParam]:
    """The parameters of the ``@triton.jit`` function ``name`` in ``path``, read from the source (not run).

    Raises ``CompileError`` naming the file when there is no such function."""
    import ast

    path = Path(path)
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        raise CompileError(f"{path}: cannot read it ({exc})") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            if not any("jit" in ast.unparse(d) for d in node.decorator_list):
                raise CompileError(f"{path}:{node.lineno}: {name} is not a @triton.jit function")
            return [KernelParam(a.arg, a.annotation is not None and "constexpr" in ast.unparse(a.annotation))
                    for a in node.args.args]
    raise CompileError(f"{path}: no function named {name!r}")


def infer_signature(params: Iterable[KernelParam], *, pointer_dtype: str = "fp32",
                    overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """A Triton signature for the non-constexpr parameters: ``*<pointer_dtype>`` for names ending in
    ``ptr``, ``i32`` for the rest, with ``overrides`` (name -> type, e.g. ``{"scale": "fp32"}``) winning."""
    overrides = dict(overrides or {})
    sig: dict[str, str] = {}
    for p in params:
        if p.constexpr:
            continue
        sig[p.name] = overrides.pop(p.name, f"*{pointer_dtype}" if p.name.lower().endswith("ptr") else "i32")
    if overrides:
        raise CompileError(f"--arg names no (non-constexpr) parameter: {', '.join(sorted(overrides))}")
    return sig


@dataclass(frozen=True)
class Request:
    """One compile: the kernel ``name`` defined in ``path``, for ``sm_<arch>``.

    ``signature`` types every non-constexpr parameter (``*fp16``, ``*fp32``, ``i32``, ``fp32``, ...),
    ``constexprs`` gives every ``tl.constexpr`` one (a dtype as the string ``"tl.float32"``), ``aligned`` names the parameters known divisible by
    16, ``options`` passes further Triton options (e.g. ``{"maxnreg": 128}``)."""

    path: str
    name: str
    signature: tuple[tuple[str, str], ...]
    constexprs: tuple[tuple[str, object], ...] = ()
    arch: int = 90
    num_warps: int = 4
    num_stages: int = 3
    aligned: tuple[str, ...] = ()
    options: tuple[tuple[str, object], ...] = ()

    @classmethod
    def make(cls, path, name, signature: Mapping[str, str], constexprs: Mapping[str, object] | None = None, *,
             arch: int = 90, num_warps: int = 4, num_stages: int = 3, aligned: Iterable[str] = (),
             options: Mapping[str, object] | None = None) -> "Request":
        p = Path(path)
        p = (p if p.is_absolute() else ROOT / p).resolve()
        try:
            shown = p.relative_to(ROOT).as_posix()
        except ValueError:
            shown = str(p)
        if arch not in (70, 75, 80, 86, 89, 90):
            raise CompileError(f"arch must be one of 70, 75, 80, 86, 89, 90 (sm_XX), got {arch}")
        if num_warps < 1 or num_warps & (num_warps - 1):
            raise CompileError(f"num_warps must be a power of two, got {num_warps}")
        return cls(shown, name, tuple(signature.items()), tuple((constexprs or {}).items()), arch, num_warps,
                   num_stages, tuple(sorted(aligned)), tuple(sorted((options or {}).items())))

    @property
    def file(self) -> Path:
        p = Path(self.path)
        return p if p.is_absolute() else ROOT / p

    def as_json(self) -> dict:
        return {"path": str(self.file), "name": self.name, "signature": dict(self.signature),
                "constexprs": dict(self.constexprs), "arch": self.arch, "num_warps": self.num_warps,
                "num_stages": self.num_stages, "aligned": list(self.aligned), "options": dict(self.options)}

    def key(self) -> str:
        """SHA-256 of the kernel's file, every repository module it imports, this module, the request and the tools."""
        h = hashlib.sha256()
        req = self.as_json() | {"path": self.path, "format": _FORMAT, "tools": _versions()}
        h.update(json.dumps(req, sort_keys=True, default=str).encode())
        files = list(_inputs(self.file)) if self.file.is_relative_to(ROOT) else [self.file]
        files.append(Path(__file__))  # the worker that compiles (what it records is part of the result)
        for f in files:
            h.update(f.as_posix().encode())
            h.update(f.read_bytes())
        return h.hexdigest()[:32]


@functools.lru_cache(maxsize=None)
def _inputs(file: Path) -> tuple[Path, ...]:
    """The repository modules ``file`` imports, itself included (the site's figure cache follows imports the same
    way). Building the import graph parses the repository, so it is done once per file and process: a process
    compiles from one state of the checkout."""
    from mianjing.site.figures import inputs

    return tuple(inputs(ROOT, file))


# --------------------------------------------------------------------------------------------------
# Readers of the compiler's output (pure functions of text)


@dataclass(frozen=True)
class MemOp:
    """A global-memory instruction form: ``kind`` (ld.global, st.global, cp.async, cp.async.bulk,
    atom.global, red.global) and the bits one thread moves with it (vector length × element bits;
    0 for the bulk/tensor copies, which are issued for a whole tile)."""

    kind: str
    bits: int


@dataclass(frozen=True)
class MMA:
    """A Tensor-Core instruction: ``family`` mma.sync (Ampere, per warp) or wgmma (Hopper, per warp
    group of 4 warps), its shape ``m×n×k`` and the element types of A, B and the accumulator."""

    instruction: str
    family: str
    m: int
    n: int
    k: int
    a: str
    b: str
    acc: str


_BITS = {"b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16, "b32": 32, "u32": 32,
         "s32": 32, "f32": 32, "b64": 64, "u64": 64, "s64": 64, "f64": 64, "b128": 128, "f16x2": 32, "bf16x2": 32}
_LDST = re.compile(r"(?<![\w.])(ld|st|atom|red)\.global((?:\.[A-Za-z0-9_:]+)*)")
_CP_ASYNC = re.compile(r"(?<![\w.])cp\.async\.(?:ca|cg)\.shared(?:::cta)?\.global(?:\.[A-Za-z0-9_:]+)*\s+"
                       r"\[[^\]]*\]\s*,\s*\[[^\]]*\]\s*,\s*(0x[0-9a-fA-F]+|\d+)")
_CP_BULK = re.compile(r"(?<![\w.])cp\.async\.bulk(?:\.[A-Za-z0-9_:]+)+")


def _strip_comments(ptx: str) -> str:
    return re.sub(r"//[^\n]*", "", ptx)


def parse_memory_ops(ptx: str) -> tuple[Counter, Counter]:
    """(loads, stores) of global memory in the PTX, as ``Counter[MemOp]`` of static instructions.

    ``ld.global.v4.b32`` is one 128-bit load per thread; qualifiers that do not change the width (cache
    and eviction hints, ``.nc``) are ignored. ``cp.async`` (sm_80+, global to shared) counts as a load of
    its copy size; ``cp.async.bulk[.tensor]`` (TMA) as a load of bits 0. Atomics and reductions count
    as stores."""
    text = _strip_comments(ptx)
    loads: Counter = Counter()
    stores: Counter = Counter()
    for m in _LDST.finditer(text):
        op, quals = m.group(1), [q for q in m.group(2).split(".") if q]
        vec = next((int(q[1:]) for q in quals if re.fullmatch(r"v\d+", q)), 1)
        elem = next((_BITS[q] for q in reversed(quals) if q in _BITS), 0)
        kind = f"{op}.global"
        (loads if op == "ld" else stores)[MemOp(kind, vec * elem)] += 1
    for m in _CP_ASYNC.finditer(text):
        loads[MemOp("cp.async", 8 * int(m.group(1), 0))] += 1
    for m in _CP_BULK.finditer(text):  # cp.async.bulk[.tensor.Nd].shared::cluster.global... : global -> shared
        token = m.group(0)
        if ".global.shared" in token:
            stores[MemOp("cp.async.bulk", 0)] += 1
        elif re.search(r"\.shared::\w+\.global", token):
            loads[MemOp("cp.async.bulk", 0)] += 1
    return loads, stores


_MMA = re.compile(r"(?<![\w.])((?:mma\.sync\.aligned|wgmma\.mma_async(?:\.sp)?\.sync\.aligned|wmma\.mma\.sync\.aligned)"
                  r"(?:\.[A-Za-z0-9_:]+)+)")


def parse_tensor_core_ops(ptx: str) -> tuple[MMA, ...]:
    """The distinct Tensor-Core instructions in the PTX, parsed (sorted by instruction text).

    ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` reads D, A, B, C types after the layouts;
    ``wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16`` reads D, A, B."""
    out = {}
    for m in _MMA.finditer(_strip_comments(ptx)):
        ins = m.group(1)
        parts = ins.split(".")
        shape = next((p for p in parts if re.fullmatch(r"m\d+n\d+k\d+", p)), None)
        if shape is None:
            continue
        mm, nn, kk = map(int, re.findall(r"\d+", shape))
        types = [p for p in parts[parts.index(shape) + 1:] if p not in ("row", "col", "satfinite")]
        family = "wgmma" if ins.startswith("wgmma") else ("wmma" if ins.startswith("wmma") else "mma.sync")
        acc, a, b = (types + ["?"] * 3)[:3]  # D, A, B (mma.sync then names C; wgmma's C is D)
        out[ins] = MMA(ins, family, mm, nn, kk, a, b, acc)
    return tuple(out[k] for k in sorted(out))


def parse_ptxas_report(log: str) -> dict[str, int]:
    """ptxas ``-v``: registers per thread, stack frame, spill store/load bytes per thread, barriers."""
    facts = {}
    if m := re.search(r"Used (\d+) registers", log):
        facts["registers"] = int(m.group(1))
    if m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log):
        facts["stack"], facts["spill_stores"], facts["spill_loads"] = map(int, m.groups())
    if m := re.search(r"used (\d+) barriers", log):
        facts["barriers"] = int(m.group(1))
    return facts


def parse_resource_usage(text: str, name: str) -> dict[str, int]:
    """``cuobjdump --dump-resource-usage``: the ``REG``, ``STACK``, ``SHARED``, ``LOCAL``, ... of function ``name``."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == f"Function {name}:" and i + 1 < len(lines):
            return {k: int(v) for k, v in re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", lines[i + 1])}
    return {}


_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)")


def parse_sass_opcodes(sass: str) -> Counter:
    """Opcodes of the SASS listing with their modifiers (``LDG.E.128``, ``HMMA.16816.F32``, ``STL``), counted."""
    return Counter(m.group(1) for m in _SASS_LINE.finditer(sass))


# --------------------------------------------------------------------------------------------------
# The result


@dataclass(frozen=True)
class Compiled:
    """What one kernel became for one target (see the module docstring for where each figure comes from)."""

    name: str
    arch: int
    target: str              # the PTX .target, e.g. sm_80, sm_90a
    num_warps: int
    num_stages: int
    registers: int           # per thread (ptxas -v; equal to cuobjdump's REG when both ran)
    shared: int              # bytes per block the launch asks for as dynamic shared memory (Triton's metadata)
    static_shared: int       # bytes per block in the cubin (cuobjdump SHARED; on sm_90, 1 KB ptxas reserves)
    stack: int               # bytes per thread of stack frame (local memory)
    spill_stores: int        # bytes per thread (ptxas -v)
    spill_loads: int
    loads: Counter = field(compare=False)     # Counter[MemOp] of global loads (static instructions)
    stores: Counter = field(compare=False)
    tensor_core: tuple[MMA, ...]
    ptx: str = field(repr=False)
    sass: str = field(repr=False)            # "" when no disassembler was found
    ptxas_log: str = field(repr=False)
    resource_usage: dict = field(repr=False, compare=False)
    cubin: bytes = field(repr=False)

    @property
    def threads(self) -> int:
        return 32 * self.num_warps

    def load_widths(self, kinds: tuple[str, ...] = ("ld.global", "cp.async")) -> dict[int, int]:
        """Bits per thread per global load instruction -> how many such instructions."""
        return _widths(self.loads, kinds)

    def store_widths(self, kinds: tuple[str, ...] = ("st.global",)) -> dict[int, int]:
        return _widths(self.stores, kinds)

    def sass_opcodes(self) -> Counter:
        return parse_sass_opcodes(self.sass)

    @classmethod
    def from_raw(cls, raw: dict, cubin: bytes) -> "Compiled":
        report = parse_ptxas_report(raw["ptxas_log"])
        usage = parse_resource_usage(raw.get("resource_usage", ""), raw["name"])
        if "registers" not in report:
            raise CompileError(f"{raw['name']}: ptxas reported no register count:\n{raw['ptxas_log'][:500]}")
        loads, stores = parse_memory_ops(raw["ptx"])
        target = re.search(r"^\s*\.target\s+(\w+)", raw["ptx"], re.M)
        return cls(raw["name"], raw["arch"], target.group(1) if target else "?", raw["num_warps"], raw["num_stages"],
                   report["registers"], raw["shared"], usage.get("SHARED", 0), report.get("stack", 0),
                   report.get("spill_stores", 0), report.get("spill_loads", 0), loads, stores,
                   parse_tensor_core_ops(raw["ptx"]), raw["ptx"], raw.get("sass", ""), raw["ptxas_log"], usage, cubin)


def _widths(ops: Counter, kinds) -> dict[int, int]:
    out: Counter = Counter()
    for op, n in ops.items():
        if op.kind in kinds:
            out[op.bits] += n
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------------------------------
# Compiling (parent side): cache, then one child process for everything missing


def cache_dir() -> Path:
    env = os.environ.get("MIANJING_COMPILE_CACHE")
    return Path(env) if env else ROOT / "build" / "cache" / "compiled"


def _load(key: str) -> Compiled | None:
    d = cache_dir()
    try:
        raw = json.loads((d / f"{key}.json").read_text(encoding="utf-8"))
        if "error" in raw:
            raise CompileError(raw["error"])
        return Compiled.from_raw(raw, (d / f"{key}.cubin").read_bytes())
    except (OSError, ValueError, KeyError):
        return None


def compile_many(requests: Iterable[Request], *, timeout: float = 600) -> list[Compiled]:
    """Compile every request (cached ones are read back, the rest compiled in one child process).

    Raises ``CompileError`` with the compiler's message for the first request that failed, and
    ``RuntimeError`` with :func:`missing`'s line when the tools are absent."""
    reqs = list(requests)
    keys = [r.key() for r in reqs]
    todo = {k: r for k, r in zip(keys, reqs) if _load(k) is None}
    if todo:
        why = missing(sass=False)
        if why:
            raise RuntimeError(why)
        out = cache_dir()
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="mianjing-compile-") as tmp:
            job = Path(tmp) / "requests.json"
            job.write_text(json.dumps({k: r.as_json() for k, r in todo.items()}), encoding="utf-8")
            env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
            env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
            env["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton")  # fresh: ptxas must run so its report is seen
            env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")      # Triton 3.9's default, stated
            try:
                proc = subprocess.run([sys.executable, "-m", "impls.gpu.compiled", str(job), str(out)], env=env,
                                      cwd=str(ROOT), capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise CompileError(f"compiling {len(todo)} kernel(s) took over {timeout:.0f} s") from None
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
                raise CompileError("the compile worker failed: " + " | ".join(tail))
    result = []
    for k, r in zip(keys, reqs):
        c = _load(k)
        if c is None:
            raise CompileError(f"{r.path}::{r.name} (sm_{r.arch}): no result came back from the compile worker")
        result.append(c)
    return result


def compile_kernel(path, name: str, signature: Mapping[str, str], constexprs: Mapping[str, object] | None = None,
                   **kw) -> Compiled:
    """Compile one kernel (see :class:`Request` for the arguments); cached by content."""
    return compile_many([Request.make(path, name, signature, constexprs, **kw)])[0]


# --------------------------------------------------------------------------------------------------
# Hand-written PTX: assemble and disassemble directly (no Triton)


def assemble(ptx: str, gpu: str = "sm_80") -> tuple[bytes, str]:
    """Assemble PTX text for ``gpu`` (``sm_80``, ``sm_90a``) with the ptxas Triton would use; (cubin, ptxas -v log).
    Raises ``CompileError`` with ptxas's message when it refuses."""
    have = tools()
    arch = int(re.sub(r"\D", "", gpu) or 0)
    name = "ptxas" if arch < 90 else "ptxas-blackwell"
    if name not in have:
        raise RuntimeError(missing(sass=False) or f"no {name}")
    with tempfile.TemporaryDirectory(prefix="mianjing-ptx-") as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx, encoding="utf-8")
        proc = subprocess.run([str(have[name]), "-v", f"--gpu-name={gpu}", str(src), "-o", str(out)],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise CompileError(proc.stderr.strip() or proc.stdout.strip())
        return out.read_bytes(), proc.stderr + proc.stdout


def disassemble(cubin: bytes) -> str:
    """The SASS of a cubin (``nvdisasm -c``)."""
    have = tools()
    if "nvdisasm" not in have:
        raise RuntimeError(missing(sass=True) or "no nvdisasm")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([str(have["nvdisasm"]), "-c", f.name], capture_output=True, text=True, timeout=120).stdout


# --------------------------------------------------------------------------------------------------
# The child process: python -m impls.gpu.compiled REQUESTS.json OUT_DIR


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _compile_one(req: dict, tool: dict[str, Path]) -> tuple[dict, bytes]:
    import contextlib
    import io

    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    path = Path(req["path"])
    spec = importlib.util.spec_from_file_location(f"_mianjing_kernel_{hashlib.md5(str(path).encode()).hexdigest()}",
                                                  path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    fn = getattr(module, req["name"], None)
    if fn is None or type(fn).__name__ != "JITFunction":
        raise CompileError(f"{path}: {req['name']} is not a @triton.jit function defined at module level")
    sig = dict(req["signature"])
    ce = {k: _constexpr_value(v) for k, v in req["constexprs"].items()}
    for i, n in enumerate(fn.arg_names):
        if i in fn.constexprs:
            if n not in ce:
                raise CompileError(f"{req['name']}: constexpr {n} needs a value (--constexpr {n}=...)")
            sig[n] = "constexpr"
        elif n not in sig:
            raise CompileError(f"{req['name']}: parameter {n} has no type in the signature (--arg {n}=...)")
    extra = sorted(set(ce) - {fn.arg_names[i] for i in fn.constexprs})
    if extra:
        raise CompileError(f"{req['name']}: not constexpr parameters: {', '.join(extra)}")
    sig = {n: sig[n] for n in fn.arg_names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(fn.arg_names) if n in req["aligned"]}
    options = {"num_warps": req["num_warps"], "num_stages": req["num_stages"], **req["options"]}
    knobs.nvidia.dump_ptxas_log = True  # ptxas -v's report is printed to stdout: capture it
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):
            ck = triton.compile(ASTSource(fn, sig, ce, attrs), target=GPUTarget("cuda", req["arch"], 32),
                                options=options)
    except Exception as exc:  # the compiler's own message is what the user needs
        text = str(exc).strip() or type(exc).__name__
        raise CompileError(f"{req['name']} does not compile for sm_{req['arch']}: {text}") from None
    cubin = ck.asm["cubin"]
    raw = {"name": ck.metadata.name, "arch": req["arch"], "num_warps": ck.metadata.num_warps,
           "num_stages": ck.metadata.num_stages, "shared": ck.metadata.shared, "ptx": ck.asm["ptx"],
           "ptxas_log": log.getvalue()}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        if "cuobjdump" in tool:
            raw["resource_usage"] = subprocess.run([str(tool["cuobjdump"]), "--dump-resource-usage", f.name],
                                                   capture_output=True, text=True, timeout=120).stdout
        if "nvdisasm" in tool:
            raw["sass"] = subprocess.run([str(tool["nvdisasm"]), "-c", f.name], capture_output=True, text=True,
                                         timeout=120).stdout
    return raw, cubin


def _constexpr_value(v):
    """JSON carries no Triton dtype: the string ``"tl.int32"`` stands for ``tl.int32``."""
    if isinstance(v, str) and v.startswith("tl."):
        import triton.language as tl

        dt = getattr(tl, v[3:], None)
        if isinstance(dt, tl.dtype):
            return dt
        raise CompileError(f"{v} is not a triton.language dtype")
    return v


def _worker(argv: list[str]) -> int:
    jobs = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    out = Path(argv[1])
    tool = tools()
    for key, req in jobs.items():
        try:
            raw, cubin = _compile_one(req, tool)
        except CompileError as exc:
            raw, cubin = {"error": str(exc)[:4000]}, b""
        _write_atomic(out / f"{key}.cubin", cubin)
        for part in ("ptx", "sass"):
            if part in raw:
                _write_atomic(out / f"{key}.{part}", raw[part].encode())
        _write_atomic(out / f"{key}.json", json.dumps(raw).encode())
    return 0


if __name__ == "__main__":  # pragma: no cover - the child process
    sys.exit(_worker(sys.argv[1:]))
