"""Where the judge's worker runs: bubblewrap when it works here, else a confined process, else unconfined.

Every mode starts the worker in its own session and process group (killed as a group), with the
parent-death signal, ``PR_SET_NO_NEW_PRIVS`` and address-space, file-size, core-dump, CPU-time and
process-count limits (``setrlimit`` in the child before exec), its output capped by the judge, and a
copy of the submission and of the worker's five files (``judge_worker.py``, ``judge_wire.py``,
``judge_confine.py``, ``judge_meters.py``, ``judge_compile.py``) in a fresh folder: nothing else of the
judge. Once Python and torch are loaded, the worker confines itself as the plan says (``judge_confine.py``):

* ``bubblewrap`` (Debian package ``bubblewrap``): its own user, PID, network, IPC and UTS namespaces;
  read-only views of ``/usr``, the interpreter's folders and the few files of ``/etc`` the loader and
  Python read (not ``/etc`` itself: the sandbox's uid is root outside when the judge is root, so a
  root-only file in a bind would be readable); a read-only root, a 16 MiB ``/dev/shm``, a size-limited
  ``/tmp`` and working directory (also ``HOME``), a cleared environment; it dies with the judge
  (``--die-with-parent``). Then seccomp in the worker: no new process, no socket, no signal outside.
* ``fallback`` (no usable bubblewrap, or ``MIANJING_SANDBOX=fallback``): the worker drops to ``nobody``
  when the judge is root and ``nobody`` can run the interpreter, else drops every capability; Landlock
  limits its reads to the interpreter, the system libraries and its own files and its writes to its
  working directory; seccomp as above. It counts as confined only if all of that held.
* ``unconfined`` (``MIANJING_SANDBOX=unconfined``, or the fallback could not confine): only the
  limits and the process group. The judge says so and does not record the result as a review.

``MIANJING_SANDBOX``: ``auto`` (default: bubblewrap, else the fallback), ``bwrap`` (bubblewrap or
refuse), ``fallback`` (also ``none``), ``unconfined``.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import site
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
WORKER_FILES = ("judge_worker.py", "judge_wire.py", "judge_confine.py", "judge_meters.py", "judge_compile.py")
FILE_LIMIT_MB = 64  # largest file the candidate may write
WORKDIR_MB = 128  # its working directory (a tmpfs under bubblewrap)
TMP_MB = 64  # /tmp under bubblewrap
SHM_MB = 16  # /dev/shm under bubblewrap
OUTPUT_LIMIT = 1 << 20  # bytes of stdout + stderr before the worker is stopped
EXTRA_TASKS = 256  # threads and processes the worker's uid may add to what it runs already
NOBODY = 65534
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives")  # + /etc/python3*
SYSTEM_READ = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache", "/etc/localtime",
               "/dev/urandom", "/dev/zero", "/proc/cpuinfo", "/sys/devices/system/cpu")  # + the CPU's description
SCRUBBED_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "PYTHONIOENCODING": "utf-8",
}
MODES = {"auto": "auto", "bwrap": "bwrap", "fallback": "fallback", "none": "fallback", "unconfined": "unconfined"}


@dataclass(frozen=True)
class Limits:
    memory_mb: int
    cpu_seconds: int
    file_mb: int = FILE_LIMIT_MB
    output_bytes: int = OUTPUT_LIMIT


@dataclass
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    kind: str  # "bubblewrap" | "fallback" | "unconfined"
    confine: dict | None  # the plan the worker applies to itself (judge_confine.apply)
    file: str  # the submission's copy, as the worker opens it
    uid: int | None = None  # the uid the worker runs as, when it drops to one


def wanted() -> str:
    """``MIANJING_SANDBOX``, normalised; an unknown value reads as ``auto``."""
    return MODES.get(os.environ.get("MIANJING_SANDBOX", "auto").strip().lower(), "auto")


def describe(kind: str, note: str = "") -> str:
    if kind == "bubblewrap":
        text = ("bubblewrap (own PID/network/user namespaces, read-only system, no checkout, empty working "
                "directory) and seccomp (one process, no sockets)")
    elif kind == "fallback":
        text = ("no bubblewrap: Landlock (reads only Python and the system, writes only its own folder), "
                "seccomp (one process, no sockets, no signals out) and no privileges")
    else:
        text = ("UNCONFINED: resource limits and a process group only; the result is shown but not recorded "
                "as a review (install bubblewrap: apt-get install bubblewrap)")
    return f"{text}; {note}" if note else text


_USABLE: dict[str, bool] = {}


def bwrap_path() -> str | None:
    """bubblewrap, if it is installed, wanted, and can make its namespaces on this machine (probed once)."""
    if wanted() in ("fallback", "unconfined"):
        return None
    path = shutil.which("bwrap")
    if path is None:
        return None
    if path not in _USABLE:
        probe = [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
        if os.geteuid() == 0:
            probe += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
        try:
            _USABLE[path] = subprocess.run(probe + ["true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, timeout=30).returncode == 0
        except (OSError, subprocess.SubprocessError):
            _USABLE[path] = False
    return path if _USABLE[path] else None


def python_roots() -> list[str]:
    """Folders the worker's Python needs: its prefixes and site-packages (no checkout)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(Path(sys.executable).resolve().parent.parent)}
    try:
        roots.update(site.getsitepackages())
    except AttributeError:
        pass
    out = []
    for r in sorted(roots, key=len):
        real = os.path.realpath(r)
        if os.path.isdir(real) and real != "/" and not any(real.startswith(o + os.sep) or real == o for o in out):
            out.append(real)
    return out


# -- the worker's folder ---------------------------------------------------------------------


class Workspace:
    """A fresh folder per worker: ``files/`` (read-only copies the worker needs) and ``work/`` (its
    working directory). Removed by file descriptor, so a worker that swapped a folder for a symlink
    cannot make the judge delete, or fail on, anything outside it."""

    def __init__(self, submission: Path):
        self.root = Path(tempfile.mkdtemp(prefix="mianjing-judge-"))
        try:
            os.chmod(self.root, 0o755)
            self.files = self.root / "files"
            self.work = self.root / "work"
            self.files.mkdir(mode=0o755)
            self.work.mkdir(mode=0o700)
            for name in WORKER_FILES:
                shutil.copyfile(HERE / name, self.files / name)
                os.chmod(self.files / name, 0o644)
            self.submission = self.files / ("submission_" + submission.name)
            shutil.copyfile(submission, self.submission)  # the file as it is now: later edits do not reach the worker
            os.chmod(self.submission, 0o644)
            os.chmod(self.files, 0o555)
        except BaseException:
            self.remove()
            raise

    def remove(self) -> None:
        _remove_tree(str(self.root))


def _remove_tree(path: str) -> None:
    """Delete ``path`` and everything under it without following symlinks; never raises."""
    parent, name = os.path.split(path)
    try:
        pfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        _remove_entry(pfd, name)
    finally:
        os.close(pfd)


def _remove_entry(dir_fd: int, name: str) -> None:
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(name, dir_fd=dir_fd)
        except OSError:
            pass
        return
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return
    try:
        try:
            os.chmod(fd, 0o700)  # a folder the worker made unreadable or unwritable
        except OSError:
            pass
        for child in os.listdir(fd):
            _remove_entry(fd, child)
    except OSError:
        pass
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except OSError:
        pass


# -- plans -----------------------------------------------------------------------------------


def _etc_binds() -> list[str]:
    args = []
    for name in ETC_FILES:
        p = f"/etc/{name}"
        if os.path.exists(p):
            args += ["--ro-bind", p, p]
    for p in sorted(glob.glob("/etc/python3*")):
        args += ["--ro-bind", p, p]
    return args


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args + _etc_binds()


def bwrap_argv(bwrap: str, files: Path, submission: Path, display: str, python_argv: list[str],
               env: dict[str, str]) -> list[str]:
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if os.geteuid() == 0:  # root outside: drop to nobody inside a user namespace
        argv += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    argv += _system_binds()
    # the empty /tmp first, then the binds: bubblewrap mounts in order, so a Python (a venv, a checkout)
    # that lives under /tmp is bound on top of the tmpfs instead of hidden by it
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(SHM_MB << 20), "--tmpfs", "/dev/shm",
             "--size", str(TMP_MB << 20), "--tmpfs", "/tmp",
             "--size", str(WORKDIR_MB << 20), "--tmpfs", "/sandbox"]
    for root in python_roots():
        if not root.startswith("/usr/"):
            argv += ["--ro-bind", root, root]
    argv += ["--ro-bind", str(files), "/judge", "--ro-bind", str(submission), display,
             "--remount-ro", "/dev", "--remount-ro", "/",
             "--chdir", "/sandbox", "--hostname", "judge", "--clearenv"]
    for k, v in env.items():
        argv += ["--setenv", k, v]
    return argv + ["--"] + python_argv


_RUNS_AS: dict[tuple, bool] = {}


def runs_as(uid: int, ws: Workspace, preload: list[str]) -> bool:
    """Can ``uid`` start the interpreter, read the worker's files and find ``preload`` (probed once)?"""
    key = (uid, sys.executable, tuple(preload))
    if key not in _RUNS_AS:
        argv = [sys.executable, "-I", "-B", str(ws.files / "judge_worker.py"), "--probe", *preload]

        def become():
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)

        try:
            _RUNS_AS[key] = subprocess.run(argv, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, preexec_fn=become, timeout=60).returncode == 0
        except (OSError, subprocess.SubprocessError):
            _RUNS_AS[key] = False
    return _RUNS_AS[key]


def plan(ws: Workspace, display: str, rfd: int, wfd: int, preload: list[str], protected: list[str]) -> Launch:
    """The command line that starts the worker, and the confinement it applies to itself.

    ``protected``: folders the worker must not read (the checkout's code); a fallback whose allowed
    reads would include one of them is not confined."""
    mode = wanted()
    bwrap = bwrap_path() if mode in ("auto", "bwrap") else None
    if bwrap:
        env = dict(SCRUBBED_ENV, HOME="/sandbox", TMPDIR="/tmp")
        files = "/judge"
        argv = bwrap_argv(bwrap, ws.files, ws.submission, display,
                          [sys.executable, "-I", "-B", f"{files}/judge_worker.py", str(rfd), str(wfd)], env)
        return Launch(argv, {"PATH": SCRUBBED_ENV["PATH"]}, str(ws.work), "bubblewrap", {"seccomp": True},
                      display)
    env = dict(SCRUBBED_ENV, HOME=str(ws.work), TMPDIR=str(ws.work))
    argv = [sys.executable, "-I", "-B", str(ws.files / "judge_worker.py"), str(rfd), str(wfd)]
    if mode == "unconfined":
        return Launch(argv, env, str(ws.work), "unconfined", None, str(ws.submission))
    uid = NOBODY if os.geteuid() == 0 and runs_as(NOBODY, ws, preload) else None
    if uid is not None:
        os.chown(ws.work, uid, uid)
    read = [*python_roots(), *SYSTEM_READ, str(ws.files)]
    if any(_beneath(p, r) for p in protected for r in read):
        return Launch(argv, env, str(ws.work), "unconfined", None, str(ws.submission))
    confine = {"uid": uid, "gid": uid, "seccomp": True,
               "landlock": {"read": read + ["/proc/self"], "write": [str(ws.work), "/dev/null"]}}
    return Launch(argv, env, str(ws.work), "fallback", confine, str(ws.submission), uid)


def _beneath(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def confined(kind: str, report: dict) -> tuple[bool, str]:
    """Did the worker's self-confinement hold for ``kind``? ``(confined, a note)``: what it ran as, or
    what failed."""
    if kind == "bubblewrap":
        return True, "seccomp applied" if report.get("seccomp") else "seccomp unavailable; bubblewrap alone"
    if kind != "fallback":
        return False, "forced" if wanted() == "unconfined" else "the checkout is inside the interpreter's folders"
    missing = [name for name in ("no_new_privs", "landlock", "seccomp") if not report.get(name)]
    if report.get("uid") == 0 and not report.get("capabilities_dropped"):
        missing.append("dropping root's capabilities")
    if missing:
        errors = "; ".join(str(e) for e in report.get("errors", [])[:3])
        return False, "could not apply " + ", ".join(missing) + (f" ({errors})" if errors else "")
    who = "as root without capabilities" if report.get("uid") == 0 else f"as uid {report.get('uid')}"
    return True, f"{who}, Landlock ABI {report.get('landlock')}"


# -- starting and stopping -------------------------------------------------------------------


def _tasks_of(uid: int) -> int:
    """Threads of every process ``uid`` runs now (what RLIMIT_NPROC counts)."""
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status", "rb") as fh:
                text = fh.read()
        except OSError:
            continue
        uid_line = text.split(b"\nUid:", 1)[1].split(None, 1)[0] if b"\nUid:" in text else b""
        if uid_line == str(uid).encode():
            threads = text.split(b"\nThreads:", 1)[1].split(None, 1)[0] if b"\nThreads:" in text else b"1"
            n += int(threads) if threads.isdigit() else 1
    return n


def preexec(limits: Limits, uid: int, no_new_privs: bool):
    """Runs in the child between fork and exec: limits, death with the judge, no new privileges (not
    for bubblewrap, which sets it itself and may need its setuid bit where unprivileged namespaces are off).
    Everything it needs is looked up here, in the parent: the child must not import (the import lock
    may be held by another thread at fork time)."""
    import resource

    prctl = _prctl()
    setrlimit = resource.setrlimit
    nproc = _tasks_of(uid) + EXTRA_TASKS if uid != 0 else 1 << 16  # the kernel never applies it to uid 0
    pairs = [(resource.RLIMIT_AS, limits.memory_mb << 20), (resource.RLIMIT_FSIZE, limits.file_mb << 20),
             (resource.RLIMIT_CORE, 0), (resource.RLIMIT_CPU, limits.cpu_seconds), (resource.RLIMIT_NPROC, nproc)]

    def apply() -> None:
        for which, value in pairs:
            try:
                setrlimit(which, (value, value))
            except (ValueError, OSError):
                pass
        if prctl is not None:
            prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
            if no_new_privs:
                prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS

    return apply


def _prctl():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def start(launch: Launch, limits: Limits, pass_fds: tuple[int, ...]) -> subprocess.Popen:
    uid = launch.uid if launch.uid is not None else os.geteuid()
    return subprocess.Popen(launch.argv, cwd=launch.cwd, env=launch.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=pass_fds,
                            start_new_session=True, preexec_fn=preexec(limits, uid, launch.kind != "bubblewrap"))


def kill(proc: subprocess.Popen) -> None:
    """Kill the worker's whole process group (bubblewrap's PID namespace goes with its init)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except OSError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass

