"""``mianjing gpu occupancy`` and ``mianjing gpu inspect``: thin commands over ``impls/gpu``.

occupancy: blocks per SM each resource allows (warps, registers, shared memory, block slots), the
limiting one, active warps and occupancy, as NVIDIA's occupancy calculator shows them
(``impls/gpu/occupancy.py``: the per-capability table as data, registers in units of 256 per warp over
four sub-partitions, shared memory in 128-byte units plus the 1 KB reserved per block on sm_80+).

inspect: compile one ``@triton.jit`` function of a file for sm_80/sm_90 without a GPU
(``impls/gpu/compiled.py``) and print registers, shared memory, spills, the vector widths of its global
loads and stores and its Tensor-Core instructions, with the occupancy they give; ``--ptx`` / ``--sass``
print the code. A kernel that does not compile gets the compiler's message. Bad input: one line, exit 2.
"""

from __future__ import annotations

import re
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)(?:i?[bB])?\s*$")


class GPUInputError(ValueError):
    """A bad argument: reported as one line, exit status 2."""


def _impl():
    from mianjing.paths import ensure_importable, repo_root

    ensure_importable(repo_root())
    from impls.gpu import compiled, occupancy

    return occupancy, compiled


def parse_size(flag: str, text) -> int:
    """``48K``, ``48KB``, ``48KiB``, ``1.5K``, ``49152``, ``0`` -> bytes (K = 1024)."""
    m = _SIZE.match(str(text))
    if not m:
        raise GPUInputError(f"{flag} must be a size like 49152, 48K or 1.5KB, got {text!r}")
    value = float(m.group(1)) * {"": 1, "k": 1024, "m": 1024 ** 2}[m.group(2).lower()]
    if not value.is_integer():
        raise GPUInputError(f"{flag} must be a whole number of bytes, got {text!r}")
    return int(value)


def parse_int(flag: str, text, lo: int, hi: int) -> int:
    try:
        v = int(str(text).strip())
    except ValueError:
        raise GPUInputError(f"{flag} must be an integer, got {text!r}") from None
    if not lo <= v <= hi:
        raise GPUInputError(f"{flag} must be between {lo} and {hi}, got {v}")
    return v


def _arch(occ_mod, text: str):
    try:
        return occ_mod.sm(text)
    except ValueError as exc:
        raise GPUInputError(f"--arch: {exc}") from None


def occupancy_table(occ, title: str) -> Table:
    s = occ.sm
    table = Table(box=box.SIMPLE_HEAD, title=title, caption=(
        f"{s.name} ({s.example}): {s.max_warps} warps, {s.max_blocks} blocks, {s.registers:,} registers and "
        f"{s.max_smem_sm // 1024} KB shared memory per SM; registers per warp rounded to {s.reg_unit}, "
        f"shared memory to {s.smem_unit} B plus {s.reserved_smem_block} B reserved per block."))
    table.add_column("resource")
    table.add_column("per block", justify="right")
    table.add_column("blocks / SM", justify="right")
    rows = [("warps", f"{occ.warps_per_block}"), ("registers", f"{occ.regs_per_block:,}"),
            ("shared memory", f"{occ.smem_per_block:,} B"), ("blocks", "1")]
    for name, per in rows:
        n = occ.limits[name]
        table.add_row(name + (" (limit)" if name in occ.limited_by and occ.blocks else ""), per, f"{n:,}")
    return table


def run_occupancy(arch: str, threads, regs, smem, carveout=None, console: Console | None = None):
    occ_mod, _ = _impl()
    s = _arch(occ_mod, arch)
    t = parse_int("--threads", threads, 1, 1 << 20)
    r = parse_int("--regs", regs, 0, 1 << 16)
    b = parse_size("--smem", smem)
    c = None if carveout is None else parse_int("--carveout", carveout, 0, 100)
    occ = occ_mod.occupancy(s, t, r, b, carveout=c)
    console = console or Console()
    console.print(occupancy_table(occ, f"{s.name}: {t} threads, {r} registers/thread, {b:,} B shared memory/block"))
    if occ.why_zero:
        console.print(f"does not launch: {occ.why_zero}", markup=False)
    else:
        console.print(f"active: {occ.blocks} blocks, {occ.warps} of {s.max_warps} warps, occupancy "
                      f"{100 * occ.fraction:.1f}%, limited by {' and '.join(occ.limited_by)}", markup=False)
    return occ


def _pairs(flag: str, items) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise GPUInputError(f"{flag} takes NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _constexpr(v: str):
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v  # a dtype such as tl.float32, or a string constexpr


def run_inspect(target: str, arch: str = "sm_90", constexprs=None, args=None, dtype: str = "fp32", num_warps=4,
                num_stages=3, align: bool = True, ptx: bool = False, sass: bool = False,
                console: Console | None = None):
    occ_mod, C = _impl()
    if "::" not in target:
        raise GPUInputError(f"expected FILE.py::kernel, got {target!r}")
    path, name = target.rsplit("::", 1)
    if not Path(path).is_file():
        raise GPUInputError(f"no such file: {path}")
    s = _arch(occ_mod, arch)
    cc = int(s.name.split("_")[1])
    warps = parse_int("--num-warps", num_warps, 1, 32)
    stages = parse_int("--num-stages", num_stages, 1, 8)
    why = C.missing(sass=sass)
    if why:
        raise GPUInputError(why)
    try:
        params = C.kernel_params(path, name)
        sig = C.infer_signature(params, pointer_dtype=dtype, overrides=_pairs("--arg", args))
        ce = {k: _constexpr(v) for k, v in _pairs("--constexpr", constexprs).items()}
        aligned = [p.name for p in params if not p.constexpr] if align else []
        c = C.compile_kernel(Path(path).resolve(), name, sig, ce, arch=cc, num_warps=warps, num_stages=stages,
                             aligned=aligned)
    except C.CompileError as exc:
        raise GPUInputError(str(exc).strip()) from None  # the compiler's own message
    console = console or Console()
    table = Table(box=box.SIMPLE_HEAD, title=f"{name} for {c.target} ({warps} warps, {stages} stages)",
                  caption="signature: " + ", ".join(f"{k}: {v}" for k, v in sig.items())
                  + ("; pointers and integers assumed divisible by 16" if align else ""))
    table.add_column("what")
    table.add_column("value", overflow="fold")
    table.add_row("registers / thread", str(c.registers))
    table.add_row("shared memory / block", f"{c.shared:,} B dynamic + {c.static_shared:,} B static")
    table.add_row("spills (bytes / thread)", f"{c.spill_stores} stored, {c.spill_loads} loaded; stack {c.stack}")
    table.add_row("global loads (bits: count)", ", ".join(f"{b}: {n}" for b, n in c.load_widths().items()) or "-")
    table.add_row("global stores (bits: count)", ", ".join(f"{b}: {n}" for b, n in c.store_widths().items()) or "-")
    table.add_row("Tensor-Core instructions", "\n".join(m.instruction for m in c.tensor_core) or "none")
    occ = occ_mod.occupancy(s, c.threads, c.registers, c.shared + c.static_shared)
    table.add_row("occupancy on " + s.name, f"{occ.blocks} blocks, {occ.warps} warps ({100 * occ.fraction:.1f}%), "
                  f"limited by {' and '.join(occ.limited_by)}")
    console.print(table)
    if ptx:
        console.print(c.ptx, markup=False, highlight=False)
    if sass:
        console.print(c.sass, markup=False, highlight=False)
    return c
