"""Question order (due reviews first, then new ones) and the kata <-> entry mapping."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from mianjing.loader import load
from mianjing.quiz.katas import available, entry_for
from mianjing.quiz.select import pick
from tests.quiz.kb import mini_kb


def test_due_reviews_come_first_then_new_in_file_order(tmp_path):
    kb = load(mini_kb(tmp_path, with_kata=True)).kb
    now = datetime(2030, 1, 1, tzinfo=timezone.utc)
    iso = lambda d: (now + timedelta(days=d)).isoformat()  # noqa: E731
    cards = {"ppo-clip": (iso(-1), "{}"), "zero-stages": (iso(-3), "{}"), "gae-basics": (iso(+2), "{}")}
    got = [(e.id, due) for e, due in pick(kb, cards, now)]
    assert got == [("zero-stages", True), ("ppo-clip", True), ("level-order", False)]
    assert [e.id for e, _ in pick(kb, cards, now, topic="rl")] == ["ppo-clip"]
    assert [e.id for e, _ in pick(kb, {}, now, company="BAIDU", difficulty=1)] == ["gae-basics"]
    assert [e.id for e, _ in pick(kb, {}, now, n=2)] == ["level-order", "zero-stages"]
    assert pick(kb, {}, now, topic="rl/gae/deeper") == []


def test_a_kata_reviews_the_entry_that_names_its_function(tmp_path):
    root = mini_kb(tmp_path, with_kata=True)
    kb = load(root).kb
    (k,) = available(root)
    assert entry_for(kb, k).id == "level-order"
    assert entry_for(load(mini_kb(tmp_path / "plain")).kb, k) is None
