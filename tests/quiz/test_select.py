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
    assert got == [("zero-stages", True), ("ppo-clip", True), ("level-order-with-depth", False)]
    assert [e.id for e, _ in pick(kb, cards, now, topic="rl")] == ["ppo-clip"]
    assert [e.id for e, _ in pick(kb, {}, now, company="BAIDU", difficulty=1)] == ["gae-basics"]
    assert [e.id for e, _ in pick(kb, {}, now, n=2)] == ["level-order-with-depth", "zero-stages"]
    assert pick(kb, {}, now, topic="rl/gae/deeper") == []


def test_a_kata_reviews_the_entry_that_names_its_function(tmp_path):
    root = mini_kb(tmp_path, with_kata=True)
    kb = load(root).kb
    (k,) = available(root)
    assert entry_for(kb, k).id == "level-order-with-depth"
    assert entry_for(load(mini_kb(tmp_path / "plain")).kb, k) is None


def test_every_kata_reviews_an_entry_that_shows_its_reference():
    """In this checkout, each kata's entry exists and lists the kata's reference function."""
    from mianjing.paths import repo_root

    root = repo_root()
    kb = load(root).kb
    for k in available(root):
        e = entry_for(kb, k)
        assert e is not None, f"kata {k.name}: no entry {k.entry!r}"
        assert k.impl_ref in e.implementations, f"kata {k.name}: {e.id} does not list {k.impl_ref}"
