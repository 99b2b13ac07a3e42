"""The site's build time, page weight and DOMContentLoaded, against baselines measured in the same run.

    python benchmarks/site.py            # writes benchmarks/results/site.json

Build: ``mianjing site build --strict`` in a child process, cold (an empty cache: every figure,
formula and code file computed) then warm (the same cache), each into a fresh folder; wall time
and CPU time (the child and its figure process). On a shared machine wall time depends on the
load, so the load average is recorded and CPU time is the figure to compare.

Weight and DOMContentLoaded: headless Chromium, a fresh context per load (a cold cache), over
`mianjing site serve`'s server (gzip, as a static host). "Typical entry" is the median entry by
HTML size. DCL is the best of 5 loads; the baseline is a page with the same theme CSS and JS and
an empty article, loaded in the same browser, so the ratio says what the site's own content costs.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("MIANJING_CHROMIUM", "/usr/bin/chromium")


def build(cache: Path, site: Path) -> tuple[float, float, str]:
    env = dict(os.environ, MIANJING_CACHE=str(cache), NO_MKDOCS_2_WARNING="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "mianjing.cli", "site", "build", "--strict", "--site-dir", str(site)],
                         cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out.stdout.strip().splitlines()[-1]


def measure_pages(site: Path) -> dict:
    from playwright.sync_api import sync_playwright

    from mianjing.site import serve_in_thread

    entries = sorted((p.stat().st_size, p.parent.relative_to(site).as_posix() + "/") for p in site.glob("q/**/index.html"))
    typical, largest = entries[len(entries) // 2][1], entries[-1][1]
    # the baseline: the theme's CSS and JS around an empty article
    home = (site / "index.html").read_text(encoding="utf-8")
    start, end = home.index("<article"), home.index("</article>")
    (site / "baseline").mkdir(exist_ok=True)
    (site / "baseline" / "index.html").write_text(
        (home[:start] + '<article class="md-content__inner md-typeset"><h1>baseline</h1>' + home[end:])
        .replace('href="assets/', 'href="../assets/').replace('src="assets/', 'src="../assets/'), encoding="utf-8")
    srv, base = serve_in_thread(site)
    out = {}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        for name, path in (("baseline (theme only)", "baseline/"), ("home", ""), ("typical entry", typical),
                           ("largest entry", largest), ("misconceptions", "misconceptions/")):
            dcls, decoded, sent = [], 0, 0
            for i in range(5):
                ctx = b.new_context(viewport={"width": 1280, "height": 900})
                page = ctx.new_page()
                responses = []
                page.on("response", lambda r: responses.append(r))
                page.goto(base + path, wait_until="load")
                page.wait_for_load_state("networkidle")
                dcls.append(page.evaluate("performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"))
                if i == 0:
                    decoded = sum(len(r.body()) for r in responses if r.status == 200)
                    sent = sum(int(r.headers.get("content-length") or 0) for r in responses)
                ctx.close()
            out[name] = {"path": path, "decoded_bytes": decoded, "transferred_bytes": sent,
                         "dcl_ms_best": round(min(dcls)), "dcl_ms_median": round(statistics.median(dcls))}
        b.close()
    srv.shutdown()
    base_dcl = out["baseline (theme only)"]["dcl_ms_best"] or 1
    for v in out.values():
        v["dcl_vs_baseline"] = round(v["dcl_ms_best"] / base_dcl, 2)
    out["search index (gzip, on demand)"] = {"path": "search/index.json.gz",
                                             "transferred_bytes": (site / "search" / "index.json.gz").stat().st_size}
    return out


def main() -> None:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cold = build(tmp / "cache", tmp / "cold")
        warm = build(tmp / "cache", tmp / "warm")
        pages = measure_pages(tmp / "warm")
    load_after = os.getloadavg()
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average {load_before[0]:.1f} → {load_after[0]:.1f}"
    rows = [["build, cold (empty cache)", round(cold[0], 1), round(cold[1], 1), "", "", "", ""],
            ["build, warm", round(warm[0], 1), round(warm[1], 1), "", "", "", ""]]
    for name, v in pages.items():
        rows.append([name, "", "", v.get("decoded_bytes", ""), v.get("transferred_bytes", ""),
                     v.get("dcl_ms_best", ""), v.get("dcl_vs_baseline", "")])
    result = {
        "title": {"zh": "站点：构建时间、页面大小与 DOMContentLoaded", "en": "The site: build time, page weight and DOMContentLoaded"},
        "machine": machine,
        "date": time.strftime("%Y-%m-%d"),
        "command": "python benchmarks/site.py",
        "columns": ["what", "wall (s)", "CPU (s)", "bytes decoded", "bytes transferred", "DCL best of 5 (ms)", "DCL / baseline"],
        "rows": rows,
        "build_output": {"cold": cold[2], "warm": warm[2]},
        "notes": {
            "zh": "构建：子进程运行 `mianjing site build --strict`，冷（空缓存）与热（同一缓存），CPU 时间含画图子进程。页面：无缓存的 Chromium，经 gzip 服务器；基线为只有主题 CSS/JS 的空页面，同一浏览器中测量。机器为多人共享，墙钟时间随负载变化。",
            "en": "Build: `mianjing site build --strict` in a child process, cold (empty cache) and warm (same cache); CPU time includes the figure process. Pages: Chromium with a cold cache, over the gzip server; the baseline is an empty page with the theme's CSS and JS, measured in the same browser. The machine is shared: wall times move with its load.",
        },
    }
    out = ROOT / "benchmarks" / "results" / "site.json"
    out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    w = max(len(r[0]) for r in rows)
    print(f"{'':{w}}  " + "  ".join(f"{c:>12}" for c in result["columns"][1:]))
    for r in rows:
        print(f"{r[0]:{w}}  " + "  ".join(f"{str(c):>12}" for c in r[1:]))
    print(machine)
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
