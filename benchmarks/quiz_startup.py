"""How fast do the rehearsal commands answer?  (targets: first question < 0.3 s, `kata list` < 0.5 s,
judging a tree kata < 1 s, judging each LeetCode kata < 1 s and each ML kata < 5 s)

Runs the real `mianjing` command in a pseudo-terminal against this checkout's knowledge base and a
throwaway review store, timing process start -> the answer prompt; beside it, in the same run, a bare
``python -c pass`` start-up as the baseline (the ratio is what carries across machines). Then the
import-time breakdown (``python -X importtime``) of the same start-up through the same entry point,
checking that torch, hypothesis, mkdocs, pydantic and typer are not on it. Then `mianjing kata list`
and `mianjing kata judge` of a correct level-order (tree) solution, end to end; then, per track (LeetCode, ML),
`mianjing kata judge` of the accepted solution of every kata of that track (``tests/quiz/accepted.py``; a kata
without one is listed as untimed), each judged a few times and its fastest run held to the track's target.

Wall time on a shared machine waits for a core: the CPU time of the measured process and the load
average are printed beside it, and a target is judged on the fastest of the runs (the one least
disturbed by other work; the median is printed too). Writes benchmarks/results/quiz_startup.json.

    .venv/bin/python benchmarks/quiz_startup.py [--runs 7] [--top 15] [--scale 1,2,4]

``--scale``: the first question again on copies of the knowledge base holding every entry 2 and 4
times (renamed copies, valid entries), each against bare python in the same loop: the start-up must
not grow with the base (its index read stays small beside the interpreter's own start).
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
TRACK_TARGETS = {"leetcode": 1.0, "ml": 5.0}  # seconds to judge one kata of the track (fastest run)
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


def scaled_checkout(into: Path, factor: int) -> Path:
    """A checkout whose qa/ holds each entry of this one ``factor`` times (copies renamed: entry ids
    ``<id>-x<k>``, claim ids ``<id>.x<k>``, no catalog ids or facts, so every copy validates)."""
    import yaml

    root = into / f"x{factor}"
    shutil.copytree(ROOT / "qa", root / "qa")
    (root / "pyproject.toml").write_text("[project]\nname = 'scaled'\n", encoding="utf-8")
    for f in sorted((ROOT / "qa").rglob("*.yaml")):
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
        if f.parent == ROOT / "qa" or not isinstance(data, dict) or "id" not in data:
            continue
        for k in range(1, factor):
            copy = {key: v for key, v in data.items() if key != "catalog"}
            copy["id"] = f"{data['id']}-x{k}"
            copy["claims"] = [{key: v for key, v in dict(c, id=f"{c['id']}.x{k}").items() if key not in ("catalog", "facts")}
                              for c in data.get("claims", [])]
            (root / f.relative_to(ROOT).with_name(copy["id"] + ".yaml")).write_text(
                yaml.safe_dump(copy, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return root


def scaling(factors: list[int], runs: int, tmp: Path) -> list[dict]:
    """First question on bases ``factors`` times this one, each beside bare python in the same loop."""
    rows = []
    for factor in factors:
        root = ROOT if factor == 1 else scaled_checkout(tmp, factor)
        env = dict(os.environ, MIANJING_DB=str(tmp / f"db-x{factor}.sqlite3"), MIANJING_ROOT=str(root), TERM="xterm")
        quiz_once(env)  # the first run after a change builds the index (a full load): not start-up
        base, walls = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            base.append(time.perf_counter() - t0)
            walls.append(quiz_once(env)[0])
        index = root / "build" / "quiz-index.json"
        entries = len(json.loads(index.read_text(encoding="utf-8"))["entries"])
        sys.path.insert(0, str(ROOT / "src"))
        from mianjing.quiz import kbindex

        reads = []
        for _ in range(20):  # the part of start-up that grows with the base, in this process: CPU, best of 20
            t0 = time.process_time()
            assert kbindex.read(root) is not None
            reads.append(time.process_time() - t0)
        rows.append({"factor": factor, "entries": entries, "index_bytes": index.stat().st_size,
                     "index_read_cpu_ms": round(min(reads) * 1000, 2),
                     "quiz_fastest_s": round(min(walls), 4), "quiz_median_s": round(statistics.median(walls), 4),
                     "bare_python_s": round(statistics.median(base), 4),
                     "ratio_to_bare_python": round(statistics.median(walls) / statistics.median(base), 2)})
    first = rows[0]
    print(f"\nfirst question as the base grows (median of {runs}; index = build/quiz-index.json):")
    for r in rows:
        r["vs_1x"] = round(r["quiz_median_s"] / first["quiz_median_s"], 2)
        print(f"  x{r['factor']}: {r['entries']:4d} entries, index {r['index_bytes'] / 1024:6.1f} KiB read in "
              f"{r['index_read_cpu_ms']:.1f} ms CPU, quiz "
              f"{r['quiz_median_s']:.3f} s (fastest {r['quiz_fastest_s']:.3f}), bare python {r['bare_python_s']:.3f} s"
              f" -> quiz / bare python {r['ratio_to_bare_python']:.1f}x, vs x1 {r['vs_1x']:.2f}x")
    return rows


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


def judge_tracks(env: dict, tmp: Path, runs: int) -> dict:
    """Per track: ``{kata: {fastest_s, median_s, cpu_s, accepted}}`` for every kata with an accepted solution, and
    the katas left untimed."""
    sys.path.insert(0, str(ROOT / "src"))
    sys.path.insert(0, str(ROOT))
    from mianjing.quiz.katas import available
    from tests.quiz.accepted import ACCEPTED

    out: dict = {}
    for track, target in TRACK_TARGETS.items():
        katas = [k for k in available(ROOT) if k.track == track]
        rows, untimed = {}, []
        for k in katas:
            code = ACCEPTED.get(k.name)
            if code is None:
                untimed.append(k.name)
                continue
            f = tmp / f"{k.name}.py"
            f.write_text(code, encoding="utf-8")
            judged = [command_once(["kata", "judge", str(f), "--kata", k.name, "--no-record"], env) for _ in range(runs)]
            walls = [w for w, _, _ in judged]
            ok = all("ACCEPTED" in o for _, _, o in judged)
            rows[k.name] = {"fastest_s": round(min(walls), 3), "median_s": round(statistics.median(walls), 3),
                            "cpu_s": round(statistics.median(c for _, c, _ in judged), 3), "accepted": ok,
                            "met": ok and min(walls) < target}
        out[track] = {"target_s": target, "katas": rows, "untimed": untimed}
        print(f"\njudging each {track} kata ({len(rows)} timed, fastest of {runs}; target {target:g} s):")
        for name, r in rows.items():
            print(f"  {name:24s} fastest {r['fastest_s']:.2f} s, median {r['median_s']:.2f} s, CPU of the judge "
                  f"{r['cpu_s']:.2f} s  {'ACCEPTED' if r['accepted'] else 'NOT accepted'}  "
                  f"-> {'met' if r['met'] else 'NOT met'}")
        if untimed:
            print(f"  untimed (no accepted solution in tests/quiz/accepted.py): {', '.join(untimed)}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--scale", default="1", help="comma-separated base sizes, as multiples of this one (e.g. 1,2,4)")
    ap.add_argument("--judge-runs", type=int, default=3, help="judgements per kata for the per-track times")
    ap.add_argument("--tracks-only", action="store_true", help="only the per-track judge times")
    args = ap.parse_args()
    factors = sorted({int(x) for x in args.scale.split(",") if x.strip()})
    tmp = Path(tempfile.mkdtemp(prefix="quiz-startup-"))
    results: dict = {"cpus": os.cpu_count(), "load_average_before": os.getloadavg()[0], "targets_s": TARGETS}
    try:
        env = dict(os.environ, MIANJING_DB=str(tmp / "db.sqlite3"), MIANJING_ROOT=str(ROOT), TERM="xterm")
        if args.tracks_only:
            results["tracks"] = judge_tracks(env, tmp, args.judge_runs)
            out = ROOT / "benchmarks" / "results" / "quiz_startup_tracks.json"
            out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
            print(f"\nwrote {out.relative_to(ROOT)}")
            return 0 if all(r["accepted"] for t in results["tracks"].values() for r in t["katas"].values()) else 1
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
        results["tracks"] = judge_tracks(env, tmp, args.judge_runs)
        if factors != [1]:
            results["scaling"] = scaling(factors, args.runs, tmp)
        results["load_average_after"] = os.getloadavg()[0]
        results["quiz"]["fastest_s"] = round(fastest, 4)
        results["met"] = {"quiz": quiz_met, "kata_list": lmin < TARGETS["kata_list"],
                          "kata_judge_tree": jmin < TARGETS["kata_judge_tree"],
                          **{f"kata_judge_{t}": all(r["met"] for r in v["katas"].values())
                             for t, v in results["tracks"].items()}}
        out = ROOT / "benchmarks" / "results" / "quiz_startup.json"
        out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {out.relative_to(ROOT)}")
        return 1 if bad or not accepted else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
