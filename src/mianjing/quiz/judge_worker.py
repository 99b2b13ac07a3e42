"""The judge's child process: ``python -m mianjing.quiz.judge_worker ROOT KATA FILE RESULTS MEM_MB [ONLY]``.

Runs under an address-space limit, imports our side first (torch, hypothesis, the reference,
the properties), announces ``ready``, then imports the candidate's file and runs every
property on it, writing one JSON line per event to RESULTS (flushed at once, so the parent
knows how far it got if the candidate's code hangs or kills the process).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback


def _emit(fh, **event) -> None:
    fh.write(json.dumps(event, ensure_ascii=False, default=repr) + "\n")
    fh.flush()


def _limit_memory(mem_mb: int) -> None:
    import resource

    if mem_mb > 0:
        limit = mem_mb * 1024 * 1024
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError):
            pass


def _first_exception(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _safe_samefile_frames(exc: BaseException, file: str) -> str:
    """The last frames of the traceback that are in the candidate's file (ours are noise to them)."""
    want = os.path.realpath(file)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.realpath(f.filename) == want]
    return "".join(traceback.format_list(frames[-3:])).rstrip()


def describe(exc: BaseException, file: str, mem_mb: int) -> dict:
    """A failure as {reason, message, example, where}."""
    exc = _first_exception(exc)
    notes = [n for n in getattr(exc, "__notes__", []) if n.strip()]
    example = "\n".join(n for n in notes if not n.startswith(("You can reproduce", "Explanation:")))
    where = _safe_samefile_frames(exc, file)
    text = str(exc)
    if isinstance(exc, AssertionError):
        return {"reason": "wrong result", "message": text or "assertion failed", "example": example, "where": where}
    if isinstance(exc, SystemExit):
        return {"reason": f"your code called sys.exit({exc.code!r})", "message": "", "example": example,
                "where": where}
    if isinstance(exc, MemoryError) or "can't allocate memory" in text or "alloc" in text.lower() and \
            "memory" in text.lower():
        return {"reason": f"ran out of memory (limit {mem_mb} MiB)", "message": text[:300], "example": example,
                "where": where}
    if isinstance(exc, RecursionError):
        return {"reason": "recursion too deep (RecursionError)", "message": text[:300], "example": example,
                "where": where}
    if isinstance(exc, NotImplementedError):
        return {"reason": "not implemented yet (NotImplementedError)", "message": "", "example": example,
                "where": where}
    return {"reason": f"raised {type(exc).__name__}", "message": text[:1000], "example": example, "where": where}


def _signature_problem(ref, cand, symbol: str) -> str | None:
    import inspect

    if isinstance(ref, type):
        if not isinstance(cand, type):
            return f"`{symbol}` must be a class, got {type(cand).__name__}"
        problems = []
        for meth in ("__init__",) + tuple(n for n in vars(ref) if not n.startswith("_") and callable(getattr(ref, n))):
            if not callable(getattr(cand, meth, None)):
                problems.append(f"missing method {meth}()")
                continue
            p = _signature_problem(getattr(ref, meth), getattr(cand, meth), f"{symbol}.{meth}")
            if p:
                problems.append(p)
        return "; ".join(problems) or None
    if not callable(cand):
        return f"`{symbol}` must be a function, got {type(cand).__name__}"
    try:
        rs, cs = inspect.signature(ref), inspect.signature(cand)
    except (TypeError, ValueError):
        return None
    # keyword-only options with a default (gae's dones, the PPO loss's norm_constant) are production extras
    # the kata's properties never pass: a candidate may leave them out
    rp = [p for p in rs.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
          and not (p.kind is p.KEYWORD_ONLY and p.default is not p.empty)]
    cp = list(cs.parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL,) for p in cp) and any(p.kind is p.VAR_KEYWORD for p in cp):
        return None
    names = [p.name for p in cp if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    want = [p.name for p in rp]
    missing = [n for n in want if n not in names]
    required_extra = [p.name for p in cp if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                      and p.name not in want]
    order_ok = names[:len(want)] == want
    if missing or required_extra or not order_ok:
        return (f"wrong signature: expected {symbol}{rs}, got {symbol}{cs}").replace("'", "")
    return None


def main(argv: list[str]) -> int:
    root, kata_name, file, results, mem_mb = argv[1], argv[2], argv[3], argv[4], int(argv[5])
    only = set(filter(None, (argv[6] if len(argv) > 6 else "").split(",")))
    max_examples = int(os.environ.get("MIANJING_MAX_EXAMPLES", "60"))
    fh = open(results, "a", encoding="utf-8")
    _limit_memory(mem_mb)
    # Our side first: nothing here is the candidate's fault.
    sys.path.insert(0, root)
    import importlib
    import importlib.util

    from hypothesis import HealthCheck, Phase, settings

    from mianjing.quiz.katas import REGISTRY

    settings.register_profile("judge", max_examples=max_examples, deadline=None, derandomize=True,
                              database=None, print_blob=False, suppress_health_check=list(HealthCheck),
                              phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink])
    settings.load_profile("judge")
    kata = next(k for k in REGISTRY if k.name == kata_name)
    ref = getattr(importlib.import_module(kata.ref_module), kata.symbol)
    props_mod = importlib.import_module(kata.props_module)
    names = [n for n in getattr(props_mod, "ALL", []) if callable(n)]
    props = [(f.__name__, f) for f in names] or [
        (n, getattr(props_mod, n)) for n in dir(props_mod) if n.startswith("prop_")]
    if not names:  # keep source order
        props.sort(key=lambda nf: nf[1].__code__.co_firstlineno)
    if only:
        props = [(n, f) for n, f in props if n in only]
    _emit(fh, event="ready", props=[n for n, _ in props])

    # The candidate's side.
    t0 = time.monotonic()
    try:
        spec = importlib.util.spec_from_file_location("kata_candidate", file)
        module = importlib.util.module_from_spec(spec)
        sys.modules["kata_candidate"] = module
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 -- SystemExit and all: report, never crash
        d = describe(exc, file, mem_mb)
        if isinstance(exc, SyntaxError):
            d = {"reason": "syntax error", "message": f"line {exc.lineno}: {exc.msg}", "example": "", "where": ""}
        else:
            d["reason"] = f"importing your file failed: {d['reason']}"
            d["where"] = d["where"] or "".join(traceback.format_exception_only(type(exc), exc)).strip()
        _emit(fh, event="fatal", **d)
        return 0
    cand = getattr(module, kata.symbol, None)
    if cand is None:
        _emit(fh, event="fatal", reason=f"your file defines no `{kata.symbol}`", message="", example="", where="")
        return 0
    problem = _signature_problem(ref, cand, kata.symbol)
    if problem:
        _emit(fh, event="fatal", reason=problem, message="", example="", where="")
        return 0
    for name, prop in props:
        _emit(fh, event="start", name=name)
        t = time.monotonic()
        try:
            prop(cand)
        except BaseException as exc:  # noqa: BLE001
            if isinstance(exc, KeyboardInterrupt):
                raise
            _emit(fh, event="result", name=name, passed=False, seconds=round(time.monotonic() - t, 2),
                  **describe(exc, file, mem_mb))
        else:
            _emit(fh, event="result", name=name, passed=True, seconds=round(time.monotonic() - t, 2))
    _emit(fh, event="done", seconds=round(time.monotonic() - t0, 2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
