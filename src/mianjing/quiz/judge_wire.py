"""The trust boundary of the kata judge: what crosses between the judge and its worker, and how it is read.

The worker runs the candidate's code, so every byte it sends is hostile until this module has read
it. Each message is a 4-byte big-endian length and a UTF-8 JSON object with a string ``op``.
Reading a message from the worker is bounded three ways before any Python object is built:

* a frame announcing more than ``FROM_WORKER.max_bytes`` is refused from its header, unread;
* a frame with more than ``FROM_WORKER.max_elements`` JSON values (counted from its ``[``, ``{``
  and ``,`` bytes: an over-count, never an under-count) is refused before it is parsed;
* any failure of the parser (bad UTF-8, bad JSON, nesting past the interpreter's recursion limit,
  out of memory) is a :class:`WireError`. The judge treats every ``WireError`` as a lost worker, so
  a bad frame can never leave an unread answer behind for a later call to pick up.

A parsed message is then checked against :data:`MESSAGES` (the operations a worker may send and the
type of each field), and values are rebuilt by :class:`Codec` as plain data only: ``None``, bools,
ints, finite floats and strings as themselves, lists as arrays, and tagged objects ``{"f": "nan"}``
(non-finite float), ``{"t": [...]}`` tuple, ``{"d": [[k, v], ...]}`` dict, ``{"s": [...]}`` set,
``{"b": base64}`` bytes, ``{"c": [re, im]}`` complex, ``{"tensor": {...}}`` / ``{"ndarray": {...}}``
(dtype, shape and raw bytes; the byte count must match), ``{"n": id}`` / ``{"j": id}`` judge-owned
nodes, ``{"m": number}`` a node the candidate made (an object with the node fields), rebuilt by the judge as its
own plain node from the reply's table of made nodes (``made``: one row of field values per node), ``{"k": id}`` a
judge-owned *counted key* (no value crosses: the worker's stand-in forwards
every comparison and hash to the judge, which answers and counts it; its id is random, so not even
the order of creation leaks) and ``{"w": [id, class name]}`` an object that lives in the worker (all
resolved by the owner's ``tagged`` callback). Nothing else is ever constructed: a subclass of a plain type the
candidate returns arrives as the plain type.

Standard library only at module level: the worker imports this file inside its sandbox.
"""

from __future__ import annotations

import base64
import inspect
import json
import math
import struct
import sys
from dataclasses import dataclass

MAX_DEPTH = 64  # nesting of lists/dicts in one value
_AS_IS = (int, str, bool)  # exact types JSON carries as themselves (a subclass is rebuilt, never passed as is)
MAX_TEXT = 4000  # characters kept of any string field of a message (messages, tracebacks)
CHANNEL_LOST = 86  # the worker's exit status when its pipes to the judge were closed or broken under it
DTYPES = {  # name -> bytes per element
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16,
    "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "bool": 1,
}


class WireError(Exception):
    """A message or value that does not follow the wire format."""


@dataclass(frozen=True)
class Limits:
    max_bytes: int  # one frame
    max_elements: int  # JSON values in one frame


# What the katas need: the largest result today is a [4096, 32] float64 gradient (1.4 MB as base64);
# kernel katas return a few MiB. The judge's memory for a frame stays near 5x its size.
FROM_WORKER = Limits(max_bytes=16 << 20, max_elements=1_000_000)
# The judge is trusted; its inputs may be realistic sizes (a [16, 152064] float32 logits block).
FROM_JUDGE = Limits(max_bytes=512 << 20, max_elements=50_000_000)


# -- frames ----------------------------------------------------------------------------------


def frame(msg: dict, limits: Limits = FROM_JUDGE) -> bytes:
    data = json.dumps(msg, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    if len(data) > limits.max_bytes:
        raise WireError(f"a message of {len(data) >> 20} MiB is over the {limits.max_bytes >> 20} MiB limit")
    return struct.pack(">I", len(data)) + data


def parse(payload: bytes, limits: Limits) -> dict:
    """One frame's JSON object, within the element budget; every failure is a WireError."""
    elements = payload.count(b"[") + payload.count(b"{") + payload.count(b",")
    if elements > limits.max_elements:
        raise WireError(f"a frame of more than {limits.max_elements} values")
    try:
        msg = json.loads(payload.decode("utf-8"))
    except RecursionError:
        raise WireError("a frame nested too deep") from None
    except MemoryError:
        raise WireError("a frame too large to read") from None
    except Exception as exc:  # noqa: BLE001 -- UnicodeDecodeError, ValueError (JSON, huge int literals), ...
        raise WireError(f"not a JSON message ({type(exc).__name__})") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("op"), str):
        raise WireError("a message without an operation")
    return msg


class FrameReader:
    """Splits a byte stream into messages (``feed`` bytes, ``pop`` complete messages)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.buf = bytearray()

    def feed(self, data: bytes) -> None:
        self.buf += data

    def pop(self) -> dict | None:
        if len(self.buf) < 4:
            return None
        (n,) = struct.unpack(">I", self.buf[:4])
        if n > self.limits.max_bytes:
            raise WireError(f"a frame announces {n} bytes (limit {self.limits.max_bytes})")
        if len(self.buf) < 4 + n:
            return None
        payload = bytes(self.buf[4:4 + n])
        del self.buf[:4 + n]
        return parse(payload, self.limits)


# -- messages from the worker ------------------------------------------------------------------

_ANY = object()
_NUM = (int, float)
# op -> {field: type}; a field may be missing (the reader supplies the default), never of another type
MESSAGES: dict[str, dict[str, object]] = {
    "hello": {"pid": int, "python": str},
    "preloaded": {"confinement": dict},
    "loaded": {"sig": dict, "attempts": list},
    "fatal": {"reason": str, "type": str, "kind": str, "message": str, "where": str, "attempts": list},
    "return": {"v": _ANY, "changes": list, "made": list, "grads": int, "usage": dict, "attempts": list},
    "raise": {"type": str, "kind": str, "message": str, "where": str, "changes": list, "made": list, "seconds": _NUM,
              "attempts": list, "index": int},
    "value": {"v": _ANY, "method": bool, "changes": list, "made": list},
    "getattr": {"target": int, "name": str},
    "setattr": {"target": int, "name": str, "v": _ANY},
    "compare": {"target": int, "name": str, "v": _ANY},  # a judge-owned key compared with ``v`` (a counted key)
    "hash": {"target": int},  # a judge-owned key hashed
    "garbled": {"message": str},
}


def check(msg: dict, allowed: tuple[str, ...]) -> dict:
    """``msg`` if its operation is one of ``allowed`` and every field has its type; strings clipped."""
    op = msg["op"]
    if op not in allowed:
        raise WireError(f"unexpected {op[:40]!r}")
    out = {"op": op}
    for name, want in MESSAGES[op].items():
        if name not in msg:
            continue
        v = msg[name]
        if want is not _ANY:
            if isinstance(v, bool) and want is not bool or not isinstance(v, want):
                raise WireError(f"{op}: field {name!r} is not a {getattr(want, '__name__', 'number')}")
        out[name] = v[:MAX_TEXT] if isinstance(v, str) else v
    return out


def texts(v, limit: int = 20) -> list[str]:
    """A list of short strings sent by the worker (attempt names...), whatever it sent."""
    return [str(x)[:200] for x in v[:limit]] if isinstance(v, list) else []


def signature(sig: dict) -> dict:
    """A worker's description of the candidate's symbol, reduced to what :func:`describe_symbol` makes."""
    kind = sig.get("kind")
    if kind == "function":
        return {"kind": kind, "params": _params_of(sig.get("params"))}
    if kind == "class":
        methods = sig.get("methods")
        if not isinstance(methods, dict) or len(methods) > 500:
            raise WireError("a class description without methods")
        return {"kind": kind, "methods": {str(k)[:100]: _params_of(v) for k, v in methods.items()}}
    return {"kind": str(kind)[:40]}


def _params_of(p) -> list | None:
    if p is None:
        return None
    if not isinstance(p, list) or len(p) > 100:
        raise WireError("a malformed parameter list")
    out = []
    for item in p:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str) and isinstance(item[1], str)
                and isinstance(item[2], bool)):
            raise WireError("a malformed parameter")
        out.append((item[0][:100], item[1][:40], item[2]))
    return out


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


def _array_parts(spec) -> tuple[str, list[int], bytes]:
    if not isinstance(spec, dict):
        raise WireError("an array without a description")
    dtype, shape, data = spec.get("dtype"), spec.get("shape"), spec.get("data")
    if dtype not in DTYPES:
        raise WireError(f"unknown array dtype {str(dtype)[:20]!r}")
    if not (isinstance(shape, list) and len(shape) <= 16
            and all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d for d in shape)):
        raise WireError("an array with a malformed shape")
    if not isinstance(data, str):
        raise WireError("an array without data")
    want = math.prod(shape) * DTYPES[dtype]
    if (len(data) + 3) // 4 * 3 < want:  # decoded length is at most this: refuse before decoding
        raise WireError(f"array data is shorter than shape {shape} of {dtype} needs")
    try:
        raw = base64.b64decode(data.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise WireError("array data is not base64") from None
    if len(raw) != want:
        raise WireError(f"array data has {len(raw)} bytes; shape {shape} of {dtype} needs {want}")
    return dtype, shape, raw


def decode_tensor(spec: dict):
    torch = _torch()
    dtype, shape, raw = _array_parts(spec)
    tdtype = getattr(torch, dtype)
    if math.prod(shape) == 0:
        return torch.empty(shape, dtype=tdtype)
    flat = torch.frombuffer(bytearray(raw), dtype=torch.int16 if dtype == "bfloat16" else tdtype)
    if dtype == "bfloat16":
        flat = flat.view(torch.bfloat16)
    return flat.reshape(shape).clone()


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
    ``tagged(tag, payload)`` turns such a tag back into an object (or raises WireError)."""

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
            if all(v is None or type(v) in _AS_IS for v in x):  # the bulk case (a batch's arguments, a grid row)
                return list(x)
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
            if all(x is None or type(x) in _AS_IS for x in v):  # ints, strings, bools, nulls: nothing to rebuild
                return list(v)
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
            if not all(isinstance(z, (int, float, dict)) and not isinstance(z, bool) for z in (re, im)):
                raise WireError("a malformed complex")
            re, im = self.decode(re, depth + 1), self.decode(im, depth + 1)
            if not all(isinstance(z, (int, float)) for z in (re, im)):
                raise WireError("a malformed complex")
            return complex(re, im)
        if tag == "tensor":
            t = decode_tensor(p)
            if p.get("rg") is True and t.is_floating_point():
                t.requires_grad_(True)
            return t
        if tag == "ndarray":
            return decode_ndarray(p)
        return self.tagged(tag, p)


def _list(p, n: int | None = None) -> list:
    if not isinstance(p, list) or (n is not None and len(p) != n):
        raise WireError("a malformed value")
    return p


def tensors(x):
    """The tensors in a (nested list/tuple/dict) value, in order."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        yield x
    elif type(x) in (list, tuple):
        for v in x:
            yield from tensors(v)
    elif type(x) is dict:
        for v in x.values():
            yield from tensors(v)


# -- signatures (the judge compares the candidate's with the reference's) -------------------------


def _params(fn) -> list | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, p.default is not p.empty] for p in sig.parameters.values()]


def describe_symbol(obj) -> dict:
    """What a symbol looks like: a class with methods, or a function with parameters."""
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
