"""The KnowledgeBase: the one object the checker, the site and the quiz read."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .schema import Claim, Entry, Names
from .yamlsource import Loc, YamlDocument


@dataclass(frozen=True)
class EntrySource:
    """Where an entry came from, for messages that name file and line."""

    path: str  # relative to the repository root, e.g. qa/rl/gae.yaml
    document: YamlDocument

    def line_of(self, *loc: str | int) -> int:
        return self.document.line_of(tuple(loc))


@dataclass
class KnowledgeBase:
    root: Path
    entries: dict[str, Entry] = field(default_factory=dict)  # in file order
    sources: dict[str, EntrySource] = field(default_factory=dict)
    names: Names = field(default_factory=Names)  # qa/names.yaml
    names_source: YamlDocument | None = None  # for messages that name its lines

    def __len__(self) -> int:
        return len(self.entries)

    def entry(self, entry_id: str) -> Entry:
        return self.entries[entry_id]

    def claims(self) -> Iterator[tuple[Entry, Claim]]:
        for entry in self.entries.values():
            for claim in entry.claims:
                yield entry, claim

    def claim_index(self) -> dict[str, tuple[Entry, Claim]]:
        """Claim id -> (entry, claim); the first wins when an id repeats (the checker reports it)."""
        index: dict[str, tuple[Entry, Claim]] = {}
        for entry, claim in self.claims():
            index.setdefault(claim.id, (entry, claim))
        return index

    def claim_line(self, entry_id: str, claim_id: str, *field_loc: str | int) -> int:
        entry = self.entries[entry_id]
        i = next(i for i, c in enumerate(entry.claims) if c.id == claim_id)
        return self.sources[entry_id].line_of("claims", i, *field_loc)

    def topics(self) -> list[str]:
        return sorted({e.topic for e in self.entries.values()})

    def select(self, ids: list[str]) -> tuple[set[str], list[str]]:
        """Claim ids named by ``ids`` (claim ids or entry ids), and the ids that matched nothing."""
        index = self.claim_index()
        chosen: set[str] = set()
        unknown: list[str] = []
        for x in ids:
            if x in index:
                chosen.add(x)
            elif x in self.entries:
                chosen.update(c.id for c in self.entries[x].claims)
            else:
                unknown.append(x)
        return chosen, unknown


def loc_text(loc: Loc) -> str:
    """("claims", 2, "verdict") -> "claims[2].verdict"."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(file)"
