"""FSRS glue (the maintained ``fsrs`` package; we do not schedule ourselves).

One card per entry; its integer id is derived from the entry id with SHA-256, so it is
the same in every process and release (Python's ``hash`` is salted per process).
"""

from __future__ import annotations

import hashlib
from datetime import datetime

RATINGS = {1: "Again", 2: "Hard", 3: "Good", 4: "Easy"}
_scheduler = None  # fsrs.Scheduler, built on first use (fsrs is imported lazily: not on the start-up path)


def card_id(entry_id: str) -> int:
    """Stable positive 63-bit id: the first 8 bytes of sha256(entry id)."""
    return int.from_bytes(hashlib.sha256(entry_id.encode("utf-8")).digest()[:8], "big") >> 1


def scheduler():
    global _scheduler
    if _scheduler is None:
        from fsrs import Scheduler

        _scheduler = Scheduler()
    return _scheduler


def review(card_json: str | None, entry_id: str, rating: int, at: datetime,
           duration_s: float | None = None) -> tuple[str, str]:
    """Apply one rating to the entry's card (a new card if ``card_json`` is None).

    Returns ``(new card json, due ISO in UTC)``.
    """
    from fsrs import Card, Rating

    card = Card.from_json(card_json) if card_json else Card(card_id=card_id(entry_id))
    ms = int(duration_s * 1000) if duration_s is not None else None
    new, _log = scheduler().review_card(card, Rating(rating), review_datetime=at, review_duration=ms)
    return new.to_json(), new.due.isoformat()


def retrievability(card_json: str, at: datetime) -> float:
    from fsrs import Card

    return float(scheduler().get_card_retrievability(Card.from_json(card_json), at))
