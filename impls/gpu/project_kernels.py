r"""This project's Triton kernels as their wrappers launch them: compile requests, and counted FLOPs and bytes.

Each entry gives what ``impls/gpu/compiled.py`` needs to compile the kernel the way its Python wrapper
launches it (block sizes from the module's defaults, Triton's default ``num_warps=4``, ``num_stages=3``,
16-byte-aligned pointers and strides/sizes divisible by 16, as Triton specialises them at run time for
the shapes below), and a count of the work one launch does at a realistic shape:

- FlashAttention forward (``impls/inference/flash_attention_triton.py``), one head, $N$ = 4096,
  $d$ = 64, fp16: matmul FLOPs $4N^2d$; HBM bytes from the module's own ``hbm_bytes`` ($Q$, $O$ once,
  $K$, $V$ once per query tile: no L2 reuse counted, an upper bound).
- Fused log-prob forward (``impls/scale/fused_logprobs_triton.py``), one fp32 row of $V$ = 151,936
  logits: the loop body does 8 operations per logit (scale, max, shift, exp, product, two sums, the
  target select) and reads each logit once (4 bytes).
- GAE (``impls/rl/gae_triton.py``), fp32 rewards/values, uint8 masks: 18 bytes per token (r, v in;
  m, d flags; advantage, return out) and, per token, two $\log_2 B_T$-level scans of 3 operations
  plus 20 element-wise operations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from impls.gpu.compiled import Request

__all__ = ["ProjectKernel", "KERNELS", "requests"]

FA = "impls/inference/flash_attention_triton.py"
LOGPROB = "impls/scale/fused_logprobs_triton.py"
GAE = "impls/rl/gae_triton.py"


@dataclass(frozen=True)
class ProjectKernel:
    key: str
    label: str
    path: str
    name: str
    signature: dict
    constexprs: dict
    aligned: tuple
    flops: float        # one launch at the shape in the module docstring
    bytes: float

    def request(self, arch: int = 90) -> Request:
        return Request.make(self.path, self.name, self.signature, self.constexprs, arch=arch, num_warps=4,
                            num_stages=3, aligned=self.aligned)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes


def _fa() -> ProjectKernel:
    import inspect

    from impls.inference import flash_attention_triton as fa

    n, d = 4096, 64
    precision = inspect.signature(fa.flash_attention_triton).parameters["precision"].default
    ints = ["Nq", "Nk", "D", "sqb", "sqh", "sqn", "skb", "skh", "skn", "svb", "svh", "svn", "sob", "soh", "son", "H"]
    sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp16", "lse_ptr": "*fp32",
           **{k: "i32" for k in ints[:3]}, "scale": "fp32", **{k: "i32" for k in ints[3:]}}
    return ProjectKernel("flash_attention", "FlashAttention fwd (N=4096, d=64, fp16)", FA, "_flash_fwd_kernel", sig,
                         {"CAUSAL": False, "BLOCK_M": fa.BLOCK_M, "BLOCK_N": fa.BLOCK_N, "BLOCK_D": d, "PRECISION": precision},
                         ("q_ptr", "k_ptr", "v_ptr", "o_ptr", "lse_ptr", *[k for k in ints if k != "H"]),
                         4.0 * n * n * d, float(fa.hbm_bytes(n, d)))


def _logprob() -> ProjectKernel:
    from impls.scale import fused_logprobs_triton as lp

    V = 151_936
    sig = {"z_ptr": "*fp32", "y_ptr": "*i64", "lp_ptr": "*fp32", "ent_ptr": "*fp32", "lse_ptr": "*fp32", "V": "i32",
           "stride_z": "i32", "inv_tau_ptr": "*fp32", "ignore_index": "i32"}
    return ProjectKernel("fused_logprob", "fused log-prob fwd (V=151,936, fp32)", LOGPROB, "_logprob_fwd_kernel", sig,
                         {"BLOCK_V": lp.DEFAULT_BLOCK_V, "ACC": "tl.float32"},
                         ("z_ptr", "y_ptr", "lp_ptr", "ent_ptr", "lse_ptr", "V", "stride_z"), 8.0 * V, 4.0 * V + 24)


def _gae() -> ProjectKernel:
    import inspect

    from impls.rl import gae_triton as g

    params = inspect.signature(g.gae_triton).parameters
    bb, bt = params["block_b"].default, params["block_t"].default
    tokens = 64 * 4096
    sig = {"r_ptr": "*fp32", "v_ptr": "*fp32", "m_ptr": "*u8", "d_ptr": "*u8", "adv_ptr": "*fp32", "ret_ptr": "*fp32",
           "B": "i32", "T": "i32", "coef_ptr": "*fp32"}
    flops_per_token = 2 * 3 * math.log2(bt) + 20
    return ProjectKernel("gae", "GAE (64 x 4096 tokens, fp32)", GAE, "_gae_kernel", sig,
                         {"BLOCK_B": bb, "BLOCK_T": bt, "ACC": "tl.float32"},
                         ("r_ptr", "v_ptr", "m_ptr", "d_ptr", "adv_ptr", "ret_ptr", "B", "T"),
                         flops_per_token * tokens, 18.0 * tokens)


KERNELS: dict[str, ProjectKernel] = {k.key: k for k in (_fa(), _logprob(), _gae())}


def requests(arch: int = 90) -> list[Request]:
    return [k.request(arch) for k in KERNELS.values()]
