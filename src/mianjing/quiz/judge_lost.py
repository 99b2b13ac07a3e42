"""Why a property failed or a worker died, in words: the reasons the judge prints.

A property fails with an ``AssertionError`` from the kata (a wrong result), a :class:`CandidateError`
(the candidate's code raised, in the worker) or a :class:`WorkerLost` (the worker is gone or unusable:
a timeout, a death by signal, an exit, a garbled or closed results stream, an output cap). Every
rejection names one of these; none is a traceback of the judge.
"""

from __future__ import annotations

import signal

from . import sandbox


class WorkerLost(BaseException):
    """The worker is gone or unusable (timeout, death, garbled stream, output cap). A BaseException so
    that hypothesis does not try to shrink with a dead worker: it ends the property at once."""

    def __init__(self, reason: str, detail: str = "", timed_out: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail
        self.timed_out = timed_out  # the remaining properties are not run (each would wait as long)


class CandidateError(Exception):
    """The candidate's code raised; carries its type, message and the lines of its file involved
    (from a message the wire has already checked: every field a string)."""

    def __init__(self, info: dict):
        self.type = str(info.get("type", "Exception"))[:80]
        self.kind = str(info.get("kind", "error"))
        self.text = str(info.get("message", ""))
        self.where = str(info.get("where", ""))
        super().__init__(f"{self.type}: {self.text}" if self.text else self.type)


def death(rc: int | None, kind: str) -> str:
    """The worker's exit status in words (bubblewrap reports a child's death by signal N as 128 + N)."""
    if rc is None:
        return "the worker stopped answering"
    sig = -rc if rc < 0 else (rc - 128 if kind == "bubblewrap" and 128 < rc < 128 + 65 else None)
    if sig:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig == signal.SIGSEGV:
            return f"your code crashed ({name}, a segmentation fault in native code)"
        if sig == signal.SIGXCPU:
            return "your code used up its CPU-time limit (SIGXCPU)"
        if sig == signal.SIGXFSZ:
            return f"your code wrote a file over the {sandbox.FILE_LIMIT_MB} MiB file-size limit (SIGXFSZ)"
        if sig == signal.SIGKILL:
            return "your code was killed (SIGKILL: out of memory, or it killed itself)"
        if sig == signal.SIGSYS:
            return "your code made a system call the sandbox forbids (SIGSYS)"
        return f"your code died from signal {name}"
    return f"your code exited with code {rc} (os._exit, or a crash in native code)"


def reason_for(err: CandidateError, memory_mb: int) -> str:
    if err.kind == "memory":
        return f"memory limit exceeded ({memory_mb} MiB): {err.type}"
    if err.kind == "recursion":
        return "recursion too deep (RecursionError)"
    if err.kind == "notimpl":
        return "not implemented yet (NotImplementedError)"
    if err.kind == "exit":
        return f"your code called sys.exit({err.text})"
    if err.kind == "fsize":
        return f"file-size limit exceeded (your code wrote a file over {sandbox.FILE_LIMIT_MB} MiB)"
    if err.kind == "denied":
        return err.text
    if err.kind == "unsendable":
        return f"your code returned a value the judge cannot read ({err.text})"
    return f"raised {err.type}"


def first_exception(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException, memory_mb: int) -> dict:
    """A property's failure as {reason, message, example, where}."""
    exc = first_exception(exc)
    notes = [n for n in getattr(exc, "__notes__", []) if n.strip()]
    example = "\n".join(n for n in notes if not n.startswith(("You can reproduce", "Explanation:")))
    if isinstance(exc, WorkerLost):
        return {"reason": exc.reason, "message": exc.detail, "example": example, "where": ""}
    if isinstance(exc, CandidateError):
        msg = "" if exc.kind in ("notimpl", "exit", "denied") else exc.text[:1000]
        return {"reason": reason_for(exc, memory_mb), "message": msg, "example": example, "where": exc.where}
    if isinstance(exc, AssertionError):
        return {"reason": "wrong result", "message": str(exc) or "assertion failed", "example": example, "where": ""}
    return {"reason": f"raised {type(exc).__name__}", "message": str(exc)[:1000], "example": example, "where": ""}


def fatal_reason(msg: dict, symbol: str, memory_mb: int) -> tuple[str, str]:
    """The worker's 'fatal' message (its import failed) as (reason, detail)."""
    reason = msg.get("reason")
    if reason == "syntax error":
        return "syntax error", str(msg.get("message", ""))
    if reason == "missing":
        return f"your file defines no `{symbol}`", ""
    err = CandidateError(msg)
    detail = "\n".join(x for x in (err.text if err.kind not in ("notimpl", "denied", "exit") else "", err.where) if x)
    return f"importing your file failed: {reason_for(err, memory_mb)}", detail
