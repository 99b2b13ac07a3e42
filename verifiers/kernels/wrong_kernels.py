"""Kernel-kata submissions: each kata's stub with a right kernel, and the realistic wrong kernels an interview sees.

verifiers/kernels/test_katas.py runs each wrong kernel here, in-process, against the property that must reject
it (the counterexample is the claim's evidence); tests/quiz/test_kernel_katas.py sends some through the real
judge.

``submission(kata, body, edits)`` is the stub of ``mianjing kata start`` with the kernel's body filled in
and, optionally, some lines of the given launch wrapper changed (``(old, new)`` pairs, each old line must
occur). ``WRONG`` lists each wrong kernel with the property that must reject it, one it still passes, and
words the rejection must contain (the counterexample).
"""

from __future__ import annotations

from pathlib import Path

from mianjing.quiz.katas import find, stub

CHECKOUT = Path(__file__).resolve().parents[2]

TODO = "    raise NotImplementedError  # your code here\n"


def submission(kata: str, body: str, edits: tuple = ()) -> str:
    k = find(CHECKOUT, kata)
    if k is None:
        raise LookupError(kata)
    text = stub(CHECKOUT, k)
    assert text.count(TODO) == 1, kata
    text = text.replace(TODO, body, 1)
    for old, new in edits:
        assert text.count(old) == 1, (kata, old)
        text = text.replace(old, new)
    return text


SOFTMAX = '''    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=ok)
'''

MATMUL = '''    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k0 + rk)[None, :],
                    mask=(rm < M)[:, None] & ((k0 + rk) < K)[None, :], other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * stride_bk + rn[None, :],
                    mask=((k0 + rk) < K)[:, None] & (rn < N)[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm < M)[:, None] & (rn < N)[None, :])
'''

REDUCE = '''    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if IS_MAX:
        acc = tl.full((BLOCK,), -float("inf"), tl.float32)
    else:
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, chunk, BLOCK):
        offs = pid * chunk + start + lanes
        ok = (start + lanes < chunk) & (offs < n)
        if IS_MAX:
            acc = tl.maximum(acc, tl.load(x_ptr + offs, mask=ok, other=-float("inf")).to(tl.float32))
        else:
            acc += tl.load(x_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    if IS_MAX:
        tl.store(out_ptr + pid, tl.max(acc, axis=0))
    else:
        tl.store(out_ptr + pid, tl.sum(acc, axis=0))
'''

TRANSPOSE = '''    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    tile = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :], mask=(rm < M)[:, None] & (rn < N)[None, :])
    tl.store(y_ptr + rn[:, None] * stride_ym + rm[None, :], tl.trans(tile), mask=(rn < N)[:, None] & (rm < M)[None, :])
'''

RIGHT = {"triton-softmax": SOFTMAX, "triton-matmul": MATMUL, "triton-reduce": REDUCE, "triton-transpose": TRANSPOSE}

# (name, kata, body, wrapper edits, the property that rejects it, a property it passes, words of the rejection).
# JUDGED names those tests/quiz/test_kernel_katas.py also sends through the real judge; verifiers/kernels/test_katas.py
# names the claim each one is the counterexample of.
WRONG = [
    ("softmax-no-max-subtraction", "triton-softmax",
     SOFTMAX.replace("    e = tl.exp(x - m)\n", "    e = tl.exp(x)\n"), (),
     "prop_large_logits", "prop_matches_fp64", "expected"),
    ("softmax-row-end-unmasked", "triton-softmax",
     SOFTMAX.replace('mask=ok, other=-float("inf"))', "mask=ok)"), (),
     "prop_row_end_is_masked", "prop_realistic_rows", "negative rows"),
    ("matmul-k-blocks-off-by-one", "triton-matmul",
     MATMUL.replace("for k0 in range(0, K, BLOCK_K):", "for k0 in range(0, K - BLOCK_K + 1, BLOCK_K):"), (),
     "prop_every_edge_tile", "prop_accumulates_in_fp32", "edge tiles"),
    ("matmul-fp16-accumulator", "triton-matmul",
     MATMUL.replace("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
                    "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=c_ptr.dtype.element_ty)"), (),
     "prop_accumulates_in_fp32", "prop_matches_fp64", "32800"),
    ("matmul-without-tensor-cores", "triton-matmul",
     MATMUL.replace("acc = tl.dot(a, b, acc)", "acc += tl.sum(a[:, :, None].to(tl.float32) * b[None, :, :], axis=1)"),
     (), "prop_uses_tensor_cores", "prop_matches_fp64", "mma"),
    ("reduce-max-padded-with-zero", "triton-reduce",
     REDUCE.replace('mask=ok, other=-float("inf"))', "mask=ok, other=0.0)"), (),
     "prop_max_of_negatives", "prop_sum_matches_fp64", "negative"),
    ("reduce-block-count-off-by-one", "triton-reduce", REDUCE,
     (("    programs = triton.cdiv(n, CHUNK)\n", "    programs = max(1, n // CHUNK)\n"),),
     "prop_counts_every_element_once", "prop_fp16_sums_in_fp32", "ones"),
    ("reduce-fp16-accumulator", "triton-reduce",
     REDUCE.replace("acc = tl.zeros((BLOCK,), dtype=tl.float32)", "acc = tl.zeros((BLOCK,), dtype=x_ptr.dtype.element_ty)")
     .replace("acc += tl.load(x_ptr + offs, mask=ok, other=0.0).to(tl.float32)", "acc += tl.load(x_ptr + offs, mask=ok, other=0.0)"),
     (), "prop_fp16_sums_in_fp32", "prop_sum_matches_fp64", "fp32"),
    ("transpose-one-mask-for-both", "triton-transpose",
     TRANSPOSE.replace("mask=(rn < N)[:, None] & (rm < M)[None, :])", "mask=(rm < M)[:, None] & (rn < N)[None, :])"), (),
     "prop_non_square_edges", "prop_stores_are_vectorized", "non-square"),
    ("transpose-scattered-elements", "triton-transpose",
     '''    i = tl.program_id(0) * BLOCK_M * BLOCK_N + tl.arange(0, BLOCK_M * BLOCK_N)
    ok = i < M * N
    tl.store(y_ptr + (i % N) * stride_ym + i // N, tl.load(x_ptr + (i // N) * stride_xm + i % N, mask=ok), mask=ok)
''', (("        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))\n",
       "        grid = (triton.cdiv(M * N, BLOCK_M * BLOCK_N),)\n"),),
     "prop_stores_are_vectorized", "prop_exact_transpose", "store widths"),
]

JUDGED = ("softmax-no-max-subtraction", "softmax-row-end-unmasked", "matmul-k-blocks-off-by-one",
          "reduce-fp16-accumulator", "matmul-without-tensor-cores")

