"""Runs the kata judge on a list of submissions in this process and writes one JSON line per result.

    python tests/quiz/judge_child.py JOBS.json RESULTS.jsonl

tests/quiz/test_judge_containment.py starts it as root or as an ordinary user (setpriv), in either
sandbox mode, so that an attack on the judge's own process (signals, /proc/<pid>/mem, its environment)
meets a real judge. ``JUDGE_PID`` and ``JUDGE_PGID`` in a submission are replaced by this process's
pid and process group before it is judged. Each result carries what the CLI would have printed
(rendered through judge_report), this process's peak RSS after the job, and any exception the judge
raised (a traceback is a failure of the judge, never of the submission). Imports nothing from tests/.
"""

from __future__ import annotations

import io
import json
import os
import resource
import sys
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    out = open(argv[2], "a", encoding="utf-8")
    from rich.console import Console

    from mianjing.quiz.judge import judge
    from mianjing.quiz.judge_report import print_outcome, print_result, print_start, record_review
    from mianjing.quiz.katas import find

    root = Path(spec["root"])
    for job in spec["jobs"]:
        code = job["code"].replace("JUDGE_PID", str(os.getpid())).replace("JUDGE_PGID", str(os.getpgrp()))
        f = Path(spec["work"]) / f"{job['kata']}_{spec.get('tag', '')}_{job['name']}.py"
        f.write_text(code, encoding="utf-8")
        buf = io.StringIO()
        console = Console(file=buf, width=200, color_system=None, force_terminal=False)
        row = {"name": job["name"]}
        try:
            res = judge(root, find(root, job["kata"]), f, timeout=job.get("timeout", 10), only=job.get("only"),
                        on_start=lambda kind, note: print_start(console, kind, note),
                        on_result=lambda r: print_result(console, r))
            print_outcome(console, res)
            row.update(ok=res.ok, fatal=res.fatal, detail=res.fatal_detail, sandbox=res.sandbox,
                       confined=res.confined, confinement=res.confinement, isolation=res.isolation,
                       attempts=res.attempts, summary=res.summary(),
                       props=[[p.name, p.passed, p.reason, p.message] for p in res.props])
            if job.get("record"):
                from mianjing.quiz.store import Store

                store = Store(Path(spec["store"]))
                try:
                    row["recorded"] = record_review(root, store, find(root, job["kata"]), res, "en")
                finally:
                    store.close()
        except KeyboardInterrupt:
            row["interrupted"] = True
        except BaseException:  # noqa: BLE001 -- the test asserts there is none
            row["traceback"] = traceback.format_exc()
        row["printed"] = buf.getvalue()
        row["maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out.write(json.dumps(row) + "\n")
        out.flush()
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
