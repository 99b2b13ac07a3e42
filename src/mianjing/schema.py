"""The schema of a knowledge-base entry (one YAML file in ``qa/``).

This module is the authority on what an entry may contain; ``qa/schema.json``
is exported from it (``mianjing schema``) so editors can autocomplete.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ENTRY_ID = r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$"
CLAIM_ID = r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$"
TOPIC = r"^[a-z0-9-]+(?:/[a-z0-9-]+)*$"
IMPL_REF = r"^impls/[A-Za-z0-9_/]+\.py(?:::[A-Za-z_][A-Za-z0-9_.]*)?$"
BENCH_REF = r"^benchmarks/results/[A-Za-z0-9_.-]+\.json$"
FIGURE_REF = r"^figures/[A-Za-z0-9_/]+\.py::[A-Za-z_][A-Za-z0-9_]*$"

NonEmpty = Annotated[str, Field(min_length=1)]
# a match term: something to find in an answer, so not empty and not only whitespace
Term = Annotated[str, Field(min_length=1, pattern=r"\S")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


class Text(Strict):
    """The same text in Chinese and English (markdown; ``$...$`` for maths)."""

    zh: NonEmpty
    en: NonEmpty

    def get(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


class TermGroup(Strict):
    """Terms that mean the same thing, in both languages."""

    zh: list[Term] = Field(min_length=1)
    en: list[Term] = Field(min_length=1)

    def get(self, lang: str) -> list[str]:
        return self.zh if lang == "zh" else self.en


class Terms(TermGroup):
    """Match terms: a key point counts as covered if any term occurs in the answer (found robustly:
    see ``mianjing/quiz/grading.py``). Optionally, for points that are easy to state backwards:
    ``near`` groups, one term of each of which must be in the same sentence as the match, and
    ``opposite`` terms which, nearer to the match than those, mean the answer says the opposite."""

    near: list[TermGroup] = Field(default_factory=list, description="each group must also be in the sentence")
    opposite: list[TermGroup] = Field(default_factory=list,
                                      description="nearer to the match than `near`: the point is contradicted")


class Verdict(str, Enum):
    holds = "holds"  # true as stated
    qualified = "qualified"  # true only under conditions the statement leaves out
    refuted = "refuted"  # false; the verifier exhibits a counterexample
    opinion = "opinion"  # a judgement or habit, not a fact


class Method(str, Enum):
    symbolic = "symbolic"
    property = "property"
    numeric = "numeric"
    empirical = "empirical"
    citation = "citation"


class Kind(str, Enum):
    question = "question"
    coding = "coding"
    follow_up = "follow-up"


class AskedAt(Strict):
    company: str | None = None
    team: str | None = None
    round: int | None = Field(default=None, ge=1)
    note: Text | None = None  # where the report comes from, in both languages


class Reference(Strict):
    title: NonEmpty
    url: str | None = None
    locator: str | None = Field(
        default=None, description="section, table or equation, e.g. '§3.1', 'Table 1', 'Eq. (7)'"
    )


class Answer(Strict):
    short: Text = Field(description="the 30-second version")
    full: Text = Field(description="markdown with $LaTeX$")


class KeyPoint(Strict):
    """What an interviewer listens for; the quiz marks it covered by its match terms."""

    zh: NonEmpty
    en: NonEmpty
    match: Terms

    def get(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


class Figure(Strict):
    """A figure drawn from the code at site-build time: ``figures/x.py::fn`` with ``fn(lang) -> matplotlib Figure``."""

    ref: Annotated[str, Field(pattern=FIGURE_REF, description="figures/<area>.py::function")]
    caption: Text


class Claim(Strict):
    id: Annotated[str, Field(pattern=CLAIM_ID, description="stable dotted id, unique across the base")]
    catalog: str | None = Field(default=None, description="the catalog claim it settles, e.g. b3-18")
    verdict: Verdict
    statement: Text
    correction: Text | None = Field(
        default=None, description="required unless holds: what is true instead, or the conditions"
    )
    method: Method
    cite: Reference | None = Field(
        default=None, description="required for method citation: paper plus section, table or equation"
    )
    facts: dict[Annotated[str, Field(pattern=CLAIM_ID)], float | bool | str] = Field(
        default_factory=dict,
        description="named facts this claim settles (what is true once it is read with its correction), e.g. "
        "{zero.zero1.reduction-on-8-gpus: 2.91, kl.k3-as-loss.unbiased-grad-of-kl-pi-to-ref: false}; the same "
        "name must have the same value in every claim that states it",
    )

    @model_validator(mode="after")
    def _rules(self) -> "Claim":
        if self.verdict is not Verdict.holds and self.correction is None:
            raise ValueError(f"verdict {self.verdict.value} needs a correction")
        if self.method is Method.citation:
            if self.cite is None:
                raise ValueError("method citation needs `cite` with a locator")
            if not (self.cite.locator or "").strip():
                raise ValueError("method citation needs `cite.locator` (section, table or equation)")
        return self

    @property
    def needs_verifier(self) -> bool:
        """Opinions and citations are settled by their text; everything else by code."""
        return self.method is not Method.citation and self.verdict is not Verdict.opinion


class Entry(Strict):
    id: Annotated[str, Field(pattern=ENTRY_ID, description="stable, kebab-case, unique")]
    catalog: str | None = Field(default=None, description="the catalog question this entry answers")
    kind: Kind = Kind.question
    topic: Annotated[str, Field(pattern=TOPIC, description="folder-like topic, e.g. rl/ppo")]
    asked_at: list[AskedAt] = Field(default_factory=list)
    difficulty: int = Field(ge=1, le=3, description="1 warm-up, 2 core, 3 deep")
    question: Text
    answer: Answer
    key_points: list[KeyPoint] = Field(min_length=1)
    claims: list[Claim] = Field(default_factory=list)
    implementations: list[Annotated[str, Field(pattern=IMPL_REF)]] = Field(
        default_factory=list, description="impls/path.py or impls/path.py::function"
    )
    follow_ups: list[str] = Field(default_factory=list)
    benchmarks: list[Annotated[str, Field(pattern=BENCH_REF)]] = Field(
        default_factory=list, description="result files written by benchmarks/, shown on the entry page"
    )
    figures: list[Figure] = Field(
        default_factory=list, description="figures drawn from the code at build time, shown on the entry page"
    )
    references: list[Reference] = Field(default_factory=list)

    @field_validator("claims")
    @classmethod
    def _unique_claims(cls, claims: list[Claim]) -> list[Claim]:
        seen: dict[str, int] = {}
        for i, c in enumerate(claims):
            if c.id in seen:
                raise ValueError(f"claim id {c.id!r} appears twice in this entry (claims[{seen[c.id]}] and "
                                 f"claims[{i}])")
            seen[c.id] = i
        return claims


class Names(Strict):
    """``qa/names.yaml``: what a reader sees for topic slugs, companies and teams, in both languages.

    One table for the site, the quiz and the checker. The order of ``topics`` is the order in
    which the site lists (and numbers) questions: each area (``rl``) followed by its topics.
    """

    topics: dict[Annotated[str, Field(pattern=TOPIC)], Text] = Field(default_factory=dict)
    companies: dict[NonEmpty, Text] = Field(default_factory=dict)
    teams: dict[NonEmpty, Text] = Field(default_factory=dict)

    def topic(self, slug: str, lang: str) -> str:
        """The topic's name in ``lang``; the slug itself when the table has none."""
        name = self.topics.get(slug)
        return name.get(lang) if name is not None else slug

    def area(self, slug: str, lang: str) -> str:
        """The name of the topic's area (the part before the first ``/``)."""
        return self.topic(slug.split("/", 1)[0], lang)

    def company(self, name: str, lang: str) -> str:
        got = self.companies.get(name)
        return got.get(lang) if got is not None else name

    def team(self, name: str, lang: str) -> str:
        got = self.teams.get(name)
        return got.get(lang) if got is not None else name

    def topic_order(self, slug: str) -> tuple[int, int, str]:
        """Sort key: the area's place in the table, then the topic's, then the slug."""
        keys = list(self.topics)
        area = slug.split("/", 1)[0]
        big = len(keys)
        return (keys.index(area) if area in keys else big, keys.index(slug) if slug in keys else big, slug)


def impl_path(ref: str) -> str:
    """``impls/rl/gae.py::gae`` -> ``impls/rl/gae.py``."""
    return ref.split("::", 1)[0]


def impl_symbol(ref: str) -> str | None:
    return ref.split("::", 1)[1] if "::" in ref else None


def json_schema() -> dict:
    schema = Entry.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "mianjing entry"
    return schema


SCHEMA_COMMENT = "# yaml-language-server: $schema={rel}"


def schema_comment(entry_path_rel_to_qa: str) -> str:
    depth = entry_path_rel_to_qa.count("/")
    return SCHEMA_COMMENT.format(rel="../" * depth + "schema.json")

