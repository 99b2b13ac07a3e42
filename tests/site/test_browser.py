"""The built site as a reader sees it, in a real (headless) Chromium over local HTTP."""

from __future__ import annotations

import re

from tests.site.sitekit import REPO

ENTRY = "q/rl/ppo/importance-ratio/"


def switch_language(page, lang: str) -> None:
    """Open the language menu in the header and pick ``lang``, as a reader would."""
    page.locator(".md-header__option .md-select").hover()
    link = page.locator(f"a.mj-lang-{lang}")
    try:
        link.click(timeout=5_000)
    except Exception:  # the menu's hover animation can lag on a loaded machine
        link.dispatch_event("click")


def test_language_switch_lands_on_the_same_entry(watched, site_url):
    page = watched.page
    page.goto(site_url + ENTRY)
    assert "重要性采样" in page.locator("article h1").inner_text()
    switch_language(page, "en")
    page.wait_for_url(site_url + "en/" + ENTRY)
    assert page.locator("article h1").inner_text().startswith("Why does PPO need importance sampling")
    assert page.locator("html").get_attribute("lang") == "en"
    switch_language(page, "zh")
    page.wait_for_url(site_url + ENTRY)
    assert page.locator("html").get_attribute("lang").startswith("zh")


def test_formulas_render_as_mathml(watched, site_url):
    page = watched.page
    page.goto(site_url + ENTRY)
    maths = page.locator("article math")
    assert maths.count() >= 3
    display = page.locator("article math[display=block]").first
    box = display.bounding_box()
    assert box and box["width"] > 50 and box["height"] > 20  # a fraction: taller than a line
    # no raw TeX left in the text a reader sees (code is allowed to contain `$`)
    text = page.evaluate("""() => { const a = document.querySelector('article').cloneNode(true);
        a.querySelectorAll('code, pre, annotation').forEach(e => e.remove()); return a.innerText; }""")
    assert "$" not in text and "\\frac" not in text


def test_chinese_search_finds_the_entry(watched, site_url):
    page = watched.page
    page.goto(site_url)
    box = page.locator("input.md-search__input")
    box.click()
    for term in ("重要性采样", "优势函数"):
        hit = page.locator(".md-search-result__item a[href*='importance-ratio']").first
        for attempt in range(3):  # the index loads in a worker: ask again if it was not ready yet
            box.fill(term)
            box.press("End")  # material's search listens for key events, not only for input
            try:
                hit.wait_for(timeout=5_000)
                break
            except Exception:
                if attempt == 2:
                    raise
        assert term[:2] in page.locator(".md-search-result").inner_text()


def test_refuted_claim_shows_its_counterexample(watched, site_url):
    page = watched.page
    page.goto(site_url + "en/q/maths/arith/adding/")
    claim = page.locator("[id='claim-sub.commutative']")
    assert "refuted" in claim.locator(".mj-verdict-refuted").inner_text()
    details = claim.locator("details")
    if details.get_attribute("open") is None:
        details.locator("summary").click()
    text = claim.inner_text()
    assert "Counterexample" in text and re.search(r'"b-a":\s*-1', text)
    assert "Correction" in text


def test_no_console_errors_and_nothing_leaves_localhost(watched, site_url):
    page = watched.page
    for path in ("", ENTRY, "en/", "en/" + ENTRY, "misconceptions/", "report/", "indexes/topic/"):
        page.goto(site_url + path)
        page.wait_for_load_state("networkidle")
    assert watched.errors == []
    assert watched.foreign == []


def test_screenshots(watched, site_url):
    out = REPO / "build" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    page = watched.page
    page.goto(site_url)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(out / "home.png"))
    page.goto(site_url + ENTRY)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(out / "entry.png"), full_page=True)
    assert (out / "home.png").stat().st_size > 10_000 and (out / "entry.png").stat().st_size > 10_000
