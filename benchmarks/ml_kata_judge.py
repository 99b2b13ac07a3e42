"""How long does judging an ML kata take?  (target: under 5 s per kata on 2 cores, issue 26)

For every kata of the ML track that has a correct solution in tests/quiz/ml_solutions.py, run
`mianjing kata judge FILE --no-record` end to end (a fresh worker, the kata's default number of hypothesis
examples, the sandbox the machine offers) ``--runs`` times and report the fastest and the median wall time,
with the machine's load average beside them (the judge's CPU competes with whatever else runs). Two
yardsticks are measured in the same run, so that a busy machine can be read: bare `python -c "import torch"`
(which the worker and the judge each pay) and judging the level-order tree kata, whose target is 1 s
(`benchmarks/quiz_startup.py`). Each kata's time is also printed as a multiple of the tree kata's.

    .venv/bin/python benchmarks/ml_kata_judge.py [--runs 3] [--only mha sampler ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.quiz import ml_solutions as S  # noqa: E402
from tests.quiz import solutions as T  # noqa: E402

TARGET = 5.0
SOLUTIONS = {"mha": S.MHA_OK, "cached_attention": S.CACHED_OK, "sampler": S.SAMPLER_OK, "beam_search": S.BEAM_OK,
             "layer_norm": S.LAYER_NORM_OK, "rms_norm": S.RMS_NORM_OK, "rope": S.ROPE_OK, "quantize_int8": S.INT8_OK,
             "BPETokenizer": S.BPE_OK, "gpt_forward": S.GPT_OK}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    mianjing = str(Path(sys.executable).with_name("mianjing"))
    env = dict(os.environ, MIANJING_DB=str(Path(tempfile.mkdtemp()) / "bench.db"))
    rows = []
    torch_walls = []
    for _ in range(args.runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        torch_walls.append(time.perf_counter() - t)
    print(f"yardstick: python -c 'import torch' fastest {min(torch_walls):.2f} s", flush=True)
    todo = [("level_order_with_depth", T.LEVEL_ORDER_OK)] + [
        (n, c) for n, c in SOLUTIONS.items() if not args.only or n in args.only]
    tree = None
    with tempfile.TemporaryDirectory() as tmp:
        for name, code in todo:
            f = Path(tmp) / f"{name}.py"
            f.write_text(f"# mianjing-kata: {name}\n{code}")
            walls, out = [], ""
            for _ in range(args.runs):
                load = os.getloadavg()[0]
                t = time.perf_counter()
                proc = subprocess.run([mianjing, "kata", "judge", str(f), "--no-record"], cwd=ROOT, env=env,
                                      capture_output=True, text=True)
                walls.append((time.perf_counter() - t, load))
                out = proc.stdout + proc.stderr
            ok = "ACCEPTED" in out
            fastest = min(w for w, _ in walls)
            if tree is None:
                tree = fastest
                print(f"yardstick: the tree kata (target 1 s) fastest {fastest:.2f} s, "
                      f"{'ACCEPTED' if ok else 'NOT accepted'}", flush=True)
                continue
            rows.append((name, fastest, statistics.median(w for w, _ in walls), max(ld for _, ld in walls), ok))
            print(f"{name:18s} fastest {fastest:6.2f} s ({fastest / tree:4.1f} x the tree kata)  median "
                  f"{rows[-1][2]:6.2f} s  load<= {rows[-1][3]:4.1f}  {'ACCEPTED' if ok else 'NOT accepted'}  -> target "
                  f"{TARGET} s: {'met' if fastest < TARGET else 'NOT met'}", flush=True)
    worst = max((r[1] for r in rows), default=0.0)
    print(f"slowest kata, fastest run: {worst:.2f} s on {os.cpu_count()} cores -> "
          f"{'met' if worst < TARGET and all(r[4] for r in rows) else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
