"""Contrast and names, as axe-core (Deque's accessibility engine) judges them, on every page type of the site,
both languages, light and dark.

axe-core comes pinned with the dev dependencies: ``axe-playwright-python==0.1.8`` (PyPI) ships
``axe.min.js`` (axe-core 4.12.1); only that file is used, injected into the page.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.site.test_browser import CLIP_ENTRY, UNFOLD

# every page type: home, an entry (with figures, code and cards), the three indexes, misconceptions, the report,
# a guide, the 404 page and a source page
PAGES = ["", CLIP_ENTRY, "indexes/topic/", "indexes/company/", "indexes/difficulty/", "misconceptions/", "report/",
         "guide/verify/", "404.html"]
SOURCE = "src/impls/rl/ppo.py.html"
# contrast, every rule about an accessible name, keyboard access to what scrolls, and the page's language
RULES = ["color-contrast", "aria-dialog-name", "aria-input-field-name", "aria-command-name", "aria-toggle-field-name",
         "aria-meter-name", "aria-progressbar-name", "aria-tooltip-name", "aria-treeitem-name", "button-name",
         "document-title", "empty-heading", "frame-title", "image-alt", "input-button-name", "input-image-alt", "label",
         "link-name", "select-name", "svg-img-alt", "role-img-alt", "summary-name", "scrollable-region-focusable",
         "html-has-lang", "html-lang-valid", "valid-lang"]


# repeated blocks (report sections, cards, listings and their lines, table rows, paragraphs, list items) that hold no
# kind of element (tag and classes) a block before them did: removed before axe runs. Its contrast rule costs some
# 5 ms an element and the report alone has 11,000; every kind of element, so every colour pairing the CSS makes, is
# still checked. A block kept is kept whole.
THIN = """() => { const seen = new Set(); let kept = 0, dropped = 0;
  for (const block of document.querySelectorAll('article .mj-rep, article .mj-misc, article .mj-claim, article .mj-src,'
      + ' article table tbody tr, article .mj-line, article p, article li')) {
    if (!block.isConnected || block.parentElement.closest('[data-mj-kept]')) continue;
    const kinds = [block, ...block.querySelectorAll('*')].map(e => e.tagName + '.' + [...e.classList].sort().join('.'));
    if (kinds.some(k => !seen.has(k))) { kinds.forEach(k => seen.add(k)); block.setAttribute('data-mj-kept', ''); kept++; }
    else { block.remove(); dropped++; }
  }
  return [kept, dropped]; }"""


def _axe_js() -> str:
    try:
        import axe_playwright_python
    except ImportError:
        pytest.skip("axe-playwright-python is not installed (pip install -e '.[dev]')")
    return (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text(encoding="utf-8")


# CSS transitions still running, awaited: the search output fades in over 0.4 s (opacity), and axe judging it
# half-faded saw a 4.23:1 contrast that no reader sees once it has opened (a flaky failure in the dark theme)
SETTLE = """() => Promise.all(document.getAnimations()
  .filter(a => a.effect && a.effect.getComputedTiming().endTime !== Infinity)
  .map(a => a.finished.catch(() => null)))"""


def _violations(page, axe: str) -> list[str]:
    page.evaluate(SETTLE)
    page.evaluate(axe)
    res = page.evaluate("rules => axe.run(document, {runOnly: {type: 'rule', values: rules}, resultTypes: ['violations']})",
                        RULES)
    out = []
    for v in res["violations"]:
        for node in v["nodes"][:3]:
            out.append(f"{v['id']}: {node['target'][0]} {node.get('failureSummary', '').splitlines()[-1:]}")
    return out


@pytest.mark.parametrize("scheme", ["default", "slate"])
def test_axe_finds_no_contrast_or_name_problem(browser, site_url, scheme):
    axe = _axe_js()
    ctx = browser.new_context(viewport={"width": 1366, "height": 900})
    # the reader's choice of theme, as the site keeps it (mkdocs-material's palette, under the site's root)
    ctx.add_init_script("localStorage.setItem('/.__palette', JSON.stringify({index: %d, color: {media: '', scheme: '%s',"
                        " primary: 'indigo', accent: 'indigo'}}))" % (0 if scheme == "default" else 1, scheme))
    p = ctx.new_page()
    bad = []
    for path in [pre + x for pre in ("", "en/") for x in PAGES] + [SOURCE]:
        p.goto(site_url + path)
        if path != SOURCE:
            assert p.evaluate("document.body.getAttribute('data-md-color-scheme')") == scheme, path
            p.evaluate(UNFOLD)
            p.evaluate(THIN)
            p.locator("input.md-search__input").click()  # the search dialog, open
        bad += [f"{path or '/'}: {v}" for v in _violations(p, axe)]
    ctx.close()
    assert not bad, f"{len(bad)} violations ({scheme}):\n" + "\n".join(bad[:25])
