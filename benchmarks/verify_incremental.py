"""`mianjing verify` on an unchanged tree, and after one edit, against a full run (budget: unchanged <= 10%).

    .venv/bin/python benchmarks/verify_incremental.py [-j 2] [IDS...]

In a scratch copy of this checkout (the working tree's build/verification.json is not touched), three
runs of the real command, each a fresh interpreter, timed end to end (wall and the children's CPU):

1. ``mianjing verify --all``: the baseline, every selected claim's verifiers run;
2. ``mianjing verify`` again, nothing changed: every result is reused (no pytest at all);
3. ``mianjing verify`` after a comment is appended to ``impls/rl/gae.py``: only the claims whose
   verifier files import it rerun.

Prints each run's time as a ratio of the full run and how many claims were rerun / reused, and writes
benchmarks/results/verify_incremental.json. IDS (claim or entry ids) limit all three runs to part of
the base (a quicker check of the same ratios); without them the whole base runs, as `make test` does.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 0.10


def timed(cmd: list[str], cwd: Path) -> tuple[float, float, dict]:
    """(wall s, CPU s of the command and its children, the report it wrote)."""
    env = dict(os.environ, MIANJING_ROOT=str(cwd))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited with {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    report = json.loads((cwd / "build" / "verification.json").read_text(encoding="utf-8"))
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("ids", nargs="*", help="claim or entry ids (default: the whole base)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from mianjing.mutation import make_scratch

    verify = [sys.executable, "-m", "mianjing.cli", "verify", "-j", str(args.jobs), *args.ids]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="mianjing-verify-bench-") as tmp:
        scratch = make_scratch(ROOT, Path(tmp) / "checkout")
        full = timed([*verify, "--all"], scratch)
        same = timed(verify, scratch)
        gae = scratch / "impls" / "rl" / "gae.py"
        gae.write_text(gae.read_text(encoding="utf-8") + "\n# edited by benchmarks/verify_incremental.py\n",
                       encoding="utf-8")
        edited = timed(verify, scratch)
    rows = []
    print(f"mianjing verify -j {args.jobs} {' '.join(args.ids) or '(whole base)'}; {os.cpu_count()} CPUs, "
          f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}")
    for name, (wall, cpu, rep) in (("full (--all)", full), ("unchanged tree", same), ("after editing impls/rl/gae.py", edited)):
        inc = rep.get("incremental", {})
        row = {"run": name, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "rerun": inc.get("rerun"),
               "reused": inc.get("reused"), "wall_vs_full": round(wall / full[0], 3), "cpu_vs_full": round(cpu / full[1], 3)}
        rows.append(row)
        print(f"  {name:32s} wall {wall:7.1f} s  CPU {cpu:7.1f} s  rerun {row['rerun']:4}  reused {row['reused']:4}"
              f"  -> {row['wall_vs_full']:.3f} of the full run's wall, {row['cpu_vs_full']:.3f} of its CPU")
    met = rows[1]["wall_vs_full"] <= BUDGET
    print(f"budget: unchanged tree <= {BUDGET:.0%} of a full run: {'met' if met else 'NOT met'}")
    out = ROOT / "benchmarks" / "results" / "verify_incremental.json"
    out.write_text(json.dumps({"command": "python benchmarks/verify_incremental.py " + " ".join(sys.argv[1:]),
                               "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "load_average": load_before,
                               "ids": args.ids, "jobs": args.jobs, "rows": rows, "budget": BUDGET, "met": met},
                              indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
