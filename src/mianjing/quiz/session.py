"""``mianjing quiz``: one question at a time, graded by key points, scheduled by FSRS."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from typing import TYPE_CHECKING

from . import grading, scheduler
from .select import pick
from .store import Review, Store, now_utc
from .mathtext import render
from .ui import LABELS, clock, read_answer, read_rating, read_ticks, t

if TYPE_CHECKING:  # not imported at run time: pydantic is off the quiz's start-up path
    from ..knowledge import KnowledgeBase
    from ..schema import Entry


@dataclass
class Outcome:
    """What one asked question produced (the mock report reads it)."""

    entry: Entry
    answer: str
    grade: grading.Grade
    seconds: float
    rating: int | None = None
    due: str | None = None


@dataclass
class SessionLog:
    rated: int = 0
    outcomes: list[Outcome] = field(default_factory=list)


def header(console: Console, entry: Entry, lang: str, label: str) -> None:
    companies = ", ".join(sorted({a.company for a in entry.asked_at if a.company}))
    meta = f"{label} · {entry.topic} · {t('difficulty', lang)} {entry.difficulty}"
    if companies:
        meta += f" · {t('asked_at', lang)} {companies}"
    console.rule(meta, style="dim")
    console.print(render(entry.question.get(lang)), markup=False, style="bold")


def show_feedback(console: Console, kb: KnowledgeBase, entry: Entry, g: grading.Grade, lang: str,
                  follow_up: bool = True) -> None:
    console.print(f"\n{t('short', lang)}:", markup=False, style="bold green")
    console.print(render(entry.answer.short.get(lang)), markup=False)
    show_points(console, entry, g, lang)
    if g.keyword_only:
        console.print(t("keyword_only", lang), markup=False, style="yellow")
    if not follow_up:
        return
    for fid in entry.follow_ups:
        if fid in kb.entries:
            console.print(f"\n{t('follow_up', lang)}: {render(kb.entries[fid].question.get(lang))}", markup=False,
                          style="magenta")
            break


def show_points(console: Console, entry: Entry, g: grading.Grade, lang: str) -> None:
    console.print(f"\n{t('key_points', lang)} ({len(g.covered)}/{g.total}):", markup=False, style="bold")
    for i, kp in enumerate(entry.key_points, 1):
        text = render(kp.get(lang))
        if kp in g.covered:
            console.print(f"  {i} ✓ [{t('covered', lang)}] {text}", markup=False, style="green")
        elif kp in g.contradicted:
            why = g.evidence.get(kp.en, "")
            console.print(f"  {i} ⚠ [{t('contradicted', lang)}: {why}] {text}", markup=False, style="bold red")
        else:
            console.print(f"  {i} ✗ [{t('missed', lang)}] {text}", markup=False, style="red")


def rate_and_store(store: Store, entry: Entry, g: grading.Grade, rating: int, seconds: float, lang: str,
                   source: str) -> str:
    at = now_utc()

    def update(card_json):
        return scheduler.review(card_json, entry.id, rating, at, seconds)

    return store.record(
        Review(entry_id=entry.id, topic=entry.topic, rating=rating, reviewed_at=at.isoformat(), source=source,
               covered=[kp.en for kp in g.covered], missed=[kp.en for kp in g.missed],
               duration_s=round(seconds, 2), suggested=g.suggested, lang=lang),
        scheduler.card_id(entry.id), update)


def human_due(due_iso: str) -> str:
    from datetime import datetime

    due = datetime.fromisoformat(due_iso)
    delta = (due - now_utc()).total_seconds()
    if delta < 3600:
        rel = f"{max(1, round(delta / 60))} min"
    elif delta < 86400:
        rel = f"{round(delta / 3600)} h"
    else:
        rel = f"{round(delta / 86400)} d"
    return f"+{rel} ({due.astimezone().strftime('%Y-%m-%d %H:%M')})"


def ask(console: Console, kb: KnowledgeBase, store: Store, entry: Entry, lang: str, label: str,
        source: str = "quiz", rate: bool = True, budget: float | None = None, full=None) -> Outcome | None:
    """Ask one question. Returns None when the candidate quits at the rating prompt.

    ``full.result()``: the real knowledge base, when ``kb``/``entry`` come from the start-up index (it is
    being loaded in the background while the candidate reads and answers)."""
    header(console, entry, lang, label)
    start = time.monotonic()
    answer = read_answer(console, lang, budget, on_prompt=full.start if full is not None else None)
    seconds = time.monotonic() - start
    if full is not None:
        kb = full.result()
        entry = kb.entries[entry.id]
    g = grading.grade(entry, answer, lang)
    show_feedback(console, kb, entry, g, lang)
    out = Outcome(entry, answer, g, seconds)
    if rate:
        ticks = read_ticks(console, lang, [kp in g.covered for kp in entry.key_points])
        if ticks is None:
            return None
        g = g.with_ticks(ticks, list(entry.key_points))
        out.grade = g
        rating = read_rating(console, lang, g.suggested)
        if rating is None:
            return None
    else:
        rating = g.suggested
        console.print(f"{LABELS[lang][rating]} ({len(g.covered)}/{g.total}) · {clock(seconds)}", markup=False,
                      style="cyan")
    out.rating = rating
    out.due = rate_and_store(store, entry, g, rating, seconds, lang, source)
    console.print(t("saved", lang, due=human_due(out.due)), markup=False, style="dim")
    return out


def run_quiz(console: Console, kb: KnowledgeBase, store: Store, *, lang: str, topic: str | None,
             company: str | None, difficulty: int | None, n: int, log: SessionLog, full=None) -> None:
    queue = pick(kb, store.cards(), now_utc(), topic=topic, company=company, difficulty=difficulty, n=n)
    if not queue:
        console.print(t("nothing", lang), markup=False)
        return
    for i, (entry, is_due) in enumerate(queue, 1):
        label = f"[{i}/{len(queue)}] {t('due' if is_due else 'new', lang)}"
        out = ask(console, kb, store, entry, lang, label, full=full)
        if out is None:
            break
        log.rated += 1
        log.outcomes.append(out)
    console.print(t("done", lang, n=log.rated), markup=False, style="bold")


def open_store(db: Path | None) -> Store:
    return Store(db)
