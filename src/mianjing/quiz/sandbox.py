"""Where the judge's worker runs: bubblewrap when it works here, resource limits always.

With ``bwrap`` (Debian package ``bubblewrap``) the worker gets its own user, PID, network, IPC
and UTS namespaces, a read-only view of the system and of Python (the checkout is not there:
``impls/``, ``verifiers/`` and the judge's code do not exist for it), an empty size-limited
working directory that is also ``HOME``, a cleared environment, and it dies with the judge
(``--die-with-parent``; the PID namespace takes every descendant with it, ``setsid`` or not).

Without it (or with ``MIANJING_SANDBOX=none``) the worker runs in its own session and process
group, killed as a group, with the parent-death signal set; the audit hook in the worker refuses
the checkout's packages and the network. That fallback cannot stop a determined process of the
same user from escaping (``setsid`` + double fork) or signalling the judge; the judge says which
sandbox it used.

Both: address-space, file-size, core-dump and CPU-time limits (``setrlimit`` in the child before
exec; bubblewrap and everything under it inherit them), output capped by the judge.
"""

from __future__ import annotations

import os
import shutil
import signal
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

WORKER = Path(__file__).with_name("judge_worker.py")
FILE_LIMIT_MB = 64  # largest file the candidate may write
WORKDIR_MB = 128  # size of its working directory (a tmpfs under bubblewrap)
OUTPUT_LIMIT = 1 << 20  # bytes of stdout + stderr before the worker is stopped
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
    kind: str  # "bubblewrap" | "rlimits"


def describe(kind: str) -> str:
    if kind == "bubblewrap":
        return ("bubblewrap (own PID/network/user namespaces, read-only system, no checkout, empty "
                "working directory)")
    return ("rlimits and a process group only (install bubblewrap for full isolation: "
            "apt-get install bubblewrap)")


def wanted() -> str:
    """``MIANJING_SANDBOX``: auto (bubblewrap when present) | bwrap (required) | none."""
    return os.environ.get("MIANJING_SANDBOX", "auto").strip().lower() or "auto"


_USABLE: dict[str, bool] = {}


def bwrap_path() -> str | None:
    """bubblewrap, if it is installed, wanted, and can make its namespaces on this machine (probed once)."""
    if wanted() == "none":
        return None
    path = shutil.which("bwrap")
    if path is None:
        return None
    if path not in _USABLE:
        probe = [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
        if os.geteuid() == 0:
            probe += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
        try:
            _USABLE[path] = subprocess.run(probe + ["true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, timeout=30).returncode == 0
        except (OSError, subprocess.SubprocessError):
            _USABLE[path] = False
    return path if _USABLE[path] else None


def _python_roots() -> list[str]:
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


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    if os.path.isdir("/etc"):
        args += ["--ro-bind", "/etc", "/etc"]
    return args


def bwrap_argv(bwrap: str, file: Path, python_argv: list[str], env: dict[str, str]) -> list[str]:
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if os.geteuid() == 0:  # root outside: drop to nobody inside a user namespace
        argv += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
    argv += _system_binds()
    # the empty /tmp first, then the binds: bubblewrap mounts in order, so a Python (a venv, a checkout)
    # that lives under /tmp is bound on top of the tmpfs instead of hidden by it
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(WORKDIR_MB << 20), "--tmpfs", "/tmp",
             "--size", str(WORKDIR_MB << 20), "--tmpfs", "/sandbox"]
    for root in _python_roots():
        if not root.startswith("/usr/"):
            argv += ["--ro-bind", root, root]
    argv += ["--ro-bind", str(WORKER), "/judge/judge_worker.py",
             "--ro-bind", str(file), str(file),
             "--chdir", "/sandbox", "--hostname", "judge", "--clearenv"]
    for k, v in env.items():
        argv += ["--setenv", k, v]
    return argv + ["--"] + python_argv


def plan(file: Path, workdir: Path, rfd: int, wfd: int) -> Launch:
    """The command line that starts the worker (inside bubblewrap when it is usable here)."""
    bwrap = bwrap_path()
    if bwrap:
        env = dict(SCRUBBED_ENV, HOME="/sandbox", TMPDIR="/tmp")
        argv = bwrap_argv(bwrap, file, [sys.executable, "-I", "-B", "/judge/judge_worker.py", str(rfd), str(wfd)], env)
        return Launch(argv, {"PATH": SCRUBBED_ENV["PATH"]}, str(workdir), "bubblewrap")
    env = dict(SCRUBBED_ENV, HOME=str(workdir), TMPDIR=str(workdir))
    return Launch([sys.executable, "-I", "-B", str(WORKER), str(rfd), str(wfd)], env, str(workdir), "rlimits")


def preexec(limits: Limits):
    """Runs in the child between fork and exec: limits, and death with the judge. Everything it
    needs is looked up here, in the parent: the child must not import (the import lock may be held
    by another thread at fork time)."""
    import resource

    prctl = _prctl()
    setrlimit = resource.setrlimit
    pairs = [(resource.RLIMIT_AS, limits.memory_mb << 20), (resource.RLIMIT_FSIZE, limits.file_mb << 20),
             (resource.RLIMIT_CORE, 0), (resource.RLIMIT_CPU, limits.cpu_seconds)]

    def apply() -> None:
        for which, value in pairs:
            try:
                setrlimit(which, (value, value))
            except (ValueError, OSError):
                pass
        if prctl is not None:
            prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL

    return apply


def _prctl():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def start(launch: Launch, limits: Limits, pass_fds: tuple[int, ...]) -> subprocess.Popen:
    return subprocess.Popen(launch.argv, cwd=launch.cwd, env=launch.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=pass_fds,
                            start_new_session=True, preexec_fn=preexec(limits))


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
