"""Entry pages, in one language, from the KnowledgeBase and the report.

Lists, indexes and the report are in ``indexes.py``; what the two share (the data read
once per build, paths, badges, raw-HTML placeholders) is here.
"""

from __future__ import annotations

import hashlib
import html
import json
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..knowledge import KnowledgeBase
from ..schema import Claim, Entry, impl_path, impl_symbol
from . import evidence as ev
from . import mathml
from .codepages import Code
from .i18n import DIFFICULTY, ENV_KEYS, KIND, METHOD, OUTCOME, VERDICT, VERDICT_MARK, pick, t
from .source import SourceError, symbol_source, test_source
from .text import normalise, same_anchors
from .text import plain as plain_text

INDEX_TOPIC = "indexes/topic.md"
INDEX_COMPANY = "indexes/company.md"
INDEX_DIFFICULTY = "indexes/difficulty.md"
MISCONCEPTIONS = "misconceptions.md"
REPORT = "report.md"
GUIDES = ("guide/verify.md", "guide/quiz.md", "guide/contribute.md")
# the ids an entry page gives its own sections (a heading of an answer must not take one)
PAGE_IDS = {"full", "figures", "impl", "key-points", "claims", "benchmarks", "follow-ups", "references"}
ENV_SHOWN = ("torch", "device", "gpu", "python", "platform", "hypothesis", "date", "commit", "dirty")


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
    figures: dict = field(default_factory=dict)  # (ref, lang) -> figures.Job
    code: Code | None = None
    ordered: list[Entry] = field(default_factory=list)  # the order of the question table and the nav
    number: dict[str, int] = field(default_factory=dict)  # entry id -> its number in that order

    @classmethod
    def read(cls, root: Path, kb: KnowledgeBase) -> "SiteData":
        from ..markers import find_markers
        from ..paths import report_path
        from ..report import ReportError, inputs_digest, load_report

        data = cls(root=root, kb=kb, code=Code(root))
        try:
            data.report = load_report(report_path(root))
        except ReportError as exc:
            data.report_problem = str(exc)
        if data.report is not None:
            data.digest = inputs_digest(root)
        uses, _broken = find_markers(root)
        for u in uses:
            data.markers.setdefault(u.claim_id, []).append(u)
        files = list(kb.entries)
        data.ordered = sorted(kb.entries.values(),
                              key=lambda e: (kb.names.topic_order(e.topic), e.difficulty, files.index(e.id)))
        data.number = {e.id: i for i, e in enumerate(data.ordered, 1)}
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

    def runnable_counterexample(self, claim: Claim) -> bool:
        """A refuted claim whose verifier ran and passed, i.e. exhibited its counterexample."""
        return claim.verdict.value == "refuted" and claim.method.value != "citation" and self.outcome(claim) == "passed"


# --------------------------------------------------------------------------- paths, names, small pieces


def entry_path(entry: Entry) -> str:
    return f"q/{entry.topic}/{entry.id}.md"


def page_url(src: str) -> str:
    """The URL (relative to the language's root) mkdocs gives a page, with directory URLs."""
    if src == "index.md":
        return ""
    if src.endswith("/index.md"):
        return src[: -len("index.md")]
    return src[:-3] + "/"


def up(src: str) -> str:
    """From page ``src`` to its language's root, as a relative URL prefix."""
    return "../" * page_url(src).count("/")


def root_up(src: str, lang: str) -> str:
    """From page ``src`` to the site root that both languages share (code pages live there)."""
    return up(src) + ("../" if lang == "en" else "")


def rel(frm: str, to: str) -> str:
    """A markdown link from page ``frm`` to page ``to`` (both src paths)."""
    return posixpath.relpath(to, posixpath.dirname(frm) or ".")


def plain(text: str) -> str:
    """Text for places that render neither markdown nor HTML (nav, titles): maths as text, markup stripped."""
    return plain_text(text, mathml.to_text)


def inline(text: str) -> str:
    """One line of author markdown as HTML for raw-HTML places (tables): maths, `code`, **bold**."""
    return mathml.inline_html(" ".join(text.split()))


def env_value(v, lang: str) -> str:
    """{'version': '6.1', 'max_examples': 60} -> 'version=6.1, max_examples=60'; a yes/no in words; others as str."""
    if isinstance(v, bool):
        return t("yes" if v else "no", lang)
    if isinstance(v, dict):
        return ", ".join(f"{k}={x}" for k, x in v.items())
    return str(v)


def stars(n: int) -> str:
    return "★" * n + "☆" * (3 - n)


def asked_text(entry: Entry, lang: str, kb: KnowledgeBase) -> list[str]:
    out = []
    for a in entry.asked_at:
        bits = []
        if a.company:
            bits.append(kb.names.company(a.company, lang))
        if a.team:
            bits.append(kb.names.team(a.team, lang))
        if a.round:
            bits.append(t("round", lang, n=a.round))
        if a.note:
            bits.append(f"（{a.note.get(lang)}）" if lang == "zh" else f"({a.note.get(lang)})")
        if bits:
            out.append(" ".join(bits))
    return out


def question_item(number: int, title: str, link: str, tail: str = "") -> str:
    """One row of a list of questions: its number (not a list marker: ``- 12. x`` would nest an ordered list)."""
    return f'- <span class="mj-qno">{number}.</span> [{title}]({link}){tail}'


def question_list(items: list[str]) -> list[str]:
    """Markdown lines for a list of ``question_item`` rows."""
    return ['<div class="mj-qlist" markdown>', "", *items, "", "</div>", ""]


def badge(kind: str, value: str, label: str) -> str:
    return f'<span class="mj-badge mj-{kind}-{value}">{html.escape(label)}</span>'


def _indent(text: str, n: int = 4) -> str:
    pad = " " * n
    return "\n".join(pad + line if line.strip() else "" for line in text.splitlines())


# Raw HTML (evidence, code, tables) must not pass through markdown: it is parked here under a
# key, the page carries a placeholder paragraph, and ``fill_raw`` (on_page_content) swaps it in.
RAW: dict[str, str] = {}
_PLACEHOLDER = re.compile(r"<p>MJRAW([0-9a-f]{16})</p>")


def raw(fragment: str) -> str:
    key = hashlib.sha256(fragment.encode()).hexdigest()[:16]
    RAW.setdefault(key, fragment)
    return f"MJRAW{key}"


def fill_raw(page_html: str) -> str:
    return _PLACEHOLDER.sub(lambda m: RAW.get(m.group(1), m.group(0)), page_html)


# --------------------------------------------------------------------------- entry page


def entry_page(entry: Entry, lang: str, data: SiteData) -> str:
    me = entry_path(entry)
    names = data.kb.names
    out: list[str] = [
        "---",
        f"title: {json.dumps(plain(entry.question.get(lang)), ensure_ascii=False)}",
        "---",
        "",
        f"# {entry.question.get(lang)}",
        "",
    ]
    topic = names.topic(entry.topic, lang)
    area = names.area(entry.topic, lang)
    meta = [f'<span class="mj-no">{t("number", lang, n=data.number[entry.id])}</span>',
            f"<b>{t('topic', lang)}</b> {html.escape(area)} › {html.escape(topic)}",
            f"<b>{t('difficulty', lang)}</b> {stars(entry.difficulty)} {pick(DIFFICULTY, entry.difficulty, lang)}",
            f"<b>{t('kind', lang)}</b> {pick(KIND, entry.kind.value, lang)}"]
    asked = asked_text(entry, lang, data.kb)
    if asked:
        meta.append(f"<b>{t('asked_at', lang)}</b> " + html.escape("; ".join(asked)))
    out += [f'<p class="mj-meta">{" · ".join(meta)}</p>', ""]
    if entry.claims:
        out += [claims_summary(entry, lang, data), ""]

    out += [f'!!! abstract "{t("short", lang)}"', "", _indent(normalise(entry.answer.short.get(lang))), ""]
    full = same_anchors(entry.answer.full.get(lang).rstrip(), entry.answer.full.en, mathml.to_text, PAGE_IDS)
    out += [f"## {t('full', lang)} {{#full}}", "", normalise(full), ""]

    if entry.figures:
        out += [f"## {t('figures', lang)} {{#figures}}", ""]
        for i, fig in enumerate(entry.figures, 1):
            out += [raw(figure_html(fig, i, lang, me, data)), ""]

    if entry.implementations:
        out += [f"## {t('impl', lang)} {{#impl}}", "", f'<p class="mj-note">{t("impl_note", lang)}</p>', ""]
        for ref in entry.implementations:
            try:
                snip = symbol_source(data.root, impl_path(ref), impl_symbol(ref))
            except SourceError as exc:
                data.problems.append(f"{entry.id}: implementation {ref}: {exc}")
                out += [f'!!! failure "{ref}"', "", _indent(str(exc)), ""]
                continue
            # fetched as the reader scrolls near it (mj.js), like the verifiers' code: the listing is the
            # largest part of a typical page, and the title links the file page for readers without JS
            out += [raw(data.code.lazy(snip, root_up(me, lang), t("impl_loading", lang))), ""]

    out += [f"## {t('key_points', lang)} {{#key-points}}", ""]
    out += [f"- {kp.get(lang)}" for kp in entry.key_points]
    out.append("")

    if entry.claims:
        out += [f"## {t('claims', lang)} {{#claims}}", ""]
        for claim in entry.claims:
            out += claim_block(entry, claim, lang, data)

    if entry.benchmarks:
        out += [f"## {t('benchmarks', lang)} {{#benchmarks}}", ""]
        for bench in entry.benchmarks:
            out += benchmark_block(bench, lang, data)

    if entry.follow_ups:
        out += [f"## {t('follow_ups', lang)} {{#follow-ups}}", ""]
        items = []
        for fid in entry.follow_ups:
            other = data.kb.entries.get(fid)
            if other is None:
                data.problems.append(f"{entry.id}: follow-up {fid!r} is not an entry")
                items.append(f"- `{fid}`")
            else:
                items.append(question_item(data.number[fid], plain(other.question.get(lang)), rel(me, entry_path(other))))
        out += question_list(items)

    if entry.references:
        out += [f"## {t('references', lang)} {{#references}}", ""]
        for r in entry.references:
            title = f"[{r.title}]({r.url})" if r.url else r.title
            out.append(f"- {title}" + (f", {r.locator}" if r.locator else ""))
        out.append("")
    return "\n".join(out) + "\n"


def claims_summary(entry: Entry, lang: str, data: SiteData) -> str:
    counts: dict[str, int] = {}
    for c in entry.claims:
        counts[c.verdict.value] = counts.get(c.verdict.value, 0) + 1
    parts = [f'<a href="#claims">{t("claims_summary", lang, n=len(entry.claims))}</a>']
    parts += [f"{verdict_badge(v, lang)} {counts[v]}" for v in VERDICT if v in counts]
    return f'<p class="mj-claims-summary">{" ".join(parts)}</p>'


def figure_html(fig, i: int, lang: str, me: str, data: SiteData) -> str:
    job = data.figures.get((fig.ref, lang))
    text = fig.caption.get(lang)
    alt = html.escape(plain_text(text, mathml.to_text))
    caption = mathml.inline_html(text, lambda msg: data.problems.append(f"{me}: figure caption: {msg}"))
    name = fig.ref.split("::", 1)[1]
    src = f"{up(me)}assets/figures/{job.file}" if job is not None else ""
    size = f'{SIZE_MARK}="{html.escape(job.file)}"' if job is not None else ""  # width, height: filled in once drawn
    return (f'<figure class="mj-figure" id="figure-{html.escape(name)}">'
            f'<a class="mj-figure-open" href="{html.escape(src)}" target="_blank" title="{t("figure_open", lang)}">'
            f'<img data-src="{html.escape(src)}" alt="{alt}" decoding="async" {size}>'  # mj.js sets src near the viewport
            f'<noscript><img src="{html.escape(src)}" alt="{alt}" loading="lazy"></noscript></a>'
            f'<figcaption><b>{t("figure_n", lang, n=i)}</b> {caption} '
            f'<a href="{html.escape(src)}" target="_blank">{t("figure_open", lang)}</a> '
            f'<span class="mj-note">{html.escape(t("figure_note", lang, ref=fig.ref).replace("`", ""))}</span></figcaption></figure>')


SIZE_MARK = "data-mj-size"
_SIZE = re.compile(SIZE_MARK + r'="([^"]+)"')


def fill_sizes(page: Path, sizes: dict[str, tuple[float, float]]) -> None:
    """Give a written page's figures the width and height of their SVGs (drawn after the pages were), so that the
    browser holds their room before they load."""
    text = page.read_text(encoding="utf-8")
    filled = _SIZE.sub(lambda m: 'width="%d" height="%d"' % sizes[m.group(1)] if m.group(1) in sizes else "", text)
    if filled != text:
        page.write_text(filled, encoding="utf-8")


def headline(claim: Claim, outcome: str, lang: str, record: dict | None) -> str:
    """One sentence: how we know (the badge beside it says the verdict)."""
    verdict = claim.verdict.value
    how = t(f"how_{claim.method.value}", lang) if claim.method.value != "citation" else ""
    if verdict == "opinion":
        sentence = t("hl_opinion", lang)
    elif outcome == "citation":
        sentence = t("hl_citation", lang)
    elif outcome == "passed":
        sentence = t("hl_passed_refuted" if verdict == "refuted" else "hl_passed", lang, how=how)
    elif outcome == "skipped":
        why = ""
        for tr in (record or {}).get("tests") or []:
            why = why or (tr.get("message") or "")
        sentence = t("hl_skipped", lang, why=why or "?")
    else:
        sentence = t(f"hl_{outcome}", lang)
    return sentence + ("。" if lang == "zh" else ".")


def precision_text(precision: str, lang: str) -> str:
    """``2 decimals`` / ``-1 decimals`` / ``rel 0.05`` / ``abs 0.01`` (as the report records it) in words."""
    m = re.fullmatch(r"(-?\d+) decimals", precision)
    if m:
        n = int(m.group(1))
        if n < 0:
            return t("prec_tens", lang, x=f"{10 ** -n:g}")
        return t("prec_digits", lang, n=n) if lang == "zh" or n != 1 else t("prec_digit", lang)
    m = re.fullmatch(r"(rel|abs) (\S+)", precision)
    if m and m.group(1) == "rel":
        return t("prec_rel", lang, x=f"{float(m.group(2)) * 100:g}%")
    if m:
        return t("prec_abs", lang, x=m.group(2))
    return precision


_FIGURE = re.compile(r"(?<![\w§^_{.\\])(?<![A-Za-z]-)(\d+\.\d+|\d+(?:\.\d+)?(?=\s?%|×|\s?倍|\stimes\b))")
_SENTENCE_END = re.compile(r"[。；;！？!?]|\.\s")


def where_quoted(text: str, quoted: float, lang: str) -> str | None:
    """The words of ``text`` (plain) around the figure ``quoted``, the figure in bold; None if it is not there.
    Within the figure's sentence, some 16 characters (zh) or 40 (en) either side, more until a Chinese
    character is included (a run of figures alone does not say which is which)."""
    from ..quoted import pinned

    for m in _FIGURE.finditer(text):
        if not pinned(float(m.group(1)), {quoted}):
            continue
        lo = max([e.end() for e in _SENTENCE_END.finditer(text, 0, m.start())] or [0])
        hi = next((e.start() + 1 for e in _SENTENCE_END.finditer(text, m.end())), len(text))
        reach = 16 if lang == "zh" else 40
        a, b = max(lo, m.start() - reach), min(hi, m.end() + reach)
        while lang == "zh" and not re.search(r"[\u3400-\u9fff]", text[a:b]) and (a > lo or b < hi):
            a, b = max(lo, a - 8), min(hi, b + 8)
        lead = ("…" if a > 0 else "") + html.escape(text[a:m.start()].lstrip())
        return f"{lead}<b>{html.escape(m.group(0))}</b>{html.escape(text[m.end():b].rstrip())}" + ("…" if b < len(text) else "")
    return None


def quoted_table(claim: Claim, rows, lang: str) -> str:
    """The figures the claim's text quotes, each beside what the code measured: one row per figure, in the
    order the text gives them, labelled by the words around it (figures the text does not quote stay in the evidence)."""
    text = plain(claim.statement.get(lang) + (" " + claim.correction.get(lang) if claim.correction else ""))
    found = []
    for name, q, m, p in rows:
        where = where_quoted(text, q, lang)
        if where is not None and where not in [f[0] for f in found]:
            found.append((where, m, p))
    if not found:
        return ""
    head = (f"<tr><th>{t('quoted_says', lang)}</th><th>{t('quoted_measured', lang)}</th>"
            f"<th>{t('quoted_precision', lang)}</th></tr>")
    body = "".join(f'<tr><td>{w}</td><td class="mj-n">{ev.fmt(m)}</td><td class="mj-n">{html.escape(precision_text(p, lang))}</td></tr>'
                   for w, m, p in found)
    return (f'<div class="mj-quoted"><div class="mj-quoted-head">{t("quoted_head", lang)}</div>'
            f'<div class="mj-scroll" tabindex="0"><table><thead>{head}</thead><tbody>{body}</tbody></table></div></div>')


def verdict_badge(verdict: str, lang: str) -> str:
    """The verdict as a reader needs it: a symbol and a word (never colour alone)."""
    return badge("verdict", verdict, f"{VERDICT_MARK[verdict]} {pick(VERDICT, verdict, lang)}")


def claim_block(entry: Entry, claim: Claim, lang: str, data: SiteData) -> list[str]:
    """A claim as a candidate needs it: the verdict, how we know, what is true, the number; then the details."""
    outcome = data.outcome(claim)
    verdict = claim.verdict.value
    rec = data.record(claim)
    head = verdict_badge(verdict, lang)
    if outcome not in ("passed", "citation", "opinion"):  # only a check that did not pass needs its own badge
        head += " " + badge("outcome", outcome, pick(OUTCOME, outcome, lang))
    head += f' <span class="mj-headline">{html.escape(headline(claim, outcome, lang, rec))}</span>'
    colon = "：" if lang == "zh" else ": "
    statement = normalise(claim.statement.get(lang).strip())
    if verdict in ("refuted", "qualified"):
        statement = f'<b class="mj-lead">{t("the_claim", lang)}{colon}</b>' + statement
    out = [f'<div class="mj-claim mj-claim-{verdict} mj-state-{outcome}" id="claim-{claim.id}" markdown>',
           "", f'<p class="mj-claim-head">{head}</p>', "", statement, ""]
    if claim.correction is not None:
        label = {"refuted": "correction", "qualified": "conditions", "opinion": "whose"}.get(verdict, "correction")
        out += [f'<b class="mj-lead">{t(label, lang)}{colon}</b>' + normalise(claim.correction.get(lang).strip()), ""]
    if claim.cite is not None:
        c = claim.cite
        title = f"[{c.title}]({c.url})" if c.url else c.title
        out += [f'<p class="mj-cite" markdown>{t("cite_source", lang)} {title}, {c.locator}</p>', ""]
    figures = ev.quoted((rec or {}).get("evidence")) if rec is not None and outcome != "stale" else []
    table = quoted_table(claim, figures, lang) if figures else ""
    if table:
        out += [raw(table), ""]

    note = {"stale": "stale_note", "not-run": "not_run_note", "failed": "failed_note"}.get(outcome)
    if note and claim.needs_verifier:
        kind = "warning" if outcome != "failed" else "failure"
        out += [f'!!! {kind} ""', "", _indent(t(note, lang)), ""]

    details = details_body(entry, claim, lang, data)
    if details:
        opened = "???+" if verdict == "refuted" and outcome == "passed" else "???"
        out += [f'{opened} info "{t("details", lang)}"', "", _indent(details), ""]
    out += [f'<p class="mj-claim-id"><a href="#claim-{html.escape(claim.id)}" title="{t("claim_link", lang)}">'
            f'<code>{html.escape(claim.id)}</code></a></p>', "", "</div>", ""]
    return out


def details_body(entry: Entry, claim: Claim, lang: str, data: SiteData) -> str:
    me = entry_path(entry)
    rec = data.record(claim)
    parts: list[str] = []
    if rec is not None:
        evidence = dict(rec.get("evidence") or {})
        cx = evidence.pop("counterexample", None)
        if cx is not None:
            parts += [f"**{t('counterexample', lang)}**", "", raw(ev.render(cx)), ""]
        rest = {k: v for k, v in evidence.items() if k != "quoted"}
        if rest:
            parts += [f"**{t('evidence', lang)}**", "", raw(ev.render(rest)), ""]
        elif cx is None and not evidence:
            parts += [f"**{t('evidence', lang)}**", "", t("no_evidence", lang), ""]
        env = dict(data.report.environment)
        env.update(rec.get("environment") or {})
        rows = [(k, env.get(k)) for k in ENV_SHOWN if env.get(k) not in (None, "")]
        if rows:
            parts += [f"**{t('environment', lang)}**", "",
                      raw('<p class="mj-env">' + " · ".join(
                          f"{html.escape(pick(ENV_KEYS, k, lang))} <code>{html.escape(env_value(v, lang))}</code>" for k, v in rows)
                          + "</p>"), ""]
        tests = rec.get("tests") or []
        if tests:
            parts += [f"**{t('tests', lang)}**", ""]
            for tr in tests:
                dur = tr.get("duration")
                state = tr.get("outcome", "not-run")
                line = f"- `{tr.get('nodeid')}`: {pick(OUTCOME, state, lang) if state in OUTCOME else state}"
                if isinstance(dur, (int, float)):
                    line += f" ({dur:.2f} s)"
                parts.append(line)
                if tr.get("message") and state == "failed":
                    msg = html.escape(str(tr["message"])[:4000])
                    parts += ["", _indent(raw(f'<pre class="mj-data"><code>{msg}</code></pre>')), ""]
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
        parts += [f"**{t('verifier', lang)}**", "", raw(data.code.lazy(snip, root_up(me, lang), t("show_code", lang))), ""]
    if claim.needs_verifier and not shown:
        parts += [t("no_verifier_found", lang), ""]
    return "\n".join(parts).strip()


def benchmark_block(ref: str, lang: str, data: SiteData) -> list[str]:
    path = data.root / ref
    try:
        b = json.loads(path.read_text(encoding="utf-8"))
        title = b.get("title") or {}
        title = title.get(lang) or title.get("en") or ref if isinstance(title, dict) else str(title)
        cols, rows = list(b["columns"]), list(b["rows"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        data.problems.append(f"benchmark {ref}: cannot read ({type(exc).__name__}: {exc})")
        return [f'!!! failure "{ref}"', "", _indent(f"cannot read: {exc}"), ""]

    def cell(v) -> str:
        return html.escape(ev.fmt(v) if isinstance(v, float) else str(v))

    table = ("<div class=\"mj-scroll\"><table><thead><tr>" + "".join(f"<th>{cell(c)}</th>" for c in cols)
             + "</tr></thead><tbody>" + "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows)
             + "</tbody></table></div>")
    anchor = re.sub(r"[^a-z0-9]+", "-", Path(ref).stem.lower())  # the same in both languages
    out = [f"### {title} {{#benchmark-{anchor}}}", "", raw(table), ""]
    facts = [(t("machine", lang), b.get("machine")), (t("date", lang), b.get("date"))]
    out += [" · ".join(f"**{k}** {v}" for k, v in facts if v), ""]
    if b.get("command"):
        out += [f"**{t('command', lang)}** `{b['command']}`", ""]
    notes = b.get("notes")
    if isinstance(notes, dict) and (notes.get(lang) or notes.get("en")):
        out += [notes.get(lang) or notes.get("en"), ""]
    out += [f'<p class="mj-note">{t("source_at", lang)}: <code>{ref}</code></p>', ""]
    return out
