"""The judge's worker: imports the candidate's file and calls its function, nothing else.

Run as ``python -I judge_worker.py RFD WFD`` inside the sandbox (see ``sandbox.py``). It holds
no property, no reference implementation and no verdict: the judge (the trusted side, in its
own process) sends it inputs over two inherited pipe descriptors and receives plain data back
(numbers, strings, lists, dicts, tensors and arrays as raw bytes + dtype + shape). Whatever the
candidate does to this interpreter can change only what this process *sends*; the judge
rebuilds every value from bytes and compares it with its own oracle.

This file is also imported by the judge for the wire format (``encode``/``decode``,
``frame``), so it must import nothing but the standard library at module level: it runs in a
sandbox where only Python and the installed packages (torch, numpy) exist.

Wire format: each message is a 4-byte big-endian length and a UTF-8 JSON object. Values:
``None``/bools/ints/finite floats/strings as themselves, lists as arrays, and tagged objects
``{"f": "nan"}`` (non-finite float), ``{"t": [...]}`` tuple, ``{"d": [[k, v], ...]}`` dict,
``{"s": [...]}`` set, ``{"b": base64}`` bytes, ``{"c": [re, im]}`` complex,
``{"tensor": {...}}`` / ``{"ndarray": {...}}`` arrays, ``{"n": id}`` a judge-owned tree node
copied into the worker (its fields travel in the message's ``nodes`` table),
``{"j": id}`` a judge-owned object read through calls (every read runs on the judge's side),
``{"w": id}`` an object that lives in the worker (e.g. the candidate's iterator).
"""

from __future__ import annotations

import base64
import inspect
import json
import math
import os
import struct
import sys
import time
import traceback

MAX_MESSAGE = 64 << 20  # bytes; a bigger frame is garbage, not a result
MAX_DEPTH = 64  # nesting of lists/dicts in one value
DTYPES = {  # name -> bytes per element
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16,
    "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "bool": 1,
}
DENIED_TOPLEVEL = ("impls", "verifiers", "mianjing", "tests", "figures", "benchmarks")
FSIZE_ERRNO = 27  # EFBIG


class WireError(Exception):
    """A message or value that does not follow the wire format."""


# -- framing -------------------------------------------------------------------------------


def frame(msg: dict) -> bytes:
    data = json.dumps(msg, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    if len(data) > MAX_MESSAGE:
        raise WireError(f"a message of {len(data) >> 20} MiB is over the {MAX_MESSAGE >> 20} MiB limit")
    return struct.pack(">I", len(data)) + data


def parse(payload: bytes) -> dict:
    try:
        msg = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"not a JSON message ({exc})") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("op"), str):
        raise WireError("a message without an operation")
    return msg


class FrameReader:
    """Splits a byte stream into frames (``feed`` bytes, ``pop`` complete messages)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> None:
        self.buf += data

    def pop(self) -> dict | None:
        if len(self.buf) < 4:
            return None
        (n,) = struct.unpack(">I", self.buf[:4])
        if n > MAX_MESSAGE:
            raise WireError(f"a frame announces {n} bytes (limit {MAX_MESSAGE})")
        if len(self.buf) < 4 + n:
            return None
        payload = bytes(self.buf[4:4 + n])
        del self.buf[:4 + n]
        return parse(payload)


# -- values --------------------------------------------------------------------------------


def _torch():
    import torch

    return torch


def encode_tensor(t) -> dict:
    torch = _torch()
    t = torch.Tensor.detach(t)
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in DTYPES:
        raise WireError(f"a tensor of dtype {dtype} cannot be sent")
    raw = (t.view(torch.int16) if dtype == "bfloat16" else t).numpy().tobytes()
    return {"dtype": dtype, "shape": list(t.shape), "data": base64.b64encode(raw).decode("ascii")}


def decode_tensor(spec: dict):
    torch = _torch()
    dtype, shape, raw = _array_parts(spec)
    tdtype = getattr(torch, dtype)
    n = math.prod(shape)
    if n == 0:
        return torch.empty(shape, dtype=tdtype)
    flat = torch.frombuffer(bytearray(raw), dtype=torch.int16 if dtype == "bfloat16" else tdtype)
    if dtype == "bfloat16":
        flat = flat.view(torch.bfloat16)
    return flat.reshape(shape).clone()


def _array_parts(spec: dict) -> tuple[str, list[int], bytes]:
    if not isinstance(spec, dict):
        raise WireError("an array without a description")
    dtype, shape, data = spec.get("dtype"), spec.get("shape"), spec.get("data")
    if dtype not in DTYPES:
        raise WireError(f"unknown array dtype {dtype!r}")
    if not (isinstance(shape, list) and len(shape) <= 16
            and all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d for d in shape)):
        raise WireError("an array with a malformed shape")
    if not isinstance(data, str):
        raise WireError("an array without data")
    try:
        raw = base64.b64decode(data.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise WireError("array data is not base64") from None
    if len(raw) != math.prod(shape) * DTYPES[dtype]:
        raise WireError(f"array data has {len(raw)} bytes; shape {shape} of {dtype} needs "
                        f"{math.prod(shape) * DTYPES[dtype]}")
    return dtype, shape, raw


def encode_ndarray(a) -> dict:
    import numpy as np

    a = np.ascontiguousarray(a)
    dtype = a.dtype.name
    if dtype not in DTYPES or dtype == "bfloat16":
        raise WireError(f"an array of dtype {dtype} cannot be sent")
    return {"dtype": dtype, "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode("ascii")}


def decode_ndarray(spec: dict):
    import numpy as np

    dtype, shape, raw = _array_parts(spec)
    if dtype == "bfloat16":
        raise WireError("numpy has no bfloat16")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


class Codec:
    """Plain data <-> JSON-able values. ``other(obj) -> dict`` tags anything else (refs, nodes);
    ``tagged(tag, payload)`` turns such a tag back into an object."""

    def __init__(self, other, tagged):
        self.other = other
        self.tagged = tagged

    def encode(self, x, depth: int = 0):
        if depth > MAX_DEPTH:
            raise WireError(f"a value nested deeper than {MAX_DEPTH} levels")
        if x is None or x is True or x is False:
            return x
        t = type(x)
        if t is int or t is str:
            return x
        if t is float:
            return x if math.isfinite(x) else {"f": repr(x)}
        if t is list:
            return [self.encode(v, depth + 1) for v in x]
        if t is tuple:
            return {"t": [self.encode(v, depth + 1) for v in x]}
        if t is dict:
            return {"d": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in x.items()]}
        if t is set or t is frozenset:
            return {"s": [self.encode(v, depth + 1) for v in x]}
        if t is bytes or t is bytearray:
            return {"b": base64.b64encode(bytes(x)).decode("ascii")}
        if t is complex:
            return {"c": [self.encode(x.real, depth + 1), self.encode(x.imag, depth + 1)]}
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x, torch.Tensor):
            spec = encode_tensor(x)
            if x.requires_grad:
                spec["rg"] = True
            return {"tensor": spec}
        if "numpy" in sys.modules:
            np = sys.modules["numpy"]
            if isinstance(x, np.ndarray):
                return {"ndarray": encode_ndarray(x)}
            if isinstance(x, np.generic):
                return self.encode(x.item(), depth)
        # subclasses of the plain types (an int that says it equals everything...) travel as the plain value
        # subclasses of the plain types (an int that claims to equal everything, a namedtuple) and
        # deques travel as the plain value: the receiver rebuilds a real int / tuple / list
        for base in (int, float, str, tuple, list, dict, set, frozenset, bytes, complex):
            if isinstance(x, base):
                return self.encode(base(x), depth + 1)
        if t.__name__ == "deque" and t.__module__ == "collections":
            return [self.encode(v, depth + 1) for v in x]
        return self.other(x)

    def decode(self, v, depth: int = 0):
        if depth > MAX_DEPTH:
            raise WireError(f"a value nested deeper than {MAX_DEPTH} levels")
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self.decode(x, depth + 1) for x in v]
        if not isinstance(v, dict) or len(v) != 1:
            raise WireError("a malformed value")
        ((tag, p),) = v.items()
        if tag == "f":
            if p not in ("nan", "inf", "-inf"):
                raise WireError("a malformed float")
            return float(p)
        if tag == "t":
            return tuple(self.decode(x, depth + 1) for x in _list(p))
        if tag == "d":
            out = {}
            for pair in _list(p):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise WireError("a malformed dict")
                key = self.decode(pair[0], depth + 1)
                try:
                    out[key] = self.decode(pair[1], depth + 1)
                except TypeError:
                    raise WireError("an unhashable dict key") from None
            return out
        if tag == "s":
            try:
                return set(self.decode(x, depth + 1) for x in _list(p))
            except TypeError:
                raise WireError("an unhashable set element") from None
        if tag == "b":
            try:
                return base64.b64decode(str(p).encode("ascii"), validate=True)
            except (ValueError, UnicodeEncodeError):
                raise WireError("malformed bytes") from None
        if tag == "c":
            re, im = _list(p, 2)
            if not all(isinstance(z, (int, float, dict)) for z in (re, im)):
                raise WireError("a malformed complex")
            return complex(self.decode(re, depth + 1), self.decode(im, depth + 1))
        if tag == "tensor":
            t = decode_tensor(p)
            if p.get("rg") and t.is_floating_point():
                t.requires_grad_(True)
            return t
        if tag == "ndarray":
            return decode_ndarray(p)
        return self.tagged(tag, p)


def _list(p, n: int | None = None) -> list:
    if not isinstance(p, list) or (n is not None and len(p) != n):
        raise WireError("a malformed value")
    return p


# -- signatures (the judge compares the candidate's with the reference's) -------------------------


def _params(fn) -> list | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, p.default is not p.empty] for p in sig.parameters.values()]


def describe_symbol(obj) -> dict:
    """What the candidate's symbol looks like: a class with methods, or a function with parameters."""
    if isinstance(obj, type):
        methods = {}
        for name in dir(obj):
            if name == "__init__" or not name.startswith("_"):
                try:
                    attr = getattr(obj, name)
                except Exception:  # noqa: BLE001 -- a property that raises on the class
                    continue
                if callable(attr):
                    methods[name] = _params(attr)
        return {"kind": "class", "methods": methods}
    if callable(obj):
        return {"kind": "function", "params": _params(obj)}
    return {"kind": type(obj).__name__}


# -- the worker ------------------------------------------------------------------------------


class Denied(ImportError):
    pass


class _Worker:
    def __init__(self, rfd: int, wfd: int):
        self.rfd, self.wfd = rfd, wfd
        self.reader = FrameReader()
        self.objects: dict[int, object] = {}  # worker-owned objects the judge holds ({"w": id})
        self.ids: dict[int, int] = {}  # id(obj) -> worker id
        self.mirror: dict[int, object] = {}  # judge node id -> the worker's copy
        self.remote: dict[int, object] = {}  # judge object id -> proxy
        self.dirty: set = set()
        self.graphs: dict[int, tuple] = {}  # call id -> (inputs needing grad, outputs)
        self.fields: tuple[str, ...] = ("val", "left", "right")
        self.file = ""
        self.attempts: list[str] = []
        self.codec = Codec(self._other, self._tagged)
        self.node_class = None

    # -- channel
    def send(self, **msg) -> None:
        data = frame(msg)
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

    def changes(self) -> list:
        out = []
        for node in list(self.dirty):
            out.append([node._jid] + [self.codec.encode(getattr(node, f)) for f in self.fields])
        self.dirty.clear()
        return out

    # -- failures
    def where(self, exc: BaseException) -> str:
        want = os.path.realpath(self.file)
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.realpath(f.filename) == want]
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
        elif isinstance(exc, Denied):
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
        self.file = load["file"]
        self.fields = tuple(load.get("fields") or self.fields)
        self.node_class = _node_class(self, self.fields)
        for mod in load.get("preload") or []:
            try:
                __import__(mod)
            except Exception:  # noqa: BLE001 -- the candidate's import will say what is missing
                pass
        _guard(self, load.get("deny_paths") or [])
        self.send(op="preloaded")
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
                self.graphs.clear()
                self.dirty.clear()
                continue
            self.serve(msg)

    def import_candidate(self, file: str, symbol: str):
        import importlib.util

        try:
            spec = importlib.util.spec_from_file_location("kata_candidate", file)
            module = importlib.util.module_from_spec(spec)
            sys.modules["kata_candidate"] = module
            spec.loader.exec_module(module)
        except SyntaxError as exc:
            self.send(op="fatal", reason="syntax error", message=f"line {exc.lineno}: {exc.msg}", where="",
                      attempts=self.attempts)
            return None
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
            self.send(op="raise", changes=self.changes(), **self.failure(exc))
            return
        if op == "getattr":
            try:
                obj = self.objects[msg["target"]]
                value = getattr(obj, msg["name"])
                if callable(value) and not isinstance(value, type):
                    self.send(op="value", method=True)
                else:
                    self.send(op="value", v=self.codec.encode(value), changes=self.changes())
            except BaseException as exc:  # noqa: BLE001
                self.send(op="raise", changes=self.changes(), **self.failure(exc))
            return
        if op == "backward":
            self.backward(msg)
            return
        if op != "call":
            self.send(op="garbled", message=f"unknown operation {op!r}")
            return
        started = time.monotonic()
        try:
            result = target(*args, **kwargs)
            encoded = self.codec.encode(result)
            outs = []
            if grad:
                torch = _torch()
                outs = [t for t in _tensors(result) if isinstance(t, torch.Tensor) and t.requires_grad]
                self.graphs[msg["id"]] = (inputs, outs)
                while len(self.graphs) > 32:
                    self.graphs.pop(next(iter(self.graphs)))
        except BaseException as exc:  # noqa: BLE001 -- the candidate's failure, reported as data
            self.send(op="raise", changes=self.changes(), seconds=time.monotonic() - started, **self.failure(exc))
            return
        self.send(op="return", v=encoded, changes=self.changes(), grads=len(outs) if grad else 0)

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
                raise AttributeError(str(reply.get("message", ""))[:300])
            self.serve(reply)  # the judge may call back in (nothing does today)


def _tensors(x):
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        yield x
    elif type(x) in (list, tuple):
        for v in x:
            yield from _tensors(v)
    elif type(x) is dict:
        for v in x.values():
            yield from _tensors(v)


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


def _guard(worker: _Worker, deny_paths: list[str]) -> None:
    """An audit hook: importing the judge's own packages, opening files under the checkout and any
    network use are refused and remembered (the sandbox hides them too; this names the attempt)."""
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
                raise PermissionError(f"the judge runs your code alone: {path} cannot be read here")
        elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo"):
            worker.attempts.append(f"network ({event})")
            raise PermissionError("the judge runs your code without network access")

    sys.addaudithook(hook)


CHANNEL_LOST = 86  # exit status: the pipes to the judge were closed or broken under us


def main(argv: list[str]) -> int:
    rfd, wfd = int(argv[1]), int(argv[2])
    sys.setrecursionlimit(1000)
    try:
        _Worker(rfd, wfd).run()
    except OSError:
        os._exit(CHANNEL_LOST)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
