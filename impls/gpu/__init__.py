"""Models of the GPU's documented rules, and the real compiler as an oracle, with no GPU needed.

- ``compiled``: compile a Triton kernel for sm_80 / sm_90 and read registers, shared memory, spills,
  vector widths of global loads/stores and Tensor-Core instructions (PTX, SASS).
- ``occupancy``: the occupancy calculator for sm_70/80/86/89/90 from the per-capability table.
- ``banks``: shared-memory bank conflicts, wavefronts per warp request.
- ``coalescing``: 32-byte sectors and 128-byte lines a warp's global access touches.
- ``simt``: a warp's active masks through branches and loops (divergence cost, reconvergence).
- ``fpsum``: floating-point summation orders against exact rational sums.
"""
