"""Markdown for every generated page, in one language, from the KnowledgeBase and the report."""

from __future__ import annotations

import html
import json
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..knowledge import KnowledgeBase
from ..schema import Claim, Entry, impl_path, impl_symbol
from .i18n import DIFFICULTY, KIND, METHOD, OUTCOME, VERDICT, pick, t
from .source import SourceError, symbol_source, test_source

INDEX_TOPIC = "indexes/topic.md"
INDEX_COMPANY = "indexes/company.md"
INDEX_DIFFICULTY = "indexes/difficulty.md"
MISCONCEPTIONS = "misconceptions.md"
REPORT = "report.md"
GUIDES = ("guide/verify.md", "guide/quiz.md", "guide/contribute.md")


@dataclass
class SiteData:
    """Everything a page needs, read once per build."""

    root: Path
    kb: KnowledgeBase
    report: object | None = None  # mianjing.report.Report
    report_problem: str | None = None
    digest: str | None = None
    markers: dict[str, list] = field(default_factory=dict)  # claim id -> [MarkerUse]
    problems: list[str] = field(default_factory=list)  # warnings for the build log

    @classmethod
    def read(cls, root: Path, kb: KnowledgeBase) -> "SiteData":
        from ..markers import find_markers
        from ..paths import report_path
        from ..report import ReportError, inputs_digest, load_report

        data = cls(root=root, kb=kb)
        try:
            data.report = load_report(report_path(root))
        except ReportError as exc:
            data.report_problem = str(exc)
        if data.report is not None:
            data.digest = inputs_digest(root)
        uses, _broken = find_markers(root)
        for u in uses:
            data.markers.setdefault(u.claim_id, []).append(u)
        return data

    def outcome(self, claim: Claim) -> str:
        """passed | failed | skipped | not-run | stale, or citation / opinion when no verifier is needed."""
        rec = self.report.claims.get(claim.id) if self.report is not None else None
        if not claim.needs_verifier and not (rec or {}).get("tests"):
            return "citation" if claim.method.value == "citation" else "opinion"
        if self.report is None:
            return "not-run"
        return self.report.outcome(claim.id, self.digest)

    def record(self, claim: Claim) -> dict | None:
        return self.report.claims.get(claim.id) if self.report is not None else None


# --------------------------------------------------------------------------- paths and tags



def env_value(v) -> str:
    """{'version': '6.1', 'max_examples': 60} -> 'version=6.1, max_examples=60'; other values as str."""
    if isinstance(v, dict):
        return ", ".join(f"{k}={x}" for k, x in v.items())
    return str(v)

def entry_path(entry: Entry) -> str:
    return f"q/{entry.topic}/{entry.id}.md"


def rel(frm: str, to: str) -> str:
    """A markdown link from page ``frm`` to page ``to`` (both src paths)."""
    return posixpath.relpath(to, posixpath.dirname(frm) or ".")


def plain(text: str) -> str:
    """Text for places that do not render markdown (nav, titles): maths and markup stripped."""
    text = re.sub(r"\$+", "", text)
    text = re.sub(r"[`*]", "", text)
    return " ".join(text.split())


def topic_tag(entry: Entry) -> str:
    return entry.topic


def company_tags(entry: Entry, lang: str) -> list[str]:
    out = []
    for a in entry.asked_at:
        if not a.company:
            continue
        out.append(a.company)
        if a.round:
            out.append(f"{a.company} · {t('round', lang, n=a.round)}")
    return list(dict.fromkeys(out))


def difficulty_tag(entry: Entry, lang: str) -> str:
    return f"{t('difficulty', lang)} {entry.difficulty} · {pick(DIFFICULTY, entry.difficulty, lang)}"


def _jsonl(values: list[str]) -> str:
    return json.dumps(values, ensure_ascii=False)


def _fence(code: str, lang: str = "", title: str | None = None, linenums: int | None = None) -> str:
    ticks = "```"
    while ticks in code:
        ticks += "`"
    opts = [lang] if lang else []
    if title:
        opts.append(f'title="{title}"')
    if linenums:
        opts.append(f'linenums="{linenums}"')
    return f"{ticks}{' '.join(opts)}\n{code}\n{ticks}\n"


def _indent(text: str, n: int = 4) -> str:
    pad = " " * n
    return "\n".join(pad + line if line.strip() else "" for line in text.splitlines())


def _badge(kind: str, value: str, label: str) -> str:
    return f'<span class="mj-badge mj-{kind}-{value}">{html.escape(label)}</span>'


# --------------------------------------------------------------------------- entry page


def entry_page(entry: Entry, lang: str, data: SiteData) -> str:
    me = entry_path(entry)
    tags = [topic_tag(entry), *company_tags(entry, lang), difficulty_tag(entry, lang)]
    out: list[str] = [
        "---",
        f"title: {json.dumps(plain(entry.question.get(lang)), ensure_ascii=False)}",
        f"tags: {_jsonl(tags)}",
        "---",
        "",
        f"# {entry.question.get(lang)}",
        "",
    ]
    meta = [f"**{t('topic', lang)}** `{entry.topic}`",
            f"**{t('difficulty', lang)}** {'★' * entry.difficulty}{'☆' * (3 - entry.difficulty)} ({pick(DIFFICULTY, entry.difficulty, lang)})",
            f"**{t('kind', lang)}** {pick(KIND, entry.kind.value, lang)}"]
    asked = []
    for a in entry.asked_at:
        bits = [b for b in (a.company, a.team) if b]
        if a.round:
            bits.append(t("round", lang, n=a.round))
        if a.note:
            bits.append(a.note)
        if bits:
            asked.append(" ".join(bits))
    if asked:
        meta.append(f"**{t('asked_at', lang)}** " + "; ".join(asked))
    out += ['<p class="mj-meta" markdown>', " · ".join(meta), "</p>", ""]

    out += [f'!!! abstract "{t("short", lang)}"', "", _indent(entry.answer.short.get(lang)), ""]
    out += [f"## {t('full', lang)}", "", entry.answer.full.get(lang).rstrip(), ""]

    if entry.implementations:
        out += [f"## {t('impl', lang)}", "", f'<p class="mj-note">{t("impl_note", lang)}</p>', ""]
        for ref in entry.implementations:
            try:
                snip = symbol_source(data.root, impl_path(ref), impl_symbol(ref))
            except SourceError as exc:
                data.problems.append(f"{entry.id}: implementation {ref}: {exc}")
                out += [f'!!! failure "{ref}"', "", _indent(str(exc)), ""]
                continue
            where = f"{snip.path}::{snip.name}" if snip.name else snip.path
            out += [_fence(snip.code, "python", f"{where}  (L{snip.start}-{snip.end})", snip.start)]

    out += [f"## {t('key_points', lang)}", ""]
    out += [f"- {kp.get(lang)}" for kp in entry.key_points]
    out.append("")

    if entry.claims:
        out += [f"## {t('claims', lang)}", ""]
        for claim in entry.claims:
            out += claim_block(entry, claim, lang, data)

    for bench in entry.benchmarks:
        out += benchmark_block(bench, lang, data)

    if entry.follow_ups:
        out += [f"## {t('follow_ups', lang)}", ""]
        for fid in entry.follow_ups:
            other = data.kb.entries.get(fid)
            if other is None:
                data.problems.append(f"{entry.id}: follow-up {fid!r} is not an entry")
                out.append(f"- `{fid}`")
            else:
                out.append(f"- [{plain(other.question.get(lang))}]({rel(me, entry_path(other))})")
        out.append("")

    if entry.references:
        out += [f"## {t('references', lang)}", ""]
        for r in entry.references:
            title = f"[{r.title}]({r.url})" if r.url else r.title
            out.append(f"- {title}" + (f", {r.locator}" if r.locator else ""))
        out.append("")
    return "\n".join(out) + "\n"


def claim_block(entry: Entry, claim: Claim, lang: str, data: SiteData) -> list[str]:
    outcome = data.outcome(claim)
    verdict = claim.verdict.value
    head = (f'{_badge("verdict", verdict, pick(VERDICT, verdict, lang))} '
            f'{_badge("outcome", outcome, pick(OUTCOME, outcome, lang))} '
            f'<code class="mj-claim-id">{html.escape(claim.id)}</code> '
            f'<span class="mj-method">{pick(METHOD, claim.method.value, lang)}</span>')
    out = [f'<div class="mj-claim mj-claim-{verdict} mj-state-{outcome}" id="claim-{claim.id}" markdown>',
           "", f'<p class="mj-claim-head">{head}</p>', "", claim.statement.get(lang).strip(), ""]
    if claim.correction is not None:
        label = {"refuted": "correction", "qualified": "conditions", "opinion": "whose"}.get(verdict, "correction")
        out += [f"**{t(label, lang)}：** " if lang == "zh" else f"**{t(label, lang)}:** ", ""]
        out[-2] += claim.correction.get(lang).strip()
    if claim.cite is not None:
        c = claim.cite
        title = f"[{c.title}]({c.url})" if c.url else c.title
        out += [f"{t('cite_note', lang)} {title}, {c.locator}", ""]

    note = {"stale": "stale_note", "not-run": "not_run_note", "failed": "failed_note"}.get(outcome)
    if note and claim.needs_verifier:
        kind = "warning" if outcome != "failed" else "failure"
        out += [f'!!! {kind} ""', "", _indent(t(note, lang)), ""]
    elif outcome == "opinion":
        out += [f'<p class="mj-note">{t("opinion_note", lang)}</p>', ""]

    details = details_body(claim, lang, data)
    if details:
        opened = "???+" if verdict == "refuted" else "???"
        out += [f'{opened} info "{t("details", lang)}"', "", _indent(details), ""]
    out += ["</div>", ""]
    return out


def details_body(claim: Claim, lang: str, data: SiteData) -> str:
    rec = data.record(claim)
    parts: list[str] = []
    if rec is not None:
        evidence = dict(rec.get("evidence") or {})
        cx = evidence.pop("counterexample", None)
        if cx is not None:
            parts += [f"**{t('counterexample', lang)}**", "", data_placeholder(cx), ""]
        if evidence:
            parts += [f"**{t('evidence', lang)}**", "", data_placeholder(evidence), ""]
        elif cx is None:
            parts += [f"**{t('evidence', lang)}**", "", t("no_evidence", lang), ""]
        env = dict(data.report.environment)
        env.update(rec.get("environment") or {})
        rows = [(k, env.get(k)) for k in ("torch", "device", "python", "platform", "hypothesis", "date", "commit", "dirty")
                if env.get(k) not in (None, "")]
        if rows:
            parts += [f"**{t('environment', lang)}**", "",
                      '<p class="mj-env">' + " · ".join(f"{k} <code>{html.escape(env_value(v))}</code>" for k, v in rows)
                      + "</p>", ""]
        tests = rec.get("tests") or []
        if tests:
            parts += [f"**{t('tests', lang)}**", ""]
            for tr in tests:
                dur = tr.get("duration")
                line = f"- `{tr.get('nodeid')}`: {pick(OUTCOME, tr.get('outcome', 'not-run'), lang) if tr.get('outcome') in OUTCOME else tr.get('outcome')}"
                if isinstance(dur, (int, float)):
                    line += f" ({dur:.2f} s)"
                parts.append(line)
                if tr.get("message") and tr.get("outcome") == "failed":
                    parts += ["", _indent(_fence(str(tr["message"])[:4000], "text")), ""]
            parts.append("")
        sources = [(tr.get("file"), tr.get("function"), tr.get("line")) for tr in tests if tr.get("file") and tr.get("function")]
    else:
        sources = [(u.path, u.function, u.line) for u in data.markers.get(claim.id, []) if u.function]
    shown = set()
    for path, function, line in sources:
        if (path, function) in shown:
            continue
        shown.add((path, function))
        try:
            snip = test_source(data.root, path, function, line)
        except SourceError as exc:
            parts += [f"`{path}::{function}`: {exc}", ""]
            continue
        parts += [f"**{t('verifier', lang)}**", "", source_placeholder(snip), ""]
    if claim.needs_verifier and not shown:
        parts += [t("no_verifier_found", lang), ""]
    return "\n".join(parts).strip()


# Verifier sources can be long and repeat across claims and languages: they are rendered once
# to plain (unhighlighted, search-excluded) HTML and put in the page after markdown runs, which
# keeps the build fast. ``mianjing.site.hooks`` swaps each placeholder paragraph for its HTML.
SOURCES: dict[str, str] = {}
_PLACEHOLDER = re.compile(r"<p>MJSRC([0-9a-f]{16})</p>")


def source_placeholder(snip) -> str:
    import hashlib

    key = hashlib.sha256(f"{snip.path}\0{snip.start}\0{snip.code}".encode()).hexdigest()[:16]
    if key not in SOURCES:
        SOURCES[key] = (f'<div class="mj-src" data-search-exclude><div class="mj-src-title"><code>{html.escape(snip.path)}</code>'
                        f' L{snip.start}-{snip.end}</div><pre><code class="language-python">{html.escape(snip.code)}</code></pre></div>')
    return f"MJSRC{key}"


def data_placeholder(value) -> str:
    """Evidence (JSON) as a plain block, placed like the verifier sources."""
    import hashlib

    text = json.dumps(value, ensure_ascii=False, indent=2)
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    SOURCES.setdefault(key, f'<pre class="mj-data"><code class="language-json">{html.escape(text)}</code></pre>')
    return f"MJSRC{key}"


def fill_sources(page_html: str) -> str:
    return _PLACEHOLDER.sub(lambda m: SOURCES.get(m.group(1), m.group(0)), page_html)


def benchmark_block(ref: str, lang: str, data: SiteData) -> list[str]:
    path = data.root / ref
    try:
        b = json.loads(path.read_text(encoding="utf-8"))
        title = b.get("title") or {}
        title = title.get(lang) or title.get("en") or ref if isinstance(title, dict) else str(title)
        cols, rows = list(b["columns"]), list(b["rows"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        data.problems.append(f"benchmark {ref}: cannot read ({type(exc).__name__}: {exc})")
        return [f"## {t('benchmarks', lang)}", "", f'!!! failure "{ref}"', "", _indent(f"cannot read: {exc}"), ""]

    def cell(v) -> str:
        if isinstance(v, float):
            v = f"{v:.4g}"
        return str(v).replace("|", "\\|").replace("\n", " ")

    out = [f"## {t('benchmarks', lang)}: {title}", ""]
    out += ["| " + " | ".join(cell(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    out.append("")
    facts = [(t("machine", lang), b.get("machine")), (t("date", lang), b.get("date"))]
    out += [" · ".join(f"**{k}** {v}" for k, v in facts if v), ""]
    if b.get("command"):
        out += [f"**{t('command', lang)}** `{b['command']}`", ""]
    notes = b.get("notes")
    if isinstance(notes, dict) and (notes.get(lang) or notes.get("en")):
        out += [notes.get(lang) or notes.get("en"), ""]
    out += [f'<p class="mj-note">{t("source_at", lang)}: <code>{ref}</code></p>', ""]
    return out


# --------------------------------------------------------------------------- indexes and lists


def _listing(tags: list[str]) -> str:
    if not tags:
        return ""
    return "<!-- material/tags " + json.dumps({"include": tags}, ensure_ascii=False) + " -->"


def index_page(which: str, lang: str, data: SiteData) -> str:
    entries = list(data.kb.entries.values())
    if which == "topic":
        title, intro = t("by_topic", lang), t("topic_intro", lang)
        tags = sorted({topic_tag(e) for e in entries})
    elif which == "company":
        title, intro = t("by_company", lang), t("company_intro", lang)
        tags = sorted({tag for e in entries for tag in company_tags(e, lang)})
    else:
        title, intro = t("by_difficulty", lang), t("difficulty_intro", lang)
        tags = sorted({difficulty_tag(e, lang) for e in entries})
    body = _listing(tags) or t("none_yet", lang)
    return f"# {title}\n\n{intro}\n\n{body}\n"


def misconceptions_page(lang: str, data: SiteData) -> str:
    me = MISCONCEPTIONS
    out = [f"# {t('misconceptions', lang)}", "", t("misc_intro", lang), ""]
    n = 0
    for verdict in ("refuted", "qualified"):
        items = [(e, c) for e, c in data.kb.claims() if c.verdict.value == verdict]
        if not items:
            continue
        out += [f"## {pick(VERDICT, verdict, lang)} ({len(items)})", ""]
        for e, c in items:
            n += 1
            outcome = data.outcome(c)
            link = f"{rel(me, entry_path(e))}#claim-{c.id}"
            out += [f'<div class="mj-misc mj-claim-{verdict}" markdown>', "",
                    f'<p class="mj-claim-head">{_badge("verdict", verdict, pick(VERDICT, verdict, lang))} '
                    f'{_badge("outcome", outcome, pick(OUTCOME, outcome, lang))} <code>{html.escape(c.id)}</code></p>', "",
                    c.statement.get(lang).strip(), "",
                    f"**{t('correction' if verdict == 'refuted' else 'conditions', lang)}{'：' if lang == 'zh' else ':'}** "
                    + c.correction.get(lang).strip(), "",
                    f"[{plain(e.question.get(lang))}]({link})", "", "</div>", ""]
    if n == 0:
        out += [t("none_yet", lang), ""]
    return "\n".join(out)


def report_page(lang: str, data: SiteData) -> str:
    me = REPORT
    out = [f"# {t('report', lang)}", "", t("report_intro", lang), ""]
    if data.report_problem:
        out += ['!!! failure ""', "", _indent(t("bad_report", lang) + f"`{data.report_problem}`"), ""]
    elif data.report is None:
        out += ['!!! warning ""', "", _indent(t("no_report", lang)), ""]
    else:
        rep = data.report
        out += [f"**{t('report_created', lang)}** {rep.data.get('created', '?')}", ""]
        env = rep.environment
        rows = [(k, env.get(k)) for k in ("torch", "device", "cuda", "python", "platform", "hypothesis", "date", "commit", "dirty")
                if env.get(k) not in (None, "")]
        if rows:
            out += [f"### {t('environment', lang)}", "", f"| {t('env_key', lang)} | {t('env_value', lang)} |", "|---|---|"]
            out += [f"| {k} | `{env_value(v)}` |" for k, v in rows]
            out.append("")
    counts: dict[str, int] = {}
    table = [f"| {t('claim', lang)} | {t('entry', lang)} | {t('verdict', lang)} | {t('method', lang)} | {t('outcome', lang)} | {t('duration', lang)} |",
             "|---|---|---|---|---|---|"]
    for e, c in data.kb.claims():
        outcome = data.outcome(c)
        counts[outcome] = counts.get(outcome, 0) + 1
        rec = data.record(c)
        dur = rec.get("duration") if rec else None
        dur_s = f"{dur:.2f} s" if isinstance(dur, (int, float)) and outcome != "stale" else ""
        table.append(f"| [`{c.id}`]({rel(me, entry_path(e))}#claim-{c.id}) | {plain(e.question.get(lang))[:60]} | "
                     f"{_badge('verdict', c.verdict.value, pick(VERDICT, c.verdict.value, lang))} | "
                     f"{pick(METHOD, c.method.value, lang)} | {_badge('outcome', outcome, pick(OUTCOME, outcome, lang))} | {dur_s} |")
    out += [f"### {t('summary', lang)}", ""]
    out += [" · ".join(f"{_badge('outcome', k, pick(OUTCOME, k, lang))} {v}" for k, v in sorted(counts.items(), key=lambda kv: list(OUTCOME).index(kv[0]))) or t("none_yet", lang), ""]
    out += [f"### {t('all_claims', lang)}", ""]
    out += table if counts else [t("none_yet", lang)]
    out.append("")
    return "\n".join(out)


def kb_summary(lang: str, data: SiteData) -> str:
    claims = [c for _, c in data.kb.claims()]
    verified = sum(1 for c in claims if data.outcome(c) == "passed")
    refuted = sum(1 for c in claims if c.verdict.value == "refuted")
    return t("kb_summary", lang, entries=len(data.kb), claims=len(claims), verified=verified, refuted=refuted)


def generated_pages(lang: str, data: SiteData) -> dict[str, str]:
    """src path -> markdown for every generated page of one language."""
    pages = {entry_path(e): entry_page(e, lang, data) for e in data.kb.entries.values()}
    pages[INDEX_TOPIC] = index_page("topic", lang, data)
    pages[INDEX_COMPANY] = index_page("company", lang, data)
    pages[INDEX_DIFFICULTY] = index_page("difficulty", lang, data)
    pages[MISCONCEPTIONS] = misconceptions_page(lang, data)
    pages[REPORT] = report_page(lang, data)
    return pages


def nav(lang: str, data: SiteData, guides: list[tuple[str, str]]) -> list:
    """The navigation of one language: home, questions by topic, indexes, guides."""
    by_topic: dict[str, list] = {}
    for e in data.kb.entries.values():
        by_topic.setdefault(e.topic, []).append({plain(e.question.get(lang)): entry_path(e)})
    questions = [{topic: by_topic[topic]} for topic in sorted(by_topic)]
    items: list = [{t("home", lang): "index.md"}]
    if questions:
        items.append({t("questions", lang): questions})
    items.append({t("indexes", lang): [
        {t("by_topic", lang): INDEX_TOPIC}, {t("by_company", lang): INDEX_COMPANY},
        {t("by_difficulty", lang): INDEX_DIFFICULTY}, {t("misconceptions", lang): MISCONCEPTIONS},
        {t("report", lang): REPORT}]})
    if guides:
        items.append({t("guides", lang): [{title: path} for title, path in guides]})
    return items
