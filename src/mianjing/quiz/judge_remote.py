"""The judge's side of the conversation with one worker: its process, the requests, the proxies.

A call through a proxy ships its arguments as plain data and rebuilds the result from plain data on
this side (``judge_wire.py``): never an object of the candidate's classes. Tree nodes are copied into
the worker and the candidate's writes copied back; nodes whose fields are computed (the properties'
pointer-read counters) stay here and every read is a request this side serves, so the count cannot
be touched by the candidate. Gradients flow through a custom autograd function whose backward asks
the worker for the vector-Jacobian product. Objects the candidate returns (an iterator) stay in the
worker; the proxy forwards method calls and gets plain data back.

Anything that goes wrong between sending a request and reading its answer (a frame the wire refuses,
a message of the wrong shape, an exception in this side's handling) loses the worker: it is killed,
so no answer can be left in the stream for a later call to read as its own.
"""

from __future__ import annotations

import os
import select
import sys
import time
import types
from pathlib import Path

from . import sandbox
from .judge_lost import CandidateError, WorkerLost, death
from .judge_wire import CHANNEL_LOST, FROM_JUDGE, FROM_WORKER, Codec, FrameReader, WireError, check, frame, tensors
from .judge_wire import texts

STARTUP_LIMIT = 180.0  # seconds for the worker's Python (and torch) to start on a slow, busy machine
POLL = 0.5  # seconds per wait for the worker; a longer gap means this process was stopped, and is not counted
REPLIES = ("return", "raise", "value", "getattr", "setattr", "compare", "hash", "garbled")
KEY_OPS = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__")


def is_key(obj) -> bool:
    """A counted key: a judge-owned value the worker may only compare and hash (``verifiers/katas/counted.py``)."""
    return getattr(type(obj), "__mianjing_key__", False) is True


class KeyStop(Exception):
    """Raised by a counted key's comparison or hash when its budget is spent: the worker's code gets an
    exception instead of an answer (``JudgeStop`` there), and the property reports the budget."""


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

    def _mianjing_calls(self, seq: list) -> list:
        """Call ``[(method, args), ...]`` on this object in one round trip (``verifiers/katas/budgets.replay``)."""
        return self._session.batch(self._wid, seq)

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
    """What a property receives as ``impl``: calling it runs the candidate's symbol in the worker;
    ``metered`` runs it under the worker's meters (``judge_meters.py``, ``verifiers/katas/budgets.py``);
    ``compiled_ptx`` compiles one of the candidate's Triton kernels for a GPU target in a worker and returns
    the PTX as text (``verifiers/katas/kernels.py``)."""

    def __init__(self, session: "Session", symbol: str, compiler=None):
        self._session = session
        self._compiler = compiler
        self.__name__ = symbol

    def compiled_ptx(self, kernel: str, request: dict) -> str:
        if self._compiler is None:
            raise TypeError("this judge cannot compile kernels")
        return self._compiler(kernel, request)

    def __call__(self, *args, **kwargs):
        return self._session.call(0, None, args, kwargs)

    def metered(self, args: tuple, kwargs: dict, watch: int | None = None) -> tuple[object, dict]:
        return self._session.call(0, None, args, kwargs, measure={"watch": watch})

    def allocated(self, args: tuple, kwargs: dict) -> tuple[object, dict]:
        """The call under the worker's tracemalloc: ``(value, {"peak_bytes", "traced", ...})``."""
        return self._session.call(0, None, args, kwargs, measure={"alloc": True})

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


class Session:
    """One sandboxed worker and the conversation with it."""

    def __init__(self, file: Path, symbol: str, *, memory_mb: int, timeout: float, fields: tuple[str, ...],
                 preload: list[str], deny: list[str], cpu_seconds: int, recursion_limit: int | None = None,
                 env: dict[str, str] | None = None):
        self.file, self.symbol, self.memory_mb, self.timeout = file, symbol, memory_mb, timeout
        self.fields, self.preload, self.deny, self.recursion_limit = fields, preload, deny, recursion_limit
        self.env = dict(env or {})  # set in the worker before the preloads (TRITON_INTERPRET for kernel katas)
        self.limits = sandbox.Limits(memory_mb=memory_mb, cpu_seconds=cpu_seconds)
        self.codec = Codec(self._other, self._tagged)
        self.objs: dict[int, object] = {}  # judge-owned objects the worker knows: id -> object
        self.jids: dict[int, int] = {}  # id(object) -> id
        self._rows: list | None = None
        self._queued: set[int] = set()
        self._pending: list = []
        self._kinds: dict[type, str | None] = {}
        self._made: dict[int, object] = {}  # the nodes the candidate made, from the last reply's table
        self.made_class = type("Node", (), {"__slots__": tuple(fields) + ("__weakref__",),
                                            "__repr__": lambda n: f"Node({getattr(n, fields[0], None)!r})"})
        self._rng = __import__("random").SystemRandom()
        self.calls = 0
        self.budget = timeout
        self.limit_note = ""  # set while a property runs under its own, shorter time limit (TIME_LIMITS)
        self.output = bytearray()
        self.output_total = 0
        self.proc = None
        self.kind = ""
        self.launch: sandbox.Launch | None = None
        self.confinement: dict = {}
        self.alive = False
        self.workspace: sandbox.Workspace | None = None
        self.attempts: list[str] = []

    # -- process
    def start(self) -> None:
        self.workspace = sandbox.Workspace(self.file)
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        self.launch = sandbox.plan(self.workspace, str(self.file), to_r, from_w, self.preload, self.deny)
        self.kind = self.launch.kind
        try:
            self.proc = sandbox.start(self.launch, self.limits, (to_r, from_w))
        finally:
            os.close(to_r)
            os.close(from_w)
        self.wfd, self.rfd = to_w, from_r
        self.out_fd = self.proc.stdout.fileno()
        os.set_blocking(self.rfd, False)
        os.set_blocking(self.out_fd, False)
        os.set_blocking(self.wfd, False)  # a worker that stops reading cannot block the judge past its limit
        self.reader = FrameReader(FROM_WORKER)
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
        if self.workspace is not None:
            self.workspace.remove()
            self.workspace = None

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
        data = memoryview(frame(msg, FROM_JUDGE))
        waited = 0.0
        while data:
            try:
                n = os.write(self.wfd, data)
                data = data[n:]
            except BlockingIOError:
                pass
            except OSError:
                raise self._gone() from None
            if data:
                if waited > max(self.budget, 1.0):
                    raise self.lose(f"timed out after {self.timeout:g} s (your code stopped reading its input)", True)
                t = time.monotonic()
                select.select([], [self.wfd], [], 0.05)
                waited += min(time.monotonic() - t, 0.05 + 0.01)

    def wait(self, limit: float | None = None, phase: str = "", allowed: tuple[str, ...] = REPLIES) -> dict:
        """The next message from the worker (checked by the wire), counting the wait against the current
        budget. Time this process spent stopped (SIGSTOP, Ctrl-Z) is not counted: only up to one poll
        per loop."""
        spent = 0.0
        while True:
            try:
                msg = self.reader.pop()
                if msg is not None:
                    msg = check(msg, allowed)
            except WireError as exc:
                raise self.lose(f"the results stream was garbled ({exc})") from None
            if msg is not None:
                self.budget -= spent
                return msg
            left = (limit if limit is not None else self.budget) - spent
            if left <= 0:
                if limit is not None:
                    raise self.lose(f"the worker did not start within {limit:.0f} s (machine overloaded?)")
                raise self.lose(f"timed out after {self.timeout:g} s{phase}{self.limit_note} (an infinite loop, or far "
                                "too slow)", True)
            step = min(left, POLL)
            t = time.monotonic()
            ready, _, _ = select.select([self.rfd, self.out_fd], [], [], step)
            spent += min(time.monotonic() - t, step + 0.25)
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
        return self.lose(death(rc, self.kind))

    # -- values
    def _jid(self, obj) -> int:
        jid = self.jids.get(id(obj))
        if jid is None or self.objs.get(jid) is not obj:
            jid = len(self.objs) + 1
            self.objs[jid] = obj
            self.jids[id(obj)] = jid
        return jid

    def _key_id(self, obj) -> int:
        """A counted key's id: random (from 2**40 up, apart from the nodes' 1, 2, 3...), so that nothing about
        the keys' values or the order they were made in can be read from it."""
        jid = self.jids.get(id(obj))
        if jid is None or self.objs.get(jid) is not obj:
            jid = self._rng.randrange(1 << 40, 1 << 52)
            while jid in self.objs:
                jid = self._rng.randrange(1 << 40, 1 << 52)
            self.objs[jid] = obj
            self.jids[id(obj)] = jid
        return jid

    def _other(self, x) -> dict:
        if isinstance(x, WorkerRef):
            return {"w": x._wid}
        if is_key(x):
            return {"k": self._key_id(x)}
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
        if tag in ("n", "j", "k"):
            obj = self.objs.get(p) if type(p) is int else None
            if obj is None or (tag == "k") != is_key(obj):
                raise WireError(f"an unknown {'key' if tag == 'k' else 'node'} id {str(p)[:20]}")
            return obj
        if tag == "m":
            node = self._made.get(p) if type(p) is int else None
            if node is None:
                raise WireError(f"an unknown made node {str(p)[:20]}")
            return node
        if tag == "w":
            if not (isinstance(p, list) and len(p) == 2 and type(p[0]) is int):
                raise WireError("a malformed object reference")
            return WorkerRef(self, p[0], str(p[1])[:80])
        raise WireError(f"an unknown tag {str(tag)[:20]!r}")

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
        except Exception as exc:  # noqa: BLE001 -- whatever a malformed value makes the decoder raise
            raise self.lose(f"the results stream was garbled ({type(exc).__name__})") from None

    def load_made(self, rows) -> None:
        """The nodes the candidate made that this reply reaches, rebuilt here as plain nodes of ``made_class``
        (two passes: every node first, then the fields, which may name each other)."""
        self._made = {}
        if not rows:
            return
        if not isinstance(rows, list):
            raise self.lose("the results stream was garbled (a malformed table of made nodes)")
        width = len(self.fields) + 1
        for row in rows:
            if not (isinstance(row, list) and len(row) == width and type(row[0]) is int and row[0] not in self._made):
                raise self.lose("the results stream was garbled (a malformed made node)")
            self._made[row[0]] = self.made_class.__new__(self.made_class)
        for row in rows:
            node = self._made[row[0]]
            for f, v in zip(self.fields, row[1:]):
                object.__setattr__(node, f, self.decode(v))

    def apply_changes(self, rows) -> None:
        if not rows:
            return
        for row in rows:
            if not (isinstance(row, list) and len(row) == len(self.fields) + 1 and type(row[0]) is int
                    and row[0] in self.objs):
                raise self.lose("the results stream was garbled (a change to an unknown node)")
            obj = self.objs[row[0]]
            for f, v in zip(self.fields, row[1:]):
                new = self.decode(v)
                if getattr(obj, f) is not new:
                    setattr(obj, f, new)

    # -- the conversation
    def greet(self) -> None:
        """Wait for the worker's Python to start (inside the sandbox)."""
        self.wait(limit=STARTUP_LIMIT, allowed=("hello",))

    def load_candidate(self) -> dict:
        """Confine the worker and import the candidate's file there. Returns its 'loaded' or 'fatal' message."""
        self.send({"op": "load", "file": self.launch.file, "display": str(self.file), "symbol": self.symbol,
                   "fields": list(self.fields), "preload": self.preload, "deny_paths": self.deny,
                   "confine": self.launch.confine, "recursion_limit": self.recursion_limit, "env": self.env})
        pre = self.wait(limit=STARTUP_LIMIT, allowed=("preloaded",))
        self.confinement = pre.get("confinement", {})
        self.budget = self.timeout
        msg = self.wait(phase=" while importing your file", allowed=("loaded", "fatal"))
        self.attempts = texts(msg.get("attempts"))
        return msg

    def reset(self) -> None:
        self.objs.clear()
        self.jids.clear()
        self.send({"op": "reset"})

    def exchange(self, msg: dict) -> dict:
        """Send a request; serve the worker's reads/writes of judge-owned nodes until it answers. Any
        failure on the way loses the worker (its answer would otherwise wait in the stream)."""
        self.send(msg)
        try:
            while True:
                m = self.wait()
                op = m["op"]
                if op in ("return", "raise", "value"):
                    self.load_made(m.get("made"))
                    self.apply_changes(m.get("changes"))
                    self.attempts = sorted(set(self.attempts) | set(texts(m.get("attempts"))))[:20]
                    return m
                if op in ("getattr", "setattr", "compare", "hash"):
                    self.serve(m)
                    continue
                raise self.lose(f"the results stream was garbled ({str(m.get('message', op))[:200]})")
        except WorkerLost:
            raise
        except KeyboardInterrupt:
            self.lose("interrupted")
            raise
        except BaseException as exc:  # noqa: BLE001 -- this side failed on what the worker sent
            raise self.lose(f"the results stream was garbled ({type(exc).__name__})") from None

    def serve(self, m: dict) -> None:
        if m["op"] in ("compare", "hash"):
            self.serve_key(m)
            return
        obj = self.objs.get(m.get("target"))
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

    def serve_key(self, m: dict) -> None:
        """A counted key compared or hashed in the worker: the key's own method answers here (and counts)."""
        obj = self.objs.get(m.get("target"))
        if obj is None or not is_key(obj):
            self.send({"op": "error", "message": "no such key"})
            return
        tp = type(obj)
        try:
            if m["op"] == "hash":
                r = tp.__hash__(obj)
                if type(r) is not int:
                    raise TypeError("a key's hash is not an int")
            else:
                name = m.get("name")
                if name not in KEY_OPS:
                    self.send({"op": "error", "message": f"a key has no operation {str(name)[:20]!r}"})
                    return
                r = getattr(tp, name)(obj, self.decode(m.get("v")))
                if r is NotImplemented:
                    r = None
                elif type(r) is not bool:
                    raise TypeError("a key's comparison is not a bool")
        except KeyStop as stop:
            self.send({"op": "error", "stop": True, "message": str(stop)[:300]})
            return
        self.send({"op": "value", "v": r})

    def batch(self, wid: int, seq: list) -> list:
        """``[(method, args), ...]`` called in order on the worker's object ``wid``, in one round trip. If one
        raises, the CandidateError carries ``index``, the position of the call that raised."""
        if not self.alive:
            raise WorkerLost("the worker is gone")
        methods: dict[str, int] = {}
        which, arity, flat = [], [], []
        for name, args in seq:
            which.append(methods.setdefault(str(name), len(methods)))
            arity.append(len(args))
            flat += args
        try:
            enc, rows = self.encode_with_nodes(flat)
        except WireError as exc:
            raise TypeError(str(exc)) from None
        m = self.exchange({"op": "calls", "target": wid, "methods": list(methods), "which": which, "arity": arity,
                           "args": enc, "nodes": rows})
        if m["op"] == "raise":
            err = CandidateError(m)
            err.index = m.get("index", -1)
            raise err
        if m["op"] != "return":
            raise self.lose("the results stream was garbled (an answer that is not a result)")
        got = self.decode(m.get("v"))
        if not isinstance(got, list) or len(got) != len(seq):
            raise self.lose("the results stream was garbled (a batch answered with the wrong number of results)")
        return got

    def compile_ptx(self, kernel: str, request: dict) -> str:
        """The worker compiles the candidate's ``kernel`` (``judge_compile.py``); its PTX comes back as a string."""
        if not self.alive:
            raise WorkerLost("the worker is gone")
        self.budget = self.timeout
        m = self.exchange({"op": "compile", "kernel": kernel, "request": request})
        if m["op"] == "raise":
            raise CandidateError(m)
        raw = self.decode(m.get("v")) if m["op"] == "return" else None
        if not isinstance(raw, bytes):
            raise self.lose("the results stream was garbled (a compile that did not return text)")
        return raw.decode("utf-8", errors="replace")

    def getattr(self, wid: int, name: str) -> tuple[bool, object]:
        m = self.exchange({"op": "getattr", "target": wid, "name": name})
        if m["op"] == "raise":
            raise CandidateError(m)
        if m.get("method"):
            return True, None
        return False, self.decode(m.get("v"))

    def call(self, target: int, method: str | None, args: tuple, kwargs: dict, measure: dict | None = None):
        """The candidate's ``target.method(*args, **kwargs)``; with ``measure``, ``(value, usage)``."""
        if not self.alive:
            raise WorkerLost("the worker is gone")
        torch = sys.modules.get("torch")
        if (measure is None and torch is not None and torch.is_grad_enabled()
                and any(t.requires_grad for t in tensors([list(args), kwargs]))):
            return self._call_with_grad(target, method, args, kwargs)
        value, _, usage = self._call(target, method, args, kwargs, grad=False, measure=measure)
        return value if measure is None else (value, usage)

    def _call(self, target, method, args, kwargs, grad: bool, measure: dict | None = None):
        self.calls += 1
        call_id = self.calls
        try:
            (enc_args, enc_kwargs), rows = self.encode_with_nodes([list(args), dict(kwargs)])
        except WireError as exc:
            raise TypeError(str(exc)) from None
        req = {"op": "call", "id": call_id, "target": target, "method": method, "args": enc_args,
               "kwargs": enc_kwargs, "nodes": rows, "grad": grad}
        if measure is not None:
            req["measure"] = measure
        m = self.exchange(req)
        if m["op"] == "raise":
            raise CandidateError(m)
        if m["op"] != "return":
            raise self.lose("the results stream was garbled (an answer that is not a result)")
        usage = m.get("usage")
        if measure is not None and not isinstance(usage, dict):
            raise self.lose("the results stream was garbled (a measured call without its measurement)")
        return self.decode(m.get("v")), call_id, usage

    def _call_with_grad(self, target, method, args, kwargs):
        import torch

        session = self
        inputs = [t for t in tensors([list(args), kwargs]) if t.requires_grad]
        holder: dict = {}

        class RemoteCall(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *_inputs):
                value, call_id, _ = session._call(target, method, args, kwargs, grad=True)
                outs = [t for t in tensors(value) if t.requires_grad]
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
