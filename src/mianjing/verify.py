"""``mianjing verify``: run the verifiers through pytest and write ``build/verification.json``.

pytest runs in a child process with the claim plugin; a per-test timeout stops
a verifier that hangs (it is reported as failed and the rest still run).

Incremental by default: each claim has a *key*, a hash of everything its outcome depends on --
the verifier files holding its tests, every project module they import (transitively, through
:mod:`mianjing.imports`, the same graph the mutation harness uses; conftest files included) and
the data files those modules name or keep beside them, the claim's own text in its entry, the
versions of Python, torch, hypothesis, triton, numpy, sympy and pytest, the device and the
``MIANJING_*`` settings (hypothesis examples and profile). A claim whose key equals the key of its
last passed or skipped record is *reused*; every other selected claim is *rerun* (failures always
are), and pytest is handed only the files that hold their tests. ``reuse=False`` (``--all``) reruns
every selected claim. Each record says ``run: {status: rerun|reused, commit, dirty, date}`` -- the
commit of the run that executed it. Records of claims outside the selection are kept while their
key still matches, and dropped otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .knowledge import KnowledgeBase
from .paths import report_path
from .report import FORMAT, ReportError, inputs_digest, load_report, summarise, write_json_atomic


@dataclass
class VerifyResult:
    claims: dict[str, dict] = field(default_factory=dict)  # the claims selected for this run
    report: dict = field(default_factory=dict)
    exitstatus: int = 0
    wall: float = 0.0
    log_path: Path | None = None
    problem: str | None = None  # a run-level failure (pytest crashed, nothing collected)
    rerun: set[str] = field(default_factory=set)  # selected claims whose verifiers ran now
    reused: set[str] = field(default_factory=set)  # selected claims whose last result still stands

    @property
    def failed(self) -> list[str]:
        return sorted(c for c, r in self.claims.items() if r["outcome"] in ("failed", "not-run"))

    @property
    def ok(self) -> bool:
        return self.problem is None and not self.failed


def git_commit(root: Path) -> tuple[str | None, bool]:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                    capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, False
    return commit, dirty


# Settings that change what a verifier computes; the other MIANJING_* variables name paths or the UI.
_NOT_SETTINGS = ("MIANJING_ROOT", "MIANJING_DB", "MIANJING_CACHE", "MIANJING_CATALOG", "MIANJING_LANG",
                 "MIANJING_CHROMIUM", "MIANJING_DEVICE", "MIANJING_FIGURE_JOBS")
_VERSIONED = ("torch", "hypothesis", "triton", "numpy", "sympy", "pytest")


def resolved_device(device: str) -> str:
    """auto -> cuda when torch sees one, else cpu (what the verifiers' ``device`` fixture picks). Without a
    GPU driver's device node (NVIDIA's, or ROCm's /dev/kfd) torch cannot see one: cpu, without importing it."""
    if device != "auto":
        return device
    if sys.platform == "linux" and not any(Path(d).exists() for d in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd")):
        return "cpu"
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def setting(device: str) -> dict:
    """What every claim's outcome depends on besides the files: versions, device, settings."""
    from importlib import metadata

    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return {"python": sys.version.split()[0], "device": device,
            "versions": {d: version(d) for d in _VERSIONED},
            "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("MIANJING_") and k not in _NOT_SETTINGS}}


def claim_files(root: Path, old: dict[str, dict] | None = None) -> dict[str, set[str]]:
    """Claim id -> the verifier files holding its tests: the claim markers found in the sources, and the
    files its tests ran from in the last report (a marker the scan cannot read still counts)."""
    from .markers import find_markers

    files: dict[str, set[str]] = {}
    for use in find_markers(root)[0]:
        files.setdefault(use.claim_id, set()).add(use.path)
    for cid, rec in (old or {}).items():
        for t in rec.get("tests", []):
            if t.get("file") and (root / t["file"]).is_file():
                files.setdefault(cid, set()).add(t["file"])
    return files


def claim_keys(root: Path, kb: KnowledgeBase, device: str, files: dict[str, set[str]]) -> dict[str, str]:
    """Claim id -> the hash of what its outcome depends on (see the module docstring). A claim with no
    verifier file known gets no key: it is always rerun."""
    import hashlib

    from .imports import closure, data_files, import_graph, module_name, project_modules

    folders = ("impls", "verifiers", "figures", "src/mianjing")
    graph, modules = import_graph(root, folders), project_modules(root, folders)
    digests: dict[Path, str] = {}
    memo: dict = {}

    def digest(path: Path) -> str:
        if path not in digests:
            digests[path] = hashlib.sha256(path.read_bytes()).hexdigest()
        return digests[path]

    common = json.dumps(setting(device), sort_keys=True)
    keys: dict[str, str] = {}
    for entry, claim in kb.claims():
        mine = sorted(files.get(claim.id, ()))
        if not mine:
            continue
        start = {"mianjing.plugin"}
        for rel in mine:
            start.add(module_name(rel))
            folder = (root / rel).parent
            while folder.is_relative_to(root / "verifiers"):  # pytest loads every conftest.py on the way
                if (folder / "conftest.py").is_file():
                    start.add(module_name((folder / "conftest.py").relative_to(root).as_posix()))
                folder = folder.parent
        code = sorted({modules[m] for m in closure(graph, start) if m in modules})
        inputs = {f.relative_to(root).as_posix(): digest(f) for f in (*code, *data_files(root, code, memo))}
        text = json.dumps({"entry": entry.id, "claim": claim.model_dump(mode="json")}, sort_keys=True, default=str)
        keys[claim.id] = hashlib.sha256("\0".join([common, text, json.dumps(inputs, sort_keys=True)]).encode()).hexdigest()
    return keys


def reusable(rec: dict | None, key: str | None) -> bool:
    """An old record stands for the current tree: same key, and it passed or was skipped."""
    return bool(rec and key and rec.get("key") == key and rec.get("outcome") in ("passed", "skipped"))


def pytest_command(root: Path, out: Path, claim_ids: set[str] | None, jobs: int, timeout: int,
                   extra: list[str], paths: list[str] | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", *(paths or ["verifiers"]), "-q", "-p", "no:cacheprovider",
           f"--mianjing-report={out}", f"--mianjing-partial={out}.partial", "--mianjing-progress",
           f"--timeout={timeout}", "-rN", "--no-header", "--tb=short"]
    if claim_ids is not None:
        cmd.append("--mianjing-claims=" + ",".join(sorted(claim_ids)))
    if jobs > 1:
        cmd += ["-n", str(jobs)]
    return cmd + list(extra)


def _status(rc: int) -> str:
    if rc < 0:
        import signal

        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def _from_partial(path: Path, rc: int) -> dict | None:
    """Results rebuilt from the per-test lines when pytest died before writing its report: the tests
    that finished keep their outcome and evidence; the one that was running when it died failed."""
    if not path.is_file():
        return None
    from .plugin import group_by_claim

    tests: dict[str, dict] = {}
    running = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue  # the last line may be cut short by the crash
        if "start" in ev:
            running = ev
        elif "done" in ev:
            tests[ev["done"]["nodeid"]] = ev["done"]
            if running and running["start"] == ev["done"]["nodeid"]:
                running = None
    crashed = None
    if running is not None:
        crashed = running["start"]
        file, line, name = (running.get("where") or [None, None, None])[:3]
        tests[crashed] = {"nodeid": crashed, "claims": running.get("claims", []), "file": file, "line": line,
                          "function": name, "outcome": "failed", "duration": 0.0, "evidence": {},
                          "message": f"the interpreter died while this test ran ({_status(rc)})"}
    return {"claims": group_by_claim(tests), "environment": {}, "tests": list(tests.values()), "crashed": crashed}


def run(root: Path, kb: KnowledgeBase, claim_ids: set[str] | None = None, device: str = "auto",
        jobs: int = 1, timeout: int = 300, extra_pytest_args: list[str] | None = None,
        on_progress=None, report_file: Path | None = None, reuse: bool = True) -> VerifyResult:
    """Run the verifiers of ``claim_ids`` (all when None) whose results cannot be reused, merge and write
    the report. ``reuse=False`` reruns every selected claim; so does any ``extra_pytest_args`` (a plugin
    injected into the run can change any outcome)."""
    digest = inputs_digest(root)
    # Citations and opinions are settled by their text; only executable claims are expected to run.
    executable = {c.id for _, c in kb.claims() if c.needs_verifier}
    selected = (set(claim_ids) if claim_ids is not None else executable) & executable
    path = report_file or report_path(root)
    try:
        old = load_report(path)
    except ReportError:
        old = None  # unreadable: replaced by a fresh report (atomic write below)
    old_claims = old.claims if old is not None else {}
    files = claim_files(root, old_claims)
    keys = claim_keys(root, kb, resolved_device(device), files)
    reuse = reuse and not extra_pytest_args
    reused = {c for c in selected if reuse and reusable(old_claims.get(c), keys.get(c))}
    to_run = selected - reused
    env = dict(os.environ, MIANJING_DEVICE=device, PYTHONUNBUFFERED="1")
    if jobs > 1:  # parallel workers each with all-core BLAS threads oversubscribe the CPU badly
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // jobs)))
    build = root / "build"
    build.mkdir(parents=True, exist_ok=True)
    log_path = (report_file.parent if report_file else build) / "verify.log"
    result = VerifyResult(log_path=log_path)
    started = time.time()
    child: dict | None = {"claims": {}, "environment": {}}
    rc = 0
    if not to_run:
        log_path.write_text(f"nothing to rerun: the {len(reused)} selected claim(s) are reused (unchanged inputs)\n",
                            encoding="utf-8")
    else:
        full = to_run == executable  # every test of verifiers/, unmarked ones too
        unknown = [c for c in to_run if not files.get(c)]
        paths = None if full or unknown else sorted(set().union(*(files[c] for c in to_run)))
        with tempfile.TemporaryDirectory(prefix="mianjing-verify-") as tmp:
            out = Path(tmp) / "claims.json"
            cmd = pytest_command(root, out, None if full else to_run, jobs, timeout, extra_pytest_args or [], paths)
            with open(log_path, "w", encoding="utf-8") as log:
                log.write("$ " + " ".join(cmd) + "\n")
                proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, bufsize=1)
                assert proc.stdout is not None
                for line in proc.stdout:
                    log.write(line)
                    if line.startswith("MJ-PROGRESS ") and on_progress is not None:
                        _, outcome, nodeid = line.rstrip("\n").split(" ", 2)
                        on_progress(outcome, nodeid)
                proc.wait()
            rc = proc.returncode
            child = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else None
            if child is None:
                child = _from_partial(Path(f"{out}.partial"), rc)
    result.exitstatus = rc
    result.wall = time.time() - started
    if child is None:
        result.problem = f"pytest exited with status {rc} before writing results; see {log_path}"
        child = {"claims": {}, "environment": {}}
    elif child.get("crashed"):
        result.problem = (f"the verifiers' interpreter died ({_status(rc)}) while running "
                          f"{child['crashed']}; the results of the tests that finished before it are kept; "
                          f"see {log_path}")
    elif rc not in (0, 1, 5):
        result.problem = f"pytest exited with status {rc}; see {log_path}"

    commit, dirty = git_commit(root)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    base_env = child.get("environment") or (old.environment if old is not None else {})
    environment = dict(base_env, commit=commit, dirty=dirty, **({} if child.get("environment") else {"date": now}))
    this_run = {"status": "rerun", "commit": commit, "dirty": dirty, "date": now}
    ran: dict[str, dict] = {}
    for cid in sorted(to_run):
        rec = child["claims"].get(cid)
        if rec is None:
            rec = {"outcome": "not-run", "duration": 0.0, "evidence": {}, "tests": [],
                   "message": result.problem or "no verifier ran for this claim"}
        ran[cid] = dict(rec, key=keys.get(cid), inputs_digest=digest, environment=environment, run=this_run)
    # A verifier marked with a claim that needs none (an opinion, a citation) is recorded too.
    for cid, rec in child["claims"].items():
        if cid not in ran and cid not in executable:
            ran[cid] = dict(rec, key=keys.get(cid), inputs_digest=digest, environment=environment, run=this_run)
    known = {c.id for _, c in kb.claims()}
    merged: dict[str, dict] = {}
    for cid, rec in old_claims.items():
        # kept while nothing it depends on changed (the selected ones only if they passed or were skipped)
        if cid in known and cid not in ran and rec.get("key") and rec.get("key") == keys.get(cid) \
                and (cid not in selected or cid in reused):
            prev = rec.get("run") or {k: rec.get("environment", {}).get(k) for k in ("commit", "dirty", "date")}
            merged[cid] = dict(rec, inputs_digest=digest, run=dict(prev, status="reused"))
    merged.update(ran)
    merged = {c: r for c, r in sorted(merged.items()) if c in known}
    result.claims = {c: merged[c] for c in selected if c in merged}
    for cid in selected - set(result.claims):  # reused records always exist; this guards the invariant
        result.claims[cid] = {"outcome": "not-run", "tests": [], "message": "no record"}
    result.rerun, result.reused = to_run, reused
    report = {
        "format": FORMAT,
        "created": now,
        "inputs_digest": digest,
        "environment": environment,
        "wall": round(result.wall, 2),
        "incremental": {"rerun": len(to_run), "reused": len(reused), "reuse": reuse},
        "claims": merged,
        "summary": summarise({c: merged.get(c, {"outcome": "not-run"}) for c in known & executable}),
    }
    write_json_atomic(path, report)
    result.report = report
    return result
