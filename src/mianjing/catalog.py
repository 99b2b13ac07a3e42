"""The shared catalog of interview questions and the claims commonly made about them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .yamlsource import YamlError, read_yaml


@dataclass(frozen=True)
class CatalogClaim:
    id: str
    says: str
    question_id: str


@dataclass
class Catalog:
    path: Path
    questions: dict[str, list[str]] = field(default_factory=dict)  # question id -> claim ids
    claims: dict[str, CatalogClaim] = field(default_factory=dict)
    question_text: dict[str, dict] = field(default_factory=dict)


def load_catalog(path: Path) -> Catalog | None:
    """The catalog, or None when the file is absent. Raises YamlError when it is malformed."""
    if not path.is_file():
        return None
    doc = read_yaml(path)
    cat = Catalog(path=path)
    for q in (doc.data or {}).get("questions", []) or []:
        qid = q.get("id")
        cat.questions[qid] = []
        cat.question_text[qid] = q.get("question") or {}
        for c in q.get("claims", []) or []:
            cat.questions[qid].append(c["id"])
            cat.claims[c["id"]] = CatalogClaim(id=c["id"], says=str(c.get("says", "")), question_id=qid)
    return cat


__all__ = ["Catalog", "CatalogClaim", "load_catalog", "YamlError"]
