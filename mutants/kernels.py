"""Mutants of the kernels a candidate is asked to write (impls/kernels): block-edge masks, missing rescales,
accumulators in the wrong dtype, block counts rounded down, and cost models that count a tile too few or too many.
The kernels run in Triton's CPU interpreter here.

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

GM = "impls/kernels/gemm_model.py"
MM = "impls/kernels/matmul.py"
SM = "impls/kernels/softmax.py"
RD = "impls/kernels/reduce.py"
NM = "impls/kernels/norms.py"
TR = "impls/kernels/transpose.py"

MUTANTS = [
    # the GEMM traffic model
    M("kernels.gemm-model-floor-tile-count", GM, "    gm, gn = _cdiv(M, t.bm), _cdiv(N, t.bn)",
      "    gm, gn = max(1, M // t.bm), max(1, N // t.bn)", why="the ragged last tile row and column are not counted"),
    M("kernels.gemm-model-a-reads-per-tile-row", GM, "    a_loads = M * K * gn", "    a_loads = M * K * gm",
      why="A is read once per tile column, not per tile row"),
    M("kernels.gemm-model-k-not-padded", GM, "    k_padded = len(steps) * t.bk", "    k_padded = K",
      why="the zero-padded last K step of the tiles is still read from shared memory"),
    M("kernels.gemm-model-vectors-ignored", GM, "    a_instr = gn * M * sum(_cdiv(w, v) for w in steps)",
      "    a_instr = gn * M * sum(steps)", why="a float4 load counted as four instructions"),
    M("kernels.gemm-model-stores-left-out", GM, "        return self.flops / ((self.global_loads + self.stores) * bytes_per_element)",
      "        return self.flops / (self.global_loads * bytes_per_element)"),
    M("kernels.gemm-model-launch-order-row-major", GM, "        r = first + (pid % (group_m * gn)) % size",
      "        r = pid // gn", why="the model's wave ignores the grouped launch order the kernel uses"),
    # the matmul kernel
    M("kernels.matmul-k-mask-dropped", MM, "                    mask=(rm < M)[:, None] & k_ok[None, :], other=0.0)",
      "                    mask=(rm < M)[:, None], other=0.0)", why="the K tail of A reads past the row"),
    M("kernels.matmul-k-tail-dropped", MM, "    for k0 in range(0, K, BLOCK_K):", "    for k0 in range(0, K - BLOCK_K + 1, BLOCK_K):"),
    M("kernels.matmul-accumulator-in-input-dtype", MM, "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
      "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=c_ptr.dtype.element_ty)"),
    M("kernels.matmul-last-group-full", MM, "    size_m = tl.minimum(num_pid_m - first_m, GROUP_M)", "    size_m = GROUP_M",
      why="the last group of tile rows is assumed full"),
    M("kernels.matmul-kata-grid-floor", MM, "    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)",
      "    grid = (max(1, M // BLOCK_M) * max(1, N // BLOCK_N),)"),
    # softmax
    M("kernels.softmax-no-max-subtraction", SM, "    e = tl.exp(x - m)\n", "    e = tl.exp(x)\n"),
    M("kernels.softmax-padded-lanes-zero", SM,
      '    x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=-float("inf")).to(tl.float32)\n    m = tl.max',
      "    x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)\n    m = tl.max"),
    M("kernels.softmax-online-sum-not-rescaled", SM, "        d = d * tl.exp(m - m_safe) + tl.exp(x - m_safe)",
      "        d = d + tl.exp(x - m_safe)"),
    M("kernels.softmax-online-unguarded", SM, '        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)',
      "        m_safe = m_new", why="a lane that has seen only -inf computes exp(-inf + inf) = NaN"),
    M("kernels.softmax-online-lanes-combined-unscaled", SM,
      "    denom = tl.sum(tl.where(d > 0, d * tl.exp(m - row_max), 0.0), axis=0)", "    denom = tl.sum(d, axis=0)",
      why="the lanes' sums are relative to their own maxima"),
    M("kernels.softmax-three-pass-sum-unshifted", SM, "        d += tl.exp(x.to(tl.float32) - row_max)",
      "        d += tl.exp(x.to(tl.float32))"),
    M("kernels.softmax-statistics-in-input-dtype", SM,
      '    x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=-float("inf")).to(tl.float32)\n    m = tl.max',
      '    x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=-float("inf"))\n    m = tl.max',
      equivalent="Triton promotes fp16/bf16 operands of tl.max, tl.exp, tl.sum and / to fp32 by itself: in the "
                 "interpreter the outputs are identical, and the kernel without the cast compiled for sm_80 has only "
                 "max.f32, ex2.approx.f32, add.f32 and div.full.f32, no f16 arithmetic (checked once by hand)"),
    M("kernels.softmax-bytes-online-one-read", SM, '    reads = {"fused": 1, "online": 2, "three-pass": 3}.get(variant)',
      '    reads = {"fused": 1, "online": 1, "three-pass": 3}.get(variant)'),
    # reduction
    M("kernels.reduce-max-padded-with-zero", RD,
      '            x = tl.load(x_ptr + offs, mask=ok, other=-float("inf")).to(acc_type)',
      "            x = tl.load(x_ptr + offs, mask=ok, other=0.0).to(acc_type)"),
    M("kernels.reduce-chunk-end-unmasked", RD, "        ok = (start + lanes < chunk) & (offs < n)", "        ok = offs < n",
      why="a chunk that is not a multiple of the block reads into the next program's chunk"),
    M("kernels.reduce-grid-floor", RD, "    programs = triton.cdiv(n, CHUNK)\n", "    programs = max(1, n // CHUNK)\n"),
    M("kernels.reduce-accumulator-in-input-dtype", RD,
      "    acc_type = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32",
      "    acc_type = x_ptr.dtype.element_ty"),
    M("kernels.reduce-atomic-unmasked", RD, "    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)\n    tl.atomic_add",
      "    x = tl.load(x_ptr + offs).to(tl.float32)\n    tl.atomic_add"),
    M("kernels.reduce-bytes-partials-once", RD, "    return n * bytes_per_element + 2 * programs * partial_bytes + partial_bytes",
      "    return n * bytes_per_element + programs * partial_bytes + partial_bytes"),
    # LayerNorm / RMSNorm
    M("kernels.norms-one-pass-variance", NM, "    var = tl.sum(xc * xc, axis=0) / D\n",
      "    var = tl.sum(x * x, axis=0) / D - mean * mean\n", why="E[x^2] - E[x]^2"),
    M("kernels.norms-padded-lanes-centred", NM, "        xc = tl.where(ok, x - mean, 0.0)", "        xc = x - mean",
      why="lanes past the row end add mean^2 each to the variance"),
    M("kernels.norms-backward-mean-term-dropped", NM, "                dx = (g - tl.sum(g, axis=0) / D - xhat * c) * rstd",
      "                dx = (g - xhat * c) * rstd", why="LayerNorm's dx as if it were RMSNorm's"),
    M("kernels.norms-dw-not-accumulated", NM, "            dw += dy * xhat", "            dw = dy * xhat",
      why="only the program's last row reaches the weight gradient"),
    M("kernels.norms-column-sum-skips-tail", NM, "    for g0 in range(0, G, BLOCK_G):", "    for g0 in range(0, G - BLOCK_G + 1, BLOCK_G):"),
    M("kernels.norms-eps-outside-sqrt", NM, "    rstd = 1.0 / tl.sqrt(var + eps)", "    rstd = 1.0 / tl.sqrt(var) + eps",
      why="a constant row (variance 0) divides by zero"),
    M("kernels.norms-bytes-fused-rereads-h", NM, "        return 4 * N * D * e + w + 4 * N", "        return 5 * N * D * e + w + 4 * N"),
    # transpose
    M("kernels.transpose-store-mask-untransposed", TR, "             mask=(rn < N)[:, None] & (rm < M)[None, :])",
      "             mask=(rm < N)[:, None] & (rn < M)[None, :])", why="the store bounded with the load's roles of M and N"),
    M("kernels.transpose-grid-floor", TR, "        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))\n        transpose_kernel[grid](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=BLOCK_M",
      "        grid = (max(1, M // BLOCK_M), max(1, N // BLOCK_N))\n        transpose_kernel[grid](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=BLOCK_M"),
    M("kernels.transpose-tile-not-transposed", TR, "    tl.store(y_ptr + rn[:, None].to(tl.int64) * stride_ym + rm[None, :], tl.trans(tile),",
      "    tl.store(y_ptr + rn[:, None].to(tl.int64) * stride_ym + rm[None, :], tile,"),
    M("kernels.transpose-bytes-one-way", TR, "    return 2 * M * N * bytes_per_element", "    return M * N * bytes_per_element"),
]
