"""Kernels a candidate is asked to write, in Triton, each beside the PyTorch op it replaces.

- ``matmul``: tiled GEMM with ``tl.dot`` (grouped tile order, fp32 accumulation, an autotune table).
- ``gemm_model``: global/shared-memory loads and arithmetic intensity of naive, shared-memory-tiled and
  register-tiled GEMM, and the A100/H100 rooflines they are drawn against (no Triton needed).
- ``softmax``: row softmax, one row per program, online (two-level) for long rows, and the three-pass baseline.
- ``reduce``: two-stage sum/max reduction (and a one-launch atomic sum, for contrast).
- ``norms``: LayerNorm and RMSNorm forward and backward (fp32 statistics, a deterministic two-stage
  weight-gradient reduction) and RMSNorm fused with the residual add.
- ``transpose``: tiled transpose, loads and stores both coalesced.

They run on CUDA tensors, or on CPU tensors in Triton's interpreter (``TRITON_INTERPRET=1`` before import).
"""
