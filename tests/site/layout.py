"""The layout pass: every page of one language, as a desktop and a phone show it (issue 23's formulas, baselines,
overflow, numbers and claim ids). ``test_layout_zh.py`` and ``test_layout_en.py`` each run the checks below on
their language's pages, so the two halves of the longest browser pass run on different workers."""

from __future__ import annotations

import json

import pytest

from tests.site.test_browser import UNFOLD, pages_of

# what a test module running the pass imports with `*`: the checks, and the fixture factory
__all__ = ["layout_fixture", "test_display_formulas_fit_their_column", "test_inline_formulas_sit_on_the_baseline",
           "test_no_horizontal_overflow_on_a_phone", "test_no_inline_formula_is_cut_on_a_phone_without_a_cue",
           "test_numbers_and_claim_ids_on_a_phone"]

_PHONE_OVERFLOW = """() => {
  const vw = window.innerWidth, out = [];
  if (document.documentElement.scrollWidth > vw) out.push('page ' + document.documentElement.scrollWidth);
  const art = document.querySelector('article');
  for (const el of art ? art.querySelectorAll('*') : []) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= vw + 1) continue;
    let p = el.parentElement, scrolls = false;
    while (p && p !== art) {
      const cs = getComputedStyle(p);
      if ((cs.overflowX === 'auto' || cs.overflowX === 'scroll') && p.getBoundingClientRect().right <= vw + 1) { scrolls = true; break; }
      p = p.parentElement;
    }
    if (!scrolls) out.push(el.tagName.toLowerCase() + ' ' + (el.textContent || '').trim().slice(0, 40));
  }
  return out.slice(0, 3);
}"""

_FORMULAS_TOO_WIDE = """() => [...document.querySelectorAll('article .mj-display')].map(d => {
    const col = d.closest('article').getBoundingClientRect(), r = d.getBoundingClientRect();
    const tooWide = d.scrollWidth > d.clientWidth + 1 || r.right > col.right + 1;  /* cut off, or needs scrolling */
    return tooWide ? (d.querySelector('annotation') || d).textContent.slice(0, 60) : null;
  }).filter(Boolean)"""


# inline formulas whose baseline is not the text's: a zero-size box beside the formula sits on the line's
# baseline, an <mspace> inside it on the formula's (issue 23: a scrolling wrapper lifted 268 of 997); every probe
# is placed first and read after, so the page is laid out once
_BASELINES = """() => { const out = [], probes = [];
  const box0 = () => { const s = document.createElement('span');
    s.style.cssText = 'display:inline-block;width:0;height:0;vertical-align:baseline'; return s; };
  const shown = [...document.querySelectorAll('article math:not([display="block"])')]
    .filter(m => !m.closest('.mj-display, .mj-wide, td, th') && m.getClientRects().length);
  for (const m of shown) {
    let outer = m;
    while (outer.parentElement && outer.parentElement.tagName === 'SPAN' && outer.parentElement.children.length === 1) outer = outer.parentElement;
    const ms = document.createElementNS('http://www.w3.org/1998/Math/MathML', 'mspace');
    const row = m.querySelector('semantics > :first-child') || m;
    row.insertBefore(ms, row.firstChild);
    const before = box0(), after = box0();
    outer.before(before);
    outer.after(after);
    probes.push([m, ms, before, after]);
  }
  let n = 0;
  for (const [m, ms, before, after] of probes) {
    const base = ms.getBoundingClientRect().bottom, box = m.getBoundingClientRect();
    const d = [before, after].map(p => p.getBoundingClientRect().bottom)
      .filter(y => y >= box.top - 1 && y <= box.bottom + 1).map(y => base - y)[0];  /* a probe on the formula's line */
    if (d === undefined) continue;
    n++;
    if (Math.abs(d) > 1) out.push(d.toFixed(1) + ' px: ' + (m.querySelector('annotation') || m).textContent.slice(0, 40));
  }
  for (const p of probes) { p[1].remove(); p[2].remove(); p[3].remove(); }
  return [n, out]; }"""

# inline formulas a phone cuts: the nearest box that clips the formula (or the screen) must scroll; boxes that
# scroll are marked data-mj-cut for the picture check
_CUT_FORMULAS = """() => { const cut = [], boxes = new Set();
  for (const m of document.querySelectorAll('article math:not([display="block"])')) {
    if (!m.getBoundingClientRect().width) continue;
    /* the ink: the formula's symbols (its box also holds the space after a trailing relation, or less than them) */
    const toks = [...m.querySelectorAll('mi, mn, mo, mtext, ms')].map(t => t.getBoundingClientRect()).filter(t => t.width);
    const r = toks.length ? {left: Math.min(...toks.map(t => t.left)), right: Math.max(...toks.map(t => t.right))} : m.getBoundingClientRect();
    const tex = (m.querySelector('annotation') || m).textContent.slice(0, 50);
    let clip = null;
    for (let a = m.parentElement; a && a.tagName !== 'ARTICLE'; a = a.parentElement) {
      if (getComputedStyle(a).overflowX === 'visible') continue;
      const c = a.getBoundingClientRect();
      if (r.right > c.right + 1 || r.left < c.left - 1) { clip = a; break; }
    }
    if (clip && clip.scrollWidth > clip.clientWidth + 1) boxes.add(clip);
    else if (clip) cut.push('cut, cannot scroll: ' + tex);
    else if (r.right > window.innerWidth + 1 || r.left < -1) cut.push('off the screen: ' + tex);
  }
  const kinds = [];  /* one box of each kind: its class, and the card or table it sits in (the background) */
  for (const b of boxes) {
    const kind = b.className + ' in ' + ((b.closest('.mj-claim, .mj-misc, .admonition, table') || {}).className || '-');
    b.setAttribute('data-mj-cut', kind);
    if (!kinds.includes(kind)) kinds.push(kind);
  }
  return [cut, kinds]; }"""

# numbers in evidence and quoted-figure cells broken across lines (not digits inside a name: Llama-3.1-70B)
_SPLIT_NUMBERS = """() => { const out = [];
  for (const el of document.querySelectorAll('article .mj-ev dd, article .mj-ev td, article .mj-quoted td')) {
    const w = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let t; (t = w.nextNode());) for (const m of t.data.matchAll(/(?<![\\w.-])-?\\d[\\d.]*(?:e[-+]?\\d+)?%?/g)) {
      if (m[0].length < 4) continue;
      const r = document.createRange(); r.setStart(t, m.index); r.setEnd(t, m.index + m[0].length);
      if (new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1) out.push(m[0]);
    }
  }
  return out.slice(0, 5); }"""

# a claim's id beside its headline on a phone (it squeezed the headline into a narrow column)
_SQUEEZED = """() => [...document.querySelectorAll('article .mj-claim')].filter(c => {
    const id = c.querySelector('.mj-claim-id'), h = c.querySelector('.mj-headline');
    if (!id || !h) return false;
    const a = id.getBoundingClientRect(), b = h.getBoundingClientRect();
    return a.bottom > b.top + 1 && b.bottom > a.top + 1; }).map(c => c.id).slice(0, 3)"""


def _cue_visible(page, box) -> bool:
    """A box that cuts a formula shows it: with its text and lines made transparent (what it and its content paint
    as background stays), the edge where it cuts differs from the edge where it does not."""
    import io

    from PIL import Image

    box.evaluate("""b => { b.scrollLeft = 0; b.setAttribute('data-mj-ink', '');
        const s = document.createElement('style'); s.id = 'mj-ink';
        s.textContent = '[data-mj-ink], [data-mj-ink] * { color: transparent !important; border-color: transparent !important; }';
        document.head.appendChild(s); }""")
    img = Image.open(io.BytesIO(box.screenshot())).convert("L")
    box.evaluate("b => { b.removeAttribute('data-mj-ink'); document.getElementById('mj-ink').remove(); }")
    w, h = img.size
    strip = lambda x0, x1: sum(img.getpixel((x, y)) for x in range(x0, x1) for y in range(h)) / ((x1 - x0) * h)
    return w > 12 and abs(strip(w - 6, w) - strip(0, 6)) > 12


def layout_pass(browser, site_url: str, paths: list[str]) -> dict:
    """One pass over the pages, every card opened: at 1280 px the display formulas that do not fit their
    column and inline formulas off the text's baseline, then at 390 px whatever is wider than the screen
    (a formula or a table may scroll inside its own box), inline formulas cut without a visible cue, numbers
    broken across lines and claim ids beside their headline."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    out = {k: [] for k in ("formulas", "phone", "baseline", "cut", "numbers", "squeezed")}
    inline, seen = 0, set()
    for path in paths:
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(site_url + path)
        page.evaluate(UNFOLD)
        out["formulas"] += [f"{path}: {tex}" for tex in page.evaluate(_FORMULAS_TOO_WIDE)]
        n, off = page.evaluate(_BASELINES)
        inline += n
        out["baseline"] += [f"{path}: {x}" for x in off]
        page.set_viewport_size({"width": 390, "height": 844})
        page.evaluate("window.mjFit && window.mjFit()")
        wide = page.evaluate(_PHONE_OVERFLOW)
        if wide:
            out["phone"].append(f"{path}: {wide}")
        cut, kinds = page.evaluate(_CUT_FORMULAS)
        out["cut"] += [f"{path}: {x}" for x in cut]
        for kind in kinds:  # a picture of the first box of each kind the run meets
            if kind in seen:
                continue
            seen.add(kind)
            box = page.locator(f"[data-mj-cut={json.dumps(kind)}]")
            for _ in range(3):  # the page's own debounced refit (after the resize) may rewrap the boxes meanwhile
                if box.count():
                    break
                page.wait_for_timeout(300)
                page.evaluate("window.mjFit && window.mjFit()")
                page.evaluate(_CUT_FORMULAS)
            assert box.count(), f"{path}: the cut box ({kind}) vanished three times"
            box = box.first
            if not _cue_visible(page, box):
                tex = box.evaluate("b => (b.querySelector('annotation') || b).textContent.slice(0, 50)")
                out["cut"].append(f"{path}: cut with no visible cue ({kind}): {tex}")
        out["numbers"] += [f"{path}: {x}" for x in page.evaluate(_SPLIT_NUMBERS)]
        out["squeezed"] += [f"{path}: {x}" for x in page.evaluate(_SQUEEZED)]
    ctx.close()
    out["inline"] = inline
    return out


def test_no_horizontal_overflow_on_a_phone(layout):
    assert not layout["phone"], "\n".join(layout["phone"])


def test_inline_formulas_sit_on_the_baseline(layout):
    """At 1280 px every inline formula's baseline is within 1 px of its line's."""
    assert layout["inline"] > 400  # each language's pages hold about half of the site's ~1,000
    assert not layout["baseline"], f"{len(layout['baseline'])} formulas off the baseline:\n" + "\n".join(layout["baseline"][:15])


def test_no_inline_formula_is_cut_on_a_phone_without_a_cue(layout):
    """At 390 px an inline formula fits its line, or sits in a box that scrolls and shows a shadow where it cuts."""
    assert not layout["cut"], f"{len(layout['cut'])} formulas:\n" + "\n".join(layout["cut"][:15])


def test_numbers_and_claim_ids_on_a_phone(layout):
    """At 390 px no number in evidence or in the quoted-figures table breaks across lines, and no claim id
    shares the headline's lines."""
    assert not layout["numbers"], "\n".join(layout["numbers"][:10])
    assert not layout["squeezed"], "\n".join(layout["squeezed"][:10])


def test_display_formulas_fit_their_column(layout):
    """On a desktop every display formula fits the text column; none is cut off or needs scrolling."""
    assert not layout["formulas"], "\n".join(layout["formulas"])


def pages_in(site, lang: str) -> list[str]:
    """Every page of one language, its 404 page included."""
    en = [p for p in pages_of(site) if p.startswith("en/")]
    return en + ["en/404.html"] if lang == "en" else [p for p in pages_of(site) if p not in en] + ["404.html"]


def layout_fixture(lang: str):
    """The module's ``layout``: the pass over ``lang``'s pages, once per module."""
    @pytest.fixture(scope="module")
    def layout(browser, site_url, real_site):
        return layout_pass(browser, site_url, pages_in(real_site[0], lang))
    return layout
