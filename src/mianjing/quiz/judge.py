"""``mianjing kata judge``: run a kata's properties on the candidate's code in a child process.

The child (``judge_worker``) runs with an address-space limit (``memory_mb``) and the parent
enforces a wall-clock limit (``timeout`` seconds for importing the candidate's file and again for
each property; our own imports do not count), killing the child's whole process group when it is
exceeded. Whatever happens -- infinite loop, huge allocation, ``sys.exit``, ``os._exit``, an
import error, a wrong signature -- the result is a clear reason, never a hang or our traceback.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from .katas import MARKER, Kata, available, find

STARTUP_LIMIT = 180.0  # seconds for our own imports (torch, hypothesis) on a slow, busy machine


@dataclass
class PropResult:
    name: str
    passed: bool | None  # None: not run
    reason: str = ""
    message: str = ""
    example: str = ""
    where: str = ""
    seconds: float = 0.0


@dataclass
class JudgeResult:
    kata: Kata
    props: list[PropResult] = field(default_factory=list)
    fatal: str | None = None
    fatal_detail: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> int:
        return sum(1 for p in self.props if p.passed)

    @property
    def ok(self) -> bool:
        return self.fatal is None and bool(self.props) and all(p.passed for p in self.props)

    def summary(self) -> str:
        n = len(self.props)
        verdict = "ACCEPTED" if self.ok else "REJECTED"
        return f"{verdict}: {self.passed}/{n} properties passed ({self.seconds:.1f} s)"


def detect_kata(root: Path, file: Path, name: str | None) -> Kata | None:
    if name:
        return find(root, name)
    try:
        head = file.read_text(encoding="utf-8", errors="replace")[:20000]
    except OSError:
        return None
    m = re.search(re.escape(MARKER) + r"([A-Za-z_][A-Za-z0-9_]*)", head)
    if m:
        return find(root, m.group(1))
    stem = file.stem
    for k in available(root):
        if stem == k.name or stem.casefold().startswith(k.name.casefold()):
            return k
    return None


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _death(rc: int) -> str:
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = str(-rc)
        if -rc == signal.SIGKILL:
            return f"the process was killed ({name}; out of memory?)"
        return f"the process died from signal {name}"
    return f"the process exited with code {rc} (os._exit or a crash in native code)"


def judge(root: Path, kata: Kata, file: Path, *, timeout: float = 30.0, memory_mb: int = 4096,
          on_result=None, only: list[str] | None = None) -> JudgeResult:
    """Judge ``file`` against ``kata``; ``on_result(PropResult)`` is called as each property finishes.

    ``only``: run just these properties (by name), e.g. to re-check one failure quickly.
    """
    res = JudgeResult(kata)
    file = Path(file).resolve()
    names = [n for n, _ in kata.properties(root) if not only or n in only]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mianjing-judge-") as tmp:
        results = Path(tmp) / "events.jsonl"
        results.touch()
        log = open(Path(tmp) / "output.txt", "w+b")
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   PYTHONDONTWRITEBYTECODE="1", PYTHONFAULTHANDLER="0")
        proc = subprocess.Popen(
            [sys.executable, "-m", "mianjing.quiz.judge_worker", str(root), kata.name, str(file), str(results),
             str(memory_mb), ",".join(only or [])],
            cwd=tmp, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)
        done: dict[str, PropResult] = {}
        current: str | None = None
        ready_at: float | None = None
        phase_start = 0.0  # the limit counts from the candidate's import, then from each property's start
        finished = False
        offset = 0
        try:
            while True:
                rc = proc.poll()
                with open(results, "rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read()
                complete = chunk[: chunk.rfind(b"\n") + 1]
                offset += len(complete)
                for line in complete.decode("utf-8", errors="replace").splitlines():
                    ev = json.loads(line)
                    kind = ev.pop("event")
                    if kind == "ready":
                        ready_at = phase_start = time.monotonic()
                        names = ev["props"]
                    elif kind == "fatal":
                        res.fatal = ev["reason"]
                        res.fatal_detail = "\n".join(x for x in (ev.get("message"), ev.get("where")) if x)
                    elif kind == "start":
                        current = ev["name"]
                        phase_start = time.monotonic()
                    elif kind == "result":
                        pr = PropResult(ev["name"], ev["passed"], ev.get("reason", ""), ev.get("message", ""),
                                        ev.get("example", ""), ev.get("where", ""), ev.get("seconds", 0.0))
                        done[pr.name] = pr
                        current = None
                        if on_result:
                            on_result(pr)
                    elif kind == "done":
                        finished = True
                if rc is not None:
                    if rc == 0 or finished or res.fatal:
                        break
                    if ready_at is None:
                        log.seek(0)
                        tail = log.read().decode("utf-8", errors="replace")[-2000:]
                        res.fatal = f"the judge could not start ({_death(rc)})"
                        res.fatal_detail = tail
                    elif current is None and not done:
                        res.fatal = f"importing your file failed: {_death(rc)}"
                    else:
                        name = current or next((n for n in names if n not in done), names[0])
                        pr = PropResult(name, False, _death(rc))
                        done[name] = pr
                        if on_result:
                            on_result(pr)
                    break
                now = time.monotonic()
                if ready_at is None and now - started > STARTUP_LIMIT:
                    _kill(proc)
                    res.fatal = f"the judge did not start within {STARTUP_LIMIT:.0f} s (machine overloaded?)"
                    break
                if ready_at is not None and now - phase_start > timeout:
                    _kill(proc)
                    reason = f"timed out after {timeout:g} s (an infinite loop, or far too slow)"
                    if current is None and not done:
                        res.fatal = f"importing your file failed: {reason}"
                    else:
                        name = current or next((n for n in names if n not in done), names[0])
                        pr = PropResult(name, False, reason)
                        done[name] = pr
                        if on_result:
                            on_result(pr)
                    break
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                _kill(proc)
            log.close()
    res.props = [done.get(n, PropResult(n, None, "not run")) for n in names]
    if res.fatal:
        res.props = [PropResult(n, None, "not run") for n in names]
    res.seconds = time.monotonic() - started
    return res


def print_result(console: Console, r: PropResult) -> None:
    if r.passed:
        console.print(f"  PASS  {r.name}  ({r.seconds:.1f} s)", markup=False, style="green")
        return
    if r.passed is None:
        console.print(f"  ----  {r.name}: not run", markup=False, style="dim")
        return
    console.print(f"  FAIL  {r.name}: {r.reason}", markup=False, style="bold red")
    # An assertion message already names inputs, expected and got; for a crash the shrunk example does.
    example = "" if (r.reason == "wrong result" and "input" in r.message) else r.example
    for block in (r.message, example, r.where):
        if block:
            for line in block.splitlines():
                console.print(f"        {line}", markup=False, soft_wrap=True)


def record_review(root: Path, store, kata: Kata, res: JudgeResult, lang: str) -> str | None:
    """A judged kata is a review of its entry: all passed -> Good, most -> Hard, else Again."""
    from . import scheduler
    from .grading import AGAIN, GOOD, HARD
    from ..loader import load
    from .katas import entry_for
    from .store import Review, now_utc

    entry = entry_for(load(root).kb, kata)
    if entry is None:
        return None
    n = len(res.props)
    rating = GOOD if res.ok else (HARD if not res.fatal and n and res.passed * 2 >= n else AGAIN)
    at = now_utc()
    covered = [f"kata {kata.name}: {p.name}" for p in res.props if p.passed]
    missed = [f"kata {kata.name}: {p.name}" for p in res.props if not p.passed]
    due = store.record(
        Review(entry_id=entry.id, topic=entry.topic, rating=rating, reviewed_at=at.isoformat(), source="kata",
               covered=covered, missed=missed, duration_s=round(res.seconds, 2), suggested=rating, lang=lang),
        scheduler.card_id(entry.id), lambda cj: scheduler.review(cj, entry.id, rating, at))
    from .session import human_due

    return f"recorded as a review of `{entry.id}` ({scheduler.RATINGS[rating]}); next review {human_due(due)}"
