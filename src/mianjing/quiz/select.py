"""Which entries to ask: due reviews first (earliest due first), then new ones in file order."""

from __future__ import annotations

from datetime import datetime

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..knowledge import KnowledgeBase
    from ..schema import Entry


def matches(entry: Entry, topic: str | None, company: str | None, difficulty: int | None) -> bool:
    if topic and not (entry.topic == topic or entry.topic.startswith(topic.rstrip("/") + "/")):
        return False
    if company:
        want = company.casefold()
        if not any((a.company or "").casefold() == want for a in entry.asked_at):
            return False
    if difficulty is not None and entry.difficulty != difficulty:
        return False
    return True


def pick(kb: KnowledgeBase, cards: dict[str, tuple[str, str]], now: datetime, *, topic: str | None = None,
         company: str | None = None, difficulty: int | None = None, n: int | None = None
         ) -> list[tuple[Entry, bool]]:
    """``[(entry, is_due_review)]``: due cards (``due <= now``) by due date, then unseen entries."""
    now_iso = now.isoformat()
    due = sorted((d, eid) for eid, (d, _) in cards.items()
                 if d <= now_iso and eid in kb.entries and matches(kb.entries[eid], topic, company, difficulty))
    out = [(kb.entries[eid], True) for _, eid in due]
    out += [(e, False) for eid, e in kb.entries.items()
            if eid not in cards and matches(e, topic, company, difficulty)]
    return out[:n] if n is not None else out
