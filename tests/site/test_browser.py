"""The built site as a reader sees it, in a real (headless) Chromium over local HTTP."""

from __future__ import annotations

import re
import time

from tests.site.sitekit import REPO

ENTRY = "q/rl/ppo/importance-ratio/"


def switch_language(page, lang: str, expected_url: str, responses: list[str], other_root: str) -> None:
    """Open the language menu in the header and pick ``lang``, as a reader would: only after the
    theme has loaded the other language's sitemap, because from then on its script intercepts
    clicks into the other site (and once sent readers to that language's home page)."""
    deadline = time.monotonic() + 15
    while other_root + "sitemap.xml" not in responses:
        assert time.monotonic() < deadline, f"the page never fetched {other_root}sitemap.xml"
        page.wait_for_timeout(50)
    page.wait_for_timeout(300)  # the script parses the sitemap after the response arrives
    page.locator(".md-header__option .md-select button").click()
    link = page.locator(f"a.mj-lang-{lang}")
    href = link.get_attribute("href")
    link.click()
    page.wait_for_load_state("networkidle")
    assert page.url == expected_url, f"the language switch (href {href!r}) landed on {page.url}, not {expected_url}"


def test_language_switch_lands_on_the_same_entry(watched, site_url):
    page = watched.page
    responses: list[str] = []
    page.on("response", lambda r: responses.append(r.url))
    # The theme fetches both languages' sitemaps and, if the English one is registered first,
    # intercepts a click into /en/ and (finding no per-page alternates) sends the reader to the
    # English home page. Which sitemap arrives first is a race: delay the Chinese one so the race
    # always goes the way that once broke the switch.
    def late(route):
        time.sleep(1.0)
        route.continue_()

    page.route(site_url + "sitemap.xml", late)
    page.goto(site_url + ENTRY)
    deadline = time.monotonic() + 15
    while site_url + "sitemap.xml" not in responses:
        assert time.monotonic() < deadline, "the page never fetched the Chinese sitemap"
        page.wait_for_timeout(50)
    assert "重要性采样" in page.locator("article h1").inner_text()
    switch_language(page, "en", site_url + "en/" + ENTRY, responses, site_url + "en/")
    assert page.locator("article h1").inner_text().startswith("Why does PPO need importance sampling")
    assert page.locator("html").get_attribute("lang") == "en"
    page.unroute(site_url + "sitemap.xml")
    page.reload()
    switch_language(page, "zh", site_url + ENTRY, responses, site_url)
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
