"""Helpers for katas that judge plain-Python code (no torch): a batch of method calls in one round trip, and the
Python memory one call held.

``replay(obj, calls)`` runs ``[(method, args), ...]`` on an object of the candidate's: in the judge as one batch
the worker runs in order (``judge_remote.Session.batch``: flat lists of ints travel as they are, so a hundred
thousand calls cost a fraction of a second), here as a loop. ``allocated(impl, *args)`` is ``(value,
peak_bytes)``: the call under tracemalloc, in the judge measured in the worker around the candidate's code only
(``judge_worker._allocated``; the candidate's own calls to start, stop or reset tracemalloc are refused there).
"""

from __future__ import annotations


def replay(obj, calls: list) -> list:
    """``[getattr(obj, m)(*args) for m, args in calls]``: in the judge one round trip for the whole list
    (the worker runs the calls in order), here a loop. If a call raises, the exception says which one
    (a note ``at call #i: m(args)``)."""
    batch = getattr(type(obj), "_mianjing_calls", None)
    if batch is not None:
        try:
            return obj._mianjing_calls([(m, list(a)) for m, a in calls])
        except Exception as exc:
            i = getattr(exc, "index", None)
            if isinstance(i, int) and 0 <= i < len(calls):
                exc.add_note(f"at call #{i + 1}: {_show_call(calls[i])}")
            raise
    out = []
    for i, (m, args) in enumerate(calls):
        try:
            out.append(getattr(obj, m)(*args))
        except Exception as exc:
            exc.add_note(f"at call #{i + 1}: {_show_call(calls[i])}")
            raise
    return out


def _show_call(call) -> str:
    m, args = call
    return f"{m}({', '.join(repr(a) for a in args)})"


def allocated(impl, *args, **kwargs):
    """``(value, peak_bytes)``: the call under tracemalloc, the most Python memory it held at once beyond what
    existed before it (in the judge measured in the worker, around the candidate's code only)."""
    remote = getattr(impl, "allocated", None)
    if callable(remote):
        value, raw = remote(args, kwargs)
    else:
        import tracemalloc

        tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        try:
            value = impl(*args, **kwargs)
        finally:
            traced = tracemalloc.is_tracing()
            peak = tracemalloc.get_traced_memory()[1] if traced else 0
            tracemalloc.stop()
        raw = {"peak_bytes": max(0, peak - base), "reads": [], "traced": traced}
    peak = raw.get("peak_bytes") if isinstance(raw, dict) else None
    if not (type(peak) is int and peak >= 0):
        raise AssertionError("the measurement of the call is malformed")
    if raw.get("traced") is not True:
        raise AssertionError("the memory measurement was stopped under the call (tracemalloc is the judge's)")
    return value, peak
