"""Showing a kata's result and recording it as a review.

Text that came from the worker (exception messages, its output, class and import names, values it
returned that an assertion message quotes) is the candidate's to choose: :func:`clean` writes every
control character, terminal escape, bidirectional override and invisible format character as a
visible escape before anything reaches the console or a report, so a submission cannot erase a FAIL
line or print a fake ACCEPTED.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from rich.console import Console

from . import sandbox

_KEEP = {"\n", "\t"}


def clean(text: str) -> str:
    """``text`` with control, format, separator and surrogate characters written as ``\\xNN``/``\\uNNNN``."""
    out = []
    for ch in str(text):
        if ch in _KEEP:
            out.append(ch)
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


def print_result(console: Console, r) -> None:
    """One property's line: PASS, FAIL with its reason and counterexample, or not run."""
    name, reason = clean(r.name), clean(r.reason)
    if r.passed:
        console.print(f"  PASS  {name}  ({r.seconds:.1f} s)", markup=False, style="green")
        return
    if r.passed is None:
        console.print(f"  ----  {name}: {reason or 'not run'}", markup=False, style="dim")
        return
    console.print(f"  FAIL  {name}: {reason}", markup=False, style="bold red")
    # An assertion message already names inputs, expected and got; for a crash the shrunk example does.
    example = "" if (r.reason == "wrong result" and "input" in r.message) else r.example
    for block in (r.message, example, r.where):
        if block:
            for line in clean(block).splitlines():
                console.print(f"        {line}", markup=False, soft_wrap=True)


def print_start(console: Console, kind: str, note: str = "") -> None:
    console.print(f"sandbox: {sandbox.describe(kind, clean(note))}", markup=False,
                  style="dim" if kind != "unconfined" else "bold yellow", soft_wrap=True)


def print_outcome(console: Console, res) -> None:
    """What follows the properties: the fatal reason, what the code tried to reach, the verdict."""
    if res.fatal:
        console.print(f"FAILED: {clean(res.fatal)}", markup=False, style="bold red", soft_wrap=True)
        for line in clean(res.fatal_detail).splitlines()[:20]:
            console.print(f"        {line}", markup=False, soft_wrap=True)
    if res.attempts:
        console.print("note: your code tried to reach what the judge keeps to itself: "
                      + "; ".join(clean(a) for a in res.attempts[:5]), markup=False, style="yellow", soft_wrap=True)
    console.print(clean(res.summary()), markup=False, style="bold green" if res.ok else "bold red", soft_wrap=True)


def record_review(root: Path, store, kata, res, lang: str) -> str | None:
    """A judged kata is a review of its entry: all passed -> Good, most -> Hard, else Again. An unconfined
    run is not one: the code could have changed what the judge saw."""
    from . import scheduler
    from ..loader import load
    from .grading import AGAIN, GOOD, HARD
    from .katas import entry_for
    from .session import human_due
    from .store import Review, now_utc

    if not res.confined:
        return ("not recorded as a review: your code ran unconfined here"
                + (f" ({clean(res.confinement)})" if res.confinement else "")
                + "; install bubblewrap (apt-get install bubblewrap) or use a kernel with Landlock")
    entry = entry_for(load(root).kb, kata)
    if entry is None:
        return None
    n = len(res.props)
    rating = GOOD if res.ok else (HARD if not res.fatal and n and res.passed * 2 >= n else AGAIN)
    at = now_utc()
    covered = [f"kata {kata.name}: {p.name}" for p in res.props if p.passed]
    missed = [f"kata {kata.name}: {p.name}" for p in res.props if not p.passed]
    due = store.record(
        Review(entry_id=entry.id, topic=entry.topic, rating=rating, reviewed_at=at.isoformat(), source="kata",
               covered=covered, missed=missed, duration_s=round(res.seconds, 2), suggested=rating, lang=lang),
        scheduler.card_id(entry.id), lambda cj: scheduler.review(cj, entry.id, rating, at))
    return f"recorded as a review of `{entry.id}` ({scheduler.RATINGS[rating]}); next review {human_due(due)}"
