"""The pages that list entries: the home page's question table, the indexes, misconceptions, the report.

Everything is generated from the KnowledgeBase (names from ``qa/names.yaml``) and the report,
in the order of ``SiteData.ordered`` (by topic as ``names.yaml`` lists them, then difficulty).
Filtering is done client-side by ``assets/mj.js`` on the ``data-*`` attributes written here.
"""

from __future__ import annotations

import html
import json
from collections import defaultdict

from ..schema import Entry
from .i18n import DIFFICULTY, ENV_KEYS, METHOD, OUTCOME, VERDICT, VERDICT_MARK, pick, t
from .pages import (INDEX_COMPANY, INDEX_DIFFICULTY, INDEX_TOPIC, MISCONCEPTIONS, REPORT, SiteData, badge,
                    entry_page, entry_path, env_value, inline, page_url, plain, question_item, question_list, raw, rel,
                    headline, stars, up, verdict_badge)

_e = html.escape


def _slug(text: str) -> str:
    out = "".join(c.lower() if c.isalnum() and c.isascii() else "-" for c in text)
    return "-".join(filter(None, out.split("-"))) or "x"


def _verdict_counts(entry: Entry) -> dict[str, int]:
    counts: dict[str, int] = {}
    for c in entry.claims:
        counts[c.verdict.value] = counts.get(c.verdict.value, 0) + 1
    return counts


def _counts_html(counts: dict[str, int], lang: str) -> str:
    return " ".join(f'<span class="mj-count mj-verdict-{v}" title="{_e(pick(VERDICT, v, lang))}">'
                    f'{VERDICT_MARK[v]}\u2009{counts[v]}</span>' for v in VERDICT if counts.get(v))


# --------------------------------------------------------------------------- the home page's table


def questions_table(lang: str, data: SiteData) -> str:
    """Every question in one table, with filters (topic, company, team, round, difficulty, verdict)."""
    names = data.kb.names
    rows, companies, teams, rounds, topics = [], {}, {}, set(), {}
    no_company = no_team = False
    for e in data.ordered:
        asked = [[a.company or "", a.team or "", a.round or ""] for a in e.asked_at] or [["", "", ""]]
        for c, tm, r in asked:
            if c:
                companies[c] = names.company(c, lang)
            else:
                no_company = True
            if tm:
                teams[tm] = names.team(tm, lang)
            else:
                no_team = True
            if r:
                rounds.add(r)
        topics.setdefault(e.topic.split("/")[0], {})[e.topic] = names.topic(e.topic, lang)
        counts = _verdict_counts(e)
        comp = "<br>".join(dict.fromkeys(_e(names.company(c, lang)) for c, _, _ in asked if c)) or "–"
        team = "<br>".join(dict.fromkeys(_e(names.team(tm, lang)) for _, tm, _ in asked if tm)) or "–"
        rnd = ", ".join(dict.fromkeys(str(r) for _, _, r in asked if r)) or "–"
        attrs = {"topic": e.topic, "asked": json.dumps(asked, ensure_ascii=False), "difficulty": str(e.difficulty),
                 "verdicts": " ".join(v for v in VERDICT if counts.get(v))}
        rows.append("<tr " + " ".join(f'data-{k}="{_e(v)}"' for k, v in attrs.items()) + ">"
                    f"<td>{data.number[e.id]}</td>"
                    f'<td><a href="{page_url(entry_path(e))}">{inline(e.question.get(lang))}</a></td>'
                    f"<td>{_e(names.topic(e.topic, lang))}</td>"
                    f'<td title="{_e(pick(DIFFICULTY, e.difficulty, lang))}">{stars(e.difficulty)}</td>'
                    f"<td>{comp}</td><td>{team}</td><td>{rnd}</td><td>{_counts_html(counts, lang)}</td></tr>")

    def select(key: str, label: str, options: list[tuple[str, str]], groups: dict | None = None) -> str:
        opts = [f'<option value="">{t("filter_all", lang)}</option>']
        if groups:
            for area, subs in groups.items():
                opts.append(f'<option value="{_e(area)}">{_e(names.topic(area, lang))}</option>')
                opts += [f'<option value="{_e(s)}">\u2003{_e(n)}</option>' for s, n in subs.items()]
        else:
            opts += [f'<option value="{_e(v)}">{_e(n)}</option>' for v, n in options]
        return (f'<label class="mj-filter"><span>{_e(label)}</span>'
                f'<select data-filter="{key}">{"".join(opts)}</select></label>')

    comp_opts = sorted(companies.items(), key=lambda kv: list(names.companies).index(kv[0]) if kv[0] in names.companies else 999)
    if no_company:
        comp_opts.append(("-", t("no_company", lang)))
    team_opts = sorted(teams.items(), key=lambda kv: list(names.teams).index(kv[0]) if kv[0] in names.teams else 999)
    if no_team:
        team_opts.append(("-", t("no_team", lang)))
    tools = "".join([
        select("topic", t("col_topic", lang), [], topics),
        select("company", t("col_company", lang), comp_opts),
        select("team", t("col_team", lang), team_opts),
        select("round", t("col_round", lang), [(str(r), t("round", lang, n=r)) for r in sorted(rounds)]),
        select("difficulty", t("col_difficulty", lang), [(str(d), f"{stars(d)} {pick(DIFFICULTY, d, lang)}") for d in (1, 2, 3)]),
        select("verdict", t("col_verdicts", lang), [(v, pick(VERDICT, v, lang)) for v in ("refuted", "qualified", "holds", "opinion")]),
        f'<button type="button" class="md-button mj-filter-reset">{t("filter_reset", lang)}</button>',
    ])
    head = "".join(f"<th>{t(k, lang)}</th>" for k in ("col_no", "col_question", "col_topic", "col_difficulty",
                                                         "col_company", "col_team", "col_round", "col_verdicts"))
    legend = " ".join(f'<span class="mj-count mj-verdict-{v}">{VERDICT_MARK[v]}\u2009n</span> {_e(pick(VERDICT, v, lang))}'
                      for v in VERDICT)
    total = len(rows)
    shown = _e(t("filter_shown", lang, n="{n}", total="{total}"))
    return (f'<div class="mj-qtable" data-shown="{shown}" data-total="{total}">'
            f'<form class="mj-filters" hidden onsubmit="return false">{tools}</form>'
            f'<p class="mj-legend">{t("col_verdicts", lang)}{"：" if lang == "zh" else ": "}{legend}</p>'
            f'<p class="mj-filter-count" aria-live="polite"></p>'
            f'<div class="mj-scroll"><table class="mj-questions"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>'
            f'<p class="mj-filter-none" hidden>{t("filter_none", lang)}</p></div>')


# --------------------------------------------------------------------------- indexes


def _item(me: str, e: Entry, lang: str, data: SiteData, extra: str = "") -> str:
    tail = f" · {extra}" if extra else ""
    return question_item(data.number[e.id], plain(e.question.get(lang)), rel(me, entry_path(e)), f" {stars(e.difficulty)}{tail}")


def topic_index(lang: str, data: SiteData) -> str:
    me, names = INDEX_TOPIC, data.kb.names
    out = [f"# {t('by_topic', lang)}", "", t("topic_intro", lang), ""]
    by_area: dict[str, dict[str, list[Entry]]] = {}
    for e in data.ordered:
        by_area.setdefault(e.topic.split("/")[0], {}).setdefault(e.topic, []).append(e)
    for area, topics in by_area.items():
        n = sum(len(v) for v in topics.values())
        out += [f"## {names.topic(area, lang)} ({n}) {{#{_slug(area)}}}", ""]
        for topic, entries in topics.items():
            out += [f"### {names.topic(topic, lang)} ({len(entries)}) {{#{_slug(topic)}}}", ""]
            out += question_list([_item(me, e, lang, data) for e in entries])
    if not data.ordered:
        out += [t("none_yet", lang), ""]
    return "\n".join(out)


def company_index(lang: str, data: SiteData) -> str:
    me, names = INDEX_COMPANY, data.kb.names
    out = [f"# {t('by_company', lang)}", "", t("company_intro", lang), ""]
    by_company: dict[str, list[tuple[Entry, list]]] = defaultdict(list)
    by_team: dict[str, list[tuple[Entry, list]]] = defaultdict(list)
    for e in data.ordered:
        comp: dict[str, list] = defaultdict(list)
        team: dict[str, list] = defaultdict(list)
        for a in e.asked_at:
            comp[a.company or ""].append(a)
            if a.team:
                team[a.team].append(a)
        for c, asks in comp.items():
            by_company[c].append((e, asks))
        for tm, asks in team.items():
            by_team[tm].append((e, asks))

    def where(asks, show_company: bool) -> str:
        bits = []
        for a in asks:
            part = [names.company(a.company, lang)] if show_company and a.company else []
            if not show_company and a.team:
                part.append(names.team(a.team, lang))
            if a.round:
                part.append(t("round", lang, n=a.round))
            if part:
                bits.append(" ".join(part))
        return "; ".join(dict.fromkeys(bits))

    order = list(names.companies)
    companies = sorted((c for c in by_company if c), key=lambda c: (order.index(c) if c in order else len(order), c))
    out += [f"## {t('companies', lang)} {{#companies}}", ""]
    for c in companies:
        items = by_company[c]
        link = f'<a class="mj-filter-link" href="{up(me)}#company={_e(c)}">{t("all_questions", lang)} ›</a>'
        out += [f"### {names.company(c, lang)} ({len(items)}) {{#company-{_slug(c)}}}", "", link, ""]
        out += question_list([_item(me, e, lang, data, where(asks, False)) for e, asks in items])
    if by_company.get(""):
        items = by_company[""]
        out += [f"### {t('no_company', lang)} ({len(items)}) {{#company-none}}", ""]
        out += question_list([_item(me, e, lang, data, where(asks, False)) for e, asks in items])
    out += [f"## {t('teams', lang)} {{#teams}}", ""]
    torder = list(names.teams)
    for tm in sorted(by_team, key=lambda x: (torder.index(x) if x in torder else len(torder), x)):
        items = by_team[tm]
        out += [f"### {names.team(tm, lang)} ({len(items)}) {{#team-{_slug(tm)}}}", ""]
        out += question_list([_item(me, e, lang, data, where(asks, True)) for e, asks in items])
    if not data.ordered:
        out += [t("none_yet", lang), ""]
    return "\n".join(out)


def difficulty_index(lang: str, data: SiteData) -> str:
    me, names = INDEX_DIFFICULTY, data.kb.names
    out = [f"# {t('by_difficulty', lang)}", "", t("difficulty_intro", lang), ""]
    for d in (1, 2, 3):
        entries = [e for e in data.ordered if e.difficulty == d]
        if entries:
            out += [f"## {stars(d)} {pick(DIFFICULTY, d, lang)} ({len(entries)}) {{#difficulty-{d}}}", ""]
            out += question_list([_item(me, e, lang, data, names.topic(e.topic, lang)) for e in entries])
    return "\n".join(out)


# --------------------------------------------------------------------------- misconceptions


def misconceptions_page(lang: str, data: SiteData) -> str:
    me, names = MISCONCEPTIONS, data.kb.names
    out = [f"# {t('misconceptions', lang)}", "", t("misc_intro", lang), ""]
    items = [(e, c) for e in data.ordered for c in e.claims if c.verdict.value in ("refuted", "qualified")]
    if not items:
        return "\n".join(out + [t("none_yet", lang), ""])
    up_ = up(me)
    rows = []
    for e, c in items:
        href = f"{up_}{page_url(entry_path(e))}#claim-{c.id}"
        rows.append(f'<tr><td><a href="#m-{_e(c.id)}">{inline(c.statement.get(lang))}</a></td>'
                    f"<td>{verdict_badge(c.verdict.value, lang)}</td>"
                    f'<td><a href="{_e(href)}">{data.number[e.id]}</a></td></tr>')
    head = f"<tr><th>{t('lookup_claim', lang)}</th><th>{t('lookup_verdict', lang)}</th><th>{t('lookup_where', lang)}</th></tr>"
    out += [f"## {t('lookup', lang)} {{#lookup}}", "",
            raw(f'<div class="mj-scroll"><table class="mj-lookup"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>'), ""]
    by_topic: dict[str, list] = {}
    for e, c in items:
        by_topic.setdefault(e.topic, []).append((e, c))
    for topic, group in by_topic.items():
        out += [f"## {names.topic(topic, lang)} ({len(group)}) {{#{_slug(topic)}}}", ""]
        for e, c in group:
            verdict = c.verdict.value
            outcome = data.outcome(c)
            link = f"{rel(me, entry_path(e))}#claim-{c.id}"
            label = "correction" if verdict == "refuted" else "conditions"
            lead = f"**{t(label, lang)}：**" if lang == "zh" else f"**{t(label, lang)}:** "
            out += [f'<div class="mj-misc mj-claim-{verdict}" id="m-{c.id}" markdown>', "",
                    f'<p class="mj-claim-head">{verdict_badge(verdict, lang)} '
                    f'<span class="mj-headline">{_e(headline(c, outcome, lang, data.record(c)))}</span></p>', "",
                    c.statement.get(lang).strip(), "",
                    lead + c.correction.get(lang).strip(), "",
                    f"→ {data.number[e.id]}. [{plain(e.question.get(lang))}]({link})", "", "</div>", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------- the report


def report_page(lang: str, data: SiteData) -> str:
    me = REPORT
    out = [f"# {t('report', lang)}", "", t("report_intro", lang), ""]
    if data.report_problem:
        out += ['!!! failure ""', "", "    " + t("bad_report", lang) + f"`{data.report_problem}`", ""]
    elif data.report is None:
        out += ['!!! warning ""', "", "    " + t("no_report", lang), ""]
    else:
        rep = data.report
        out += [f"**{t('report_created', lang)}** {rep.data.get('created', '?')}", ""]
    up_ = up(me)
    totals: dict[str, int] = {}
    sections = []
    for e in data.ordered:
        if not e.claims:
            continue
        per: dict[str, int] = {}
        rows = []
        for c in e.claims:
            outcome = data.outcome(c)
            per[outcome] = per.get(outcome, 0) + 1
            rec = data.record(c)
            dur = rec.get("duration") if rec else None
            dur_s = f"{dur:.2f} s" if isinstance(dur, (int, float)) and outcome not in ("stale", "citation", "opinion") else ""
            href = f"{up_}{page_url(entry_path(e))}#claim-{c.id}"
            rows.append(f'<tr data-verdict="{c.verdict.value}" data-method="{c.method.value}" data-outcome="{outcome}">'
                        f'<td><a href="{_e(href)}">{inline(c.statement.get(lang))}</a><br><code>{_e(c.id)}</code></td>'
                        f"<td>{verdict_badge(c.verdict.value, lang)}</td>"
                        f"<td>{pick(METHOD, c.method.value, lang)}</td>"
                        f"<td>{badge('outcome', outcome, pick(OUTCOME, outcome, lang))}</td><td class=\"mj-n\">{dur_s}</td></tr>")
        for k, v in per.items():
            totals[k] = totals.get(k, 0) + v
        tally = " ".join(f"{badge('outcome', k, pick(OUTCOME, k, lang))} {per[k]}" for k in OUTCOME if per.get(k))
        head = (f"<tr><th>{t('claim', lang)}</th><th>{t('verdict', lang)}</th><th>{t('method', lang)}</th>"
                f"<th>{t('outcome', lang)}</th><th>{t('duration', lang)}</th></tr>")
        sections.append(
            f'<section class="mj-rep" id="r-{_e(e.id)}"><div class="mj-rep-head">'
            f'<a href="{up_}{page_url(entry_path(e))}">{data.number[e.id]}. {inline(e.question.get(lang))}</a>'
            f'<span class="mj-rep-tally">{tally}</span></div>'
            f'<table class="mj-rep-table">{_REPORT_COLS}<thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></section>')
    out += [f"## {t('summary', lang)} {{#summary}}", ""]
    out += [" · ".join(f"{badge('outcome', k, pick(OUTCOME, k, lang))} {totals[k]}" for k in OUTCOME if totals.get(k))
            or t("none_yet", lang), ""]
    if sections:
        def sel(key: str, table: dict) -> str:
            opts = f'<option value="">{t("filter_all", lang)}</option>' + "".join(
                f'<option value="{k}">{_e(pick(table, k, lang))}</option>' for k in table)
            return f'<label class="mj-filter"><span>{t(key, lang)}</span><select data-filter="{key}">{opts}</select></label>'

        tools = sel("verdict", VERDICT) + sel("method", METHOD) + sel("outcome", OUTCOME)
        out += [f"## {t('by_entry', lang)} {{#by-entry}}", "",
                raw(f'<div class="mj-report" data-shown="{_e(t("filter_shown", lang, n="{n}", total="{total}"))}">'
                    f'<form class="mj-filters" hidden onsubmit="return false">{tools}</form>'
                    + "".join(sections) + "</div>"), ""]
    if data.report is not None and not data.report_problem:  # where it ran: after what it found
        env = data.report.environment
        keys = [k for k in ENV_KEYS if env.get(k) not in (None, "")]
        if keys:
            rows = "".join(f"<tr><td>{_e(pick(ENV_KEYS, k, lang))}</td><td><code>{_e(env_value(env[k], lang))}</code></td></tr>"
                           for k in keys)
            out += [f"## {t('environment', lang)} {{#environment}}", "",
                    raw(f'<div class="mj-report-env mj-scroll"><table><tbody>{rows}</tbody></table></div>'), ""]
    return "\n".join(out)


# every entry's table has the same columns: claim, verdict, method, outcome, duration
_REPORT_COLS = ('<colgroup><col class="mj-c-claim"><col class="mj-c-verdict"><col class="mj-c-method">'
                '<col class="mj-c-outcome"><col class="mj-c-dur"></colgroup>')


# --------------------------------------------------------------------------- home summary, all pages, nav


def kb_summary(lang: str, data: SiteData) -> str:
    claims = [c for _, c in data.kb.claims()]
    verified = sum(1 for c in claims if data.outcome(c) == "passed")
    refuted = [c for c in claims if c.verdict.value == "refuted"]
    runnable = sum(1 for c in refuted if data.runnable_counterexample(c))
    cited = sum(1 for c in refuted if c.method.value == "citation")
    return t("kb_summary", lang, entries=len(data.kb), claims=len(claims), verified=verified,
             refuted=len(refuted), runnable=runnable, cited=cited)


def generated_pages(lang: str, data: SiteData) -> dict[str, str]:
    """src path -> markdown for every generated page of one language."""
    pages = {entry_path(e): entry_page(e, lang, data) for e in data.ordered}
    pages[INDEX_TOPIC] = topic_index(lang, data)
    pages[INDEX_COMPANY] = company_index(lang, data)
    pages[INDEX_DIFFICULTY] = difficulty_index(lang, data)
    pages[MISCONCEPTIONS] = misconceptions_page(lang, data)
    pages[REPORT] = report_page(lang, data)
    return pages


def nav(lang: str, data: SiteData, guides: list[tuple[str, str]]) -> list:
    """Home, questions by area and topic (numbered, in table order), indexes, guides."""
    names = data.kb.names
    areas: dict[str, dict[str, list]] = {}
    for e in data.ordered:
        title = f"{data.number[e.id]}. {plain(e.question.get(lang))}"
        areas.setdefault(e.topic.split("/")[0], {}).setdefault(e.topic, []).append({title: entry_path(e)})
    questions = [{names.topic(area, lang): [{names.topic(tp, lang): items} for tp, items in topics.items()]}
                 for area, topics in areas.items()]
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
