"""The site's build budgets: figures drawn in parallel on a cold cache vs one process, and the warm strict
build (budget: <= 10 s on 2 cores).

    .venv/bin/python benchmarks/site_budget.py [--skip-figures]

1. Every figure of the knowledge base (both languages) drawn into an empty cache by the site's own
   renderer (``mianjing.site.figures.Renderer``), once with ``MIANJING_FIGURE_JOBS=1`` (the baseline:
   one drawing process) and once with the default (one process per core), in the same run; wall
   time of each and the ratio.
2. ``mianjing site build --strict`` twice on the cache the parallel run filled (the first computes
   what else the build caches -- MathML, highlighted code -- the second is the warm build), each into
   a fresh folder; wall and CPU time (the command and its children) against the 10 s budget.

The machine is shared: the load average is printed, and CPU time is the steadier figure. Writes
benchmarks/results/site_budget.json.
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
WARM_BUDGET_S = 10.0


def draw_all(cache: Path, jobs: str | None) -> tuple[float, int, int, list[str], float]:
    """(wall s, figures drawn, drawing processes, problems, CPU s of the drawing processes) for every
    figure, into the empty ``cache``."""
    from mianjing.loader import load
    from mianjing.site import figures as F

    kb = load(ROOT).kb
    refs = sorted({f.ref for e in kb.entries.values() for f in e.figures})
    saved = os.environ.get("MIANJING_FIGURE_JOBS")
    if jobs is None:
        os.environ.pop("MIANJING_FIGURE_JOBS", None)
    else:
        os.environ["MIANJING_FIGURE_JOBS"] = jobs
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        renderer = F.Renderer(ROOT, cache, list(F.keys_for(ROOT, refs).values()))
        problems = renderer.wait()
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return wall, len(renderer.missing), renderer.workers, problems, cpu
    finally:
        if saved is None:
            os.environ.pop("MIANJING_FIGURE_JOBS", None)
        else:
            os.environ["MIANJING_FIGURE_JOBS"] = saved


def build(cache: Path, site: Path) -> tuple[float, float, str]:
    env = dict(os.environ, MIANJING_CACHE=str(cache))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "mianjing.cli", "site", "build", "--strict", "--site-dir", str(site)],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"site build failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out.stdout.strip().splitlines()[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-figures", action="store_true", help="only the warm build (fills the cache in parallel first)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    sys.path.insert(0, str(ROOT))
    result: dict = {"command": "python benchmarks/site_budget.py" + (" --skip-figures" if args.skip_figures else ""),
                    "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "load_average_before": os.getloadavg()[0]}
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="mianjing-site-bench-") as tmp:
        tmp = Path(tmp)
        if not args.skip_figures:
            serial = draw_all(tmp / "serial" / "figures", "1")
        parallel = draw_all(tmp / "cache" / "figures", None)
        for name, run in ((("one process", serial),) if not args.skip_figures else ()) + (("parallel", parallel),):
            wall, n, workers, problems, cpu = run
            print(f"  figures, cold cache, {name:11s}: {n} drawn by {workers} process(es) in {wall:6.1f} s"
                  f" (CPU {cpu:6.1f} s)" + (f"; problems: {problems}" if problems else ""))
            result[f"figures_{name.replace(' ', '_')}"] = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "drawn": n,
                                                           "processes": workers, "problems": problems}
        if not args.skip_figures:
            ratio = parallel[0] / serial[0]
            result["figures_parallel_vs_one_process"] = round(ratio, 3)
            print(f"  -> parallel / one process = {ratio:.2f}")
        first = build(tmp / "cache", tmp / "site1")
        warm = build(tmp / "cache", tmp / "site2")
    print(f"  strict build, figures cached   : wall {first[0]:5.1f} s, CPU {first[1]:5.1f} s  ({first[2]})")
    print(f"  strict build, warm             : wall {warm[0]:5.1f} s, CPU {warm[1]:5.1f} s  ({warm[2]})")
    met = warm[0] <= WARM_BUDGET_S
    print(f"  -> warm build / {WARM_BUDGET_S:.0f} s budget = {warm[0] / WARM_BUDGET_S:.2f} ({'met' if met else 'NOT met'}; "
          f"CPU {warm[1] / WARM_BUDGET_S:.2f})")
    result.update(first_build={"wall_s": round(first[0], 1), "cpu_s": round(first[1], 1), "output": first[2]},
                  warm_build={"wall_s": round(warm[0], 1), "cpu_s": round(warm[1], 1), "output": warm[2]},
                  warm_budget_s=WARM_BUDGET_S, warm_met=met, load_average_after=os.getloadavg()[0])
    out = ROOT / "benchmarks" / "results" / "site_budget.json"
    out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
