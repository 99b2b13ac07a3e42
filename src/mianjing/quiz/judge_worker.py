"""The judge's worker: imports the candidate's file and calls its function, nothing else.

Run as ``python -I -B judge_worker.py RFD WFD`` (see ``sandbox.py``). It holds no property, no
reference implementation and no verdict: the judge (the trusted side, in its own process) sends it
inputs over two inherited pipe descriptors and receives plain data back (``judge_wire.py``, which
this file imports from its own folder, like ``judge_confine.py``, ``judge_meters.py`` and
``judge_compile.py``: the sandbox holds copies of these five files and nothing else of the judge).

Until it imports the candidate's file the worker is trusted code: it greets the judge, loads torch
and numpy when the kata needs them, confines itself as the judge's plan says (``judge_confine.py``:
seccomp everywhere; an unprivileged uid or no capabilities, and Landlock, without bubblewrap) and
reports what held. Whatever the candidate does afterwards to this interpreter can change only what
this process *sends*; the judge rebuilds every value from bytes and compares it with its own oracle.
"""

from __future__ import annotations

import linecache
import os
import sys
import time
import traceback
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from judge_wire import CHANNEL_LOST, FROM_JUDGE, FROM_WORKER, Codec, FrameReader, WireError, describe_symbol, frame  # noqa: E402
from judge_wire import _torch, tensors as _tensors  # noqa: E402

DENIED_TOPLEVEL = ("impls", "verifiers", "mianjing", "tests", "figures", "benchmarks")
PROCESS_EVENTS = ("subprocess.Popen", "os.system", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec")
FSIZE_ERRNO = 27  # EFBIG
DEFAULT_RECURSION_LIMIT = 1000


class Denied(ImportError):
    """An import the judge refuses."""


class Refused(PermissionError):
    """Something else the judge refuses: a process, the network, a file of the checkout."""


class JudgeStop(Exception):
    """The judge refused to answer a counted key's comparison or hash: the property's budget of
    operations is spent (the property fails whatever the candidate's code does with this exception)."""


_TM: dict = {}  # tracemalloc's own functions, kept before the candidate's file runs (see _guard)


class _Worker:
    def __init__(self, rfd: int, wfd: int):
        self.rfd, self.wfd = rfd, wfd
        self.reader = FrameReader(FROM_JUDGE)
        self.objects: dict[int, object] = {}  # worker-owned objects the judge holds ({"w": id})
        self.ids: dict[int, int] = {}  # id(obj) -> worker id
        self.mirror: dict[int, object] = {}  # judge node id -> the worker's copy
        self.remote: dict[int, object] = {}  # judge object id -> proxy
        self.keys: dict[int, object] = {}  # judge key id -> its stand-in (_JudgeKey)
        self.dirty: set = set()
        self.graphs: dict[int, tuple] = {}  # call id -> (inputs needing grad, outputs)
        self.fields: tuple[str, ...] = ("val", "left", "right")
        self.file = ""  # the path the candidate's code knows its file by (tracebacks, __file__)
        self.attempts: list[str] = []
        self.codec = Codec(self._other, self._tagged)
        self.node_class = None
        self.making = False  # while a reply is encoded: objects of the candidate's with the node fields go as data
        self.made_ids: dict[int, int] = {}  # id(object) -> its number in this reply's table of made nodes
        self.made_queue: list = []
        self.made_keep: list = []  # the objects numbered (alive until the reply is sent: ids stay unique)

    # -- channel
    def send(self, **msg) -> None:
        try:
            data = frame(msg, FROM_WORKER)
        except (WireError, ValueError, TypeError) as exc:  # too big for the judge, or not JSON: say so instead
            if msg.get("op") not in ("return", "value", "raise"):
                raise
            data = frame({"op": "raise", "type": "WireError", "kind": "unsendable", "message": str(exc)[:300],
                          "where": "", "changes": []}, FROM_WORKER)
        view = memoryview(data)
        while view:
            n = os.write(self.wfd, view)
            view = view[n:]

    def recv(self) -> dict:
        while True:
            msg = self.reader.pop()
            if msg is not None:
                return msg
            chunk = os.read(self.rfd, 1 << 16)
            if not chunk:
                os._exit(0)  # the judge went away
            self.reader.feed(chunk)

    # -- values
    def _other(self, x) -> dict:
        if self.node_class is not None and type(x) is self.node_class and x._jid is not None:
            return {"n": x._jid}
        if isinstance(x, _JudgeObject):
            return {"j": object.__getattribute__(x, "_jid")}
        if isinstance(x, _JudgeKey):
            return {"k": object.__getattribute__(x, "_jid")}
        if self.making and self._node_like(x):
            mid = self.made_ids.get(id(x))
            if mid is None:
                mid = self.made_ids[id(x)] = len(self.made_ids) + 1
                self.made_queue.append(x)
                self.made_keep.append(x)
            return {"m": mid}
        key = id(x)
        wid = self.ids.get(key)
        if wid is None or self.objects.get(wid) is not x:
            wid = len(self.objects) + 1
            while wid in self.objects:
                wid += 1
            self.objects[wid] = x
            self.ids[key] = wid
        return {"w": [wid, type(x).__name__[:80]]}

    def _tagged(self, tag: str, p):
        if tag == "n":
            node = self.mirror.get(p)
            if node is None:
                raise WireError(f"unknown node {p!r}")
            return node
        if tag == "j":
            proxy = self.remote.get(p)
            if proxy is None:
                proxy = self.remote[p] = _JudgeObject(self, p)
            return proxy
        if tag == "k":
            if type(p) is not int:
                raise WireError("a malformed key id")
            key = self.keys.get(p)
            if key is None:
                key = self.keys[p] = _JudgeKey(self, p)
            return key
        if tag == "w":
            obj = self.objects.get(p)
            if obj is None:
                raise WireError(f"unknown object {p!r}")
            return obj
        raise WireError(f"unknown tag {tag!r}")

    def load_nodes(self, table) -> None:
        """Create or refresh the copies of judge-owned nodes (two passes: ids first, then fields)."""
        for row in table or []:
            if not isinstance(row, list) or len(row) != len(self.fields) + 1:
                raise WireError("a malformed node table")
            jid = row[0]
            if jid not in self.mirror:
                node = self.node_class.__new__(self.node_class)
                object.__setattr__(node, "_jid", jid)
                for f in self.fields:
                    object.__setattr__(node, f, None)
                self.mirror[jid] = node
        mirror, setattr_, decode = self.mirror, object.__setattr__, self.codec.decode
        for row in table or []:
            node = mirror[row[0]]
            for f, v in zip(self.fields, row[1:]):
                if v is None or type(v) is int:
                    setattr_(node, f, v)
                elif type(v) is dict and "n" in v and len(v) == 1 and v["n"] in mirror:
                    setattr_(node, f, mirror[v["n"]])
                else:
                    setattr_(node, f, decode(v))

    def _node_like(self, x) -> bool:
        """A node the candidate made (of its own class, or a copy-class node it built): it has every node field."""
        if isinstance(x, (type, types.ModuleType, types.FunctionType, types.MethodType)):
            return False
        try:
            return all(hasattr(x, f) for f in self.fields)
        except Exception:  # noqa: BLE001 -- a __getattr__ of the candidate's that raises something odd
            return False

    def tail(self) -> dict:
        """The end of a reply: the judge nodes the candidate changed, and the table of nodes it made that the reply
        (or a change) reaches, one row per node (``[number, field values...]``, nodes as ``{"m": number}``): built
        without recursion, so a made chain of any length is a flat table."""
        self.making = True
        try:
            changes = self.changes()
            made = []
            while self.made_queue:
                x = self.made_queue.pop()
                row = [self.made_ids[id(x)]]
                for f in self.fields:
                    try:
                        v = getattr(x, f)
                    except Exception:  # noqa: BLE001
                        v = None
                    row.append(self.codec.encode(v))
                made.append(row)
        finally:
            self.making = False
            self.made_ids.clear()
            self.made_queue.clear()
            self.made_keep.clear()
        return {"changes": changes, "made": made}

    def changes(self) -> list:
        out = []
        for node in list(self.dirty):
            out.append([node._jid] + [self.codec.encode(getattr(node, f)) for f in self.fields])
        self.dirty.clear()
        return out

    # -- failures
    def where(self, exc: BaseException) -> str:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == self.file]
        return "".join(traceback.format_list(frames[-3:])).rstrip()

    def failure(self, exc: BaseException) -> dict:
        kind = "error"
        text = str(exc)
        if isinstance(exc, SystemExit):
            kind, text = "exit", repr(exc.code)
        elif isinstance(exc, MemoryError) or ("alloc" in text.lower() and "memory" in text.lower()):
            kind = "memory"
        elif isinstance(exc, RecursionError):
            kind = "recursion"
        elif isinstance(exc, NotImplementedError):
            kind = "notimpl"
        elif isinstance(exc, OSError) and exc.errno == FSIZE_ERRNO:
            kind = "fsize"
        elif isinstance(exc, (Denied, Refused)):
            kind = "denied"
        elif isinstance(exc, WireError):
            kind = "unsendable"
        return {"type": type(exc).__name__[:80], "kind": kind, "message": text[:2000], "where": self.where(exc)}

    # -- the loop
    def run(self) -> None:
        self.send(op="hello", pid=os.getpid(), python=sys.version.split()[0])
        load = self.recv()
        if load.get("op") != "load":
            return
        self.file = load["display"]
        self.fields = tuple(load.get("fields") or self.fields)
        self.node_class = _node_class(self, self.fields)
        for key, value in (load.get("env") or {}).items():  # before the preloads: TRITON_INTERPRET is read on import
            if isinstance(key, str) and isinstance(value, str):
                os.environ[key] = value
        for mod in load.get("preload") or []:
            try:
                __import__(mod)
                if mod == "judge_meters":
                    sys.modules[mod].warm()
            except Exception:  # noqa: BLE001 -- the candidate's import will say what is missing
                pass
        report = {}
        if load.get("confine") is not None:
            import judge_confine

            report = judge_confine.apply(load["confine"])
        _guard(self, load.get("deny_paths") or [], load.get("recursion_limit"))
        self.send(op="preloaded", confinement=report)
        cand = self.import_candidate(load["file"], load["symbol"])
        if cand is None:
            return
        self.objects[0] = cand
        while True:
            msg = self.recv()
            op = msg["op"]
            if op == "exit":
                return
            if op == "reset":
                self.objects = {0: cand}
                self.ids.clear()
                self.mirror.clear()
                self.remote.clear()
                self.keys.clear()
                self.graphs.clear()
                self.dirty.clear()
                continue
            self.serve(msg)

    def import_candidate(self, file: str, symbol: str):
        """Run the submission (the judge's copy at ``file``) as module ``kata_candidate``, known by its own path."""
        try:
            with open(file, "rb") as fh:
                source = fh.read()
            code = compile(source, self.file, "exec", dont_inherit=True)
        except SyntaxError as exc:
            self.send(op="fatal", reason="syntax error", message=f"line {exc.lineno}: {exc.msg}", where="",
                      attempts=self.attempts)
            return None
        except (OSError, ValueError) as exc:
            self.send(op="fatal", reason="import", type=type(exc).__name__, kind="error", message=str(exc)[:500],
                      where="", attempts=self.attempts)
            return None
        lines = source.decode("utf-8", errors="replace").splitlines(True)
        linecache.cache[self.file] = (len(source), None, lines, self.file)  # tracebacks quote the lines
        module = types.ModuleType("kata_candidate")
        module.__file__ = self.file
        sys.modules["kata_candidate"] = module
        try:
            exec(code, module.__dict__)
        except BaseException as exc:  # noqa: BLE001 -- SystemExit and all: report, never crash
            f = self.failure(exc)
            f["where"] = f["where"] or "".join(traceback.format_exception_only(type(exc), exc)).strip()
            self.send(op="fatal", reason="import", attempts=self.attempts, **f)
            return None
        cand = getattr(module, symbol, None)
        if cand is None:
            self.send(op="fatal", reason="missing", message="", where="", attempts=self.attempts)
            return None
        self.send(op="loaded", sig=describe_symbol(cand), attempts=self.attempts)
        return cand

    def serve(self, msg: dict) -> None:
        """One request from the judge: call, method call, backward pass or attribute read."""
        op = msg["op"]
        try:
            self.load_nodes(msg.get("nodes"))
            if op == "call":
                target = self.objects[msg["target"]]
                if msg.get("method"):
                    target = getattr(target, msg["method"])
                args = self.codec.decode(msg.get("args", []))
                kwargs = self.codec.decode(msg.get("kwargs", {"d": []}))
                grad = bool(msg.get("grad"))
                inputs = _grad_leaves(args, kwargs) if grad else []
        except WireError as exc:
            self.send(op="garbled", message=str(exc))
            return
        except Exception as exc:  # noqa: BLE001
            self.send(op="raise", **self.tail(), **self.failure(exc))
            return
        if op == "getattr":
            try:
                obj = self.objects[msg["target"]]
                value = getattr(obj, msg["name"])
                if callable(value) and not isinstance(value, type):
                    self.send(op="value", method=True)
                else:
                    self.making = True
                    encoded = self.codec.encode(value)
                    self.send(op="value", v=encoded, **self.tail())
            except BaseException as exc:  # noqa: BLE001
                self.send(op="raise", **self.tail(), **self.failure(exc))
            return
        if op == "backward":
            self.backward(msg)
            return
        if op == "calls":
            self.calls(msg)
            return
        if op == "compile":
            try:
                import judge_compile

                text = judge_compile.ptx(sys.modules["kata_candidate"], msg.get("kernel"), msg.get("request"))
                # as bytes: the wire clips strings to a few thousand characters, and PTX runs to megabytes
                self.send(op="return", v=self.codec.encode(text.encode("utf-8")), changes=[], attempts=self.attempts)
            except BaseException as exc:  # noqa: BLE001 -- the compiler's complaint is the candidate's result
                self.send(op="raise", changes=[], attempts=self.attempts, **self.failure(exc))
            return
        if op != "call":
            self.send(op="garbled", message=f"unknown operation {op!r}")
            return
        started = time.monotonic()
        usage = None
        try:
            measure = msg.get("measure")
            if isinstance(measure, dict) and measure.get("alloc"):
                result, usage = _allocated(target, args, kwargs)
            elif isinstance(measure, dict):
                from judge_meters import Meter

                watch = measure.get("watch")
                watched = args[watch] if isinstance(watch, int) and 0 <= watch < len(args) else None
                with Meter(watched) as meter:
                    result = target(*args, **kwargs)
                usage = meter.usage()
            else:
                result = target(*args, **kwargs)
            self.making = True
            encoded = self.codec.encode(result)
            outs = []
            if grad:
                torch = _torch()
                outs = [t for t in _tensors(result) if isinstance(t, torch.Tensor) and t.requires_grad]
                self.graphs[msg["id"]] = (inputs, outs)
                while len(self.graphs) > 32:
                    self.graphs.pop(next(iter(self.graphs)))
        except BaseException as exc:  # noqa: BLE001 -- the candidate's failure, reported as data
            self.send(op="raise", **self.tail(), seconds=time.monotonic() - started, attempts=self.attempts,
                      **self.failure(exc))
            return
        reply = {"usage": usage} if usage is not None else {}
        self.send(op="return", v=encoded, **self.tail(), grads=len(outs) if grad else 0,
                  attempts=self.attempts, **reply)

    def calls(self, msg: dict) -> None:
        """A batch of method calls on one object of the candidate's, run in order: one round trip for what would
        otherwise be thousands. Call ``i`` is ``methods[which[i]](*args[pos:pos + arity[i]])``, ``args`` being every
        call's arguments one after the other (flat lists of ints travel as they are). Stops at the first
        exception and says which call raised (``index``)."""
        try:
            obj = self.objects[msg["target"]]
            methods, which, arity = msg.get("methods"), msg.get("which"), msg.get("arity")
            args = self.codec.decode(msg.get("args", []))
            if not (isinstance(methods, list) and all(type(m) is str for m in methods)
                    and isinstance(which, list) and isinstance(arity, list) and len(which) == len(arity)
                    and all(type(w) is int and 0 <= w < len(methods) for w in which)
                    and all(type(a) is int and a >= 0 for a in arity)
                    and isinstance(args, list) and sum(arity) == len(args)):
                raise WireError("a malformed batch of calls")
        except (WireError, KeyError) as exc:
            self.send(op="garbled", message=str(exc))
            return
        started = time.monotonic()
        i = 0
        try:
            table = [getattr(obj, m) for m in methods]
            out = []
            pos = 0
            for i in range(len(which)):
                n = arity[i]
                out.append(table[which[i]](*args[pos:pos + n]))
                pos += n
            self.making = True
            encoded = self.codec.encode(out)
        except BaseException as exc:  # noqa: BLE001 -- the candidate's failure, reported as data
            self.send(op="raise", **self.tail(), seconds=time.monotonic() - started, attempts=self.attempts,
                      index=i, **self.failure(exc))
            return
        self.send(op="return", v=encoded, **self.tail(), attempts=self.attempts)

    def backward(self, msg: dict) -> None:
        try:
            inputs, outs = self.graphs[msg["id"]]
            grads = self.codec.decode(msg["grads"])
            torch = _torch()
            pairs = [(o, g) for o, g in zip(outs, grads) if g is not None]
            if not pairs or not inputs:
                got = [None] * len(inputs)
            else:
                got = torch.autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs], allow_unused=True,
                                          retain_graph=True)
            self.send(op="return", v=self.codec.encode(list(got)), changes=[])
        except BaseException as exc:  # noqa: BLE001
            self.send(op="raise", changes=[], **self.failure(exc))

    def ask_judge(self, **msg):
        """A nested request (read/write of a judge-owned object) while the candidate runs."""
        self.send(**msg)
        while True:
            reply = self.recv()
            if reply["op"] == "value":
                self.load_nodes(reply.get("nodes"))
                return self.codec.decode(reply.get("v"))
            if reply["op"] == "error":
                if reply.get("stop"):
                    raise JudgeStop(str(reply.get("message", ""))[:300])
                raise AttributeError(str(reply.get("message", ""))[:300])
            self.serve(reply)  # the judge may call back in (nothing does today)


def _grad_leaves(args, kwargs) -> list:
    return [t for t in list(_tensors(args)) + list(_tensors(kwargs)) if t.requires_grad]


class _JudgeObject:
    """A judge-owned object (an instrumented tree node): every field read or write is a request the
    judge serves, so what it counts (pointer reads) happens where the candidate cannot reach."""

    __slots__ = ("_w", "_jid", "__weakref__")

    def __init__(self, worker: _Worker, jid: int):
        object.__setattr__(self, "_w", worker)
        object.__setattr__(self, "_jid", jid)

    def __getattr__(self, name: str):
        w = object.__getattribute__(self, "_w")
        if name not in w.fields:
            raise AttributeError(f"tree nodes have only the fields {', '.join(w.fields)}; not {name!r}")
        return w.ask_judge(op="getattr", target=object.__getattribute__(self, "_jid"), name=name)

    def __setattr__(self, name: str, value) -> None:
        w = object.__getattribute__(self, "_w")
        if name not in w.fields:
            raise AttributeError(f"tree nodes have only the fields {', '.join(w.fields)}; not {name!r}")
        w.ask_judge(op="setattr", target=object.__getattribute__(self, "_jid"), name=name, v=w.codec.encode(value))

    def __repr__(self) -> str:
        return "TreeNode(...)"


class _JudgeKey:
    """A judge-owned counted key (``{"k": id}``): it holds no value here. ``==``, ``!=``, ``<``, ``<=``, ``>``,
    ``>=`` and ``hash()`` are each a request the judge answers and counts, so a kata can count the comparisons
    (or hash lookups) an algorithm makes where the candidate cannot reach the count. A comparison with anything
    but another key of the same kind is ``NotImplemented`` (no number can probe a key's value), and the id is a
    random number (not even the order in which keys were made leaks)."""

    __slots__ = ("_w", "_jid", "__weakref__")

    def __init__(self, worker: _Worker, jid: int):
        object.__setattr__(self, "_w", worker)
        object.__setattr__(self, "_jid", jid)

    def _ask(self, name: str, other=None, with_other: bool = True):
        w = object.__getattribute__(self, "_w")
        msg = {"op": "compare" if with_other else "hash", "target": object.__getattribute__(self, "_jid")}
        if with_other:
            if not isinstance(other, _JudgeKey):
                return NotImplemented  # a key is compared only with keys: nothing else is sent
            msg["name"] = name
            msg["v"] = w.codec.encode(other)
        return w.ask_judge(**msg)

    def _cmp(self, name: str, other):
        r = self._ask(name, other)
        if r is NotImplemented or r is None:
            return NotImplemented
        if type(r) is not bool:
            raise TypeError("the judge answered a comparison with something else than a bool")
        return r

    def __eq__(self, other):
        return self._cmp("__eq__", other)

    def __ne__(self, other):
        return self._cmp("__ne__", other)

    def __lt__(self, other):
        return self._cmp("__lt__", other)

    def __le__(self, other):
        return self._cmp("__le__", other)

    def __gt__(self, other):
        return self._cmp("__gt__", other)

    def __ge__(self, other):
        return self._cmp("__ge__", other)

    def __hash__(self):
        r = self._ask("__hash__", with_other=False)
        if type(r) is not int:
            raise TypeError("the judge answered a hash with something else than an int")
        return r

    def __getattr__(self, name: str):
        raise AttributeError(f"a key has no attributes ({name!r}): compare keys with each other, or hash them")

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError("a key cannot be written")

    def __repr__(self) -> str:
        return "Key(?)"


def _allocated(fn, args, kwargs):
    """``fn(*args, **kwargs)`` under tracemalloc: the result, and the most Python memory the call held at once
    beyond what existed before it (``peak_bytes``). ``traced`` is False if tracing was stopped under it."""
    tm = _TM
    tm["start"]()
    tm["reset_peak"]()
    base = tm["get_traced_memory"]()[0]
    try:
        result = fn(*args, **kwargs)
    finally:
        held = tm["is_tracing"]()
        peak = tm["get_traced_memory"]()[1] if held else 0
        tm["stop"]()
    return result, {"peak_bytes": max(0, peak - base), "reads": [], "traced": bool(held)}


def _node_class(worker: _Worker, fields: tuple[str, ...]):
    """The class of the worker's copies of judge-owned tree nodes: plain slots, writes remembered."""

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        if name in fields and self._jid is not None:
            worker.dirty.add(self)

    def __init__(self, *args, **kwargs):  # a node the candidate makes itself: TreeNode(val, left, right)
        object.__setattr__(self, "_jid", None)
        for f in fields:
            object.__setattr__(self, f, None)
        for f, v in zip(fields, args):
            object.__setattr__(self, f, v)
        for f, v in kwargs.items():
            setattr(self, f, v)

    def __repr__(self):
        return f"TreeNode({getattr(self, fields[0], None)!r})"

    return type("TreeNode", (), {"__slots__": fields + ("_jid", "__weakref__"), "__setattr__": __setattr__,
                                 "__init__": __init__, "__repr__": __repr__})


def _guard(worker: _Worker, deny_paths: list[str], recursion_limit: int | None) -> None:
    """An audit hook: importing the judge's own packages, opening files under the checkout, starting a
    process and any network use are refused and remembered (the sandbox refuses them too; this names
    the attempt). With ``recursion_limit`` (a kata that asks for an iterative solution), Python's
    recursion limit stays there: ``sys.setrecursionlimit`` is remembered and changes nothing."""
    deny_paths = [os.path.realpath(p) + os.sep for p in deny_paths]

    def hook(event: str, args: tuple) -> None:
        if event == "import":
            name = str(args[0])
            if name.split(".")[0] in DENIED_TOPLEVEL:
                worker.attempts.append(f"import {name}")
                raise Denied(f"the judge runs your code alone: `{name}` cannot be imported here")
        elif event == "open" and deny_paths and isinstance(args[0], (str, bytes)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if any(path.startswith(p) for p in deny_paths):
                worker.attempts.append(f"open {path}")
                raise Refused(f"the judge runs your code alone: {path} cannot be read here")
        elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo"):
            worker.attempts.append(f"network ({event})")
            raise Refused("the judge runs your code without network access")
        elif event in PROCESS_EVENTS:
            worker.attempts.append(f"start a process ({event})")
            raise Refused(f"the judge runs your code in one process: it cannot start another ({event})")

    sys.addaudithook(hook)
    _keep_tracemalloc(worker)
    if recursion_limit:
        sys.setrecursionlimit(recursion_limit)

        def setrecursionlimit(n):
            worker.attempts.append(f"sys.setrecursionlimit({n!r}) (this kata keeps the limit at {recursion_limit})")

        sys.setrecursionlimit = setrecursionlimit


def _keep_tracemalloc(worker: _Worker) -> None:
    """The judge measures Python memory with tracemalloc (``_allocated``): keep its functions for the worker
    and leave the candidate stand-ins that refuse (and name the attempt) to start, stop or reset it."""
    import tracemalloc

    import _tracemalloc

    for name in ("start", "stop", "reset_peak", "get_traced_memory", "is_tracing", "clear_traces"):
        _TM[name] = getattr(tracemalloc, name)

    def refused(name: str):
        def stand_in(*args, **kwargs):
            worker.attempts.append(f"tracemalloc.{name}() (the judge measures memory with it)")
            raise Refused(f"the judge measures your code's memory with tracemalloc: tracemalloc.{name}() is refused")

        return stand_in

    for mod in (tracemalloc, _tracemalloc):
        for name in ("start", "stop", "reset_peak", "clear_traces"):
            if hasattr(mod, name):
                setattr(mod, name, refused(name))


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--probe"]:  # can this interpreter start here (as this uid)? the judge asks before a run
        return 0
    rfd, wfd = int(argv[1]), int(argv[2])
    sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT)
    try:
        _Worker(rfd, wfd).run()
    except OSError:
        os._exit(CHANNEL_LOST)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
