"""``mianjing check``: the knowledge base's cross references, every problem at once.

Checks, on top of the loader's schema errors: duplicate claim ids, a claim with
no verifier, a verifier marker naming no claim, an implementation path or
function that does not exist, a follow-up naming no entry, a figure function or a benchmark result
that does not exist, a catalog id unknown to the catalog or settled twice, and
a catalog question answered by an entry whose catalog claims are not all settled, a figure an
executable claim's text quotes that no verifier pins with ``evidence.quote`` (or that only one language quotes),
a named fact (``facts:``) given two different values by two claims, a topic (or its area),
company or team that ``qa/names.yaml`` does not name in both languages, a short answer longer than
30 seconds spoken (``spoken_length``), full answers whose headings do not pair up across the languages
(the site gives a heading the same anchor in both), and a kata without the Chinese text of its stub (``ZH`` in
its property module) or without its entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .catalog import Catalog, YamlError, load_catalog
from .knowledge import KnowledgeBase
from .loader import load
from .markers import MarkerUse, defined_names, find_markers
from .paths import NAMES_FILE, catalog_path
from .problems import Problem
from .quoted import claim_figures, find_quotes, pinned, quoted_by_claim
from .schema import impl_path, impl_symbol


@dataclass
class CheckResult:
    kb: KnowledgeBase
    problems: list[Problem] = field(default_factory=list)
    markers: list[MarkerUse] = field(default_factory=list)
    catalog: Catalog | None = None
    warnings: list[str] = field(default_factory=list)  # shown, but not problems (exit status unchanged)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def executable_share(self) -> tuple[int, int]:
        """(claims settled by code, claims that are not opinions): the rest are settled by citation only."""
        factual = [c for _, c in self.kb.claims() if c.verdict.value != "opinion"]
        return sum(1 for c in factual if c.needs_verifier), len(factual)

    @property
    def citation_only_refuted(self) -> list[str]:
        """Refuted claims with no runnable counterexample (settled by a citation)."""
        return [c.id for _, c in self.kb.claims() if c.verdict.value == "refuted" and not c.needs_verifier]


def check(root: Path, catalog_file: Path | None = None) -> CheckResult:
    loaded = load(root)
    kb = loaded.kb
    res = CheckResult(kb=kb, problems=list(loaded.problems))
    unvalidated = loaded.unvalidated_claim_ids
    add = res.problems.append

    # claims unique across the base (within one entry the schema already refuses repeats)
    owner: dict[str, str] = {}
    for entry, claim in kb.claims():
        if claim.id in owner:
            add(Problem(kb.sources[entry.id].path, kb.claim_line(entry.id, claim.id, "id"), "claims.id",
                        f"duplicate claim id {claim.id!r} (also in {kb.sources[owner[claim.id]].path})"))
        else:
            owner[claim.id] = entry.id

    # verifiers <-> claims
    res.markers, broken = find_markers(root)
    for rel, line, msg in broken:
        add(Problem(rel, line, "(python)", f"cannot parse: {msg}"))
    verified = {m.claim_id for m in res.markers}
    index = kb.claim_index()
    for m in res.markers:
        if m.claim_id not in index and m.claim_id not in unvalidated:
            add(Problem(m.path, m.line, "claim", f"marker names no claim: {m.claim_id!r}"))
    for entry, claim in kb.claims():
        if claim.needs_verifier and claim.id not in verified:
            add(Problem(kb.sources[entry.id].path, kb.claim_line(entry.id, claim.id, "id"), "claims.id",
                        f"claim {claim.id!r} ({claim.method.value}) has no verifier "
                        "(add @pytest.mark.claim to a test in verifiers/)"))

    # figures quoted in the text: pinned by evidence.quote in a verifier, the same in both languages
    quoted = quoted_by_claim(find_quotes(root))
    for entry, claim in kb.claims():
        if not claim.needs_verifier:
            continue
        where = (kb.sources[entry.id].path, kb.claim_line(entry.id, claim.id, "id"))
        en, zh = claim_figures(claim, "en"), claim_figures(claim, "zh")
        if sorted(en) != sorted(zh):
            add(Problem(*where, "claims.correction",
                        f"{claim.id}: the zh and en texts quote different figures "
                        f"(en only: {_fmt(set(en) - set(zh))}; zh only: {_fmt(set(zh) - set(en))})"))
        loose = [f for f in en if not pinned(f, quoted.get(claim.id, set()))]
        if loose:
            add(Problem(*where, "claims.correction",
                        f"{claim.id} quotes {_fmt(loose)} but no verifier of it asserts "
                        f"{'it' if len(loose) == 1 else 'them'} with evidence.quote(name, quoted=..., measured=...)"))

    _check_facts(kb, quoted, add)

    # implementations, follow-ups, benchmarks
    for entry in kb.entries.values():
        src = kb.sources[entry.id]
        for i, ref in enumerate(entry.implementations):
            file = root / impl_path(ref)
            if not file.is_file():
                add(Problem(src.path, src.line_of("implementations", i), f"implementations[{i}]",
                            f"no such file: {impl_path(ref)}"))
            elif (sym := impl_symbol(ref)) and sym not in defined_names(file):
                add(Problem(src.path, src.line_of("implementations", i), f"implementations[{i}]",
                            f"{impl_path(ref)} defines no {sym!r}"))
        for i, fid in enumerate(entry.follow_ups):
            if fid not in kb.entries:
                add(Problem(src.path, src.line_of("follow_ups", i), f"follow_ups[{i}]", f"no entry with id {fid!r}"))
            elif fid == entry.id:
                add(Problem(src.path, src.line_of("follow_ups", i), f"follow_ups[{i}]", "an entry cannot follow itself"))
        for i, fig in enumerate(entry.figures):
            file = root / impl_path(fig.ref)
            where = src.line_of("figures", i, "ref")
            if not file.is_file():
                add(Problem(src.path, where, f"figures[{i}].ref", f"no such file: {impl_path(fig.ref)}"))
            elif impl_symbol(fig.ref) not in defined_names(file):
                add(Problem(src.path, where, f"figures[{i}].ref",
                            f"{impl_path(fig.ref)} defines no {impl_symbol(fig.ref)!r}"))
        for i, b in enumerate(entry.benchmarks):
            if not (root / b).is_file():
                add(Problem(src.path, src.line_of("benchmarks", i), f"benchmarks[{i}]",
                            f"no such file: {b} (run the benchmark that writes it)"))

    _check_names(kb, add)
    _check_katas(root, kb, add)
    _check_answers(kb, add)

    # the catalog
    cat_file = catalog_file or catalog_path(root)
    try:
        res.catalog = load_catalog(cat_file)
    except YamlError as exc:
        add(Problem(str(cat_file), exc.line, "(catalog)", exc.message))
    if res.catalog is not None:
        _check_catalog(kb, res.catalog, add)
    elif catalog_file is not None:
        add(Problem(str(cat_file), 0, "(catalog)", "no such file (given with --catalog)"))
    elif not any(p.field == "(catalog)" for p in res.problems):
        res.warnings.append(f"no catalog at {cat_file}: catalog ids were not checked "
                            "(pass --catalog FILE or set MIANJING_CATALOG)")
    res.problems.sort()
    return res


def _check_katas(root: Path, kb: KnowledgeBase, add) -> None:
    """Every kata this checkout offers has the Chinese text its zh stub needs (``ZH`` in the property module), and
    names an entry of the base."""
    from .quiz.katas import available

    for k in available(root):
        missing = k.zh_missing(root)
        if missing:
            text = (root / k.props_path).read_text(encoding="utf-8").splitlines()
            line = next((i for i, ln in enumerate(text, 1) if ln.startswith("ZH =")), 1)
            add(Problem(k.props_path, line, "ZH",
                        f"kata {k.name}: no Chinese text for {', '.join(missing)} (`kata start --lang zh` needs it: "
                        "ZH = {\"doc\": ..., \"prop_...\": ..., \"" + (k.write or (k.symbol,))[0] + "\": ...}, see CONTRIBUTING.md)"))
        if k.entry not in kb.entries:
            add(Problem(k.props_path, 1, "kata", f"kata {k.name} names entry {k.entry!r}, which the base does not have"))


def _decimals(x: float) -> int:
    text = repr(float(x))
    return 0 if "e" in text else len(text.split(".")[1].rstrip("0"))


def same_fact(a, b) -> bool:
    """Two values of one fact agree: booleans and texts exactly, numbers at the coarser of the two precisions
    (2.91 and 2.909 agree; 2.91 and 2.92 do not)."""
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        return type(a) is type(b) and a == b
    d = min(_decimals(a), _decimals(b))
    return round(float(a), d) == round(float(b), d)


def _check_facts(kb: KnowledgeBase, quoted: dict[str, set[float]], add) -> None:
    """A named fact has one value across the whole base; a number an executable claim states as a fact is
    pinned by evidence.quote in its verifiers (so the registry holds measured values, not typed ones)."""
    first: dict[str, tuple[object, str, str, int]] = {}  # fact -> (value, claim id, path, line)
    for entry, claim in kb.claims():
        src = kb.sources[entry.id]
        for i, (name, value) in enumerate(claim.facts.items()):
            line = kb.claim_line(entry.id, claim.id, "facts", name)
            if name in first and not same_fact(first[name][0], value):
                v0, c0, p0, l0 = first[name]
                add(Problem(src.path, line, "claims.facts",
                            f"{claim.id} says {name} = {value!r}, but {c0} ({p0}:{l0}) says {v0!r}: "
                            "one of them is wrong"))
            first.setdefault(name, (value, claim.id, src.path, line))
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if number and claim.needs_verifier and not pinned(float(value), quoted.get(claim.id, set())):
                add(Problem(src.path, line, "claims.facts",
                            f"{claim.id} states {name} = {value!r} but no verifier of it asserts it "
                            "with evidence.quote(name, quoted=..., measured=...)"))


def _fmt(values) -> str:
    return ", ".join(f"{v:g}" for v in sorted(values)) or "none"
def _check_names(kb: KnowledgeBase, add) -> None:
    """Every topic slug, its area, every company and team an entry uses has a name in both languages."""
    names = kb.names
    for entry in kb.entries.values():
        src = kb.sources[entry.id]
        area = entry.topic.split("/", 1)[0]
        for slug in dict.fromkeys((area, entry.topic)):
            if slug not in names.topics:
                add(Problem(src.path, src.line_of("topic"), "topic",
                            f"topic {slug!r} has no name in {NAMES_FILE} (add it under topics: with zh and en)"))
        for i, a in enumerate(entry.asked_at):
            for fld, section, value, table in (("company", "companies", a.company, names.companies),
                                               ("team", "teams", a.team, names.teams)):
                if value and value not in table:
                    add(Problem(src.path, src.line_of("asked_at", i, fld), f"asked_at[{i}].{fld}",
                                f"{fld} {value!r} has no name in {NAMES_FILE} (add it under {section}: with zh and en)"))


def _check_catalog(kb: KnowledgeBase, cat: Catalog, add) -> None:
    settled: dict[str, tuple[str, str]] = {}  # catalog claim id -> (entry id, claim id)
    for entry, claim in kb.claims():
        if claim.catalog is None:
            continue
        src = kb.sources[entry.id]
        line = kb.claim_line(entry.id, claim.id, "catalog")
        if claim.catalog not in cat.claims:
            add(Problem(src.path, line, "claims.catalog", f"catalog id {claim.catalog!r} is not in the catalog"))
        elif claim.catalog in settled:
            other_entry, other_claim = settled[claim.catalog]
            add(Problem(src.path, line, "claims.catalog",
                        f"catalog id {claim.catalog!r} is settled twice (also by {other_claim} in "
                        f"{kb.sources[other_entry].path})"))
        else:
            settled[claim.catalog] = (entry.id, claim.id)
    for entry in kb.entries.values():
        if entry.catalog is None:
            continue
        src = kb.sources[entry.id]
        if entry.catalog not in cat.questions:
            add(Problem(src.path, src.line_of("catalog"), "catalog",
                        f"catalog question {entry.catalog!r} is not in the catalog"))
            continue
        missing = [c for c in cat.questions[entry.catalog] if c not in settled]
        if missing:
            add(Problem(src.path, src.line_of("catalog"), "catalog",
                        f"catalog claims of {entry.catalog!r} not settled by any claim: {', '.join(missing)}"))


# A short answer is what a candidate says in about 30 seconds: some 70 English words (140 a minute)
# or 200 Chinese characters (400 a minute). What does not fit belongs in the full answer.
SHORT_LIMIT = {"en": 70, "zh": 200}
_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$]+)\$", re.S)
_WORD = re.compile(r"[A-Za-z0-9]+(?:[-'’.+/][A-Za-z0-9]+)*")
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_SPOKEN_TEX = re.compile(r"\\(alpha|beta|gamma|delta|epsilon|varepsilon|theta|lambda|mu|pi|sigma|tau|phi|psi|omega|"
                         r"Delta|Sigma|Omega|nabla|sqrt|frac|sum|log|exp|min|max|approx|le|ge|neq|in|to|infty)\b")


def spoken_length(text: str, lang: str) -> int:
    """How long ``text`` takes to say, in words (en) or in characters (zh): a Chinese character, a word or
    a number is one; in a formula each name, number and spoken symbol (\\theta, \\frac, \\le...) is one."""

    def formula(m: re.Match) -> str:
        tex = m.group(1) or m.group(2)
        spoken = len(_SPOKEN_TEX.findall(tex))
        rest = re.sub(r"\\[A-Za-z]+", " ", tex)
        return " w" * (spoken + len(re.findall(r"[A-Za-z]+|[0-9.]+", rest)))

    text = _MATH.sub(formula, text)
    text = re.sub(r"`([^`]*)`", r" \1 ", text)
    n = len(_WORD.findall(text))
    return n + len(_HAN.findall(text)) if lang == "zh" else n


def _check_answers(kb: KnowledgeBase, add) -> None:
    """Short answers fit in 30 seconds; the full answers' headings pair up across the languages."""
    from .site.text import headings  # plain text handling: no site dependency

    for entry in kb.entries.values():
        src = kb.sources[entry.id]
        for lang, unit in (("en", "words"), ("zh", "characters")):
            n = spoken_length(entry.answer.short.get(lang), lang)
            if n > SHORT_LIMIT[lang]:
                add(Problem(src.path, src.line_of("answer", "short", lang), f"answer.short.{lang}",
                            f"the short answer is {n} {unit} spoken, longer than 30 seconds ({SHORT_LIMIT[lang]}); "
                            "move the detail to the full answer"))
        zh, en = (headings(entry.answer.full.get(lang)) for lang in ("zh", "en"))
        if len(zh) != len(en):
            add(Problem(src.path, src.line_of("answer", "full"), "answer.full",
                        f"the zh full answer has {len(zh)} headings, the en one {len(en)}: "
                        "they must pair up (the site gives both the same anchors)"))
