"""The one loader: every ``qa/**/*.yaml`` -> a validated :class:`KnowledgeBase`.

Problems (bad YAML, schema errors, duplicate entry ids, a file named unlike its
id) are collected, never raised, so ``mianjing check`` reports them all at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from .knowledge import EntrySource, KnowledgeBase, loc_text
from .problems import Problem, one_line
from .paths import NAMES_FILE
from .schema import Entry, Names
from .yamlsource import YamlError, read_yaml


@dataclass
class LoadResult:
    kb: KnowledgeBase
    problems: list[Problem] = field(default_factory=list)
    # claim ids read from entries that failed validation, so that their verifiers
    # are not also reported as naming no claim
    unvalidated_claim_ids: set[str] = field(default_factory=set)


# best effort for a file that does not parse: list items of the form "- id: x.y"
_CLAIM_ID_LINE = re.compile(r"^\s+-\s+id:\s*([a-z0-9][a-z0-9.-]*)\s*$", re.M)


def entry_files(root: Path) -> list[Path]:
    names = root / NAMES_FILE
    return sorted(p for p in (root / "qa").rglob("*.yaml") if p.is_file() and p != names)


def _load_names(root: Path, result: "LoadResult") -> None:
    """``qa/names.yaml`` into ``kb.names``; an absent file is an empty table (the checker says what is missing)."""
    path = root / NAMES_FILE
    if not path.is_file():
        return
    try:
        doc = read_yaml(path)
    except YamlError as exc:
        result.problems.append(Problem(NAMES_FILE, exc.line, "(yaml)", exc.message))
        return
    try:
        result.kb.names = Names.model_validate(doc.data if doc.data is not None else {})
    except ValidationError as exc:
        for err in exc.errors():
            loc = _schema_loc(err["loc"])
            result.problems.append(Problem(NAMES_FILE, doc.line_of(loc), loc_text(loc), _message(err)))
        return
    result.kb.names_source = doc


def _schema_loc(loc: tuple) -> tuple:
    """Drop pydantic's union/model tags (e.g. 'Text') that are not real keys."""
    return tuple(p for p in loc if isinstance(p, int) or not (p[:1].isupper() or "[" in p))


def _message(err: dict) -> str:
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    msg = err.get("msg", "invalid")
    return one_line(msg.removeprefix("Value error, "))


def load(root: Path) -> LoadResult:
    result = LoadResult(kb=KnowledgeBase(root=root))
    _load_names(root, result)
    for path in entry_files(root):
        rel = path.relative_to(root).as_posix()
        try:
            doc = read_yaml(path)
        except YamlError as exc:
            result.problems.append(Problem(rel, exc.line, "(yaml)", exc.message))
            result.unvalidated_claim_ids.update(_CLAIM_ID_LINE.findall(path.read_text(errors="replace")))
            continue
        if not isinstance(doc.data, dict):
            result.problems.append(Problem(rel, 1, "(file)", "an entry must be a mapping of fields"))
            continue
        try:
            entry = Entry.model_validate(doc.data)
        except ValidationError as exc:
            for c in doc.data.get("claims") or []:
                if isinstance(c, dict) and isinstance(c.get("id"), str):
                    result.unvalidated_claim_ids.add(c["id"])
            for err in exc.errors():
                loc = _schema_loc(err["loc"])
                msg = _message(err)
                if err.get("type") == "string_pattern_mismatch" and "\\S" in str(err.get("ctx", {}).get("pattern")):
                    msg = "a match term must not be empty or only whitespace"
                dup = re.search(r"and claims\[(\d+)\]\)$", msg)
                if loc == ("claims",) and dup:  # report the duplicate at its own line
                    loc = ("claims", int(dup.group(1)), "id")
                result.problems.append(Problem(rel, doc.line_of(loc), loc_text(loc), msg))
            continue
        if entry.id in result.kb.entries:
            first = result.kb.sources[entry.id].path
            result.problems.append(
                Problem(rel, doc.line_of(("id",)), "id", f"duplicate entry id {entry.id!r} (also {first})")
            )
            continue
        if path.stem != entry.id:
            result.problems.append(
                Problem(rel, doc.line_of(("id",)), "id", f"file name must be the id: rename to {entry.id}.yaml")
            )
        result.kb.entries[entry.id] = entry
        result.kb.sources[entry.id] = EntrySource(path=rel, document=doc)
    return result
