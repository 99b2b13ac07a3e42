"""The static site: generated pages in both languages, offline maths, claims with their evidence."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from mianjing.loader import load
from mianjing.site import SiteError, build
from mianjing.verify import run
from tests.site.sitekit import IS_ENTRY, REPO, make_site_repo

ENTRY = "q/rl/ppo/importance-ratio/index.html"
ADDING = "q/maths/arith/adding/index.html"
PAGES = ("index.html", ENTRY, ADDING, "indexes/topic/index.html", "indexes/company/index.html",
         "indexes/difficulty/index.html", "misconceptions/index.html", "report/index.html",
         "guide/verify/index.html", "guide/quiz/index.html", "guide/contribute/index.html")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")


def verify(root):
    return run(root, load(root).kb, None, device="cpu")


def article(site: Path, page: str) -> str:
    text = (site / page).read_text(encoding="utf-8")
    return text[text.index("<article"):text.index("</article>")]


def visible(html: str) -> str:
    """Article text a reader sees outside code: tags, code, pre and TeX annotations removed."""
    for tag in ("pre", "code", "annotation"):
        html = re.sub(rf"<{tag}\b.*?</{tag}>", "", html, flags=re.S)
    return re.sub(r"<[^>]+>", "", html)


def test_every_page_in_both_languages_and_nothing_written_to_docs(tmp_path):
    root = make_site_repo(tmp_path)
    docs_before = sorted(p.relative_to(root).as_posix() for p in (root / "docs").rglob("*"))
    site = build(root, strict=True).site_dir
    for prefix in ("", "en/"):
        for page in PAGES:
            assert (site / prefix / page).is_file(), prefix + page
    assert sorted(p.relative_to(root).as_posix() for p in (root / "docs").rglob("*")) == docs_before
    zh, en = (site / ENTRY).read_text(), (site / "en" / ENTRY).read_text()
    assert '<html lang="zh' in zh and '<html lang="en"' in en
    assert "PPO 为什么需要重要性采样？" in zh and "Why does PPO need importance sampling?" in en
    assert "简答" in zh and "Short answer" in en and "Short answer" not in zh
    # the switcher goes to the same page in the other language
    assert 'href="../../../../en/q/rl/ppo/importance-ratio/"' in zh
    assert 'href="../../../../../q/rl/ppo/importance-ratio/"' in en


def test_maths_is_mathml_and_code_dollars_stay(tmp_path):
    site = build(make_site_repo(tmp_path), strict=True).site_dir
    for prefix in ("", "en/"):
        art = article(site, prefix + ENTRY)
        assert art.count("<math") >= 4 and 'display="block"' in art and "<mfrac>" in art
        assert "$" not in visible(art) and "\\frac" not in visible(art)
        assert "<code>$</code>" in art  # a dollar inside code is not maths
        # a $$...$$ block written flush inside a list item is display maths, and the list survives
        item = art[art.index("<li>", art.index("<code>$</code>")):]
        assert item.index('display="block"') < item.index("</li>")
        assert "\\mathrm{clip}" in item and "CLIP" in item
    assert "MathJax" not in (site / ENTRY).read_text() and "katex" not in (site / ENTRY).read_text().lower()


def test_implementation_benchmark_and_tags(tmp_path):
    site = build(make_site_repo(tmp_path), strict=True).site_dir
    art = article(site, ENTRY)
    assert "impls/arith.py::add" in art and "def add(a, b):" in re.sub(r"<[^>]+>", "", art)
    assert "<td>1.25</td>" in art and "test machine" in art and "2026-11-29" in art
    assert "Baidu · 第 2 轮" in art and "难度 2 · 核心" in art
    topic = article(site, "indexes/topic/index.html")
    assert "rl/ppo" in topic and "importance-ratio" in topic
    assert "importance-ratio" in article(site, "indexes/company/index.html")
    assert "Difficulty 2 · core" in article(site, "en/indexes/difficulty/index.html")


def test_without_a_report_every_claim_shows_not_run(tmp_path):
    site = build(make_site_repo(tmp_path), strict=True).site_dir
    for page in (ENTRY, ADDING, "report/index.html", "en/" + ADDING):
        art = article(site, page)
        assert "mj-outcome-passed" not in art
    assert "mj-outcome-not-run" in article(site, ADDING)
    assert "mj-outcome-citation" in article(site, ENTRY)  # a citation needs no verifier
    # the verifier's source is found by AST from its marker even without a report
    assert "def test_sub(evidence):" in article(site, ADDING)


def test_verified_claims_show_evidence_environment_source_then_go_stale(tmp_path):
    root = make_site_repo(tmp_path)
    verify(root)
    site = build(root, strict=True).site_dir
    art = article(site, "en/" + ADDING)
    sub = art[art.index('id="claim-sub.commutative"'):]
    assert "mj-verdict-refuted" in sub and "mj-outcome-passed" in sub
    assert "Counterexample" in sub and "&quot;b-a&quot;: -1" in sub
    assert "Correction" in sub and "a−b = −(b−a)" in sub
    assert "def test_sub(evidence):" in sub and "verifiers/test_arith.py" in sub
    assert sys.version.split()[0] in sub  # the environment it ran in
    assert "&quot;checked&quot;: 3" in article(site, ENTRY)
    report = article(site, "report/index.html")
    assert all(c in report for c in ("add.commutative", "sub.commutative", "ratio.add-commutes", "ratio.paper-epsilon"))
    assert re.search(r"\d\.\d\d s", report)
    # the code changes: the old green must not be shown as current
    (root / "impls" / "arith.py").write_text((root / "impls" / "arith.py").read_text() + "\n# edited\n")
    site = build(root, strict=True).site_dir
    for page in (ENTRY, ADDING, "report/index.html", "en/" + ADDING):
        assert "mj-outcome-passed" not in article(site, page)
    assert "mj-outcome-stale" in article(site, ADDING)


def test_a_failed_claim_is_marked(tmp_path):
    root = make_site_repo(tmp_path)
    (root / "impls" / "arith.py").write_text("def add(a, b):\n    return a + 2 * b\n\n\ndef sub(a, b):\n    return a - b\n")
    verify(root)
    art = article(build(root, strict=True).site_dir, "en/" + ADDING)
    add = art[art.index('id="claim-add.commutative"'):art.index('id="claim-sub.commutative"')]
    assert "mj-outcome-failed" in add and "mj-state-failed" in add and "AssertionError" in add or "assert" in add


def test_misconceptions_lists_refuted_and_qualified_with_corrections(tmp_path):
    root = make_site_repo(tmp_path)
    extra = (
        "  - id: ratio.qualified-example\n"
        "    verdict: qualified\n"
        "    method: property\n"
        '    statement: {zh: "比值总是接近 1", en: "the ratio is always near 1"}\n'
        '    correction: {zh: "只在新旧策略接近时成立", en: "only while the two policies are close"}\n'
    )
    assert "\nimplementations:" in IS_ENTRY
    text = IS_ENTRY.replace("\nimplementations:", "\n" + extra + "implementations:")
    (root / "qa" / "rl" / "importance-ratio.yaml").write_text(text)
    assert not load(root).problems, load(root).problems
    site = build(root).site_dir
    misc = article(site, "en/misconceptions/index.html")
    assert "subtraction commutes" in misc and "a−b = −(b−a)" in misc
    assert "the ratio is always near 1" in misc and "only while the two policies are close" in misc
    assert "addition commutes" not in misc
    assert "#claim-sub.commutative" in misc


@pytest.mark.parametrize("tex", [r"\frac{a}{", r"\notacommand x"])
def test_a_formula_that_cannot_render_fails_the_strict_build(tmp_path, tex):
    root = make_site_repo(tmp_path)
    bad = IS_ENTRY.replace("比值为", f"比值为 ${tex}$")
    (root / "qa" / "rl" / "importance-ratio.yaml").write_text(bad)
    with pytest.raises(SiteError):
        build(root, strict=True)
    build(root)  # without --strict the page still builds, with the TeX shown as an error


def test_a_missing_implementation_fails_the_strict_build(tmp_path):
    root = make_site_repo(tmp_path)
    (root / "qa" / "rl" / "importance-ratio.yaml").write_text(IS_ENTRY.replace("arith.py::add", "arith.py::nope"))
    with pytest.raises(SiteError):
        build(root, strict=True)


def test_cli_site_build(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from mianjing.cli import app

    root = make_site_repo(tmp_path)
    monkeypatch.setenv("MIANJING_ROOT", str(root))
    res = CliRunner().invoke(app, ["site", "build", "--strict"])
    assert res.exit_code == 0, res.output
    assert "built build/site/" in res.output and (root / "build" / "site" / "en" / ENTRY).is_file()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_verifies_a_missing_report_then_builds_and_serves(tmp_path):
    root = make_site_repo(tmp_path)
    port = _free_port()
    env = dict(os.environ, MIANJING_ROOT=str(root), NO_MKDOCS_2_WARNING="1")
    proc = subprocess.Popen([sys.executable, "-m", "mianjing.cli", "site", "serve", "--addr", f"127.0.0.1:{port}"],
                            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        body = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/en/q/maths/arith/adding/", timeout=2).read().decode()
                break
            except OSError:
                time.sleep(0.5)
        assert body is not None, proc.stdout.read() if proc.poll() is not None else "server did not answer"
        assert (root / "build" / "verification.json").is_file()  # it ran the verifiers first
        assert "mj-outcome-passed" in body
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_real_site_builds_strictly_and_fast(tmp_path):
    """The whole knowledge base, as committed: strict, both languages; CPU time well under 20 s."""
    t0, c0 = time.perf_counter(), time.process_time()
    res = build(REPO, strict=True, site_dir=tmp_path / "site")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    kb = load(REPO).kb
    for entry in kb.entries.values():
        for prefix in ("", "en/"):
            assert (res.site_dir / prefix / "q" / entry.topic / entry.id / "index.html").is_file()
    print(f"real site: {len(kb)} entries, wall {wall:.1f} s, cpu {cpu:.1f} s")
    assert cpu < 20, f"building the site took {cpu:.1f} s of CPU"
