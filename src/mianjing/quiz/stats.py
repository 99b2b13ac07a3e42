"""``mianjing stats``: due today, reviews done, retention, weakest topics and key points.

Retention is the share of *recall* reviews (a card's second or later review) not rated Again;
the FSRS-predicted recall probability of the cards right now is shown beside it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rich.console import Console
from rich.table import Table

from ..knowledge import KnowledgeBase
from . import scheduler
from .store import Store, now_utc


@dataclass
class Stats:
    cards: int = 0
    new: int = 0
    due_now: int = 0
    due_today: int = 0
    reviews_total: int = 0
    reviews_today: int = 0
    reviews_7d: int = 0
    recall_reviews: int = 0
    recalled: int = 0
    predicted: float | None = None
    topics: list[tuple[str, int, int, int]] = field(default_factory=list)  # topic, covered, total, again
    key_points: list[tuple[str, int, int]] = field(default_factory=list)  # key point (en), missed, seen
    zh_text: dict[str, str] = field(default_factory=dict)  # key point en -> zh, from the knowledge base

    @property
    def retention(self) -> float | None:
        return self.recalled / self.recall_reviews if self.recall_reviews else None


def compute(kb: KnowledgeBase, store: Store, now: datetime | None = None) -> Stats:
    now = now or now_utc()
    local_now = now.astimezone()
    end_of_day = (local_now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1))
    start_of_day = end_of_day - timedelta(days=1)
    s = Stats()
    cards = {e: v for e, v in store.cards().items() if e in kb.entries}
    s.cards = len(cards)
    s.new = sum(1 for e in kb.entries if e not in cards)
    s.due_now = sum(1 for d, _ in cards.values() if datetime.fromisoformat(d) <= now)
    s.due_today = sum(1 for d, _ in cards.values() if datetime.fromisoformat(d) < end_of_day)
    if cards:
        s.predicted = sum(scheduler.retrievability(c, now) for _, c in cards.values()) / len(cards)
    seen: set[str] = set()
    topic_cov: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    missed: Counter[str] = Counter()
    shown: Counter[str] = Counter()
    for r in store.reviews():
        at = datetime.fromisoformat(r.reviewed_at)
        s.reviews_total += 1
        s.reviews_today += at >= start_of_day
        s.reviews_7d += at >= now - timedelta(days=7)
        if r.entry_id in seen:
            s.recall_reviews += 1
            s.recalled += r.rating > 1
        seen.add(r.entry_id)
        t = topic_cov[r.topic]
        t[0] += len(r.covered)
        t[1] += len(r.covered) + len(r.missed)
        t[2] += r.rating == 1
        for k in r.missed:
            missed[k] += 1
            shown[k] += 1
        for k in r.covered:
            shown[k] += 1
    s.topics = sorted(((tp, c, n, a) for tp, (c, n, a) in topic_cov.items()),
                      key=lambda x: (x[1] / x[2] if x[2] else 1.0, -x[3], x[0]))
    s.zh_text = {kp.en: kp.zh for e in kb.entries.values() for kp in e.key_points}
    s.key_points = sorted(((k, m, shown[k]) for k, m in missed.items()),
                          key=lambda x: (-x[1] / x[2], -x[1], x[0]))
    return s


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def render(console: Console, s: Stats, lang: str, top: int = 5) -> None:
    zh = lang == "zh"
    t = Table(title="复习概况" if zh else "Reviews", show_header=False)
    t.add_column()
    t.add_column(justify="right")
    rows = [
        ("今天到期" if zh else "due today", str(s.due_today)),
        ("现在到期" if zh else "due now", str(s.due_now)),
        ("未学新题" if zh else "new (never asked)", str(s.new)),
        ("复习次数（今天 / 7 天 / 全部）" if zh else "reviews done (today / 7 days / all)",
         f"{s.reviews_today} / {s.reviews_7d} / {s.reviews_total}"),
        ("保持率（再次复习未选 Again）" if zh else "retention (recall reviews not rated Again)",
         f"{_pct(s.retention)} ({s.recalled}/{s.recall_reviews})"),
        ("FSRS 预测当前回忆概率" if zh else "FSRS predicted recall now", _pct(s.predicted)),
    ]
    for a, b in rows:
        t.add_row(a, b)
    console.print(t)
    if s.topics:
        tt = Table(title="最弱的主题" if zh else "Weakest topics")
        tt.add_column("topic")
        tt.add_column("要点覆盖" if zh else "key points covered", justify="right")
        tt.add_column("Again", justify="right")
        for tp, c, n, a in s.topics[:top]:
            tt.add_row(tp, f"{c}/{n} ({_pct(c / n if n else None)})", str(a))
        console.print(tt)
    if s.key_points:
        tk = Table(title="最常遗漏的要点" if zh else "Most-missed key points")
        tk.add_column("key point")
        tk.add_column("遗漏" if zh else "missed", justify="right")
        for k, m, n in s.key_points[:top]:
            tk.add_row(s.zh_text.get(k, k) if zh else k, f"{m}/{n}")
        console.print(tk)
    if not s.reviews_total:
        console.print("还没有复习记录：运行 mianjing quiz" if zh else "No reviews yet: run mianjing quiz",
                      markup=False)
