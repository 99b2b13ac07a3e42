"""How fast do the rehearsal commands answer?  (targets: first question < 0.3 s, `kata list` < 0.5 s,
judging a tree kata < 1 s)

Runs the real `mianjing` command in a pseudo-terminal against this checkout's knowledge base and a
throwaway review store, timing process start -> the answer prompt; beside it, in the same run, a bare
``python -c pass`` start-up as the baseline (the ratio is what carries across machines). Then the
import-time breakdown (``python -X importtime``) of the same start-up through the same entry point,
checking that torch, hypothesis, mkdocs, pydantic and typer are not on it. Then `mianjing kata list`
and `mianjing kata judge` of a correct level-order (tree) solution, end to end.

Wall time on a shared machine waits for a core: the CPU time of the measured process and the load
average are printed beside it, and a target is judged on the fastest of the runs (the one least
disturbed by other work; the median is printed too). Writes benchmarks/results/quiz_startup.json.

    .venv/bin/python benchmarks/quiz_startup.py [--runs 7] [--top 15]
"""

from __future__ import annotations

import argparse
import json
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
FORBIDDEN = ("torch", "hypothesis", "mkdocs", "pydantic", "typer")
TARGETS = {"quiz": 0.3, "kata_list": 0.5, "kata_judge_tree": 1.0}
LEVEL_ORDER = '''
def level_order_with_depth(root, stats=None):
    out, level = [], [root] if root is not None else []
    while level:
        out.append([n.val for n in level])
        level = [c for n in level for c in (n.left, n.right) if c is not None]
    return out
'''


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def quiz_once(env: dict) -> tuple[float, float]:
    """(wall seconds to the first question, CPU seconds the process used, user + system)."""
    before = _cpu()
    t0 = time.perf_counter()
    child = pexpect.spawn(MIANJING, ["quiz", "--lang", "en", "-n", "1"], env=env, cwd=str(ROOT),
                          encoding="utf-8", timeout=30, dimensions=(50, 120))
    child.expect(PROMPT)
    dt = time.perf_counter() - t0
    child.close(force=True)  # it now waits for input (the background load is not start-up)
    return dt, _cpu() - before


def command_once(args: list[str], env: dict) -> tuple[float, float, str]:
    before = _cpu()
    t0 = time.perf_counter()
    p = subprocess.run([MIANJING, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    return time.perf_counter() - t0, _cpu() - before, p.stdout + p.stderr


def importtime(env: dict) -> tuple[list[tuple[int, int, str]], set[str]]:
    # up to the answer prompt only: the background load (started at the prompt) and grading are not start-up
    code = ("import builtins, sys\nfrom mianjing.quiz import kbindex\n"
            "kbindex.Background.start = lambda self: None\n"
            "def stop(*a):\n    raise SystemExit(0)\nbuiltins.input = stop\n"
            "from mianjing.entry import main\n"
            "try:\n    main(['quiz', '--lang', 'en', '-n', '1'])\nexcept SystemExit:\n    pass\n")
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env, cwd=ROOT, input="",
                       capture_output=True, text=True, timeout=60)
    rows, names = [], set()
    for line in p.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            self_us, cum_us, indent, name = int(m[1]), int(m[2]), len(m[3]), m[4]
            names.add(name.split(".")[0])
            if indent <= 3:
                rows.append((cum_us, self_us, name))
    return sorted(rows, reverse=True), names


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="quiz-startup-"))
    results: dict = {"cpus": os.cpu_count(), "load_average_before": os.getloadavg()[0], "targets_s": TARGETS}
    try:
        env = dict(os.environ, MIANJING_DB=str(tmp / "db.sqlite3"), MIANJING_ROOT=str(ROOT), TERM="xterm")
        quiz_once(env)  # writes build/quiz-index.json if qa/ changed (the first run after an edit)
        base, runs = [], []
        for _ in range(args.runs):  # interleaved, so both see the same load
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            base.append(time.perf_counter() - t0)
            runs.append(quiz_once(env))
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        b = statistics.median(base)
        results["quiz"] = {"wall_s": round(wall, 4), "wall_min_s": round(min(w for w, _ in runs), 4),
                           "cpu_s": round(cpu, 4), "bare_python_s": round(b, 4), "ratio_to_bare_python": round(wall / b, 2)}
        print(f"mianjing quiz: start -> first question, median of {args.runs} runs ({os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.1f})")
        print(f"  quiz start-up : wall {wall:.3f} s (min {min(w for w, _ in runs):.3f}), CPU {cpu:.3f} s")
        print(f"  bare python   : wall {b:.3f} s   -> quiz / bare python = {wall / b:.1f}x")
        fastest = min(w for w, _ in runs)
        quiz_met = fastest < TARGETS["quiz"]
        print(f"  target {TARGETS['quiz']} s: {'met' if quiz_met else 'NOT met'} (fastest run {fastest:.3f} s; "
              f"CPU {cpu:.3f} s {'met' if cpu < TARGETS['quiz'] else 'NOT met'})")

        rows, names = importtime(env)
        total = max((r[0] for r in rows), default=0)
        print(f"\nimport-time breakdown (python -X importtime, cumulative, top {args.top}; all imports "
              f"{total / 1e6:.3f} s):")
        for cum, self_us, name in rows[: args.top]:
            print(f"  {cum / 1000:8.1f} ms  (self {self_us / 1000:6.1f})  {name}")
        bad = [m for m in FORBIDDEN if m in names]
        print(f"heavy modules on the start-up path: {', '.join(bad) if bad else 'none (' + ', '.join(FORBIDDEN) + ')'}")
        results["import_breakdown_ms"] = {name: round(cum / 1000, 1) for cum, _, name in rows[: args.top]}
        results["heavy_modules_on_path"] = bad

        lists = [command_once(["kata", "list"], env) for _ in range(max(3, args.runs // 2))]
        lw, lc = statistics.median(w for w, _, _ in lists), statistics.median(c for _, c, _ in lists)
        lmin = min(w for w, _, _ in lists)
        print(f"\nmianjing kata list: wall {lw:.3f} s (fastest {lmin:.3f}), CPU {lc:.3f} s  -> target "
              f"{TARGETS['kata_list']} s: {'met' if lmin < TARGETS['kata_list'] else 'NOT met'}")
        sol = tmp / "level_order_with_depth.py"
        sol.write_text(LEVEL_ORDER, encoding="utf-8")
        judges = [command_once(["kata", "judge", str(sol), "--no-record"], env) for _ in range(5)]
        jw, jc = statistics.median(w for w, _, _ in judges), statistics.median(c for _, c, _ in judges)
        jmin = min(w for w, _, _ in judges)
        accepted = all("ACCEPTED" in out for _, _, out in judges)
        sandbox = next((ln.split(":", 1)[1].split("(")[0].strip() for ln in judges[0][2].splitlines()
                        if ln.startswith("sandbox:")), "?")
        print(f"mianjing kata judge (level order, a tree kata, {os.environ.get('MIANJING_MAX_EXAMPLES', '60')} "
              f"examples per property, sandbox {sandbox}): wall {jw:.3f} s (fastest {jmin:.3f}), CPU of the judge "
              f"{jc:.3f} s, {'ACCEPTED' if accepted else 'NOT accepted'} -> target {TARGETS['kata_judge_tree']} s: "
              f"{'met' if jmin < TARGETS['kata_judge_tree'] else 'NOT met'}")
        results["kata_list"] = {"wall_s": round(lw, 4), "fastest_s": round(lmin, 4), "cpu_s": round(lc, 4)}
        results["kata_judge_tree"] = {"wall_s": round(jw, 4), "fastest_s": round(jmin, 4), "cpu_s": round(jc, 4),
                                      "accepted": accepted, "sandbox": sandbox}
        results["load_average_after"] = os.getloadavg()[0]
        results["quiz"]["fastest_s"] = round(fastest, 4)
        results["met"] = {"quiz": quiz_met, "kata_list": lmin < TARGETS["kata_list"],
                          "kata_judge_tree": jmin < TARGETS["kata_judge_tree"]}
        out = ROOT / "benchmarks" / "results" / "quiz_startup.json"
        out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {out.relative_to(ROOT)}")
        return 1 if bad or not accepted else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
