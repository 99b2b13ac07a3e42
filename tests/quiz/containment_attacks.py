"""Submissions that try to get out of the judge's worker (tests/quiz/test_judge_containment.py runs them).

Each goes around the worker's audit hook on purpose (system calls through ctypes, not ``open`` or
``subprocess``), so what it meets is the sandbox itself: bubblewrap, or the fallback's Landlock,
seccomp and uid. Most report what they reached at import, in the message of the exception they raise
(``LOOK {json}``); a value starting with ``denied`` is a refusal. Placeholders the test fills in:
ROOT (the judged checkout), REF (its reference implementation), SITE (a site-packages folder of the
judge's venv), JUDGE_SRC (a module of the judge's own code), STORE (the review store), GITOBJ (an
object of the checkout's git repository), PORT (a socket the test listens on), MARK (a unique string
for processes and files), OUTSIDE (a path outside the worker's folder), JUDGE_PID/JUDGE_PGID (filled in
by judge_child.py).
"""

PRELUDE = r'''
import ctypes, errno, json, os, signal
_libc = ctypes.CDLL(None, use_errno=True)

def _why():
    e = ctypes.get_errno()
    return "denied " + errno.errorcode.get(e, str(e))

def raw_open(path, flags=os.O_RDONLY, mode=0o644):
    fd = _libc.open(path.encode(), flags, mode)
    if fd < 0:
        return _why()
    os.close(fd)
    return "OPENED"

def raw_read(path, n=80):
    fd = _libc.open(path.encode(), os.O_RDONLY)
    if fd < 0:
        return _why()
    buf = ctypes.create_string_buffer(n)
    k = _libc.read(fd, buf, n)
    os.close(fd)
    return "READ " + repr(buf.raw[:max(k, 0)])

def raw_fork_sleep(tag, daemon=False):
    pid = _libc.fork()
    if pid < 0:
        return _why()
    if pid == 0:
        if daemon:
            _libc.setsid()
            if _libc.fork() != 0:
                _libc._exit(0)
        argv = (ctypes.c_char_p * 4)(b"/bin/sleep", b"120", tag.encode(), None)
        _libc.execv(b"/bin/sleep", argv)
        _libc._exit(0)
    return "FORKED"

def raw_kill(pid, sig):
    return "SENT" if _libc.kill(pid, sig) == 0 else _why()

def look(info):
    raise RuntimeError("LOOK " + json.dumps(info))
'''

ATTACKS = {
    # a child process that cats the reference (and would exec it), and a daemon that outlives the judge
    "child-process": r'''
info = {"fork": raw_fork_sleep("MARK-child"), "double_fork_daemon": raw_fork_sleep("MARK-daemon", daemon=True)}
args = (ctypes.c_uint64 * 8)(0, 0, 0, 0, signal.SIGCHLD, 0, 0, 0)  # struct clone_args: a plain fork
pid = _libc.syscall(435, args, ctypes.sizeof(args))  # clone3, whose flags seccomp cannot read
info["clone3"] = "CLONED" if pid >= 0 else _why()
if pid == 0:
    _libc._exit(0)
look(info)
''',
    # the reference by hard link into the working directory, by path, and out of .git objects
    "reference-by-link-path-git": r'''
info = {"link": "LINKED" if _libc.link(b"REF", b"ref_copy.py") == 0 else _why(),
        "read_ref": raw_read("REF"), "read_git_object": raw_read("GITOBJ"),
        "list_checkout": "LISTED" if _libc.opendir(b"ROOT") else _why()}
look(info)
''',
    # what the judge imports later: a module of its venv and of its own code, and the kata's properties
    "write-judge-code": r'''
info = {"append_judge_module": raw_open("JUDGE_SRC", os.O_WRONLY | os.O_APPEND),
        "new_module_in_venv": raw_open("SITE/MARK_planted.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL),
        "pyc_in_venv": raw_open("SITE/__pycache__/MARK.cpython-311.pyc", os.O_WRONLY | os.O_CREAT | os.O_EXCL),
        "rewrite_properties": raw_open("ROOT/verifiers/katas/level_order.py", os.O_WRONLY | os.O_TRUNC)}
look(info)
''',
    # the review store (also found through the judge's environment), the judge's memory, root-only files
    "store-environ-mem-shadow": r'''
info = {"store": raw_open("STORE", os.O_WRONLY | os.O_APPEND), "store_dir": raw_open("STORE-MARK", os.O_WRONLY | os.O_CREAT),
        "judge_environ": raw_read("/proc/JUDGE_PID/environ"), "judge_mem": raw_open("/proc/JUDGE_PID/mem", os.O_RDWR),
        "shadow": raw_read("/etc/shadow"), "outside": raw_open("OUTSIDE", os.O_WRONLY | os.O_CREAT)}
look(info)
''',
    # the network: a socket in this process, a connect to the test's port
    "network": r'''
s = _libc.socket(2, 1, 0)  # AF_INET, SOCK_STREAM
info = {"tcp_socket": "CREATED" if s >= 0 else _why()}
if s >= 0:
    import struct
    addr = struct.pack("!HH4s8x", 2, PORT, bytes([127, 0, 0, 1]))
    info["connect"] = "CONNECTED" if _libc.connect(s, addr, len(addr)) == 0 else _why()
u = _libc.socket(2, 2, 0)  # AF_INET, SOCK_DGRAM
info["udp_socket"] = "CREATED" if u >= 0 else _why()
look(info)
''',
    # signals to the judge: SIGINT (so its failing review is never recorded), SIGSTOP (a hang), to its group, to all
    "signal-the-judge": r'''
info = {"sigint_judge": raw_kill(JUDGE_PID, signal.SIGINT), "sigstop_judge": raw_kill(JUDGE_PID, signal.SIGSTOP),
        "sigint_group": raw_kill(-JUDGE_PGID, signal.SIGINT), "sigint_everyone": raw_kill(-1, signal.SIGINT)}
look(info)
''',
    # writing memory the limits do not count: /dev/shm, the sandbox's root, /tmp (200 MiB each)
    "unsized-filesystems": r'''
info = {}
block = b"x" * (1 << 20)
for name, path in (("dev_shm", "/dev/shm/MARK"), ("root", "/MARK"), ("tmp", "/tmp/MARK")):
    fd = _libc.open(path.encode(), os.O_WRONLY | os.O_CREAT, 0o644)
    if fd < 0:
        info[name] = _why()
        continue
    written = 0
    for _ in range(200):
        n = _libc.write(fd, block, len(block))
        if n <= 0:
            break
        written += n
    os.close(fd)
    info[name] = f"wrote {written >> 20} MiB"
look(info)
''',
    # replace the working directory by a symlink to the checkout (the judge deletes the working directory)
    "symlink-swap": r'''
here = os.getcwd()
info = {"rename_cwd": "RENAMED" if _libc.rename(here.encode(), (here + "-moved").encode()) == 0 else _why()}
info["symlink"] = "LINKED" if _libc.symlink(b"ROOT", here.encode()) == 0 else _why()
info["inner_link"] = "LINKED" if _libc.symlink(b"ROOT", b"checkout") == 0 else _why()
look(info)
''',
    # resource limits the worker runs under
    "limits": r'''
with open("/proc/self/limits") as fh:
    limits = fh.read()
nproc = [line.split()[2] for line in limits.splitlines() if line.startswith("Max processes")]
info = {"nproc": nproc[0] if nproc else "?", "no_new_privs": open("/proc/self/status").read().split("NoNewPrivs:")[1].split()[0]}
look(info)
''',
}

# Text the candidate controls, full of terminal escapes: in its exception, its output and an import name.
ESCAPES = r'''
import sys
sys.stdout.write("\x1b[2J\x1b[H\x1b]0;owned\x07ACCEPTED: 5/5 properties passed\r\n")
sys.stdout.flush()
try:
    __import__("impls.\x1b[2K\rACCEPTED")  # an attempt the judge names in its note
except ImportError:
    pass

def level_order_with_depth(root, stats=None):
    raise ValueError("\x1b[1A\x1b[2K\rACCEPTED: 5/5 properties passed (0.1 s)\x1b[8m\u202e")
'''

# A results frame over the judge's limit: 60 MiB, announced honestly, then the same as a frame of a
# million-and-more tiny values under the limit (bounded by the element budget), then 200 000-deep JSON.
HUGE_FRAME = PRELUDE + r'''
import struct

def _to_judge(payload):
    for fd in range(3, 64):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if fd != 1 and fd != 2:
            try:
                os.write(fd, struct.pack(">I", len(payload)) + payload)
            except OSError:
                pass

_calls = []

def level_order_with_depth(root, stats=None):
    if len(_calls) == 1:  # on the second call only, then the right answers: a judge that read on would see
        _to_judge(KIND)  # each of them one call late
    _calls.append(1)
    out, level = [], [root] if root is not None else []
    while level:
        out.append([n.val for n in level])
        level = [c for n in level for c in (n.left, n.right) if c is not None]
    return out
'''
FRAMES = {
    "frame-60MiB": 'b\'{"op":"return","v":"\' + b"x" * (60 << 20) + b\'"}\'',
    "frame-many-values": 'b\'{"op":"return","v":[\' + b"0," * (7 << 20) + b\'0]}\'',
    "frame-deep": 'b\'{"op":"return","v":\' + b"[" * 200000 + b"]" * 200000 + b"}"',
}
