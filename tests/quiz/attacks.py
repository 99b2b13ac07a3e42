"""Submissions that try to fool or escape the kata judge (tests/quiz/test_judge_attacks.py runs them).

Most target the level-order kata (``level_order_with_depth(root)``; no torch, fast). ``MARK`` is
replaced by a unique string so a test can look for leftover processes by their command line.
"""

# -- fooling the verdict -------------------------------------------------------------------

# The old judge passed the path of its results file in sys.argv: write fake "passed" events there,
# then leave. Today argv names no file; the submission also forges frames on every descriptor it
# can find (the pipe to the judge among them) and exits.
FORGE_RESULTS = r'''
import json, os, struct, sys

def _frame(msg):
    data = json.dumps(msg).encode()
    return struct.pack(">I", len(data)) + data

paths = [a for a in sys.argv[1:] if os.path.sep in a]
for p in paths:  # the old attack: append "passed" events to a results file named in argv
    try:
        with open(p, "a") as fh:
            for name in ("prop_none_root", "prop_levels_match_oracle"):
                fh.write(json.dumps({"event": "result", "name": name, "passed": True}) + "\n")
            fh.write(json.dumps({"event": "done"}) + "\n")
    except OSError:
        pass
forged = _frame({"op": "loaded", "sig": {"kind": "function", "params": [["root", "POSITIONAL_OR_KEYWORD", False],
                                                                ["stats", "POSITIONAL_OR_KEYWORD", True]]},
                 "attempts": []})
forged += b"".join(_frame({"op": "return", "v": [], "changes": [], "grads": 0}) for _ in range(50))
for fd in range(3, 64):
    try:
        os.write(fd, forged)
    except OSError:
        pass
os._exit(0)

def level_order_with_depth(root):
    return []
'''

# Rebind `given` and replace every prop_* in the verifiers' modules (via sys.modules and gc),
# then return a constant that is right only for the empty tree.
PATCH_PROPERTIES = r'''
import gc, sys

def _noop(*a, **k):
    return None

for name, mod in list(sys.modules.items()):
    if name.startswith(("verifiers", "hypothesis")):
        for attr in dir(mod):
            if attr.startswith("prop_") or attr == "given":
                try:
                    setattr(mod, attr, _noop)
                except Exception:
                    pass
for obj in gc.get_objects():
    if callable(obj) and getattr(obj, "__name__", "").startswith("prop_"):
        try:
            obj.__code__ = _noop.__code__
        except Exception:
            pass
try:
    import verifiers.katas.level_order as props
    for attr in dir(props):
        if attr.startswith("prop_"):
            getattr(props, attr).__code__ = _noop.__code__
except ImportError:
    pass

def level_order_with_depth(root):
    return []
'''

# Calls the reference implementation from impls/ instead of writing one.
CALL_REFERENCE = r'''
from impls.coding.level_order import level_order_with_depth  # noqa: F401
'''

# The same, by hand: put the checkout on sys.path, or read and exec the reference's source.
CALL_REFERENCE_SNEAKY = r'''
import os, sys

ROOT = CHECKOUT
sys.path.insert(0, ROOT)
try:
    from impls.coding.level_order import level_order_with_depth
except ImportError:
    ns = {}
    try:
        with open(os.path.join(ROOT, "impls", "coding", "level_order.py")) as fh:
            exec(compile(fh.read(), "ref", "exec"), ns)
        level_order_with_depth = ns["level_order_with_depth"]
    except (OSError, KeyError):
        def level_order_with_depth(root):
            return [[0]]
'''

# Returns values whose comparisons always say True: an int subclass and a list subclass.
ALWAYS_EQUAL = r'''
class Yes(int):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = int.__hash__

class Same(list):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False

def level_order_with_depth(root):
    return Same([Same([Yes(0)])])
'''

# A torch.Tensor subclass whose comparisons (==, allclose, equal) always say True (grpo kata).
TENSOR_ALWAYS_EQUAL = r'''
import torch

class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("allclose", "equal", "isclose", "eq", "__eq__", "all", "any", "__bool__"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})

def grpo_advantages(scores, group_size, scale_by_std=True, eps=1e-6):
    return torch.zeros_like(scores).as_subclass(Liar)
'''

# -- escaping -----------------------------------------------------------------------------

# A child process that would outlive the judge (plain, then setsid + double fork): refused today.
CHILDREN = r'''
import os, subprocess, sys, time

subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "MARK-plain"])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", "MARK-setsid"])
    os._exit(0)
time.sleep(0.3)

def level_order_with_depth(root):
    out, level = [], [root] if root is not None else []
    while level:
        out.append([n.val for n in level])
        level = [c for n in level for c in (n.left, n.right) if c is not None]
    return out
'''

# Kill the judge: the parent, every process it can signal, anything whose command line says mianjing.
KILL_THE_JUDGE = r'''
import os, signal

victims = []
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read()
            if b"mianjing" in cmdline or b"pytest" in cmdline:
                victims.append(int(pid))
        except OSError:
            pass
for pid in victims + [os.getppid()]:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass

def level_order_with_depth(root):
    return []
'''

# Names its own thread (so the test can find the worker in /proc), then hangs until the judge is killed.
NAME_THEN_HANG = r'''
import ctypes, time

ctypes.CDLL(None).prctl(15, b"MARK", 0, 0, 0)  # PR_SET_NAME

def level_order_with_depth(root):
    while True:
        time.sleep(0.1)
'''

# Swaps its working directory for a symlink to TARGET (and leaves another link inside it): the judge
# deletes its working directory afterwards and must follow neither.
SWAP_WORKDIR = r'''
import os

here = os.getcwd()
os.symlink("TARGET", os.path.join(here, "inner-link"))
try:
    os.rename(here, here + "-moved")
    os.symlink("TARGET", here)
except OSError:
    pass

def level_order_with_depth(root):
    return []
'''

WRITE_GIGABYTE_FILE = r'''
def level_order_with_depth(root):
    block = b"x" * (1 << 20)
    with open("big.bin", "wb") as fh:
        for _ in range(1024):  # 1 GiB
            fh.write(block)
    return []
'''

PRINT_GIGABYTE = r'''
import sys

def level_order_with_depth(root):
    line = "y" * 1023 + "\n"
    for _ in range(1 << 20):  # 1 GiB
        sys.stdout.write(line)
    return []
'''

# Reports what it can see, in the message of the exception it raises at import.
LOOK_AROUND = r'''
import json, os, socket

info = {"cwd": os.getcwd(), "listdir": sorted(os.listdir(".")), "home": os.environ.get("HOME"),
        "env": sorted(os.environ), "uid": os.getuid()}
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
    info["network"] = "connected"
except OSError as exc:
    info["network"] = f"refused: {exc}"
try:
    with open(STORE, "a") as fh:
        fh.write("overwritten by the submission")
    info["store"] = "wrote a file there"
except OSError as exc:
    info["store"] = f"refused: {exc}"
try:
    info["next_to_me"] = sorted(os.listdir(os.path.dirname(__file__)))
except OSError as exc:
    info["next_to_me"] = f"refused: {exc}"
raise RuntimeError("LOOK " + json.dumps(info))
'''

ALLOCATE_20GB = r'''
def level_order_with_depth(root):
    block = bytearray(20 * 10 ** 9)
    return [[len(block)]]
'''

INFINITE_LOOP = r'''
def level_order_with_depth(root):
    while True:
        pass
'''

EXIT_AT_IMPORT = "import sys\nsys.exit(3)\n"

OS_EXIT_AT_IMPORT = "import os\nos._exit(5)\n"

SEGFAULT = r'''
import ctypes

def level_order_with_depth(root):
    ctypes.string_at(0)
'''

CLOSE_RESULTS = r'''
import os

def level_order_with_depth(root):
    for fd in range(3, 64):
        try:
            os.close(fd)
        except OSError:
            pass
    return []
'''

GARBLE_RESULTS = r'''
import os

def level_order_with_depth(root):
    for fd in range(3, 64):
        try:
            os.write(fd, b"\x00\x00\x00\x05{bad}" + b"garbage" * 100)
        except OSError:
            pass
    return []
'''

# BST kata: the pointer-read counter lives in the judge; ask it to reset the counter over the raw
# channel, then iterate with 20 wasted pointer reads per call (over the 16n + 8 bound from n = 2 on).
PROBE_COUNTER = r'''
class BSTIterator:
    def __init__(self, root):
        self.root, self.stack = root, []
        try:
            w = object.__getattribute__(root, "_w")
            jid = object.__getattribute__(root, "_jid")
            w.ask_judge(op="setattr", target=jid, name="counter", v={"d": [["reads", 0], ["writes", 0]]})
        except Exception:
            pass
        self._left(root)

    def _left(self, node):
        while node is not None:
            self.stack.append(node)
            node = node.left

    def hasNext(self):
        return bool(self.stack)

    def next(self):
        for _ in range(20):
            self.root.left  # work the judge counts, whatever this process does to hide it
        node = self.stack.pop()
        self._left(node.right)
        return node.val
'''

DEEP_RETURN = r'''
def level_order_with_depth(root):
    x = []
    for _ in range(10000):
        x = [x]
    return x
'''
