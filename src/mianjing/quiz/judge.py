"""``mianjing kata judge``: the kata's properties judge the candidate's code, which runs elsewhere.

Two processes that share nothing but two pipes:

* **the judge** (this process, trusted): imports the kata's ``prop_*`` functions, hypothesis and
  the reference, and runs each property with a *proxy* in place of the candidate's function.
* **the worker** (``judge_worker.py``, untrusted, sandboxed by ``sandbox.py``): imports only the
  candidate's file and calls its function on the inputs the proxy sends.

A call through the proxy ships its arguments as plain data (tensors as bytes + dtype + shape) and
rebuilds the result from plain data on this side: never an object of the candidate's classes, so
a tensor subclass whose ``==`` always says True arrives as a plain tensor. Tree nodes are copied
into the worker and the candidate's writes copied back; nodes whose fields are computed (the
properties' pointer-read counters) stay here and every read is a request this side serves, so
the count cannot be touched by the candidate. Gradients flow through a custom autograd function
whose backward asks the worker for the vector-Jacobian product. Objects the candidate returns (an
iterator) stay in the worker; the proxy forwards method calls and gets plain data back.

Nothing the candidate does to its own interpreter reaches a verdict: the properties, their oracle
and their comparisons never share an interpreter with it. Every rejection says why: timeout,
memory limit, exit at import, a crash with its signal, a garbled or closed results stream, an
output or file-size limit.
"""

from __future__ import annotations

import importlib
import math
import os
import re
import select
import signal
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from . import sandbox
from .judge_worker import CHANNEL_LOST, Codec, FrameReader, WireError, _tensors, describe_symbol, frame
from .katas import MARKER, Kata, available, find

STARTUP_LIMIT = 180.0  # seconds for the worker's Python (and torch) to start on a slow, busy machine
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

    @property
    def passed(self) -> int:
        return sum(1 for p in self.props if p.passed)

    @property
    def ok(self) -> bool:
        return self.fatal is None and bool(self.props) and all(p.passed for p in self.props)

    def summary(self) -> str:
        n = len(self.props)
        if self.ok:
            return f"ACCEPTED: {self.passed}/{n} properties passed ({self.seconds:.1f} s)"
        if self.fatal:
            return f"REJECTED: {self.fatal} (0/{n} properties run, {self.seconds:.1f} s)"
        first = next((p for p in self.props if p.passed is False), None)
        cause = f"; first failure: {first.name}: {first.reason}" if first else ""
        return f"REJECTED: {self.passed}/{n} properties passed{cause} ({self.seconds:.1f} s)"


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


# -- what goes wrong ---------------------------------------------------------------------------


class WorkerLost(BaseException):
    """The worker is gone or unusable (timeout, death, garbled stream, output cap). A BaseException so
    that hypothesis does not try to shrink with a dead worker: it ends the property at once."""

    def __init__(self, reason: str, detail: str = "", timed_out: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail
        self.timed_out = timed_out  # the remaining properties are not run (each would wait as long)


class CandidateError(Exception):
    """The candidate's code raised; carries its type, message and the lines of its file involved."""

    def __init__(self, info: dict):
        self.type = str(info.get("type", "Exception"))
        self.kind = str(info.get("kind", "error"))
        self.text = str(info.get("message", ""))
        self.where = str(info.get("where", ""))
        super().__init__(f"{self.type}: {self.text}" if self.text else self.type)


def _death(rc: int | None, kind: str) -> str:
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
        return f"your code died from signal {name}"
    return f"your code exited with code {rc} (os._exit, or a crash in native code)"


def _reason_for(err: CandidateError, memory_mb: int) -> str:
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


def _first_exception(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException, memory_mb: int) -> dict:
    """A property's failure as {reason, message, example, where}."""
    exc = _first_exception(exc)
    notes = [n for n in getattr(exc, "__notes__", []) if n.strip()]
    example = "\n".join(n for n in notes if not n.startswith(("You can reproduce", "Explanation:")))
    if isinstance(exc, WorkerLost):
        return {"reason": exc.reason, "message": exc.detail, "example": example, "where": ""}
    if isinstance(exc, CandidateError):
        msg = "" if exc.kind in ("notimpl", "exit", "denied") else exc.text[:1000]
        return {"reason": _reason_for(exc, memory_mb), "message": msg, "example": example, "where": exc.where}
    if isinstance(exc, AssertionError):
        return {"reason": "wrong result", "message": str(exc) or "assertion failed", "example": example, "where": ""}
    return {"reason": f"raised {type(exc).__name__}", "message": str(exc)[:1000], "example": example, "where": ""}


# -- the proxies -----------------------------------------------------------------------------


class WorkerRef:
    """An object that lives in the worker (the candidate's iterator...): methods are forwarded,
    results come back as plain data."""

    __slots__ = ("_session", "_wid", "_cls", "_methods", "__weakref__")

    def __init__(self, session: "Session", wid: int, cls: str):
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_wid", wid)
        object.__setattr__(self, "_cls", cls)
        object.__setattr__(self, "_methods", set())

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in self._methods:
            return RemoteMethod(self._session, self._wid, name)
        is_method, value = self._session.getattr(self._wid, name)
        if is_method:
            self._methods.add(name)
            return RemoteMethod(self._session, self._wid, name)
        return value

    def __setattr__(self, name, value):
        raise AttributeError("the judge does not write into your objects")

    def __call__(self, *args, **kwargs):
        return self._session.call(self._wid, None, args, kwargs)

    def __iter__(self):
        return self._session.call(self._wid, "__iter__", (), {})

    def __next__(self):
        try:
            return self._session.call(self._wid, "__next__", (), {})
        except CandidateError as exc:
            if exc.type == "StopIteration":
                raise StopIteration from None
            raise

    def __len__(self):
        n = self._session.call(self._wid, "__len__", (), {})
        if type(n) is not int:
            raise TypeError(f"__len__ returned {type(n).__name__}")
        return n

    def __repr__(self) -> str:
        return f"<{self._cls} object in your code>"


class RemoteMethod:
    __slots__ = ("session", "wid", "name")

    def __init__(self, session: "Session", wid: int, name: str):
        self.session, self.wid, self.name = session, wid, name

    def __call__(self, *args, **kwargs):
        return self.session.call(self.wid, self.name, args, kwargs)

    def __repr__(self) -> str:
        return f"<method {self.name} of your object>"


class Candidate:
    """What a property receives as ``impl``: calling it runs the candidate's symbol in the worker."""

    def __init__(self, session: "Session", symbol: str):
        self._session = session
        self.__name__ = symbol

    def __call__(self, *args, **kwargs):
        return self._session.call(0, None, args, kwargs)

    def __repr__(self) -> str:
        return f"<your {self.__name__}>"


def _field_kind(obj, fields: tuple[str, ...]) -> str | None:
    """'copy' for a plain record with these fields, 'remote' when a field is computed (a property,
    e.g. a pointer-read counter), None when ``obj`` is not a node. Reads nothing through descriptors."""
    tp = type(obj)
    kind = "copy"
    inst = getattr(obj, "__dict__", None)
    for f in fields:
        desc = None
        for klass in tp.__mro__:
            if f in klass.__dict__:
                desc = klass.__dict__[f]
                break
        if desc is None:
            if inst is None or f not in inst:
                return None
        elif not isinstance(desc, types.MemberDescriptorType):
            kind = "remote"
    return kind


def _replace(x, swap: dict):
    if id(x) in swap:
        return swap[id(x)]
    if type(x) is list:
        return [_replace(v, swap) for v in x]
    if type(x) is tuple:
        return tuple(_replace(v, swap) for v in x)
    if type(x) is dict:
        return {k: _replace(v, swap) for k, v in x.items()}
    return x


# -- a session with one worker ----------------------------------------------------------------


class Session:
    """One sandboxed worker and the conversation with it."""

    def __init__(self, kata: Kata, file: Path, *, memory_mb: int, timeout: float, fields: tuple[str, ...],
                 preload: list[str], deny: list[str], cpu_seconds: int):
        self.kata, self.file, self.memory_mb, self.timeout = kata, file, memory_mb, timeout
        self.fields, self.preload, self.deny = fields, preload, deny
        self.limits = sandbox.Limits(memory_mb=memory_mb, cpu_seconds=cpu_seconds)
        self.codec = Codec(self._other, self._tagged)
        self.objs: dict[int, object] = {}  # judge-owned objects the worker knows: id -> object
        self.jids: dict[int, int] = {}  # id(object) -> id
        self._rows: list | None = None
        self._queued: set[int] = set()
        self._pending: list = []
        self._kinds: dict[type, str | None] = {}
        self.calls = 0
        self.budget = timeout
        self.output = bytearray()
        self.output_total = 0
        self.proc = None
        self.kind = ""
        self.alive = False
        self.tmp = None
        self.attempts: list[str] = []
        self.sig: dict = {}

    # -- process
    def start(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="mianjing-judge-")
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        launch = sandbox.plan(self.file, Path(self.tmp.name), to_r, from_w)
        self.kind = launch.kind
        try:
            self.proc = sandbox.start(launch, self.limits, (to_r, from_w))
        finally:
            os.close(to_r)
            os.close(from_w)
        self.wfd, self.rfd = to_w, from_r
        self.out_fd = self.proc.stdout.fileno()
        os.set_blocking(self.rfd, False)
        os.set_blocking(self.out_fd, False)
        os.set_blocking(self.wfd, False)  # a worker that stops reading cannot block the judge past its limit
        self.reader = FrameReader()
        self.alive = True

    def close(self) -> None:
        if self.proc is not None:
            if self.alive and self.proc.poll() is None:
                try:
                    os.write(self.wfd, frame({"op": "exit"}))
                except OSError:
                    pass
            sandbox.kill(self.proc)
            for fd in (self.wfd, self.rfd):
                try:
                    os.close(fd)
                except OSError:
                    pass
            try:
                self.proc.stdout.close()
            except OSError:
                pass
            self.proc = None
        self.alive = False
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None

    def lose(self, reason: str, timed_out: bool = False) -> WorkerLost:
        tail = self.output_tail()
        if self.proc is not None:
            sandbox.kill(self.proc)
        self.alive = False
        return WorkerLost(reason, ("your code's last output:\n" + tail) if tail else "", timed_out)

    def output_tail(self, lines: int = 15) -> str:
        text = bytes(self.output[-4000:]).decode("utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    # -- the wire
    def _drain_output(self) -> None:
        while True:
            try:
                chunk = os.read(self.out_fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                return
            if not chunk:
                return
            self.output_total += len(chunk)
            self.output += chunk
            del self.output[:-8192]
            if self.output_total > self.limits.output_bytes:
                raise self.lose(f"output limit exceeded: your code printed more than "
                                f"{self.limits.output_bytes >> 20} MiB (stopped)")

    def send(self, msg: dict) -> None:
        data = memoryview(frame(msg))
        deadline = time.monotonic() + max(self.budget, 1.0)
        while data:
            try:
                n = os.write(self.wfd, data)
                data = data[n:]
            except BlockingIOError:
                pass
            except (BrokenPipeError, OSError):
                raise self._gone() from None
            if data:
                if time.monotonic() > deadline:
                    raise self.lose(f"timed out after {self.timeout:g} s (your code stopped reading its input)", True)
                select.select([], [self.wfd], [], 0.05)

    def wait(self, limit: float | None = None, phase: str = "") -> dict:
        """The next message from the worker, counting the wait against the current budget."""
        start = time.monotonic()
        while True:
            try:
                msg = self.reader.pop()
            except WireError as exc:
                raise self.lose(f"the results stream was garbled ({exc})") from None
            if msg is not None:
                self.budget -= time.monotonic() - start
                return msg
            left = (limit if limit is not None else self.budget) - (time.monotonic() - start)
            if left <= 0:
                if limit is not None:
                    raise self.lose(f"the worker did not start within {limit:.0f} s (machine overloaded?)")
                raise self.lose(f"timed out after {self.timeout:g} s{phase} (an infinite loop, or far too slow)", True)
            ready, _, _ = select.select([self.rfd, self.out_fd], [], [], min(left, 0.5))
            if self.out_fd in ready:
                self._drain_output()
            if self.rfd in ready:
                try:
                    chunk = os.read(self.rfd, 1 << 20)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    raise self._gone()
                self.reader.feed(chunk)

    def _gone(self) -> WorkerLost:
        """The results stream closed: the worker died, or its code closed the stream."""
        rc = None
        if self.proc is not None:
            try:
                rc = self.proc.wait(timeout=3)
            except Exception:  # noqa: BLE001 -- still running with the stream closed
                rc = None
        try:
            self._drain_output()
        except WorkerLost:
            pass
        if rc is None or rc == CHANNEL_LOST:
            return self.lose("the results stream was closed or broken by your code (the judge cannot read "
                             "its results)")
        if rc == 0:
            return self.lose("your code exited with code 0 before answering (os._exit or sys.exit in a thread)")
        return self.lose(_death(rc, self.kind))

    # -- values
    def _jid(self, obj) -> int:
        jid = self.jids.get(id(obj))
        if jid is None or self.objs.get(jid) is not obj:
            jid = len(self.objs) + 1
            self.objs[jid] = obj
            self.jids[id(obj)] = jid
        return jid

    def _other(self, x) -> dict:
        if isinstance(x, WorkerRef):
            return {"w": x._wid}
        tp = type(x)
        kind = self._kinds.get(tp)
        if kind is None:
            kind = _field_kind(x, self.fields)
            if not hasattr(x, "__dict__"):  # a slots class: the same answer for every instance
                self._kinds[tp] = kind
        if kind == "remote":
            return {"j": self._jid(x)}
        if kind == "copy":
            jid = self._jid(x)
            if self._rows is not None and jid not in self._queued:
                self._queued.add(jid)
                self._pending.append((jid, x))
            return {"n": jid}
        raise WireError(f"the judge cannot pass a {type(x).__name__} to the candidate's code")

    def _tagged(self, tag: str, p):
        if tag in ("n", "j"):
            obj = self.objs.get(p) if isinstance(p, int) else None
            if obj is None:
                raise WireError(f"an unknown node id {p!r}")
            return obj
        if tag == "w":
            if not (isinstance(p, list) and len(p) == 2 and isinstance(p[0], int)):
                raise WireError("a malformed object reference")
            return WorkerRef(self, p[0], str(p[1])[:80])
        raise WireError(f"an unknown tag {tag!r}")

    def encode_with_nodes(self, value) -> tuple[object, list]:
        """``value`` encoded, and the table of the tree nodes it reaches (built without recursion:
        a chain of 5000 nodes is 5000 rows, not 5000 nested frames)."""
        self._rows, self._queued, self._pending = [], set(), []
        try:
            out = self.codec.encode(value)
            enc, kinds, jids, objs = self.codec.encode, self._kinds, self.jids, self.objs
            while self._pending:
                jid, node = self._pending.pop()
                row = [jid]
                for f in self.fields:
                    v = getattr(node, f)
                    if v is None or type(v) is int:  # the common cases, inline: a value, a missing child...
                        row.append(v)
                    elif kinds.get(type(v)) == "copy" and objs.get(jids.get(id(v), -1)) is v:
                        cid = jids[id(v)]  # ... and a child already known
                        if cid not in self._queued:
                            self._queued.add(cid)
                            self._pending.append((cid, v))
                        row.append({"n": cid})
                    else:
                        row.append(enc(v))
                self._rows.append(row)
            return out, self._rows
        finally:
            self._rows = None

    def decode(self, v):
        try:
            return self.codec.decode(v)
        except WireError as exc:
            raise self.lose(f"the results stream was garbled ({exc})") from None
        except (ValueError, TypeError, RecursionError) as exc:
            raise self.lose(f"the results stream was garbled ({type(exc).__name__})") from None

    def apply_changes(self, rows) -> None:
        if not rows:
            return
        if not isinstance(rows, list):
            raise self.lose("the results stream was garbled (a malformed list of changes)")
        for row in rows:
            if not (isinstance(row, list) and len(row) == len(self.fields) + 1 and row[0] in self.objs):
                raise self.lose("the results stream was garbled (a change to an unknown node)")
            obj = self.objs[row[0]]
            for f, v in zip(self.fields, row[1:]):
                new = self.decode(v)
                if getattr(obj, f) is not new:
                    setattr(obj, f, new)

    # -- the conversation
    def greet(self) -> None:
        """Wait for the worker's Python to start (inside the sandbox)."""
        hello = self.wait(limit=STARTUP_LIMIT)
        if hello.get("op") != "hello":
            raise self.lose("the results stream was garbled (no greeting from the worker)")

    def load_candidate(self) -> dict:
        """Import the candidate's file in the worker. Returns its 'loaded' or 'fatal' message."""
        self.send({"op": "load", "file": str(self.file), "symbol": self.kata.symbol, "fields": list(self.fields),
                   "preload": self.preload, "deny_paths": self.deny})
        pre = self.wait(limit=STARTUP_LIMIT)
        if pre.get("op") != "preloaded":
            raise self.lose("the results stream was garbled (the worker did not get ready)")
        self.budget = self.timeout
        msg = self.wait(phase=" while importing your file")
        if msg.get("op") not in ("loaded", "fatal"):
            raise self.lose("the results stream was garbled (an unexpected message at import)")
        self.attempts = [str(a)[:200] for a in msg.get("attempts") or []][:20]
        return msg

    def reset(self) -> None:
        self.objs.clear()
        self.jids.clear()
        self.send({"op": "reset"})

    def exchange(self, msg: dict) -> dict:
        """Send a request; serve the worker's reads/writes of judge-owned nodes until it answers."""
        self.send(msg)
        while True:
            m = self.wait()
            op = m.get("op")
            if op in ("return", "raise", "value"):
                self.apply_changes(m.get("changes"))
                return m
            if op in ("getattr", "setattr"):
                self.serve(m)
                continue
            if op == "garbled":
                raise self.lose(f"the results stream was garbled ({str(m.get('message'))[:200]})")
            raise self.lose(f"the results stream was garbled (unexpected {str(op)[:40]!r})")

    def serve(self, m: dict) -> None:
        obj = self.objs.get(m.get("target")) if isinstance(m.get("target"), int) else None
        name = m.get("name")
        if obj is None or name not in self.fields:
            self.send({"op": "error", "message": f"no field {name!r} on that node"})
            return
        if m["op"] == "getattr":
            v, rows = self.encode_with_nodes(getattr(obj, name))
            self.send({"op": "value", "v": v, "nodes": rows})
        else:
            setattr(obj, name, self.decode(m.get("v")))
            self.send({"op": "value", "v": None})

    def getattr(self, wid: int, name: str) -> tuple[bool, object]:
        m = self.exchange({"op": "getattr", "target": wid, "name": name})
        if m["op"] == "raise":
            raise CandidateError(m)
        if m.get("method"):
            return True, None
        return False, self.decode(m.get("v"))

    def call(self, target: int, method: str | None, args: tuple, kwargs: dict):
        if not self.alive:
            raise WorkerLost("the worker is gone")
        torch = sys.modules.get("torch")
        if torch is not None and torch.is_grad_enabled() and any(t.requires_grad for t in _tensors([list(args), kwargs])):
            return self._call_with_grad(target, method, args, kwargs)
        return self._call(target, method, args, kwargs, grad=False)[0]

    def _call(self, target, method, args, kwargs, grad: bool):
        self.calls += 1
        call_id = self.calls
        try:
            (enc_args, enc_kwargs), rows = self.encode_with_nodes([list(args), dict(kwargs)])
        except WireError as exc:
            raise TypeError(str(exc)) from None
        m = self.exchange({"op": "call", "id": call_id, "target": target, "method": method, "args": enc_args,
                           "kwargs": enc_kwargs, "nodes": rows, "grad": grad})
        if m["op"] == "raise":
            raise CandidateError(m)
        if m["op"] != "return":
            raise self.lose("the results stream was garbled (an answer that is not a result)")
        return self.decode(m.get("v")), call_id

    def _call_with_grad(self, target, method, args, kwargs):
        import torch

        session = self
        inputs = [t for t in _tensors([list(args), kwargs]) if t.requires_grad]
        holder: dict = {}

        class RemoteCall(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *_inputs):
                value, call_id = session._call(target, method, args, kwargs, grad=True)
                outs = [t for t in _tensors(value) if t.requires_grad]
                holder["value"], holder["outs"] = value, outs
                ctx.call_id = call_id
                ctx.shapes = [(t.shape, t.dtype) for t in _inputs]
                if not outs:
                    dummy = torch.zeros(())
                    ctx.mark_non_differentiable(dummy)
                    return dummy
                return tuple(t.detach() for t in outs)

            @staticmethod
            def backward(ctx, *grads):
                m = session.exchange({"op": "backward", "id": ctx.call_id,
                                      "grads": session.codec.encode([g.contiguous() for g in grads])})
                if m["op"] == "raise":
                    raise CandidateError(m)
                got = session.decode(m.get("v"))
                if not isinstance(got, list) or len(got) != len(ctx.shapes):
                    raise CandidateError({"type": "GradientError", "kind": "unsendable",
                                          "message": "the backward pass returned the wrong number of gradients"})
                out = []
                for g, (shape, dtype) in zip(got, ctx.shapes):
                    if g is None:
                        out.append(None)
                        continue
                    if not isinstance(g, torch.Tensor) or tuple(g.shape) != tuple(shape):
                        raise CandidateError({"type": "GradientError", "kind": "error",
                                              "message": f"a gradient of shape {tuple(getattr(g, 'shape', ()))} "
                                                         f"for an input of shape {tuple(shape)}"})
                    out.append(g.to(dtype))
                return tuple(out)

        res = RemoteCall.apply(*inputs)
        outs = holder["outs"]
        if not outs:
            return holder["value"]
        graph = res if isinstance(res, tuple) else (res,)
        return _replace(holder["value"], {id(o): g for o, g in zip(outs, graph)})


# -- the judge -----------------------------------------------------------------------------


def _signature_problem(ref: dict, cand: dict, symbol: str) -> str | None:
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
    if ref is None or cand is None or not isinstance(cand, list):
        return None
    try:
        cand = [(str(n), str(k), bool(d)) for n, k, d in cand]
    except (TypeError, ValueError):
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
    """Heavy modules the reference imports (torch, numpy): loaded in the worker before the
    candidate's file, so the import limit counts only the candidate's own import."""
    text = (root / kata.ref_path).read_text(encoding="utf-8")
    return [m for m in ("torch", "numpy") if re.search(rf"^\s*(import|from)\s+{m}\b", text, re.M)]


def _deny_paths(root: Path) -> list[str]:
    return [str(root / d) for d in ("impls", "verifiers", "src", "tests", "figures", "benchmarks", "qa")]


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


def _fatal_reason(msg: dict, symbol: str, memory_mb: int) -> tuple[str, str]:
    reason = msg.get("reason")
    if reason == "syntax error":
        return "syntax error", str(msg.get("message", ""))
    if reason == "missing":
        return f"your file defines no `{symbol}`", ""
    err = CandidateError(msg)
    detail = "\n".join(x for x in (err.text if err.kind not in ("notimpl", "denied", "exit") else "", err.where) if x)
    return f"importing your file failed: {_reason_for(err, memory_mb)}", detail


def judge(root: Path, kata: Kata, file: Path, *, timeout: float = 30.0, memory_mb: int = 4096,
          on_result=None, only: list[str] | None = None, on_start=None) -> JudgeResult:
    """Judge ``file`` against ``kata``; ``on_result(PropResult)`` is called as each property finishes.

    ``timeout``: seconds the candidate's code may run while importing its file, and again during
    each property (time spent in the judge's own code does not count). ``only``: run just these
    properties. ``on_start(sandbox_kind)`` is called once the worker is up.
    """
    check_options(timeout, memory_mb)
    res = JudgeResult(kata)
    file = Path(file).resolve()
    started = time.monotonic()
    names = [n for n, _ in kata.properties(root) if not only or n in only]
    fields = kata.node_fields(root) or DEFAULT_FIELDS
    cpu = int(60 + timeout * (len(names) + 2) * 2)
    if sandbox.wanted() == "bwrap" and sandbox.bwrap_path() is None:
        raise JudgeOptionError("MIANJING_SANDBOX=bwrap, but bubblewrap is not installed or cannot create "
                               "namespaces here (apt-get install bubblewrap)")

    def new_session() -> Session:
        return Session(kata, file, memory_mb=memory_mb, timeout=timeout, fields=fields,
                       preload=_preload(root, kata), deny=_deny_paths(root), cpu_seconds=cpu)

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
            if on_start and not lost.reason.startswith("the worker"):
                on_start(session.kind)
            res.fatal = lost.reason if lost.reason.startswith("the worker") else \
                f"importing your file failed: {lost.reason}"
            res.fatal_detail = lost.detail
            return res
        res.sandbox = session.kind
        res.attempts = list(session.attempts)
        if on_start:
            on_start(session.kind)
        if loaded["op"] == "fatal":
            res.fatal, res.fatal_detail = _fatal_reason(loaded, kata.symbol, memory_mb)
            imports = [a for a in session.attempts if a.startswith("import ")]
            if imports and "runs your code alone" not in res.fatal:
                res.fatal += f" (it tried to {imports[0]}: the judge runs your code alone)"
            return res
        problem = _signature_problem(describe_symbol(ref), loaded.get("sig") or {}, kata.symbol)
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
                elif not stop_reason:
                    try:
                        session.reset()
                    except WorkerLost as lost:
                        pr = PropResult(name, False, lost.reason, lost.detail)
                if stop_reason:
                    pr = PropResult(name, None, f"not run ({stop_reason})")
                if pr is None:
                    session.budget = timeout
                    t = time.monotonic()
                    try:
                        prop(Candidate(session, kata.symbol))
                    except KeyboardInterrupt:
                        raise
                    except BaseException as exc:  # noqa: BLE001 -- every failure is a result
                        pr = PropResult(name, False, seconds=round(time.monotonic() - t, 2),
                                        **describe(exc, memory_mb))
                        lost = _first_exception(exc)
                        if isinstance(lost, WorkerLost):
                            session.alive = False
                            if lost.timed_out:
                                stop_reason = f"{name} timed out"
                    else:
                        pr = PropResult(name, True, seconds=round(time.monotonic() - t, 2))
                res.props.append(pr)
                res.attempts = sorted(set(res.attempts) | set(session.attempts))
                if on_result:
                    on_result(pr)
    finally:
        session.close()
        res.seconds = time.monotonic() - started
        if res.fatal:
            res.props = [PropResult(n, None, "not run") for n in names]
    return res


def print_result(console: Console, r: PropResult) -> None:
    if r.passed:
        console.print(f"  PASS  {r.name}  ({r.seconds:.1f} s)", markup=False, style="green")
        return
    if r.passed is None:
        console.print(f"  ----  {r.name}: {r.reason or 'not run'}", markup=False, style="dim")
        return
    console.print(f"  FAIL  {r.name}: {r.reason}", markup=False, style="bold red")
    # An assertion message already names inputs, expected and got; for a crash the shrunk example does.
    example = "" if (r.reason == "wrong result" and "input" in r.message) else r.example
    for block in (r.message, example, r.where):
        if block:
            for line in block.splitlines():
                console.print(f"        {line}", markup=False, soft_wrap=True)


def record_review(root: Path, store, kata: Kata, res: JudgeResult, lang: str) -> str | None:
    """A judged kata is a review of its entry: all passed -> Good, most -> Hard, else Again."""
    from . import scheduler
    from .grading import AGAIN, GOOD, HARD
    from ..loader import load
    from .katas import entry_for
    from .store import Review, now_utc

    entry = entry_for(load(root).kb, kata)
    if entry is None:
        return None
    n = len(res.props)
    rating = GOOD if res.ok else (HARD if not res.fatal and n and res.passed * 2 >= n else AGAIN)
    at = now_utc()
    covered = [f"kata {kata.name}: {p.name}" for p in res.props if p.passed]
    missed = [f"kata {kata.name}: {p.name}" for p in res.props if not p.passed]
    due = store.record(
        Review(entry_id=entry.id, topic=entry.topic, rating=rating, reviewed_at=at.isoformat(), source="kata",
               covered=covered, missed=missed, duration_s=round(res.seconds, 2), suggested=rating, lang=lang),
        scheduler.card_id(entry.id), lambda cj: scheduler.review(cj, entry.id, rating, at))
    from .session import human_due

    return f"recorded as a review of `{entry.id}` ({scheduler.RATINGS[rating]}); next review {human_due(due)}"
