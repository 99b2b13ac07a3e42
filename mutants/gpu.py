"""Mutants of impls/gpu (models of the GPU's rules, the compile helper, the project-kernel specs) and of the
``mianjing gpu`` calculator: the mistakes people make about banks, sectors, occupancy, divergence and rounding.

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

OCC = "impls/gpu/occupancy.py"
BANK = "impls/gpu/banks.py"
COAL = "impls/gpu/coalescing.py"
SIMT = "impls/gpu/simt.py"
FP = "impls/gpu/fpsum.py"
COMP = "impls/gpu/compiled.py"
PK = "impls/gpu/project_kernels.py"
CLI = "src/mianjing/calculators/gpu_cli.py"

MUTANTS = [
    M("gpu.occ.register-granularity-128", OCC, "    reg_unit: int = 256          # register allocation unit, per warp",
      "    reg_unit: int = 128          # register allocation unit, per warp", why="a wrong register allocation unit"),
    M("gpu.occ.no-sub-partitions", OCC, "            warps_by_regs = (s.registers // s.sub_partitions // regs_warp) * s.sub_partitions",
      "            warps_by_regs = s.registers // regs_warp", why="the register file as one pool, not four sub-partitions"),
    M("gpu.occ.no-reserved-smem", OCC, "    smem_block = _round_up(smem + s.reserved_smem_block, s.smem_unit)",
      "    smem_block = _round_up(smem, s.smem_unit)", why="forgets the 1 KB the driver reserves per block on sm_80+"),
    M("gpu.occ.sm86-has-64-warps", OCC, 'SM("sm_86", "RTX 3090 / A10", 48, 1536, 16,', 'SM("sm_86", "RTX 3090 / A10", 64, 2048, 16,',
      why="sm_86 taken to have sm_80's 64 warp slots"),
    M("gpu.occ.warps-truncated", OCC, "    wpb = -(-threads // s.warp_size)", "    wpb = max(1, threads // s.warp_size)",
      why="a partial warp not counted as a warp"),
    M("gpu.occ.no-opt-in", OCC, "    elif smem > s.max_smem_block:", "    elif smem > s.default_smem_block:",
      why="48 KB taken as the per-block limit"),
    M("gpu.banks.off-by-one-bank", BANK, "            words.setdefault(w % BANKS, set()).add(w)",
      "            words.setdefault(w % (BANKS - 1), set()).add(w)", why="bank = word mod 31"),
    M("gpu.banks.no-broadcast", BANK, "            words.setdefault(w % BANKS, set()).add(w)",
      "            words.setdefault(w % BANKS, set()).add((w, a))", why="threads reading the same word counted apart"),
    M("gpu.banks.half-warp-phases", BANK, "    per = max(1, 128 // max(width, WORD))  # sub-word accesses are served like 4-byte ones",
      "    per = max(1, 64 // max(width, WORD))  # sub-word accesses are served like 4-byte ones",
      why="4-byte requests split into half-warps, as on compute capability 1.x"),
    M("gpu.banks.wide-access-one-word", BANK, "        for w in range(first, first + max(1, width // WORD)):",
      "        for w in range(first, first + 1):",
      equivalent="accesses must be width-aligned, so a thread's words w..w+k sit in banks b..b+k with b a multiple of "
                 "k+1: two threads collide in bank b+j exactly when they collide in bank b, and the busiest bank's "
                 "count is the same (unaligned accesses, where it would differ, are refused)"),
    M("gpu.coal.sector-64", COAL, "SECTOR = 32\n", "SECTOR = 64\n", why="64-byte sectors"),
    M("gpu.coal.width-ignored", COAL, "        touched.update(range(a, a + width))", "        touched.update(range(a, a + 4))",
      why="every lane taken to read 4 bytes whatever its access width"),
    M("gpu.simt.divergence-cost-max", SIMT,
      "                for body, m in (reversed(sides) if else_first else sides):\n                    if m:\n"
      "                        _exec(body, m, iters, out, else_first, interleave)",
      "                live = [(body, m) for body, m in sides if m]\n"
      "                if len(live) == 2:  # both sides at once: the costlier one's instructions\n"
      "                    body = max(live, key=lambda bm: sum(getattr(o, 'cost', 1) for o in bm[0]))[0]\n"
      "                    _exec(body, mask, iters, out, else_first, interleave)\n                else:\n"
      "                    for body, m in live:\n                        _exec(body, m, iters, out, else_first, interleave)",
      why="divergence costs the longer path (max) instead of both (sum)"),
    M("gpu.simt.its-merges-paths", SIMT, "                    out.extend(x[i] for x in (a, b) if i < len(x))",
      "                    out.extend(x[i] for x in (a, b)[:1] if i < len(x))",
      why="the interleaving scheduler drops the other side's instructions"),
    M("gpu.simt.loop-keeps-finished-lanes", SIMT, "                active = sum(1 << ln for ln in _lanes(mask) if s.trips(ln, iters) > i)",
      "                active = mask if any(s.trips(ln, iters) > i for ln in _lanes(mask)) else 0",
      why="finished lanes stay active in a loop"),
    M("gpu.simt.barrier-releases-early", SIMT, "        if all(at_bar):", "        if any(at_bar):",
      why="one lane reaching __syncwarp releases the others"),
    M("gpu.fp.round-half-up", FP, "    if twice > q.denominator or (twice == q.denominator and n % 2 == 1):",
      "    if twice >= q.denominator:", why="ties rounded away from zero instead of to even"),
    M("gpu.fp.kahan-uncompensated", FP, "        y = add(x, -c, fmt)", "        y = add(x, 0, fmt)", why="Kahan without the correction"),
    M("gpu.fp.no-gradual-underflow", FP, "    quantum_exp = max(e, f.emin) - (f.precision - 1)",
      "    quantum_exp = e - (f.precision - 1)", why="subnormals kept at full precision"),
    M("gpu.fp.blocked-sequential-blocks", FP, "    partials = [pairwise(list(xs[i:i + block]), fmt) for i in range(0, len(xs), block)]",
      "    partials = [sequential(list(xs[i:i + block]), fmt) for i in range(0, len(xs), block)]",
      why="each block summed left to right instead of as the tree a block reduction computes"),
    M("gpu.compiled.vector-width-ignored", COMP, '        vec = next((int(q[1:]) for q in quals if re.fullmatch(r"v\\d+", q)), 1)',
      "        vec = 1", why="ld.global.v4.b32 read as a 32-bit load"),
    M("gpu.compiled.cp-async-size-in-bytes", COMP, '        loads[MemOp("cp.async", 8 * int(m.group(1), 0))] += 1',
      '        loads[MemOp("cp.async", int(m.group(1), 0))] += 1', why="cp.async size taken as bits"),
    M("gpu.compiled.mma-types-shifted", COMP, '        acc, a, b = (types + ["?"] * 3)[:3]  # D, A, B (mma.sync then names C; wgmma\'s C is D)',
      '        a, b, acc = (types + ["?"] * 3)[:3]  # D, A, B (mma.sync then names C; wgmma\'s C is D)',
      why="the accumulator type read as the A operand's"),
    M("gpu.compiled.alignment-not-passed", COMP,
      '    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(fn.arg_names) if n in req["aligned"]}',
      "    attrs = {}", why="the divisibility the launcher specialises on never reaches the compiler"),
    M("gpu.compiled.registers-misread", COMP, '    if m := re.search(r"Used (\\d+) registers", log):',
      '    if m := re.search(r"used (\\d+) barriers", log):', why="registers read from the wrong field of ptxas -v"),
    M("gpu.project.fa-block-m-128", PK, '{"CAUSAL": False, "BLOCK_M": fa.BLOCK_M,', '{"CAUSAL": False, "BLOCK_M": 128,',
      why="the FlashAttention spec drifts from the wrapper's block size"),
    M("gpu.cli.kilo-is-1000", CLI, '    value = float(m.group(1)) * {"": 1, "k": 1024, "m": 1024 ** 2}[m.group(2).lower()]',
      '    value = float(m.group(1)) * {"": 1, "k": 1000, "m": 1000 ** 2}[m.group(2).lower()]', why="48K read as 48000 bytes"),
]
