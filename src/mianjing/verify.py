"""``mianjing verify``: run the verifiers through pytest and write ``build/verification.json``.

pytest runs in a child process with the claim plugin; a per-test timeout stops
a verifier that hangs (it is reported as failed and the rest still run). The
child's per-claim results are merged into the report: claims run now replace
their old records; older records are kept only while the code they ran
against is unchanged (same inputs digest).
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


def pytest_command(root: Path, out: Path, claim_ids: set[str] | None, jobs: int, timeout: int,
                   extra: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "verifiers", "-q", "-p", "no:cacheprovider",
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
        on_progress=None, report_file: Path | None = None) -> VerifyResult:
    """Run the verifiers of ``claim_ids`` (all when None), merge and write the report."""
    digest = inputs_digest(root)
    # Citations and opinions are settled by their text; only executable claims are expected to run.
    executable = {c.id for _, c in kb.claims() if c.needs_verifier}
    selected = (set(claim_ids) if claim_ids is not None else executable) & executable
    env = dict(os.environ, MIANJING_DEVICE=device, PYTHONUNBUFFERED="1")
    if jobs > 1:  # parallel workers each with all-core BLAS threads oversubscribe the CPU badly
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // jobs)))
    build = root / "build"
    build.mkdir(parents=True, exist_ok=True)
    log_path = (report_file.parent if report_file else build) / "verify.log"
    result = VerifyResult(log_path=log_path)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="mianjing-verify-") as tmp:
        out = Path(tmp) / "claims.json"
        cmd = pytest_command(root, out, selected if claim_ids is not None else None, jobs, timeout,
                             extra_pytest_args or [])
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
        result.exitstatus = proc.returncode
        child = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else None
        if child is None:
            child = _from_partial(Path(f"{out}.partial"), proc.returncode)
    result.wall = time.time() - started
    if child is None:
        result.problem = f"pytest exited with status {proc.returncode} before writing results; see {log_path}"
        child = {"claims": {}, "environment": {}}
    elif child.get("crashed"):
        result.problem = (f"the verifiers' interpreter died ({_status(proc.returncode)}) while running "
                          f"{child['crashed']}; the results of the tests that finished before it are kept; "
                          f"see {log_path}")
    elif proc.returncode not in (0, 1, 5):
        result.problem = f"pytest exited with status {proc.returncode}; see {log_path}"

    commit, dirty = git_commit(root)
    environment = dict(child.get("environment", {}), commit=commit, dirty=dirty)
    ran: dict[str, dict] = {}
    for cid in sorted(selected):
        rec = child["claims"].get(cid)
        if rec is None:
            rec = {"outcome": "not-run", "duration": 0.0, "evidence": {}, "tests": [],
                   "message": result.problem or "no verifier ran for this claim"}
        ran[cid] = dict(rec, inputs_digest=digest, environment=environment)
    # Markers naming claims outside the selection (a test settling several claims) are kept too.
    for cid, rec in child["claims"].items():
        if cid not in ran:
            ran[cid] = dict(rec, inputs_digest=digest, environment=environment)
    result.claims = {c: ran[c] for c in selected}

    path = report_file or report_path(root)
    try:
        old = load_report(path)
    except ReportError:
        old = None  # unreadable: replaced by a fresh report (atomic write below)
    merged: dict[str, dict] = {}
    if old is not None:
        merged = {c: r for c, r in old.claims.items() if r.get("inputs_digest") == digest}
    merged.update(ran)
    known = {c.id for _, c in kb.claims()}
    merged = {c: r for c, r in sorted(merged.items()) if c in known}
    executable_known = known & executable
    report = {
        "format": FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "inputs_digest": digest,
        "environment": environment,
        "wall": round(result.wall, 2),
        "claims": merged,
        "summary": summarise({c: merged.get(c, {"outcome": "not-run"}) for c in executable_known}),
    }
    write_json_atomic(path, report)
    result.report = report
    return result
