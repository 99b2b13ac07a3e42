"""Comparisons the ML katas share: a tensor against an oracle with a stated tolerance, and "this must raise".

``close(got, want, atol=..., rtol=..., what=..., where=...)`` checks the type, the shape and the dtype (when
asked) before any value, refuses a NaN or an infinity where the oracle has a finite number (``max()`` over a
tensor with a NaN would hide it), and names the worst element: its index, the expected and the observed value.
``rejects(call, what, where)`` expects the candidate to raise ValueError (or AssertionError: an ``assert``
is what most people write at a whiteboard); in the judge the candidate's exception arrives as the proxy's
``CandidateError`` carrying the type's name.
"""

from __future__ import annotations

import torch


def close(got, want: torch.Tensor, *, atol, rtol: float = 0.0, what: str, where: str,
          dtype: torch.dtype | None = None) -> None:
    """``|got - want| <= atol + rtol·|want|`` elementwise; ``atol`` a number or a tensor of want's shape."""
    assert isinstance(got, torch.Tensor), f"{where}: {what} expected a tensor, got {type(got).__name__}"
    assert tuple(got.shape) == tuple(want.shape), \
        f"{where}: {what} expected shape {tuple(want.shape)}, got {tuple(got.shape)}"
    if dtype is not None:
        assert got.dtype == dtype, f"{where}: {what} expected dtype {dtype}, got {got.dtype}"
    g, w = got.detach().to(torch.float64), want.detach().to(torch.float64)
    odd = (~torch.isfinite(g)) & torch.isfinite(w)
    if bool(odd.any()):
        i = tuple(int(v) for v in torch.nonzero(odd)[0])
        raise AssertionError(f"{where}: {what} is {g[i].item()} at index {list(i)} where {w[i].item()!r} was "
                             f"expected ({int(odd.sum())} non-finite values in all)")
    err = torch.where(g == w, torch.zeros_like(g), (g - w).abs())
    err = torch.where(torch.isnan(err), torch.full_like(err, float("inf")), err)   # NaN where the oracle has ±inf
    allowed = atol + rtol * w.abs().nan_to_num(posinf=0.0, neginf=0.0)
    if not isinstance(allowed, torch.Tensor):
        allowed = torch.full_like(w, float(allowed))
    excess = err - allowed
    if bool((excess > 0).any()):
        i = tuple(int(v) for v in torch.nonzero(excess == excess.max())[0])
        raise AssertionError(f"{where}: {what} at index {list(i)}: expected {w[i].item()!r}, got {g[i].item()!r} "
                             f"(error {err[i].item():.3g}, allowed {allowed[i].item():.3g}; "
                             f"{int((excess > 0).sum())} elements over)")


def error_type(exc: BaseException) -> str:
    """The type name of what the candidate raised (the judge's proxy raises ``CandidateError`` with ``.type``)."""
    if type(exc).__name__ == "CandidateError":
        return str(getattr(exc, "type", "Exception"))
    return type(exc).__name__


def rejects(call, what: str, where: str, types: tuple[str, ...] = ("ValueError", "AssertionError")) -> None:
    try:
        call()
    except Exception as exc:  # noqa: BLE001 -- any exception is an answer; its type is judged
        name = error_type(exc)
        assert name in types, f"{where}: {what} should raise ValueError; it raised {name}: {str(exc)[:200]}"
        return
    raise AssertionError(f"{where}: {what} should raise ValueError; it returned normally")
