"""Every attack on the judge from issue 22, in both sandbox modes, with the judge run as root and as an
ordinary user: each is rejected or contained, with no traceback, no process left, nothing written
outside the worker's folder, and the checkout, the venv and the review store unchanged.

Combinations (``combo``): root with bubblewrap; root with the fallback (``MIANJING_SANDBOX=fallback``:
the machine here keeps its interpreter under /root, which ``nobody`` cannot read, so the worker stays
uid 0 without capabilities); root with the fallback where ``nobody`` can read the interpreter (the
worker drops to ``nobody``); an ordinary user with bubblewrap; an ordinary user with the fallback.
Where the interpreter lives under a folder other users cannot enter, the user combinations run in a
private mount namespace that shows it to them (``unshare``, as root); where that cannot be had they
are skipped with the reason.

Each combination judges all the attacks in one child process (tests/quiz/judge_child.py, the real
judge in its own process, so that signals and /proc/<pid> reach a real judge), then the tests read the
results. "Unchanged" is checked once per batch against fingerprints taken before it: a fingerprint
holds every file's inode, size, mode, mtime and ctime, and a file's ctime cannot be set back, so a file
changed by any attack of the batch and restored afterwards still shows.
"""

from __future__ import annotations

import glob
import json
import os
import platform
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from mianjing.quiz import judge_confine, sandbox
from tests.quiz import containment_attacks as C
from tests.quiz import solutions as S
from tests.quiz.kb import CHECKOUT, mini_kb, processes_with

CHILD = Path(__file__).with_name("judge_child.py")
USER = 61222  # an unprivileged uid no account uses
COMBOS = {"root-bwrap": ("root", "bwrap"), "root-fallback": ("root", "fallback"),
          "root-fallback-nobody": ("root-ns", "fallback"), "user-bwrap": ("user", "bwrap"),
          "user-fallback": ("user", "fallback")}


# -- fingerprints and leftovers ------------------------------------------------------------------


def fingerprint(top: Path, skip_pycache: bool) -> dict:
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        if skip_pycache:
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        # what git ignores at the top and other test processes write there meanwhile (.hypothesis: the example
        # database of the tests running beside these; the judge itself uses none)
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) == top and d in (".venv", "build", "site", ".git",
                                                                                  ".hypothesis", ".pytest_cache"))]
        for name in filenames + dirnames:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            out[p] = (st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns, st.st_ctime_ns)
    return out


def changed(before: dict, after: dict) -> list[str]:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def site_packages() -> Path:
    """The judge's own site-packages (hypothesis, rich... which it imports as it runs)."""
    import hypothesis

    return Path(hypothesis.__file__).resolve().parents[1]


def git_object() -> str:
    out = subprocess.run(["git", "-C", str(CHECKOUT), "rev-parse", "--git-common-dir"], capture_output=True, text=True)
    if out.returncode != 0:
        return "/nonexistent/git-object"
    common = Path(out.stdout.strip())
    common = common if common.is_absolute() else CHECKOUT / common
    objs = sorted(glob.glob(str(common / "objects" / "??" / "*")))
    return objs[0] if objs else str(common / "HEAD")


# -- running the judge as someone ------------------------------------------------------------------


def hidden_roots(uid: int) -> dict[str, list[str]]:
    """Folders ``uid`` cannot enter on the way to the interpreter: {blocking folder: [python roots under it]}."""
    out: dict[str, list[str]] = {}
    for root in sandbox.python_roots():
        parts = Path(root).parts
        for i in range(2, len(parts) + 1):
            folder = str(Path(*parts[:i]))
            st = os.stat(folder)
            if not (st.st_mode & stat.S_IXOTH) and st.st_uid != uid:
                out.setdefault(folder, []).append(root)
                break
    return out


def namespace_prefix(uid: int) -> tuple[list[str], str]:
    """A command prefix that shows the interpreter to ``uid`` (a private mount namespace), or a reason why not."""
    hidden = hidden_roots(uid)
    if not hidden:
        return [], ""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return [], f"the interpreter is under {sorted(hidden)}, which uid {uid} cannot enter (needs root and unshare)"
    lines = ["set -e"]
    holds = []
    for i, (folder, roots) in enumerate(sorted(hidden.items())):
        for j, root in enumerate(roots):
            hold = f"/tmp/mjns-{uuid.uuid4().hex}"
            holds.append((hold, root))
            lines += [f"mkdir -p {hold}", f"mount --bind {root} {hold}"]
        lines.append(f"mount -t tmpfs -o mode=0755 tmpfs {folder}")
    for hold, root in holds:
        lines += [f"mkdir -p {root}", f"mount --move {hold} {root}", f"rmdir {hold}"]
    lines.append('exec "$@"')
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", "\n".join(lines),
                            "sh", "true"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return [], f"cannot make a mount namespace here ({probe.stderr.strip()[:120]})"
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", "\n".join(lines), "sh"], ""


def command_for(who: str) -> tuple[list[str], str]:
    if os.geteuid() != 0:
        return ([], "") if who == "user" else ([], "the root combinations need the tests to run as root")
    if who == "root":
        return [], ""
    if who == "root-ns":
        prefix, why = namespace_prefix(sandbox.NOBODY)
        if why:
            return [], why
        if not prefix:
            return [], ""  # nobody reads the interpreter already: the root-fallback combination covers it
        return prefix, ""
    prefix, why = namespace_prefix(USER)
    if why:
        return [], why
    if shutil.which("setpriv") is None:
        return [], "setpriv (util-linux) is not installed"
    return prefix + ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups", "--"], ""


class Batch:
    """One combination: the scratch checkout, store and folders, the jobs, and what the child reported."""

    def __init__(self, who: str, mode: str, tmp: Path):
        self.who, self.mode = who, mode
        self.mark = f"mjk{uuid.uuid4().hex[:12]}"
        self.base = Path(tempfile.mkdtemp(prefix="mjk-batch-", dir="/tmp"))
        os.chmod(self.base, 0o755)
        self.root = mini_kb(self.base / "kb", with_kata=True)
        for d in self.root.rglob("*"):
            os.chmod(d, 0o755 if d.is_dir() else 0o644)
        self.work = self.base / "work"
        self.home = self.base / "home"
        self.store_dir = self.base / "store"
        for d in (self.work, self.home, self.store_dir):
            d.mkdir()
        self.store = self.store_dir / "reviews.sqlite3"
        from mianjing.quiz.store import Store

        Store(self.store).close()
        self.uid = USER if who == "user" else 0
        if self.uid:
            for d in (self.work, self.home, self.store_dir, self.store):
                os.chown(d, self.uid, self.uid)
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.site = site_packages()
        self.outside = str(self.home / f"{self.mark}-outside")  # the judge's home: hidden or read-only for the worker
        self.rows: dict[str, dict] = {}

    def fill(self, code: str) -> str:
        subs = {"ROOT": str(self.root), "REF": str(self.root / "impls" / "coding" / "level_order.py"),
                "SITE": str(self.site), "JUDGE_SRC": str(CHECKOUT / "src" / "mianjing" / "quiz" / "judge_report.py"),
                "STORE": str(self.store), "GITOBJ": git_object(), "PORT": str(self.server.getsockname()[1]),
                "MARK": self.mark, "OUTSIDE": self.outside}
        for k in sorted(subs, key=len, reverse=True):
            code = code.replace(k, subs[k])
        return code

    def jobs(self) -> list[dict]:
        jobs = [{"name": n, "kata": "level_order_with_depth", "code": self.fill(C.PRELUDE + code), "only": ["prop_none_root"]}
                for n, code in C.ATTACKS.items()]
        jobs.append({"name": "properties-intact", "kata": "level_order_with_depth",
                     "code": "def level_order_with_depth(root, stats=None):\n    return []\n",
                     "only": ["prop_levels_match_oracle"]})
        jobs.append({"name": "escapes", "kata": "level_order_with_depth", "code": C.ESCAPES,
                     "only": ["prop_levels_match_oracle"]})
        for name, payload in C.FRAMES.items():
            jobs.append({"name": name, "kata": "level_order_with_depth",
                         "code": self.fill(C.HUGE_FRAME.replace("KIND", payload)),
                         "only": ["prop_none_root", "prop_levels_match_oracle"]})
        return jobs

    def run(self, jobs: list[dict], prefix: list[str], timeout: float = 600) -> list[dict]:
        spec = self.base / f"jobs-{uuid.uuid4().hex[:6]}.json"
        results = self.base / f"results-{uuid.uuid4().hex[:6]}.jsonl"
        spec.write_text(json.dumps({"root": str(self.root), "work": str(self.work), "store": str(self.store),
                                    "tag": self.mark, "jobs": jobs}))
        results.touch()
        os.chmod(spec, 0o644)
        if self.uid:
            os.chown(results, self.uid, self.uid)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home), "LANG": "C.UTF-8",
               "MIANJING_SANDBOX": self.mode, "MIANJING_MAX_EXAMPLES": "8", "MIANJING_DB": str(self.store),
               "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp"}
        proc = subprocess.run(prefix + [sys.executable, "-B", str(CHILD), str(spec), str(results)], env=env,
                              capture_output=True, text=True, timeout=timeout, cwd=str(self.work))
        rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
        assert proc.returncode == 0 and len(rows) == len(jobs), (proc.returncode, proc.stdout[-2000:],
                                                                 proc.stderr[-3000:], [r["name"] for r in rows])
        return rows

    def close(self) -> None:
        self.server.close()
        for pid in processes_with(self.mark):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        for p in glob.glob(str(self.site / f"{self.mark}*")) + glob.glob(str(self.site / "__pycache__" / f"{self.mark}*")):
            os.unlink(p)
        for p in glob.glob(f"/tmp/{self.mark}*"):
            shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else os.unlink(p)
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module", params=list(COMBOS), ids=list(COMBOS))
def batch(request, tmp_path_factory):
    who, mode = COMBOS[request.param]
    if mode == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap; CI installs it)")
    if mode == "fallback" and not (judge_confine.landlock_abi() > 0 and platform.machine() in judge_confine.SYSCALLS):
        pytest.skip("no Landlock in this kernel, or no seccomp table for this machine: the fallback is unconfined")
    prefix, why = command_for(who)
    if why:
        pytest.skip(why)
    if who == "root-ns" and not prefix:
        pytest.skip("nobody can read the interpreter here: root-fallback drops to nobody already")
    b = Batch(who, mode, tmp_path_factory.mktemp(request.param))
    try:
        before = {"checkout": fingerprint(CHECKOUT, skip_pycache=True), "venv": fingerprint(b.site, skip_pycache=True),
                  "scratch": fingerprint(b.root, skip_pycache=False), "store": fingerprint(b.store_dir, False)}
        started = time.monotonic()
        rows = b.run(b.jobs(), prefix)
        b.seconds = time.monotonic() - started
        b.rows = {r["name"]: r for r in rows}
        after = {"checkout": fingerprint(CHECKOUT, skip_pycache=True), "venv": fingerprint(b.site, skip_pycache=True),
                 "scratch": fingerprint(b.root, skip_pycache=False), "store": fingerprint(b.store_dir, False)}
        b.changed = {k: changed(before[k], after[k]) for k in before}
        time.sleep(0.5)
        b.left = processes_with(b.mark)
        b.workspaces = glob.glob(f"/tmp/mianjing-judge-*/files/submission_*{b.mark}*")
        try:
            b.connected = b.server.accept() is not None
        except (socket.timeout, OSError):
            b.connected = False
        b.prefix = prefix
        yield b
    finally:
        b.close()


ATTACKS = list(C.ATTACKS) + ["escapes", "frame-60MiB", "frame-many-values", "frame-deep"]


def denied(v) -> bool:
    return isinstance(v, str) and v.startswith("denied")


def look(row: dict) -> dict:
    text = row.get("detail", "") or ""
    assert "LOOK {" in text, (row.get("fatal"), text[:1500], row.get("printed", "")[-1500:])
    return json.loads(text.split("LOOK ", 1)[1].splitlines()[0])


def expected(name: str, info: dict, batch: Batch) -> list[str]:
    """The keys of a LOOK report that got through where they must not."""
    bad = []
    for key, value in info.items():
        if name == "unsized-filesystems":
            limit = {"dev_shm": sandbox.SHM_MB, "tmp": sandbox.TMP_MB, "root": 0}[key]
            if batch.mode == "fallback":
                limit = 0  # outside the worker's folder: Landlock refuses it
            if not (denied(value) or (value.startswith("wrote ") and int(value.split()[1]) <= limit)):
                bad.append(key)
        elif name == "symlink-swap" and key == "inner_link":
            continue  # a symlink inside its own folder is allowed; the judge must not follow it
        elif name == "limits":
            if key == "nproc" and not value.isdigit():
                bad.append(key)
            if key == "no_new_privs" and value != "1":
                bad.append(key)
        elif not denied(value):
            bad.append(key)
    return bad


@pytest.mark.parametrize("attack", ATTACKS)
def test_attack_is_contained(batch, attack):
    row = batch.rows[attack]
    assert "traceback" not in row, row["traceback"]
    assert not row.get("interrupted"), "the judge took a signal from the submission as Ctrl-C"
    assert "Traceback (most recent call last)" not in row["printed"], row["printed"][-2000:]
    assert not row["ok"], row["summary"]
    assert row["confined"], (row["sandbox"], row["confinement"], row.get("isolation"))
    if attack in C.ATTACKS:
        info = look(row)
        assert not expected(attack, info, batch), (batch.who, batch.mode, info)
    elif attack == "escapes":
        printed = row["printed"]
        assert not any(ch in printed for ch in "\x1b\x07\r\u202e"), repr(printed[-800:])
        assert "\\x1b" in printed and "REJECTED" in printed.splitlines()[-1], printed[-800:]
    else:
        props = {p[0]: p for p in row["props"]}
        assert props["prop_none_root"][1] is True, props["prop_none_root"]  # the first call, answered right
        # the bad frame loses the worker at once: the right answers after it are never read as later calls' answers
        assert props["prop_levels_match_oracle"][1] is False
        assert "garbled" in props["prop_levels_match_oracle"][2], props["prop_levels_match_oracle"]


def test_nothing_changed_outside_and_nothing_left(batch):
    assert batch.changed == {"checkout": [], "venv": [], "scratch": [], "store": []}, batch.changed
    assert batch.left == [], f"processes of the submissions outlived the judge: {batch.left}"
    assert batch.workspaces == [], batch.workspaces
    assert not batch.connected, "a submission reached the test's socket"
    assert not os.path.exists(batch.outside)
    assert not glob.glob(str(batch.site / f"{batch.mark}*"))


def test_the_judge_kept_its_memory_bounded(batch):
    rows = [batch.rows[n] for n in ("escapes", "frame-60MiB", "frame-many-values", "frame-deep")]
    growth = [(b["maxrss_kib"] - a["maxrss_kib"]) >> 10 for a, b in zip(rows, rows[1:])]
    assert max(growth) < 200, f"the judge's peak RSS grew by {growth} MiB reading the frames"


def test_the_rewritten_properties_did_not_stick(batch):
    row = batch.rows["properties-intact"]
    assert not row["ok"] and row["props"][0][2] == "wrong result", row["summary"]


def test_a_signal_from_the_submission_does_not_stop_the_review(batch):
    """The submission SIGINTs and SIGSTOPs the judge and fails: the judge finishes, and records the failure."""
    code = batch.fill(C.PRELUDE + C.ATTACKS["signal-the-judge"].replace("look(info)", "pass") +
                      "\ndef level_order_with_depth(root, stats=None):\n    return [[1]]\n")
    (row,) = batch.run([{"name": "record-after-signals", "kata": "level_order_with_depth", "code": code,
                         "only": ["prop_none_root"], "record": True}], batch.prefix, timeout=300)
    assert not row.get("interrupted") and "traceback" not in row, row
    assert not row["ok"] and "recorded as a review of `level-order-with-depth` (Again)" in (row.get("recorded") or ""), row
    import sqlite3

    con = sqlite3.connect(batch.store)
    got = con.execute("SELECT entry_id, rating, source FROM reviews").fetchall()
    con.close()
    assert got == [("level-order-with-depth", 1, "kata")], got


def test_the_worker_ran_as_planned(batch):
    iso = batch.rows["limits"]["isolation"]
    if batch.mode == "fallback":
        assert iso.get("landlock") and iso.get("seccomp") and iso.get("no_new_privs"), iso
        if batch.who == "root-ns":
            assert iso["uid"] == sandbox.NOBODY, iso
        elif batch.who == "root":
            assert iso["uid"] == sandbox.NOBODY or iso.get("capabilities_dropped"), iso
        else:
            assert iso["uid"] == USER, iso
    else:
        assert iso.get("seccomp"), iso
