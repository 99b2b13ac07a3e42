"""How fast does `mianjing quiz` show its first question?  (target: < 0.5 s)

Runs the real CLI in a pseudo-terminal against this checkout's knowledge base and a throwaway
review store, timing process start -> the answer prompt, beside a baseline measured in the same
run (a bare ``python -c pass`` start-up), then prints the import-time breakdown
(``python -X importtime``) of the same start-up and checks that torch, hypothesis and mkdocs are
not on it.

    .venv/bin/python benchmarks/quiz_startup.py [--runs 5] [--top 15]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pexpect

ROOT = Path(__file__).resolve().parents[1]
MIANJING = str(Path(sys.executable).with_name("mianjing"))
PROMPT = "Your answer"
FORBIDDEN = ("torch", "hypothesis", "mkdocs")


def one_run(env: dict) -> tuple[float, float]:
    """(wall seconds to the first question, CPU seconds the process used, user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    child = pexpect.spawn(MIANJING, ["quiz", "--lang", "en", "-n", "1"], env=env, cwd=str(ROOT),
                          encoding="utf-8", timeout=30, dimensions=(50, 120))
    child.expect(PROMPT)
    dt = time.perf_counter() - t0
    child.close(force=True)  # it now blocks on input: its CPU time is the start-up's
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return dt, cpu


def importtime(env: dict) -> tuple[list[tuple[int, int, str]], set[str]]:
    code = ("import sys; sys.argv=['mianjing','quiz','--lang','en','-n','1']\n"
            "from mianjing.cli import app\n"
            "try:\n    app()\nexcept SystemExit:\n    pass\n")
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env, cwd=ROOT, input="",
                       capture_output=True, text=True, timeout=60)
    rows, names = [], set()
    for line in p.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            self_us, cum_us, indent, name = int(m[1]), int(m[2]), len(m[3]), m[4]
            names.add(name.split(".")[0])
            if indent <= 3:  # top-level imports and their direct children
                rows.append((cum_us, self_us, name))
    return sorted(rows, reverse=True), names


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="quiz-startup-"))
    try:
        env = dict(os.environ, MIANJING_DB=str(tmp / "db.sqlite3"), MIANJING_ROOT=str(ROOT), TERM="xterm")
        runs = [one_run(env) for _ in range(args.runs)]
        base = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            base.append(time.perf_counter() - t0)
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        b = statistics.median(base)
        print(f"mianjing quiz: start -> first question, median of {args.runs} runs ({os.cpu_count()} CPUs)")
        print(f"  quiz start-up : wall {wall:.3f} s (min {min(w for w, _ in runs):.3f}), CPU {cpu:.3f} s")
        print(f"  bare python   : wall {b:.3f} s   -> quiz / bare python = {wall / b:.1f}x")
        print(f"  target 0.5 s: wall {'met' if wall < 0.5 else 'NOT met'}; CPU {'met' if cpu < 0.5 else 'NOT met'} "
              f"(load average now {os.getloadavg()[0]:.1f}: on a busy machine wall time waits for a core)")
        rows, names = importtime(env)
        total = max((r[0] for r in rows), default=0)
        print(f"\nimport-time breakdown (python -X importtime, cumulative, top {args.top}; all imports {total / 1e6:.3f} s):")
        for cum, self_us, name in rows[: args.top]:
            print(f"  {cum / 1000:8.1f} ms  (self {self_us / 1000:6.1f})  {name}")
        bad = [m for m in FORBIDDEN if m in names]
        print(f"\nheavy modules on the start-up path: {', '.join(bad) if bad else 'none (no torch, hypothesis, mkdocs)'}")
        return 1 if bad else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
