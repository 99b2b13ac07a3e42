"""``mianjing kata judge``: the kata's properties judge the candidate's code, which runs elsewhere.

Two processes that share nothing but two pipes:

* **the judge** (this process, trusted): imports the kata's ``prop_*`` functions, hypothesis and the
  reference, and runs each property with a proxy in place of the candidate's function
  (``judge_remote.py``);
* **the worker** (``judge_worker.py``, untrusted, confined as ``sandbox.py`` plans): imports only the
  candidate's file and calls its function on the inputs the proxy sends. A kernel kata's worker runs the
  candidate's Triton kernels in Triton's CPU interpreter; a property about what the kernel compiles to gets
  a second worker, confined the same way and without the interpreter, that compiles the kernel as far as PTX
  and returns the text (``judge_compile.py``): compiling runs the candidate's code, so it never happens here.

What crosses between them, and how it is read, is ``judge_wire.py``; why a property failed or a
worker died is ``judge_lost.py``; printing and recording a result is ``judge_report.py``. This file
is the judging loop: check the signature, run each property with a fresh worker state, restart a
worker that died, stop early after a timeout, and say whether the run was confined.

Nothing the candidate does to its own interpreter reaches a verdict: the properties, their oracle
and their comparisons never share an interpreter with it.
"""

from __future__ import annotations

import importlib
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import sandbox
from .judge_lost import WorkerLost, describe, fatal_reason, first_exception
from .judge_remote import Candidate, Session
from .judge_wire import WireError, describe_symbol, signature
from .katas import MARKER, Kata, available, find

DEFAULT_FIELDS = ("val", "left", "right")
MIN_MEMORY_MB = 64


class JudgeOptionError(ValueError):
    """An option the judge cannot run with (the CLI prints it as one line, exit 2)."""


def check_options(timeout: float, memory_mb: int) -> None:
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise JudgeOptionError(f"--timeout must be a positive number of seconds, not {timeout!r}")
    if timeout > 24 * 3600:
        raise JudgeOptionError(f"--timeout {timeout:g} is more than a day; give at most 86400 seconds")
    if not isinstance(memory_mb, int) or memory_mb < MIN_MEMORY_MB:
        raise JudgeOptionError(f"--memory-mb must be at least {MIN_MEMORY_MB} (MiB), not {memory_mb!r}")
    if memory_mb > 1 << 20:
        raise JudgeOptionError(f"--memory-mb {memory_mb} is more than 1 TiB")


@dataclass
class PropResult:
    name: str
    passed: bool | None  # None: not run
    reason: str = ""
    message: str = ""
    example: str = ""
    where: str = ""
    seconds: float = 0.0


@dataclass
class JudgeResult:
    kata: Kata
    props: list[PropResult] = field(default_factory=list)
    fatal: str | None = None
    fatal_detail: str = ""
    seconds: float = 0.0
    sandbox: str = ""
    attempts: list[str] = field(default_factory=list)
    confined: bool = False  # the worker ran confined (bubblewrap, or the fallback that held): a review
    confinement: str = ""  # what the worker ran as, or what failed
    isolation: dict = field(default_factory=dict)  # the worker's own report of what it applied (judge_confine.apply)

    @property
    def passed(self) -> int:
        return sum(1 for p in self.props if p.passed)

    @property
    def ok(self) -> bool:
        return self.fatal is None and bool(self.props) and all(p.passed for p in self.props)

    def summary(self) -> str:
        n = len(self.props)
        tail = "" if self.confined or not self.sandbox else "; UNCONFINED: not a review"
        if self.ok:
            return f"ACCEPTED: {self.passed}/{n} properties passed ({self.seconds:.1f} s{tail})"
        if self.fatal:
            return f"REJECTED: {self.fatal} (0/{n} properties run, {self.seconds:.1f} s{tail})"
        first = next((p for p in self.props if p.passed is False), None)
        cause = f"; first failure: {first.name}: {first.reason}" if first else ""
        return f"REJECTED: {self.passed}/{n} properties passed{cause} ({self.seconds:.1f} s{tail})"


def detect_kata(root: Path, file: Path, name: str | None) -> Kata | None:
    if name:
        return find(root, name)
    try:
        head = file.read_text(encoding="utf-8", errors="replace")[:20000]
    except OSError:
        return None
    m = re.search(re.escape(MARKER) + r"([A-Za-z_][A-Za-z0-9_]*)", head)
    if m:
        return find(root, m.group(1))
    stem = file.stem
    for k in available(root):
        if stem == k.name or stem.casefold().startswith(k.name.casefold()):
            return k
    return None


def _signature_problem(ref: dict, cand: dict, symbol: str) -> str | None:
    """Why the candidate's symbol (as ``judge_wire.signature`` left it) cannot stand in for the reference's."""
    if ref.get("kind") == "class":
        if cand.get("kind") != "class":
            return f"`{symbol}` must be a class, got a {cand.get('kind')}"
        problems = []
        for meth, params in ref["methods"].items():
            if meth not in cand.get("methods", {}):
                problems.append(f"missing method {meth}()")
                continue
            p = _params_problem(params, cand["methods"][meth], f"{symbol}.{meth}")
            if p:
                problems.append(p)
        return "; ".join(problems) or None
    if cand.get("kind") != "function":
        return f"`{symbol}` must be a function, got a {cand.get('kind')}"
    return _params_problem(ref.get("params"), cand.get("params"), symbol)


def _fmt(params) -> str:
    out = []
    for name, kind, has_default in params:
        prefix = "*" if kind == "VAR_POSITIONAL" else "**" if kind == "VAR_KEYWORD" else ""
        out.append(prefix + name + ("=..." if has_default else ""))
    return "(" + ", ".join(out) + ")"


def _params_problem(ref, cand, symbol: str) -> str | None:
    if ref is None or cand is None:
        return None
    kinds = {k for _, k, _ in cand}
    if "VAR_POSITIONAL" in kinds and "VAR_KEYWORD" in kinds:
        return None
    # the reference's required parameters, in order; its optional ones (e.g. a stats dict) the
    # properties never pass, so a candidate may leave them out
    want = [n for n, k, d in ref if k not in ("VAR_POSITIONAL", "VAR_KEYWORD") and not d]
    names = [n for n, k, _ in cand if k not in ("VAR_POSITIONAL", "VAR_KEYWORD")]
    missing = [n for n in want if n not in names]
    known = {n for n, _, _ in ref}
    required_extra = [n for n, k, d in cand if not d and k in ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY")
                      and n not in known]
    if missing or required_extra or names[:len(want)] != want:
        return f"wrong signature: expected {symbol}{_fmt(ref)}, got {symbol}{_fmt(cand)}"
    return None


def _load_kata(root: Path, kata: Kata):
    """The reference symbol and the kata's properties, imported here (the trusted side)."""
    s = str(root)
    if s not in sys.path:
        sys.path.insert(0, s)
    ref = getattr(importlib.import_module(kata.ref_module), kata.symbol)
    mod = importlib.import_module(kata.props_module)
    named = [p for p in getattr(mod, "ALL", []) if callable(p)]
    if named:
        props = [(p.__name__, p) for p in named]
    else:
        props = sorted(((n, getattr(mod, n)) for n in dir(mod) if n.startswith("prop_") and callable(getattr(mod, n))),
                       key=lambda nf: nf[1].__code__.co_firstlineno)
    return ref, props


def _preload(root: Path, kata: Kata) -> list[str]:
    """Heavy modules the reference imports (torch, numpy, triton), and the meters when the properties measure a
    call: loaded in the worker before the candidate's file, so the limits count only the candidate's work."""
    text = (root / kata.ref_path).read_text(encoding="utf-8")
    mods = [m for m in ("torch", "numpy", "triton") if re.search(rf"^\s*(import|from)\s+{m}\b", text, re.M)]
    if "metered(" in (root / kata.props_path).read_text(encoding="utf-8"):
        mods.append("judge_meters")
    return mods


# A kernel kata's worker runs the candidate's @triton.jit kernels in Triton's CPU interpreter; the one that
# compiles them for a GPU target (a compile property) keeps them as JIT functions. Set before triton loads.
INTERPRET_ENV = {"TRITON_INTERPRET": "1", "TRITON_DEFAULT_FP_FUSION": "1"}
COMPILE_ENV = {"TRITON_DEFAULT_FP_FUSION": "1"}


def _deny_paths(root: Path) -> list[str]:
    """The checkout's code and data: the worker must not read them (the fallback checks its plan against them)."""
    return [str(root / d) for d in ("impls", "verifiers", "src", "tests", "figures", "benchmarks", "qa", ".git")]


class _Profile:
    """The judge's hypothesis profile for the duration of a judgement (restored afterwards)."""

    def __enter__(self):
        from hypothesis import HealthCheck, Phase, settings

        self.previous = settings.get_current_profile_name()
        settings.register_profile(
            "mianjing-judge", max_examples=int(os.environ.get("MIANJING_MAX_EXAMPLES", "60")), deadline=None,
            derandomize=True, database=None, print_blob=False, suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink])
        settings.load_profile("mianjing-judge")
        return self

    def __exit__(self, *exc):
        from hypothesis import settings

        settings.load_profile(self.previous)


def judge(root: Path, kata: Kata, file: Path, *, timeout: float = 30.0, memory_mb: int = 4096,
          on_result=None, only: list[str] | None = None, on_start=None) -> JudgeResult:
    """Judge ``file`` against ``kata``; ``on_result(PropResult)`` is called as each property finishes.

    ``timeout``: seconds the candidate's code may run while importing its file, and again during
    each property (time spent in the judge's own code does not count). ``only``: run just these
    properties. ``on_start(sandbox_kind, note)`` is called once the worker is up (``"unconfined"`` and
    what failed, when its confinement did not hold).
    """
    check_options(timeout, memory_mb)
    res = JudgeResult(kata)
    file = Path(file).resolve()
    started = time.monotonic()
    names = [n for n, _ in kata.properties(root) if not only or n in only]
    fields = kata.node_fields(root) or DEFAULT_FIELDS
    cpu = int(60 + timeout * (len(names) + 2) * 2)
    recursion_limit = kata.constant(root, "RECURSION_LIMIT")
    caps = kata.time_limits(root)
    if sandbox.wanted() == "bwrap" and sandbox.bwrap_path() is None:
        raise JudgeOptionError("MIANJING_SANDBOX=bwrap, but bubblewrap is not installed or cannot create "
                               "namespaces here (apt-get install bubblewrap)")

    preload = _preload(root, kata)

    def new_session(env: dict | None = None) -> Session:
        if env is None:
            env = INTERPRET_ENV if "triton" in preload else {}
        return Session(file, kata.symbol, memory_mb=memory_mb, timeout=timeout, fields=fields,
                       preload=preload, deny=_deny_paths(root), cpu_seconds=cpu,
                       recursion_limit=recursion_limit if isinstance(recursion_limit, int) else None, env=env)

    compiling: list[Session] = []  # the worker that compiles kernels for a GPU target, started on first use

    def compile_ptx(kernel: str, request: dict) -> str:
        """The PTX of the candidate's ``kernel`` for ``request`` (see ``judge_compile.py``), compiled in a worker of
        its own (Triton not in interpreter mode there) and returned as text: untrusted data, only parsed here."""
        if not compiling or not compiling[0].alive:
            for old in compiling:
                old.close()
            compiling[:] = [new_session(COMPILE_ENV)]
            got = handshake(compiling[0])
            if got.get("op") != "loaded":
                raise WorkerLost("the worker that compiles your kernel could not load your file: "
                                 + str(got.get("message") or got.get("reason") or "")[:300])
            held, note = sandbox.confined(compiling[0].kind, compiling[0].confinement)
            if res.confined and not held:
                res.confined, res.confinement = False, note
        return compiling[0].compile_ptx(kernel, request)

    def handshake(s: Session) -> dict:
        if s.proc is None:
            s.start()
        s.greet()
        return s.load_candidate()

    session = new_session()
    try:
        try:
            session.start()  # its Python starts while this side imports the properties
        except OSError as exc:
            res.fatal = f"the judge could not start a worker ({exc})"
            return res
        ref, props = _load_kata(root, kata)
        props = [(n, p) for n, p in props if n in names]
        names = [n for n, _ in props]
        try:
            loaded = handshake(session)
        except WorkerLost as lost:
            res.sandbox = session.kind
            res.confined, res.confinement = sandbox.confined(session.kind, session.confinement)
            if on_start and not lost.reason.startswith("the worker"):
                on_start(session.kind if res.confined else "unconfined", res.confinement)
            res.fatal = lost.reason if lost.reason.startswith("the worker") else \
                f"importing your file failed: {lost.reason}"
            res.fatal_detail = lost.detail
            return res
        res.sandbox = session.kind
        res.confined, res.confinement = sandbox.confined(session.kind, session.confinement)
        res.isolation = dict(session.confinement)
        res.attempts = list(session.attempts)
        if on_start:
            on_start(session.kind if res.confined else "unconfined", res.confinement)
        if loaded["op"] == "fatal":
            res.fatal, res.fatal_detail = fatal_reason(loaded, kata.symbol, memory_mb)
            imports = [a for a in session.attempts if a.startswith("import ")]
            if imports and "runs your code alone" not in res.fatal:
                res.fatal += f" (it tried to {imports[0]}: the judge runs your code alone)"
            return res
        try:
            problem = _signature_problem(signature(describe_symbol(ref)), signature(loaded.get("sig") or {}),
                                         kata.symbol)
        except WireError as exc:
            problem = f"the worker described `{kata.symbol}` in a way the judge cannot read ({exc})"
        if problem:
            res.fatal = problem
            return res
        stop_reason = ""
        with _Profile():
            for name, prop in props:
                pr = None
                if not stop_reason and not session.alive:
                    session.close()
                    session = new_session()
                    try:
                        again = handshake(session)
                    except WorkerLost:
                        again = {"op": "lost"}
                    if again.get("op") != "loaded":
                        stop_reason = "the worker could not be restarted"
                    held, note = sandbox.confined(session.kind, session.confinement)
                    if res.confined and not held:
                        res.confined, res.confinement = False, note
                elif not stop_reason:
                    try:
                        session.reset()
                    except WorkerLost as lost:
                        pr = PropResult(name, False, lost.reason, lost.detail)
                if stop_reason:
                    pr = PropResult(name, None, f"not run ({stop_reason})")
                if pr is None:
                    cap = caps.get(name)
                    session.timeout = min(timeout, cap) if cap else timeout
                    session.limit_note = ", the limit this property sets," if cap and cap < timeout else ""
                    session.budget = session.timeout
                    t = time.monotonic()
                    try:
                        prop(Candidate(session, kata.symbol, compiler=compile_ptx))
                    except KeyboardInterrupt:
                        raise
                    except BaseException as exc:  # noqa: BLE001 -- every failure is a result
                        pr = PropResult(name, False, seconds=round(time.monotonic() - t, 2),
                                        **describe(exc, memory_mb))
                        lost = first_exception(exc)
                        if isinstance(lost, WorkerLost):
                            session.alive = False
                            if lost.timed_out and not session.limit_note:  # past its own, shorter limit: the
                                stop_reason = f"{name} timed out"  # next property gets a fresh worker
                    else:
                        pr = PropResult(name, True, seconds=round(time.monotonic() - t, 2))
                res.props.append(pr)
                res.attempts = sorted(set(res.attempts) | set(session.attempts))
                if on_result:
                    on_result(pr)
    finally:
        session.close()
        for s in compiling:
            s.close()
        res.seconds = time.monotonic() - started
        if res.fatal:
            res.props = [PropResult(n, None, "not run") for n in names]
    return res


