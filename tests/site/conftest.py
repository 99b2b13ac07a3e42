"""Fixtures for the browser tests: the whole knowledge base built once and served over local HTTP,
and a headless Chromium (Debian's, driven by Playwright)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.site.sitekit import REPO

CHROMIUM = os.environ.get("MIANJING_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def real_site(tmp_path_factory):
    """The knowledge base as committed, with build/verification.json if `mianjing verify` wrote it:
    (site_dir, BuildResult, KnowledgeBase). Figures and other caches live in the checkout's build/cache.
    Built once per test run: under xdist the first worker to ask builds it into the run's shared temporary
    folder while the others wait on a lock, then read the same site (no test writes to it).
    MIANJING_TEST_SITE=DIR tests a site built earlier instead (an older build, to see a test fail on it)."""
    import fcntl
    import pickle

    from mianjing.loader import load
    from mianjing.site import BuildResult, build

    if os.environ.get("MIANJING_TEST_SITE"):
        site = Path(os.environ["MIANJING_TEST_SITE"])
        return site, BuildResult(site, 0.0), load(REPO).kb
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, above every worker's own
    done = shared / "real-site.pickle"
    with open(shared / "real-site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            res = build(REPO, strict=True, site_dir=shared / "real-site" / "site")
            tmp = done.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(res))
            tmp.replace(done)
        res = pickle.loads(done.read_bytes())
    return res.site_dir, res, load(REPO).kb


@pytest.fixture(scope="session")
def site_url(real_site):
    from mianjing.site import serve_in_thread

    srv, url = serve_in_thread(real_site[0])
    yield url
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install playwright)")
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set MIANJING_CHROMIUM)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Watched:
    """A page that records console errors and every request that is not for the local server."""

    def __init__(self, page, base: str):
        self.page = page
        self.errors: list[str] = []
        self.foreign: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("request", lambda r: None if r.url.startswith((base, "data:", "blob:")) else self.foreign.append(r.url))


@pytest.fixture
def watched(browser, site_url):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    w = Watched(page, site_url)
    yield w
    ctx.close()
