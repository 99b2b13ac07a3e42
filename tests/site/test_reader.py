"""The site as a careful reader sees it (issue 23): lists, formulas, anchors, the search index, source pages,
English on the Chinese site, figures, the claim card, the report, the language switch.

Static checks read the built pages (tests/site/sitekit.py::parse); the rest drive Chromium over the whole
knowledge base built once per worker (tests/site/conftest.py::real_site).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.site.sitekit import parse
from tests.site.test_browser import CLIP_ENTRY, pages_of

HAN = re.compile(r"[\u3400-\u9fff]")
WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def page(site: Path, path: str):
    return parse((site / path / "index.html").read_text(encoding="utf-8"))


def article(root):
    return next(n for n in root.iter() if n.tag == "article")


def entry_paths(site: Path, lang: str) -> list[str]:
    prefix = "" if lang == "zh" else "en/"
    return [p for p in pages_of(site) if p.startswith(prefix + "q/")]


def section(art, h2_id: str) -> list:
    """The nodes of ``art`` between <h2 id=h2_id> and the next h2 (top level of the article)."""
    out, inside = [], False
    for c in art.children:
        if getattr(c, "tag", None) == "h2":
            inside = c.attrs.get("id") == h2_id
            continue
        if inside:
            out.append(c)
    return out


# --------------------------------------------------------------------------- 1. lists of questions


def test_question_lists_show_their_numbers_and_never_nest(real_site):
    """Follow-ups and the topic/company/difficulty indexes: one flat list, each row starting with its number."""
    site = real_site[0]
    bad, rows = [], 0
    for lang, prefix in (("zh", ""), ("en", "en/")):
        lists = []
        for path in entry_paths(site, lang):
            lists += [n for n in section(article(page(site, path)), "follow-ups") if not isinstance(n, str)]
        for index in ("indexes/topic/", "indexes/company/", "indexes/difficulty/"):
            lists += [n for n in article(page(site, prefix + index)).children if getattr(n, "tag", None) in ("ul", "ol", "div")]
        for block in lists:
            if block.find_all(lambda n: n.tag == "ol"):
                bad.append(f"{lang}: nested <ol> in {block.text()[:60]!r}")
            for li in block.find_all(lambda n: n.tag == "li"):
                rows += 1
                if not re.match(r"\s*\d+\.\s", li.text()):
                    bad.append(f"{lang}: row without its number: {li.text()[:60]!r}")
    assert rows > 200
    assert not bad, "\n".join(bad[:10])


# --------------------------------------------------------------------------- 5. the search index


def _tokens(text: str) -> list[str]:
    return [m.group(0).lower() for m in re.finditer(r"[A-Za-z][A-Za-z0-9]*|[\u3400-\u9fff]", text)]


def _subsequence(small: list[str], big: list[str]) -> int:
    """How many of ``small`` match in order inside ``big`` (greedy)."""
    it, n = iter(big), 0
    for tok in small:
        for other in it:
            if other == tok:
                n += 1
                break
        else:
            return n
    return n


_NOT_PROSE = {"math", "code", "pre", "script", "figure", "details", "svg", "annotation"}


def _skip(n) -> bool:
    return n.tag in _NOT_PROSE or bool(n.classes & {"headerlink", "mj-lead", "mj-claim-head", "mj-cite", "mj-quoted",
                                                  "mj-claim-id", "mj-src", "admonition-title", "mj-headline"})


def test_the_search_index_holds_every_word_of_the_prose(real_site):
    """For every entry, both languages: the words of its short answer, full answer, key points and each claim, as
    rendered, appear in that order in the index's text of the same part (maths and code aside)."""
    import gzip
    import json

    site = real_site[0]
    misses = []
    for lang, prefix in (("zh", ""), ("en", "en/")):
        docs = json.loads(gzip.decompress((site / prefix / "search/index.json.gz").read_bytes()))["docs"]
        by_url = {d["u"]: d for d in docs}
        for path in entry_paths(site, lang):
            doc = by_url[path[len(prefix):]]
            art = article(page(site, path))
            secs = doc["s"]
            full_end = next(i for i, s in enumerate(secs) if s[0] == "key-points")
            parts = {"short": (next(n for n in art.iter() if "abstract" in n.classes), secs[0][2]),
                     "full": (section(art, "full"), " ".join(s[1] + " " + s[2] for s in secs[1:full_end])),
                     "key points": (section(art, "key-points"), secs[full_end][2])}
            for card in art.find_all(lambda n: "mj-claim" in n.classes and n.attrs.get("id", "").startswith("claim-")):
                text = next((s[2] for s in secs if s[0] == card.attrs["id"]), "")
                parts[card.attrs["id"]] = ([c for c in card.children if getattr(c, "tag", None) == "p"], text)
            for name, (nodes, indexed) in parts.items():
                nodes = nodes if isinstance(nodes, list) else [nodes]
                big = _tokens(indexed)
                for node in nodes:
                    if isinstance(node, str) or _skip(node) or "mj-figure" in node.classes:
                        continue
                    for piece in node.texts(_skip):
                        small = _tokens(piece)
                        got = _subsequence(small, big)
                        if got < len(small):
                            misses.append(f"{path} {name}: {' '.join(small[got:got + 6])!r} (from {piece.strip()[:50]!r})")
                            break
    assert not misses, f"{len(misses)} passages missing from the index:\n" + "\n".join(misses[:15])


# --------------------------------------------------------------------------- 7. English on the Chinese site


def test_no_english_prose_on_the_chinese_site(real_site):
    """Provenance notes, the quoted-figures table, precisions and environment values speak the page's language;
    no page in either language says "N decimals" or prints a Python boolean."""
    site, _, kb = real_site
    notes = {a.note.en for e in kb.entries.values() for a in e.asked_at if a.note}
    assert notes
    bad = []
    for path in pages_of(site):
        text = (site / path / "index.html").read_text(encoding="utf-8")
        root = parse(text)
        art = article(root)
        if re.search(r"\b\d+ decimals\b", art.text()):
            bad.append(f"{path}: 'N decimals'")
        for env in art.find_all(lambda n: "mj-env" in n.classes or n.tag == "td"):
            if re.fullmatch(r"\s*(True|False)\s*", env.text()) or re.search(r">\s*(True|False)\s*<", str(env.text())):
                bad.append(f"{path}: a Python boolean {env.text()!r}")
        for code in art.find_all(lambda n: n.tag == "code" and n.text().strip() in ("True", "False")):
            if code.parent is not None and ("mj-env" in code.parent.classes or code.parent.tag == "td"):
                bad.append(f"{path}: a Python boolean in the environment")
        if path.startswith("en/"):
            continue
        meta = " ".join(n.text() for n in art.find_all(lambda n: "mj-meta" in n.classes))
        bad += [f"{path}: English note {note[:40]!r}" for note in notes if note in meta]
        for table in art.find_all(lambda n: "mj-quoted" in n.classes):
            for tr in table.find_all(lambda n: n.tag == "tr"):
                cells = [c for c in tr.children if getattr(c, "tag", None) in ("td", "th")]
                if cells and not HAN.search(cells[0].text()):
                    bad.append(f"{path}: quoted-figures row labelled in English: {cells[0].text()[:50]!r}")
                if len(cells) > 2 and cells[-1].tag == "td" and not HAN.search(cells[-1].text()):
                    bad.append(f"{path}: precision in English: {cells[-1].text()!r}")
    assert not bad, f"{len(bad)} places:\n" + "\n".join(sorted(set(bad))[:20])


# --------------------------------------------------------------------------- 8. figures on a phone

PHONE_TEXT_PX = 9  # the smallest figure text a reader can read on a phone (the site's body text is 16 px)

# every figure of the page, inserted into one page as the entry page writes it, then each text's size as the browser
# shows it: the glyphs' scale in the SVG (matplotlib draws a glyph at `unit` to the em) times the picture's scale
_FIGURE_TEXT = """async ([figures, unit]) => {
  const art = document.querySelector('article'), out = [];
  for (const [name, html] of figures) {
    art.insertAdjacentHTML('beforeend', html);
    const img = art.lastElementChild.querySelector('img');
    img.src = img.getAttribute('data-src');
    await img.decode();
    const svg = new DOMParser().parseFromString(await (await fetch(img.src)).text(), 'image/svg+xml').documentElement;
    const scale = img.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    const sizes = [...svg.querySelectorAll('g[id^="text_"] g[transform]')].filter(g => g.querySelector('use')).map(g => {
      let m = new DOMMatrix();
      for (let e = g; e !== svg; e = e.parentNode) {
        const t = e.transform && e.transform.baseVal.consolidate();
        if (t) m = DOMMatrix.fromMatrix(t.matrix).multiply(m);
      }
      return Math.hypot(m.a, m.b) * unit * scale;
    });
    out.push([name, Math.round(img.getBoundingClientRect().width), sizes.length, Math.min(...sizes)]);
    art.lastElementChild.remove();
  }
  return out; }"""


def test_figure_text_is_legible_on_a_phone(browser, site_url, real_site):
    """Every figure, both languages, as its entry page shows it on a 390 px phone: every text in it (ticks, legend,
    labels, the numbers in a timeline) is at least PHONE_TEXT_PX high, as the browser scales the SVG."""
    from matplotlib.textpath import TextToPath

    site = real_site[0]
    ctx = browser.new_context(viewport={"width": 390, "height": 844})
    p = ctx.new_page()
    bad, seen = [], 0
    for lang, prefix in (("zh", ""), ("en", "en/")):
        figures = {}
        for path in entry_paths(site, lang):
            text = (site / path / "index.html").read_text(encoding="utf-8")
            for html in re.findall(r'<figure class="mj-figure".*?</figure>', text, re.S):
                src = re.search(r'data-src="([^"]+)"', html).group(1)
                name = src.rsplit("/", 1)[1]
                figures[name] = html.replace(src, site_url + prefix + "assets/figures/" + name)
        p.goto(site_url + prefix + CLIP_ENTRY)
        for name, width, texts, smallest in p.evaluate(_FIGURE_TEXT, [sorted(figures.items()), TextToPath.FONT_SCALE]):
            seen += 1
            assert texts > 5, name
            if smallest < PHONE_TEXT_PX:
                bad.append(f"{name}: shown {width} px wide, smallest text {smallest:.1f} px")
    ctx.close()
    assert seen >= 50
    assert not bad, f"{len(bad)} of {seen} figures:\n" + "\n".join(bad)


# --------------------------------------------------------------------------- 10. the claim card


def test_the_claim_card_says_the_verdict_once_and_in_words(real_site):
    """One verdict badge with a symbol; no green "verified" badge beside a red verdict; the headline says how we
    know, not the verdict again; the evidence has no raw keys (snake_case) or Python expressions (``**``)."""
    site = real_site[0]
    bad, cards = [], 0
    for lang in ("zh", "en"):
        for path in entry_paths(site, lang):
            for card in article(page(site, path)).find_all(lambda n: "mj-claim" in n.classes and "id" in n.attrs):
                cards += 1
                head = next(n for n in card.iter() if "mj-claim-head" in n.classes)
                badges = head.find_all(lambda n: "mj-badge" in n.classes)
                verdicts = [b for b in badges if any(c.startswith("mj-verdict-") for c in b.classes)]
                if len(verdicts) != 1 or not re.match(r"[✓◐✗◇] ", verdicts[0].text()):
                    bad.append(f"{path} {card.attrs['id']}: verdict badges {[b.text() for b in verdicts]}")
                    continue
                word = verdicts[0].text()[2:]
                if card.find_all(lambda n: "mj-outcome-passed" in n.classes):
                    bad.append(f"{path} {card.attrs['id']}: a 'verified' badge beside the verdict")
                if head.text().count(word) != 1 or head.text().lower().count(word.split()[0].lower()) > 1:
                    bad.append(f"{path} {card.attrs['id']}: the head says {word!r} twice: {head.text()[:80]!r}")
                for key in card.find_all(lambda n: n.tag == "dt" or "mj-ev-key" in n.classes or n.tag == "th"):
                    if "_" in key.text():
                        bad.append(f"{path} {card.attrs['id']}: raw key {key.text()!r}")
                for val in card.find_all(lambda n: n.tag in ("dd", "td")):
                    if "**" in val.text():
                        bad.append(f"{path} {card.attrs['id']}: raw expression {val.text()[:40]!r}")
    assert cards > 500
    assert not bad, f"{len(bad)} cards:\n" + "\n".join(bad[:15])


# --------------------------------------------------------------------------- 12. the language switch


def test_both_languages_have_the_same_anchors(real_site):
    """Every heading id of a Chinese page exists on its English page and the other way round, so that the
    language switch keeps the reader's place."""
    site = real_site[0]
    bad = []
    for path in pages_of(site):
        if path.startswith("en/"):
            continue
        ids = []
        for p in (path, "en/" + path):
            art = article(page(site, p))
            ids.append({n.attrs["id"] for n in art.iter() if re.fullmatch(r"h[2-6]", n.tag) and "id" in n.attrs})
        if ids[0] != ids[1]:
            bad.append(f"{path}: zh only {sorted(ids[0] - ids[1])[:3]}, en only {sorted(ids[1] - ids[0])[:3]}")
    assert not bad, f"{len(bad)} pages:\n" + "\n".join(bad[:10])


def test_the_language_switch_keeps_the_filters(watched, site_url, real_site):
    kb = real_site[2]
    want = sum(1 for e in kb.entries.values() if e.difficulty == 2 and any(a.company == "Baidu" for a in e.asked_at))
    p = watched.page
    p.goto(site_url + "#company=Baidu&difficulty=2")
    shown = "table.mj-questions tbody tr:not([hidden])"
    assert p.locator(shown).count() == want
    p.locator(".md-header__option .md-select button").click()
    p.locator("a.mj-lang-en").click()
    p.wait_for_load_state("load")
    assert p.url.endswith("/en/#company=Baidu&difficulty=2"), p.url
    assert p.locator(shown).count() == want
    assert watched.errors == []


# --------------------------------------------------------------------------- 13. the short answer


def test_the_short_answer_is_set_in_body_type(watched, site_url):
    p = watched.page
    p.goto(site_url + "en/" + CLIP_ENTRY)
    short = p.evaluate("parseFloat(getComputedStyle(document.querySelector('article .admonition.abstract p')).fontSize)")
    body = p.evaluate("parseFloat(getComputedStyle(document.querySelector('article > p:not([class])')).fontSize)")
    assert short >= body >= 15, (short, body)


# --------------------------------------------------------------------------- 6. source pages


def test_source_pages_read_like_code(browser, site_url, real_site):
    """Single-spaced, a heading, a line range scrolled into view, and the theme the reader chose on the site."""
    ctx = browser.new_context(viewport={"width": 1366, "height": 900})
    p = ctx.new_page()
    src = "src/impls/rl/ppo.py.html"
    p.goto(site_url + src + "#L60-L90")
    assert p.locator("h1").count() == 1
    tops = p.evaluate("[1, 2, 3].map(i => document.getElementById('L' + i).getBoundingClientRect())")
    line = tops[1]["top"] - tops[0]["top"]
    assert abs(line - tops[0]["height"]) < 1 and line < 30, tops  # no blank line between two lines of code
    top = p.evaluate("document.getElementById('L60').getBoundingClientRect().top")
    assert 0 <= top < 200, top
    assert p.locator(".l.hit").count() == 31
    # the reader switches the site to dark, then opens a source page
    p.goto(site_url + CLIP_ENTRY)
    p.locator("label[for='__palette_1']").first.click()
    assert p.evaluate("document.body.getAttribute('data-md-color-scheme')") == "slate"
    p.goto(site_url + src)
    dark = p.evaluate("getComputedStyle(document.body).backgroundColor")
    p.goto(site_url + "en/" + CLIP_ENTRY)  # the English half of the site shares the choice
    assert p.evaluate("document.body.getAttribute('data-md-color-scheme')") == "slate"
    ctx.close()
    rgb = [int(x) for x in re.findall(r"\d+", dark)[:3]]
    assert sum(rgb) < 200, dark


# --------------------------------------------------------------------------- 11. the report


def test_the_report_reads_summary_first_and_fits_a_phone(browser, site_url):
    """The summary before the environment (the table that names the commit); one column layout for every entry's
    table; no duration wrapped onto a second line; on a phone every claim's verdict, method and outcome shown."""
    ctx = browser.new_context(viewport={"width": 1366, "height": 900})
    p = ctx.new_page()
    bad = []
    for prefix in ("", "en/"):
        p.goto(site_url + prefix + "report/")
        order = p.evaluate("""() => { const a = document.querySelector('article'), s = a.querySelector('#summary');
            const env = [...a.querySelectorAll('table code')].find(c => /^[0-9a-f]{40}$/.test(c.textContent.trim()))?.closest('table');
            return !!s && !!env && !!(s.compareDocumentPosition(env) & Node.DOCUMENT_POSITION_FOLLOWING); }""")
        if not order:
            bad.append(f"{prefix}report: the environment comes before the summary")
        lefts = p.evaluate("""() => [...document.querySelectorAll('table.mj-rep-table')].slice(0, 40).map(t =>
            [...t.querySelectorAll('tr:first-child > *')].map(c => Math.round(c.getBoundingClientRect().left)).join(','))""")
        if len(set(lefts)) != 1:
            bad.append(f"{prefix}report: {len(set(lefts))} column layouts in the first {len(lefts)} tables")
        wrapped = p.evaluate("""() => [...document.querySelectorAll('table.mj-rep-table td:last-child')].filter(td => {
            const r = document.createRange(); r.selectNodeContents(td);
            return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1; }).map(td => td.textContent)""")
        if wrapped:
            bad.append(f"{prefix}report: {len(wrapped)} durations wrapped, e.g. {wrapped[:3]}")
    p.set_viewport_size({"width": 390, "height": 844})
    p.goto(site_url + "report/")
    hidden = p.evaluate("""() => [...document.querySelectorAll('table.mj-rep-table tbody tr')].slice(0, 60).flatMap(tr =>
        [...tr.children].slice(1, 4).filter(td => { const r = td.getBoundingClientRect();
          return r.width === 0 || r.right > window.innerWidth || r.left < 0; }).map(td => td.textContent))""")
    ctx.close()
    if hidden:
        bad.append(f"report on a phone: {len(hidden)} of the first 60 claims' verdict/method/outcome cells off the screen")
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------- 3. table-of-contents clicks

# entries that hold every kind of content loaded late: listings (implementations; verifier code in a refuted claim's
# card, open from the start), a tall figure (the pipeline timelines), a wide one (the ring all-reduce steps), and
# their sub-headings (on the build before issue 23, 3 of these 4 put a heading 260 to 1300 px below the top)
TOC_ENTRIES = ["q/parallel/pipeline/pipeline-bubble/", "q/rl/ppo/trpo-vs-ppo/", "q/inference/decoding/speculative-decoding/",
               "q/distributed/collectives/ring-allreduce-ddp/"]


def test_toc_clicks_land_at_their_target(browser, site_url):
    """The table-of-contents links of those entries (every section, and every sub-heading below content loaded late),
    clicked in order from a fresh page as a reader would: one second after the click, with what it scrolled near
    loaded, its heading is within 100 px of the top (below the header), unless the page has reached its end. The four
    pages are read side by side (a click on each, then one second for all)."""
    ctx = browser.new_context(viewport={"width": 1366, "height": 900})
    tabs = []
    for path in TOC_ENTRIES:
        p, pending = ctx.new_page(), set()
        p.on("request", lambda r, pending=pending: pending.add(r))
        p.on("requestfinished", lambda r, pending=pending: pending.discard(r))
        p.on("requestfailed", lambda r, pending=pending: pending.discard(r))
        p.goto(site_url + path)
        assert p.locator("figure.mj-figure, .mj-lazy").count() > 0, path
        # every section heading, and every sub-heading that content loaded late can push (one after the first of it)
        hrefs = p.evaluate("""() => { const late = document.querySelector('article .mj-lazy, article figure.mj-figure');
            return [...document.querySelectorAll('.md-sidebar--secondary nav.md-nav--secondary a.md-nav__link')]
              .map(a => a.getAttribute('href')).filter(h => { const t = document.getElementById(decodeURIComponent(h.slice(1)));
                return t.tagName === 'H2' || late.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING; }); }""")
        tabs.append((path, p, pending, hrefs))
    clicks, bad = 0, []
    for i in range(max(len(t[3]) for t in tabs)):
        now = [(path, p, pending, hrefs[i]) for path, p, pending, hrefs in tabs if i < len(hrefs)]
        for _, p, _, href in now:
            p.evaluate("h => [...document.querySelectorAll('.md-sidebar--secondary a.md-nav__link')].find(a => a.getAttribute('href') === h).click()", href)
        now[0][1].wait_for_timeout(1000)
        for path, p, pending, href in now:
            for _ in range(100):  # what the scroll started loading has arrived (a listing, a figure)
                if not pending:
                    break
                p.wait_for_timeout(50)
            p.wait_for_function("() => [...document.images].every(i => !i.getAttribute('src') || i.complete)")
            top, header, bottom = p.evaluate("""id => [document.getElementById(decodeURIComponent(id)).getBoundingClientRect().top,
                document.querySelector('.md-header').getBoundingClientRect().bottom,
                scrollY + innerHeight >= document.documentElement.scrollHeight - 2]""", href[1:])
            clicks += 1
            if not (header - 2 <= top <= header + 100) and not (bottom and top > header):  # the page's end stops a late heading
                bad.append(f"{path} {href}: {top - header:.0f} px below the header")
    ctx.close()
    assert clicks >= 25
    assert not bad, f"{len(bad)} of {clicks} clicks:\n" + "\n".join(bad[:15])
