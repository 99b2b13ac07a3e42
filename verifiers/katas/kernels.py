"""Helpers of the kernel katas (triton-softmax, -matmul, -reduce, -transpose): fp64 oracles compared at
tolerances derived from the dtype, and what a kernel compiles to.

``within(got, want, rel, abs_, where, what)``: every element finite where the oracle is, NaN exactly where
the oracle is, and ``|got - want| <= rel * |want| + abs_`` elementwise (``rel`` may be a tensor); the
first offending element is named with its index, the expected and the observed value.

``compiled_ptx(impl, kernel, ...)``: the PTX of one of the implementation's Triton kernels for an sm_80 /
sm_90 target. Under the kata judge ``impl`` is the judge's proxy: the candidate's kernel is compiled in a
sandboxed worker (``src/mianjing/quiz/judge_compile.py``) and only the text comes back; here (the
verifiers) it is the reference, compiled with ``impls/gpu/compiled.py``. Either way the property reads
the text with ``parse_tensor_core_ops`` / ``parse_memory_ops``: regular expressions, nothing executed.
"""

from __future__ import annotations

import sys

import torch

U32 = 2.0**-24  # unit roundoff of fp32 (half an ulp of 1)
U16 = 2.0**-11  # of fp16
MAX_TEXT = 8 << 20


def settings_few(n: int):
    """``n`` examples (fewer if ``MIANJING_MAX_EXAMPLES`` says so), stopping at the first failure, no shrinking: an interpreted kernel costs 0.1-2 s a call, and
    shrinking one failure takes hundreds of calls (minutes, past the judge's time limit). The properties list
    their edge cases smallest first and name the shape and values of the failing case in the message."""
    import os

    from hypothesis import Phase, settings

    cap = os.environ.get("MIANJING_MAX_EXAMPLES", "")
    n = min(n, max(1, int(cap))) if cap.isdigit() else n
    return settings(max_examples=n, deadline=None, report_multiple_bugs=False,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate])


def within(got, want: torch.Tensor, rel, abs_: float, where: str, what: str = "output") -> None:
    """``got`` equals the fp64 ``want`` to ``rel * |want| + abs_`` elementwise, with NaN where, and only where,
    ``want`` has NaN. ``got`` is what the implementation returned (shape checked first)."""
    got_shape = tuple(getattr(got, "shape", ()))
    assert isinstance(got, torch.Tensor) and got_shape == tuple(want.shape), (
        f"{where}: {what} expected a tensor of shape {tuple(want.shape)}, got {type(got).__name__} {got_shape}")
    g = got.double()
    nan_want, nan_got = torch.isnan(want), torch.isnan(g)
    if not torch.equal(nan_want, nan_got):
        i = tuple(int(v) for v in torch.nonzero(nan_want != nan_got)[0])
        raise AssertionError(f"{where}: {what}{list(i)} expected {want[i].item()!r}, got {g[i].item()!r}")
    fin = ~nan_want
    inf_bad = fin & (torch.isinf(g) != torch.isinf(want))
    tol = want.abs() * rel + abs_
    bad = fin & ~inf_bad & ((g - want).abs() > tol)
    bad |= inf_bad
    if bad.any():
        i = tuple(int(v) for v in torch.nonzero(bad)[0])
        t = tol[i].item() if isinstance(tol, torch.Tensor) else tol
        raise AssertionError(f"{where}: {what}{list(i)} expected {want[i].item()!r} (to {t:.3g}), got {g[i].item()!r}"
                             f"; {int(bad.sum())} of {bad.numel()} elements are off")


def compiled_ptx(impl, kernel: str, *, signature: dict, constexprs: dict, arch: int = 90, num_warps: int = 4,
                 num_stages: int = 3, aligned: tuple = ()) -> str:
    """The PTX of ``kernel`` (defined beside ``impl``) for ``sm_<arch>``; see the module docstring."""
    request = {"signature": dict(signature), "constexprs": dict(constexprs), "arch": arch, "num_warps": num_warps,
               "num_stages": num_stages, "aligned": list(aligned)}
    remote = getattr(impl, "compiled_ptx", None)
    if callable(remote):
        text = remote(kernel, request)
    else:
        from impls.gpu.compiled import compile_kernel

        path = sys.modules[impl.__module__].__file__
        text = compile_kernel(path, kernel, signature, constexprs, arch=arch, num_warps=num_warps,
                              num_stages=num_stages, aligned=aligned).ptx
    assert isinstance(text, str) and ".entry" in text, f"compiling {kernel} for sm_{arch} gave no PTX entry point"
    return text[:MAX_TEXT]
