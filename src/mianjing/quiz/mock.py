"""``mianjing mock``: a whole interview round with a clock, then a closing report.

Stages: one warm-up (difficulty 1), two core (2), one deep (3) and one coding kata. Each stage
gets a share of ``--minutes`` (weights 1, 2, 2, 2, 3); a clock line shows the question's budget
and the round's elapsed time, a clock ticks in the terminal title while the candidate types,
and each answer's time is compared with its budget.
Answers are graded and recorded with the suggested rating at once (no pause to self-rate);
the kata is judged like ``mianjing kata judge`` and counts as a review of its entry.
The report (covered key points per topic, time per question, what to review next) is
printed, written as markdown (``--out`` or the user data directory) and kept in the store.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown

from ..knowledge import KnowledgeBase
from ..schema import Entry
from .select import matches
from .session import ask
from .store import Store, now_utc
from .ui import ask_line, clock

STAGES = [("warm-up", 1, 1), ("core", 2, 2), ("core", 2, 2), ("deep", 3, 2)]
KATA_WEIGHT = 3
STAGE_ZH = {"warm-up": "热身", "core": "核心", "deep": "深挖", "kata": "手撕代码"}


def plan(kb: KnowledgeBase, store: Store, company: str | None, topic: str | None = None
         ) -> list[tuple[str, Entry, int]]:
    """``[(stage, entry, weight)]``, one entry per stage of its difficulty (a stage with none left is
    dropped): prefer the company's questions, then the topic's, then due reviews, then unseen ones, then file
    order."""
    cards = store.cards()
    now_iso = now_utc().isoformat()
    used: set[str] = set()
    out = []
    for stage, diff, weight in STAGES:
        pool = [e for e in kb.entries.values() if e.difficulty == diff and e.id not in used and e.kind.value != "coding"]
        if not pool:
            continue

        def key(e: Entry) -> tuple:
            at_company = bool(company) and matches(e, None, company, None)
            on_topic = bool(topic) and matches(e, topic, None, None)
            due = e.id in cards and cards[e.id][0] <= now_iso
            unseen = e.id not in cards
            return (not at_company, not on_topic, not due, not unseen)

        best = min(pool, key=key)  # min keeps file order among equals
        used.add(best.id)
        out.append((stage, best, weight))
    if not out:  # no difficulty labels to go by: the first non-coding entries
        out = [(stage, e, w) for (stage, _, w), e in zip(STAGES, [e for e in kb.entries.values()
                                                                  if e.kind.value != "coding"])]
    return out


def pick_kata(root: Path, kb: KnowledgeBase, company: str | None, *, topic: str | None = None,
              track: str | None = None, store: Store | None = None):
    """The coding question of the round, from any track (``track`` keeps one): prefer a kata whose entry was asked
    at ``company``, then one on ``topic``, then one whose entry is due for review, then one never rehearsed, then
    registry order. ``(kata, entry)``, or ``(None, None)`` when no kata fits."""
    from .katas import available, entry_for

    katas = [k for k in available(root) if track is None or k.track == track]
    if not katas:
        return None, None
    cards = store.cards() if store is not None else {}
    now_iso = now_utc().isoformat()
    scored = []
    for i, k in enumerate(katas):
        e = entry_for(kb, k)
        at_company = bool(company and e is not None and matches(e, None, company, None))
        on_topic = bool(topic and e is not None and matches(e, topic, None, None))
        eid = e.id if e is not None else k.entry
        due = eid in cards and cards[eid][0] <= now_iso
        unseen = eid not in cards
        scored.append(((not at_company, not on_topic, e is None, not due, not unseen, i), k, e))
    _, k, e = min(scored, key=lambda x: x[0])
    return k, e


def _input(prompt: str) -> str:
    try:
        return ask_line(prompt)
    except EOFError:
        return "skip"


def run_mock(console: Console, root: Path, kb: KnowledgeBase, store: Store, *, lang: str, minutes: int,
             company: str | None, out: Path | None, kata_dir: Path, timeout: float, track: str | None = None,
             topic: str | None = None) -> Path | None:
    zh = lang == "zh"
    stages = plan(kb, store, company, topic)
    kata, kata_entry = pick_kata(root, kb, company, topic=topic, track=track, store=store)
    weights = [w for (_, _, w) in stages] + ([KATA_WEIGHT] if kata else [])
    unit = minutes * 60 / max(1, sum(weights))
    round_start = time.monotonic()
    rows: list[dict] = []
    n_total = len(stages) + (1 if kata else 0)
    console.rule(("模拟面试" if zh else "Mock interview") + f" · {minutes} min · {n_total} "
                 + ("题" if zh else "questions") + (f" · {company}" if company else ""), style="bold")
    for i, (stage, entry, _w) in enumerate(stages):
        budget = weights[i] * unit
        elapsed = time.monotonic() - round_start
        console.print(f"⏱ {clock(elapsed)} / {clock(minutes * 60)} · "
                      + (f"本题预算 {clock(budget)}" if zh else f"budget for this question {clock(budget)}"),
                      markup=False, style="bold yellow")
        label = f"{STAGE_ZH[stage] if zh else stage} {i + 1}/{n_total}"
        o = ask(console, kb, store, entry, lang, label, source="mock", rate=False, budget=budget)
        over = o.seconds > budget
        console.print(f"⏱ {clock(o.seconds)} / {clock(budget)}" + ((" 超时" if zh else " over time") if over else ""),
                      markup=False, style="red" if over else "green")
        rows.append({"stage": stage, "entry": entry.id, "topic": entry.topic, "seconds": round(o.seconds, 1),
                     "budget": round(budget), "covered": [kp.get(lang) for kp in o.grade.covered],
                     "missed": [kp.get(lang) for kp in o.grade.missed], "rating": o.rating})
    if kata:
        budget = weights[-1] * unit
        rows.append(_kata_stage(console, root, store, kata, kata_entry, lang, kata_dir, timeout, budget,
                                round_start, minutes, n_total))
    total = time.monotonic() - round_start
    report = build_report(rows, lang, minutes, total, company)
    path = out or _default_report_path()
    # The store first: whatever happens to the file, the report is kept.
    report_id = store.save_mock_report({"minutes": minutes, "company": company, "lang": lang,
                                        "seconds": round(total, 1), "questions": rows, "markdown": report}, str(path))
    console.rule("报告" if zh else "Report", style="bold")
    console.print(Markdown(report))
    problem = write_report(path, report)
    if problem:
        console.print((f"报告文件写入失败（{problem}）；报告已保存在复习库 {store.path}（mock_reports 第 {report_id} 条）"
                       if zh else f"could not write the report to {path} ({problem}); it is kept in the review "
                                  f"store {store.path} (table mock_reports, id {report_id})"),
                      markup=False, style="bold red", soft_wrap=True)
        return None
    console.print(("报告已保存：" if zh else "report saved: ") + str(path), markup=False, style="bold",
                  soft_wrap=True)
    return path


def check_report_path(path: Path) -> str | None:
    """Why ``path`` cannot take the report, found before the round starts (None: it can)."""
    if path.is_dir():
        return f"{path} is a folder; name a file, e.g. {path / 'mock-report.md'}"
    parent = path.parent
    if not parent.exists():
        return f"no such folder {parent}"
    if not parent.is_dir():
        return f"{parent} is not a folder"
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".mianjing-probe-", delete=True):
            pass
    except OSError as exc:
        return f"cannot write in {parent} ({exc.strerror or exc})"
    if path.exists() and not os.access(path, os.W_OK):
        return f"{path} is not writable"
    return None


def write_report(path: Path, text: str) -> str | None:
    """Write atomically (a temporary file in the same folder, then rename); on failure remove the
    temporary file and return the reason."""
    import tempfile

    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
        tmp = None
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _default_report_path() -> Path:
    from platformdirs import user_data_dir

    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(user_data_dir("mianjing", appauthor=False)) / "mock-reports" / f"mock-{stamp}.md"


def _kata_stage(console, root, store, kata, entry, lang, kata_dir: Path, timeout, budget, round_start, minutes,
                n_total) -> dict:
    from .judge import judge
    from .judge_report import clean, print_outcome, print_result, record_review
    from .katas import stub

    zh = lang == "zh"
    console.print(f"⏱ {clock(time.monotonic() - round_start)} / {clock(minutes * 60)} · "
                  + (f"本题预算 {clock(budget)}" if zh else f"budget for this question {clock(budget)}"),
                  markup=False, style="bold yellow")
    console.rule(f"{STAGE_ZH['kata'] if zh else 'coding kata'} {n_total}/{n_total} · {kata.name}", style="dim")
    if entry is not None:
        console.print(entry.question.get(lang), markup=False, style="bold")
    path = kata_dir / f"{kata.name}.py"
    if path.exists():
        path = kata_dir / f"{kata.name}_{datetime.now().strftime('%H%M%S')}.py"
    path.write_text(stub(root, kata, lang), encoding="utf-8")
    console.print((f"已写入代码模板 {path}：实现 `{kata.symbol}`，完成后按回车评测（输入 skip 跳过）。" if zh else
                   f"Stub written to {path}: implement `{kata.symbol}`, then press Enter to judge it "
                   "(type skip to skip)."), markup=False, soft_wrap=True)
    start = time.monotonic()
    answer = _input("> ").strip().casefold()
    seconds = time.monotonic() - start
    row = {"stage": "kata", "entry": entry.id if entry else kata.name, "topic": entry.topic if entry else "coding",
           "kata": kata.name, "file": str(path), "seconds": round(seconds, 1), "budget": round(budget),
           "covered": [], "missed": [], "rating": None}
    if answer == "skip":
        row["missed"] = [f"kata {kata.name}: skipped"]
        return row
    res = judge(root, kata, path, timeout=timeout, on_result=lambda r: print_result(console, r))
    print_outcome(console, res)
    over = seconds > budget
    console.print(f"⏱ {clock(seconds)} / {clock(budget)}" + ((" 超时" if zh else " over time") if over else ""),
                  markup=False, style="red" if over else "green")
    row["covered"] = [p.name for p in res.props if p.passed]
    row["missed"] = [p.name for p in res.props if not p.passed] or ([clean(res.fatal)] if res.fatal else [])
    saved = record_review(root, store, kata, res, lang)
    if saved:
        console.print(saved, markup=False, style="dim", soft_wrap=True)
    row["rating"] = 3 if res.ok else 1
    return row


def build_report(rows: list[dict], lang: str, minutes: int, total: float, company: str | None) -> str:
    zh = lang == "zh"
    L = (lambda a, b: a if zh else b)
    lines = [f"# {L('模拟面试报告', 'Mock interview report')} · {datetime.now().strftime('%Y-%m-%d %H:%M')}", "",
             f"{L('时长', 'Time')}: {clock(total)} / {clock(minutes * 60)}"
             + (f" · {L('公司', 'company')}: {company}" if company else ""), "",
             f"## {L('每题用时', 'Time per question')}", "",
             f"| # | {L('阶段', 'stage')} | {L('题目', 'entry')} | {L('用时', 'time')} | {L('预算', 'budget')} "
             f"| {L('要点', 'key points')} |", "|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        n = len(r["covered"]) + len(r["missed"])
        stage = STAGE_ZH.get(r["stage"], r["stage"]) if zh else r["stage"]
        flag = " ⚠" if r["seconds"] > r["budget"] else ""
        lines.append(f"| {i} | {stage} | {r['entry']} | {clock(r['seconds'])}{flag} | {clock(r['budget'])} "
                     f"| {len(r['covered'])}/{n} |")
    per_topic: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        per_topic[r["topic"]][0] += len(r["covered"])
        per_topic[r["topic"]][1] += len(r["covered"]) + len(r["missed"])
    lines += ["", f"## {L('各主题覆盖的要点', 'Key points covered per topic')}", "",
              f"| {L('主题', 'topic')} | {L('覆盖', 'covered')} |", "|---|---|"]
    for tp, (c, n) in sorted(per_topic.items(), key=lambda x: (x[1][0] / x[1][1] if x[1][1] else 1, x[0])):
        lines.append(f"| {tp} | {c}/{n} |")
    lines += ["", f"## {L('接下来复习', 'What to review next')}", ""]
    todo = sorted((r for r in rows if r["missed"]),
                  key=lambda r: len(r["covered"]) / max(1, len(r["covered"]) + len(r["missed"])))
    if not todo:
        lines.append(L("全部要点都覆盖了。", "Every key point was covered."))
    for r in todo:
        lines.append(f"- **{r['entry']}** ({r['topic']}, {len(r['covered'])}/{len(r['covered']) + len(r['missed'])}): "
                     + "; ".join(r["missed"]))
    return "\n".join(lines) + "\n"
