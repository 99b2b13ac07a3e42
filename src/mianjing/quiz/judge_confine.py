"""How the judge's worker confines itself, after Python and torch are loaded and before the candidate's file.

Everything here is irreversible for the process and for anything it could start, and needs no
privilege (``PR_SET_NO_NEW_PRIVS`` is set first):

* **identity** (when the worker was started as root): ``setresuid``/``setresgid`` to an unprivileged
  uid (``nobody``) when the judge found that uid can read the interpreter; otherwise every capability
  is dropped (bounding set and capset), so uid 0 is left without ``CAP_DAC_OVERRIDE``, ``CAP_KILL``,
  ``CAP_SYS_PTRACE``...;
* **Landlock** (Linux >= 5.13): files may be read only beneath the interpreter's folders, the system's
  library folders, the worker's own files and the submission, and written only in the working
  directory; no file may be linked or renamed in from elsewhere. ABI >= 4 also refuses TCP, ABI >= 6
  signals to processes outside the sandbox and abstract Unix sockets. Ptrace and ``/proc/<pid>/mem``
  of processes outside the domain are refused by every ABI;
* **seccomp** (x86-64 and arm64): no new process (``clone`` only with ``CLONE_THREAD``; fork, vfork,
  clone3, execve refused), no socket (``socketpair`` stays), no ptrace or cross-process memory
  access, no io_uring, and signals only to the worker itself.

:func:`apply` returns what it could apply; the judge decides from that whether the run was confined.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
import struct

PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
CLONE_THREAD = 0x00010000

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _check(rc: int, what: str) -> int:
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")
    return rc


# -- identity --------------------------------------------------------------------------------


def drop_capabilities() -> None:
    """Empty bounding, effective, permitted and inheritable sets (the ambient set follows)."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 and ctypes.get_errno() == errno.EINVAL:
            break  # past the last capability this kernel knows

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    data = (ctypes.c_uint32 * 6)()  # two struct __user_cap_data (effective, permitted, inheritable), zeroed
    _check(_libc.capset(ctypes.byref(Header(0x20080522, 0)), data), "capset")


def become(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


# -- Landlock --------------------------------------------------------------------------------

_LL_CREATE, _LL_ADD, _LL_RESTRICT = 444, 445, 446  # the same numbers on every architecture
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15


def landlock_abi() -> int:
    rc = _libc.syscall(_LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION
    return int(rc) if rc > 0 else 0


def landlock(read: list[str], write: list[str]) -> int:
    """Restrict this process to reading ``read`` and writing ``write`` (each a file or a folder tree).
    Returns the ABI used. Paths that do not exist are skipped."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available in this kernel")
    fs = (1 << 13) - 1  # ABI 1: execute .. make_sym
    file_rights = EXECUTE | WRITE_FILE | READ_FILE
    if abi >= 2:
        fs |= REFER
    if abi >= 3:
        fs |= TRUNCATE
        file_rights |= TRUNCATE
    if abi >= 5:
        fs |= IOCTL_DEV
        file_rights |= IOCTL_DEV
    net = 0b11 if abi >= 4 else 0  # bind and connect TCP, with no rule allowing any port
    scoped = 0b11 if abi >= 6 else 0  # abstract Unix sockets and signals outside the domain
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    attr = ctypes.create_string_buffer(struct.pack("=QQQ", fs, net, scoped)[:size], size)
    ruleset = _check(_libc.syscall(_LL_CREATE, attr, ctypes.c_size_t(size), ctypes.c_uint32(0)),
                     "landlock_create_ruleset")
    try:
        for paths, rights in ((read, EXECUTE | READ_FILE | READ_DIR), (write, fs & ~REFER)):
            for path in paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    allowed = rights if stat.S_ISDIR(os.fstat(fd).st_mode) else rights & file_rights
                    rule = ctypes.create_string_buffer(struct.pack("=Qi", allowed, fd), 12)
                    _check(_libc.syscall(_LL_ADD, ctypes.c_int(ruleset), ctypes.c_int(1), rule, ctypes.c_uint32(0)),
                           f"landlock_add_rule {path}")
                finally:
                    os.close(fd)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
        _check(_libc.syscall(_LL_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


# -- seccomp ---------------------------------------------------------------------------------

SYSCALLS = {
    "x86_64": dict(arch=0xC000003E, socket=41, ptrace=101, kill=62, tkill=200, tgkill=234, rt_sigqueueinfo=129,
                   rt_tgsigqueueinfo=297, process_vm_readv=310, process_vm_writev=311, pidfd_send_signal=424,
                   pidfd_open=434, pidfd_getfd=438, clone=56, fork=57, vfork=58, execve=59, execveat=322, clone3=435,
                   io_uring_setup=425, io_uring_enter=426, io_uring_register=427),
    "aarch64": dict(arch=0xC00000B7, socket=198, ptrace=117, kill=129, tkill=130, tgkill=131, rt_sigqueueinfo=138,
                    rt_tgsigqueueinfo=240, process_vm_readv=270, process_vm_writev=271, pidfd_send_signal=424,
                    pidfd_open=434, pidfd_getfd=438, clone=220, execve=221, execveat=281, clone3=435,
                    io_uring_setup=425, io_uring_enter=426, io_uring_register=427),
}
DENIED = {  # syscall -> errno it fails with
    "socket": errno.EACCES, "ptrace": errno.EPERM, "process_vm_readv": errno.EPERM, "process_vm_writev": errno.EPERM,
    "pidfd_send_signal": errno.EPERM, "pidfd_open": errno.EPERM, "pidfd_getfd": errno.EPERM, "fork": errno.EPERM,
    "vfork": errno.EPERM, "execve": errno.EPERM, "execveat": errno.EPERM, "tkill": errno.EPERM,
    "clone3": errno.ENOSYS,  # glibc then falls back to clone(), which the filter can inspect
    "io_uring_setup": errno.EPERM, "io_uring_enter": errno.EPERM, "io_uring_register": errno.EPERM,
}
_LD_W, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL = 0x7FFF0000, 0x80000000
_ARG0 = 16  # offset of args[0] in struct seccomp_data (its low 32 bits: the kernel reads pid_t/int)


def _errno(e: int) -> int:
    return 0x00050000 | e


def seccomp_program(table: dict, pid: int) -> list[tuple[int, int, int, int]]:
    """The BPF filter (code, jt, jf, k) for ``table``'s architecture and this process's ``pid``."""
    p = [(_LD_W, 0, 0, 4), (_JEQ, 1, 0, table["arch"]), (_RET, 0, 0, _KILL),  # another ABI (i386 on x86-64)
         (_LD_W, 0, 0, 0), (_JGE, 0, 1, 0x40000000), (_RET, 0, 0, _errno(errno.ENOSYS))]  # x32
    for name, e in DENIED.items():
        if name in table:
            p += [(_JEQ, 0, 1, table[name]), (_RET, 0, 0, _errno(e))]
    # clone: threads only
    p += [(_JEQ, 0, 4, table["clone"]), (_LD_W, 0, 0, _ARG0), (_JSET, 0, 1, CLONE_THREAD), (_RET, 0, 0, _ALLOW),
          (_RET, 0, 0, _errno(errno.EPERM))]
    # kill(pid): its own process (group)
    own = [0, pid, (-pid) & 0xFFFFFFFF]
    p += [(_JEQ, 0, 2 + len(own), table["kill"]), (_LD_W, 0, 0, _ARG0)]
    p += [(_JEQ, len(own) - i, 0, v) for i, v in enumerate(own)]
    p += [(_RET, 0, 0, _errno(errno.EPERM)), (_RET, 0, 0, _ALLOW)]
    for name in ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):  # thread-group id first: its own
        p += [(_JEQ, 0, 4, table[name]), (_LD_W, 0, 0, _ARG0), (_JEQ, 1, 0, pid), (_RET, 0, 0, _errno(errno.EPERM)),
              (_RET, 0, 0, _ALLOW)]
    return p + [(_RET, 0, 0, _ALLOW)]


def seccomp() -> None:
    table = SYSCALLS.get(platform.machine())
    if table is None:
        raise OSError(errno.ENOSYS, f"no seccomp table for {platform.machine()}")
    prog = seccomp_program(table, os.getpid())
    raw = b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Prog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


# -- all of it -------------------------------------------------------------------------------


def apply(plan: dict) -> dict:
    """Apply ``plan`` = {uid, gid, landlock: {read, write} | None, seccomp: bool}; report what held."""
    report: dict = {"errors": []}

    def attempt(name, fn):
        try:
            report[name] = fn()
            if report[name] is None:
                report[name] = True
        except (OSError, ValueError) as exc:
            report[name] = False
            report["errors"].append(f"{name}: {exc}")

    attempt("no_new_privs", lambda: _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl") == 0)
    if os.geteuid() == 0:
        if isinstance(plan.get("uid"), int):
            attempt("identity", lambda: become(plan["uid"], plan.get("gid", plan["uid"])))
        else:
            attempt("capabilities_dropped", drop_capabilities)
    ll = plan.get("landlock")
    if isinstance(ll, dict):
        attempt("landlock", lambda: landlock([str(p) for p in ll.get("read", [])], [str(p) for p in ll.get("write", [])]))
    if plan.get("seccomp"):
        attempt("seccomp", seccomp)
    report["uid"] = os.geteuid()
    return report
