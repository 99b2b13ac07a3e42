"""The static site, read as files: pages in both languages, names, claim cards, figures, search, 404.

A tiny checkout (tests/site/sitekit.py) is built here; the whole knowledge base is built once
for the browser tests (tests/site/). Figures, MathML and highlighted code are cached in one
folder for the session, as a developer's ``build/cache`` would be.
"""

from __future__ import annotations

import gzip
import json
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
from mianjing.site import SiteError, build, serve_in_thread
from mianjing.site.text import normalise
from mianjing.verify import run
from tests.site.sitekit import IS_ENTRY, make_site_repo

ENTRY = "q/rl/ppo/importance-ratio/index.html"
ADDING = "q/maths/arith/adding/index.html"
PAGES = ("index.html", ENTRY, ADDING, "indexes/topic/index.html", "indexes/company/index.html",
         "indexes/difficulty/index.html", "misconceptions/index.html", "report/index.html",
         "guide/verify/index.html", "guide/quiz/index.html", "guide/contribute/index.html", "404.html")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def _env(monkeypatch, cache):
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")
    monkeypatch.setenv("MIANJING_CACHE", str(cache))


@pytest.fixture(scope="module")
def verified(tmp_path_factory, cache):
    """A verified and built tiny site, shared by the tests that only read it."""
    os.environ["MIANJING_CACHE"] = str(cache)
    root = make_site_repo(tmp_path_factory.mktemp("verified"))
    verify(root)
    res = build(root, strict=True)
    return root, res.site_dir


def verify(root):
    return run(root, load(root).kb, None, device="cpu")


def article(site: Path, page: str) -> str:
    text = (site / page).read_text(encoding="utf-8")
    return text[text.index("<article"):text.index("</article>")]


def card(art: str, claim_id: str) -> str:
    """One claim card's HTML, from its opening <div> to the next card."""
    at = art.index(f'id="claim-{claim_id}"')
    start = art.rindex('<div class="mj-claim', 0, at)
    end = art.find('<div class="mj-claim', at)
    return art[start:end if end > 0 else len(art)]


def visible(html: str) -> str:
    """Article text a reader sees outside code: tags, code, pre and TeX annotations removed."""
    for tag in ("pre", "code", "annotation", "script"):
        html = re.sub(rf"<{tag}\b.*?</{tag}>", "", html, flags=re.S)
    return re.sub(r"<[^>]+>", "", html)


# --------------------------------------------------------------------------- pages and languages


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
    # the switcher and <link rel="alternate"> point at the same page in the other language
    assert 'href="../../../../en/q/rl/ppo/importance-ratio/"' in zh
    assert 'href="../../../../../q/rl/ppo/importance-ratio/"' in en
    assert re.search(r'<link rel="alternate" hreflang="en" href="\.\./\.\./\.\./\.\./en/q/rl/ppo/importance-ratio/">', zh)
    assert re.search(r'<link rel="alternate" hreflang="zh" href="\.\./\.\./\.\./\.\./\.\./q/rl/ppo/importance-ratio/">', en)
    # no theme search index: ours, compressed, loaded on demand
    assert not (site / "search" / "search_index.json").exists()
    assert (site / "search" / "index.json.gz").is_file() and (site / "en" / "search" / "index.json.gz").is_file()


def test_names_not_slugs_and_numbered_questions(verified):
    _, site = verified
    zh, en = article(site, ENTRY), article(site, "en/" + ENTRY)
    assert "强化学习 › PPO 与 TRPO" in zh and "百度 AI Infra 第 2 轮" in zh and "第 2 题" in zh
    assert "Reinforcement learning › PPO and TRPO" in en and "Baidu AI Infra round 2" in en and "No. 2" in en
    nav = (site / ENTRY).read_text()
    assert "PPO 与 TRPO" in nav and ">rl/ppo<" not in nav and "2. PPO 为什么需要重要性采样" in nav
    # Chinese headings get meaningful anchors; the sections every entry has get the same anchor in both languages
    assert 'id="full"' in zh and 'id="full"' in en and 'id="claims"' in zh and 'id="claims"' in en
    assert re.search(r'<h1 id="ppo-为什么需要重要性采样"', zh)


def test_home_table_lists_every_question_with_filters(verified):
    _, site = verified
    for prefix, topic, company in (("", "PPO 与 TRPO", "百度"), ("en/", "PPO and TRPO", "Baidu")):
        home = article(site, prefix + "index.html")
        rows = re.findall(r"<tr data-topic=\"([^\"]+)\" data-asked=\"([^\"]+)\" data-difficulty=\"(\d)\" data-verdicts=\"([^\"]*)\">(.*?)</tr>", home)
        assert [r[0] for r in rows] == ["maths/arith", "rl/ppo"], rows
        assert json.loads(rows[1][1].replace("&quot;", '"')) == [["Baidu", "AI Infra", 2]]
        assert json.loads(rows[0][1].replace("&quot;", '"')) == [["", "AI Infra", 1]]  # a team, no company
        assert rows[0][3] == "holds refuted"
        cells = re.findall(r"<td[^>]*>(.*?)</td>", rows[1][4])
        assert cells[0] == "2" and "importance-ratio" in cells[1] and cells[2] == topic and cells[4] == company
        for key in ("topic", "company", "team", "round", "difficulty", "verdict"):
            assert f'data-filter="{key}"' in home
        assert f'<option value="Baidu">{company}</option>' in home and '<option value="-">' in home


def test_company_index_has_teams_and_no_list_per_round(verified):
    _, site = verified
    zh = article(site, "indexes/company/index.html")
    assert 'id="company-baidu"' in zh and "百度 (1)" in zh
    assert "未注明公司 (1)" in zh and 'id="team-ai-infra"' in zh and "AI Infra (2)" in zh
    assert zh.count("importance-ratio") == 2  # once under Baidu, once under its team: not once per round
    assert "#company=Baidu" in zh  # the home table, filtered
    en = article(site, "en/indexes/company/index.html")
    assert "Company not named (1)" in en and "By team" in en


# --------------------------------------------------------------------------- maths, lists, code


def test_maths_is_mathml_and_code_dollars_stay(verified):
    _, site = verified
    for prefix in ("", "en/"):
        art = article(site, prefix + ENTRY)
        assert art.count("<math") >= 4 and 'display="block"' in art and "<mfrac>" in art
        assert "$" not in visible(art) and "\\frac" not in visible(art)
        assert "<code>$</code>" in art  # a dollar inside code is not maths
        # a $$...$$ block written flush inside a list item is display maths in a scroll box, and the list survives
        item = art[art.index("<li>", art.index("<code>$</code>")):]
        assert item.index('<span class="mj-display"><math') < item.index('display="block"') < item.index("</li>")
        assert "\\mathrm{clip}" in item and "CLIP" in item
    assert "MathJax" not in (site / ENTRY).read_text() and "katex" not in (site / ENTRY).read_text().lower()


def test_xrightarrow_is_a_stretchy_arrow_under_its_label():
    from mianjing.site.mathml import to_mathml

    out = to_mathml(r"\frac{16}{4+12/N_d}\xrightarrow{N_d\to\infty}4")
    assert '<mover><mo stretchy="true">&#x02192;</mo>' in out and "mpadded" not in out and "voffset" not in out


def test_aligned_lines_sized_braces_and_side_by_side_equations():
    from mianjing.site.mathml import render, split_qquad, to_mathml

    out = to_mathml(r"\begin{aligned}J&=\Big\{a\\&\quad+b\Big\}\end{aligned}", True)
    assert "<mtable>" in out and 'columnalign="left"' in out and "&amp;" not in out.split("<annotation")[0]
    assert '<mo stretchy="true" minsize="1.623em" maxsize="1.623em">{</mo>' in out and "\\{" not in out.split("<annotation")[0]
    assert split_qquad(r"a=\frac{1\qquad 2}{3},\qquad b=2\qquad(\text{c})") == [r"a=\frac{1\qquad 2}{3},", "b=2", r"(\text{c})"]
    html = render('<div class="arithmatex">\\[a=1,\\qquad b=2\\]</div>')
    assert html.startswith('<div class="mj-display mj-multi"><math') and html.count("<math") == 2


def test_long_inline_formulas_break_after_their_relations():
    from mianjing.site.mathml import render

    short = render('<p><span class="arithmatex">\\(a+b\\)</span></p>')
    sums = render('<p><span class="arithmatex">\\(' + "+".join(f"x_{{{i}}}" for i in range(20)) + "\\)</span></p>")
    chain = render('<p><span class="arithmatex">\\(\\min(rA, \\mathrm{clip}(r)A) = \\min(r, 1+\\epsilon)A \\le 2A\\)</span></p>')
    assert short.count("<math") == 1 and sums.count("<math") == 1 and "<wbr>" not in sums
    assert chain.count("<math") == 3 and chain.count("<wbr>") == 2  # cut after = and after \\le, not inside ( )
    assert "iscroll" not in short + sums + chain and "<span" not in chain  # no wrapper: the text's baseline


def test_lists_after_a_sentence_render_as_lists():
    text = "How to correct the figures:\n- one\n- two\nstill two\n- three\n\n```\nfence:\n- not a list\n```\n### H\n- ok\n1. a\n2. b"
    out = normalise(text)
    assert out.startswith("How to correct the figures:\n\n- one\n- two\nstill two\n- three")
    assert "fence:\n- not a list" in out and "### H\n- ok" in out
    import markdown

    html = markdown.markdown(out)
    assert html.count("<li>") == 4 + 1 + 1 and "<p>How to correct the figures:</p>" in html


def test_implementation_is_highlighted_and_links_to_its_file(verified):
    _, site = verified
    art = article(site, ENTRY)
    assert 'href="../../../../src/impls/arith.py.html#L1-L2"' in art
    # the listing is fetched as the reader scrolls to it: a fragment beside the file pages
    frag = re.search(r'class="mj-src mj-lazy" data-src="\.\./\.\./\.\./\.\./(src/_/[0-9a-f]{16}\.html)"', art)
    assert frag, art
    listing = (site / frag.group(1)).read_text()
    assert '<span class="k">def</span>' in listing and '<span class="nf">add</span>' in listing
    assert '<span class="k">def</span>' not in art
    page = (site / "src" / "impls" / "arith.py.html").read_text()
    assert 'id="L1"' in page and 'id="L5"' in page and '<span class="nf">sub</span>' in page
    # the English page links the same shared file
    assert 'href="../../../../../src/impls/arith.py.html#L1-L2"' in article(site, "en/" + ENTRY)
    assert "<td>1.25</td>" in art and "test machine" in art and "2026-11-29" in art


# --------------------------------------------------------------------------- claim cards


def test_claim_cards_say_how_each_claim_is_settled(verified):
    _, site = verified
    en = article(site, "en/" + ADDING)
    refuted = card(en, "sub.commutative")
    assert "✗ misconception" in refuted and "Code runs a counterexample: a numeric computation." in refuted
    assert "mj-outcome-passed" not in refuted  # no green 'verified' beside the red verdict
    assert "Checked by code: a property tested on generated inputs." in card(en, "add.commutative")
    cite = card(article(site, "en/" + ENTRY), "ratio.paper-epsilon")
    assert "From the literature: what a paper reports, which no code can check offline" in cite and "Source:" in cite
    zh = article(site, ENTRY)
    assert "代码跑出了反例：数值计算。" in article(site, ADDING) and "依据文献" in zh


def test_quoted_figures_stand_next_to_the_measured_ones(verified):
    _, site = verified
    for lang, says, prec in (("en/", "Where the claim says it", "to 0 decimal places"), ("", "论断原文", "保留 0 位小数")):
        c = card(article(site, lang + ENTRY), "ratio.add-commutes")
        head = c[:c.index("<details")] if "<details" in c else c
        assert says in head and prec in head  # in the card, not hidden in details
        assert re.search(r"<td>[^<]*<b>3\.0</b>[^<]*</td><td class=\"mj-n\">3</td>", head), head


def test_evidence_series_are_small_plots_not_json(verified):
    _, site = verified
    c = card(article(site, "en/" + ENTRY), "ratio.add-commutes")
    assert '<svg class="mj-plot-svg"' in c and "partial sums" in c and "<polyline" in c  # the key in words
    assert "partial_sums" not in c
    assert "<title>0, 2, 4, 6, 8, 10</title>" in c
    assert "mj-data" not in c and "[0, 2, 4" not in c  # no JSON dump
    sub = article(site, "en/" + ADDING)
    assert "<dt>b-a</dt><dd>-1</dd>" in sub  # a counterexample is a table of its values


def test_verifier_source_loads_from_a_shared_fragment(verified):
    _, site = verified
    art = article(site, "en/" + ADDING)
    m = re.search(r'class="mj-src mj-lazy" data-src="\.\./\.\./\.\./\.\./\.\./src/_/([0-9a-f]{16})\.html"', art)
    assert m, "no lazily loaded verifier source"
    frag = (site / "src" / "_" / f"{m.group(1)}.html").read_text()
    assert 'class="mj-lines"' in frag and "test_" in frag and '<span class="k">def</span>' in frag
    assert "verifiers/test_arith.py.html#L" in art  # and it links to its file


def test_without_a_report_every_claim_shows_not_run(tmp_path):
    site = build(make_site_repo(tmp_path), strict=True).site_dir
    for page in (ENTRY, ADDING, "report/index.html", "en/" + ADDING):
        assert "mj-state-passed" not in article(site, page)
    assert "mj-outcome-not-run" in article(site, ADDING)
    assert "Not checked yet" in article(site, "en/" + ADDING)
    assert "mj-state-citation" in article(site, ENTRY)  # a citation needs no verifier
    # the verifier's source is found by AST from its marker even without a report
    assert "verifiers/test_arith.py::test_sub" in article(site, ADDING)


def test_verified_claims_go_stale_when_the_code_changes(tmp_path):
    root = make_site_repo(tmp_path)
    verify(root)
    site = build(root, strict=True).site_dir
    art = article(site, "en/" + ADDING)
    sub = card(art, "sub.commutative")
    assert "mj-verdict-refuted" in sub and "mj-state-passed" in sub
    assert "Counterexample" in sub and "In fact" in sub and "a−b = −(b−a)" in sub
    assert sys.version.split()[0] in sub  # the environment it ran in
    report = article(site, "report/index.html")
    assert all(c in report for c in ("add.commutative", "sub.commutative", "ratio.add-commutes", "ratio.paper-epsilon"))
    assert re.search(r"\d\.\d\d s", report)
    (root / "impls" / "arith.py").write_text((root / "impls" / "arith.py").read_text() + "\n# edited\n")
    site = build(root, strict=True).site_dir
    for page in (ENTRY, ADDING, "report/index.html", "en/" + ADDING):
        assert "mj-state-passed" not in article(site, page)
    assert "mj-outcome-stale" in article(site, ADDING) and "out of date" in article(site, "en/" + ADDING)


def test_a_failed_claim_is_marked(tmp_path):
    root = make_site_repo(tmp_path)
    (root / "impls" / "arith.py").write_text("def add(a, b):\n    return a + 2 * b\n\n\ndef sub(a, b):\n    return a - b\n")
    verify(root)
    art = article(build(root, strict=True).site_dir, "en/" + ADDING)
    add = card(art, "add.commutative")
    assert "mj-outcome-failed" in add and "mj-state-failed" in add and "Its check fails" in add
    assert "AssertionError" in add or "assert" in add


# --------------------------------------------------------------------------- lists of claims


def test_misconceptions_by_topic_with_a_lookup_table(tmp_path):
    root = make_site_repo(tmp_path)
    extra = (
        "  - id: ratio.qualified-example\n"
        "    verdict: qualified\n"
        "    method: property\n"
        '    statement: {zh: "比值总是接近 1", en: "the ratio is always near 1"}\n'
        '    correction: {zh: "只在新旧策略接近时成立", en: "only while the two policies are close"}\n'
    )
    text = IS_ENTRY.replace("\nimplementations:", "\n" + extra + "implementations:")
    (root / "qa" / "rl" / "importance-ratio.yaml").write_text(text)
    assert not load(root).problems, load(root).problems
    site = build(root).site_dir
    misc = article(site, "en/misconceptions/index.html")
    assert 'id="lookup"' in misc and 'href="#m-sub.commutative"' in misc and 'href="#m-ratio.qualified-example"' in misc
    # one section per topic, named, in table order; each card links to the claim on its entry
    assert misc.index('id="maths-arith"') < misc.index('id="rl-ppo"')
    assert "Arithmetic (1)" in misc and "PPO and TRPO (1)" in misc
    assert "subtraction commutes" in misc and "a−b = −(b−a)" in misc
    assert "the ratio is always near 1" in misc and "only while the two policies are close" in misc
    assert "addition commutes" not in misc.split('id="lookup"')[1].split("</table>")[1]
    assert "#claim-sub.commutative" in misc
    toc = (site / "en" / "misconceptions" / "index.html").read_text()
    assert all(f'<a href="#{a}" class="md-nav__link"' in toc for a in ("lookup", "maths-arith", "rl-ppo"))  # the TOC


def test_report_groups_claims_by_entry_with_totals_and_filters(verified):
    _, site = verified
    rep = article(site, "en/report/index.html")
    sections = re.findall(r'<section class="mj-rep" id="r-([a-z-]+)">(.*?)</section>', rep, re.S)
    assert [s[0] for s in sections] == ["adding", "importance-ratio"]
    assert "verified</span> 2" in sections[0][1]
    assert "verified</span> 1" in sections[1][1] and "citation only</span> 1" in sections[1][1]
    for key in ("verdict", "method", "outcome"):
        assert f'data-filter="{key}"' in rep
    assert 'data-outcome="citation"' in rep and "How do you add?" in rep
    assert rep.count("How do you add?") == 1  # the question once, not per claim


def test_home_counts_runnable_counterexamples(verified):
    _, site = verified
    home = article(site, "en/index.html")
    assert "1 common wrong statements, 1 of them with a counterexample that runs and 0 settled by citation" in home


# --------------------------------------------------------------------------- figures


def test_figures_are_drawn_in_both_languages_and_cached(tmp_path, cache):
    root = make_site_repo(tmp_path)
    first = build(root, strict=True)
    svgs = {p: sorted((first.site_dir / p / "assets" / "figures").glob("*.svg")) for p in ("", "en")}
    assert len(svgs[""]) == 1 and len(svgs["en"]) == 1 and svgs[""][0].name.endswith(".zh.svg")
    assert svgs[""][0].read_bytes() != svgs["en"][0].read_bytes()
    for prefix, svg in (("", svgs[""][0]), ("en/", svgs["en"][0])):
        art = article(first.site_dir, prefix + ENTRY)
        # loaded by mj.js as the reader nears it; a plain lazy <img> for readers without JS
        assert f'<img data-src="../../../../assets/figures/{svg.name}"' in art
        assert f'<noscript><img src="../../../../assets/figures/{svg.name}"' in art and 'loading="lazy"' in art
    assert "<math" in article(first.site_dir, ENTRY).split('class="mj-figure"')[1]  # the caption's maths
    again = build(root, strict=True)
    assert again.stats["figures_drawn"] == 0 and again.stats["figures_total"] == 2
    # the figure imports impls/arith.py: changing it changes the key, and the figure is drawn again
    (root / "impls" / "arith.py").write_text((root / "impls" / "arith.py").read_text() + "\n# edited\n")
    third = build(root, strict=True)
    assert third.stats["figures_drawn"] == 2
    assert sorted((third.site_dir / "assets" / "figures").glob("*.svg"))[0].name != svgs[""][0].name


@pytest.mark.parametrize("body, message", [
    ("def sums(lang):\n    raise ValueError('no data')\n", "ValueError: no data (at figures/arith.py:2)"),
    ("from matplotlib.figure import Figure\n\n\ndef sums(lang):\n    fig = Figure()\n    fig.subplots().set_xlabel('n')\n    return fig\n",
     "the Chinese figure has no Chinese text"),
])
def test_a_broken_figure_fails_the_strict_build_with_one_line(tmp_path, body, message):
    root = make_site_repo(tmp_path)
    (root / "figures" / "arith.py").write_text(body)
    with pytest.raises(SiteError) as exc:
        build(root, strict=True)
    assert "Aborted with" in str(exc.value)
    build(root)  # without --strict the pages still build


def test_a_broken_figure_is_named_in_the_build_log(tmp_path):
    root = make_site_repo(tmp_path)
    (root / "figures" / "arith.py").write_text("def sums(lang):\n    raise ValueError('no data')\n")
    env = dict(os.environ, MIANJING_ROOT=str(root))
    env.pop("NO_MKDOCS_2_WARNING", None)  # the command keeps Material's end-of-life notice out by itself
    res = subprocess.run([sys.executable, "-m", "mianjing.cli", "site", "build", "--strict"], cwd=root, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1
    assert "figure figures/arith.py::sums (zh): ValueError: no data (at figures/arith.py:2)" in res.stderr
    assert "Traceback" not in res.stderr
    assert "end of life" not in res.stdout + res.stderr and "Zensical" not in res.stdout + res.stderr


# --------------------------------------------------------------------------- search index


def test_search_index_is_plain_text_in_both_languages(verified):
    _, site = verified
    for prefix, title, other in (("", "PPO 为什么需要重要性采样？", "Why does PPO need importance sampling?"),
                                 ("en/", "Why does PPO need importance sampling?", "PPO 为什么需要重要性采样？")):
        raw = (site / prefix / "search" / "index.json.gz").read_bytes()
        assert raw[:2] == b"\x1f\x8b"
        data = json.loads(gzip.decompress(raw))
        docs = {d["u"]: d for d in data["docs"]}
        assert "" not in docs  # the home page holds nothing to find
        d = docs["q/rl/ppo/importance-ratio/"]
        assert d["t"] == title and d["o"] == other and d["n"] == 2
        assert "百度" in d["k"] and "Baidu" in d["k"]
        text = json.dumps(d, ensure_ascii=False)
        assert "\\\\frac" not in text and "\\\\theta" not in text and "$r" not in text
        assert "r_t(θ)" in text and "π_θ" in text  # the maths as text
        anchors = [s[0] for s in d["s"]]
        assert "claim-ratio.add-commutes" in anchors and "full" in anchors


# --------------------------------------------------------------------------- build errors


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


def test_cli_site_build_prints_its_time(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from mianjing.cli import app

    root = make_site_repo(tmp_path)
    monkeypatch.setenv("MIANJING_ROOT", str(root))
    res = CliRunner().invoke(app, ["site", "build", "--strict"])
    assert res.exit_code == 0, res.output
    assert re.search(r"built build/site/ \(zh\) and build/site/en/ in \d+\.\d s \(zh pages \d+\.\d s; en pages \d+\.\d s; figures: ",
                     res.output), res.output
    assert (root / "build" / "site" / "en" / ENTRY).is_file()


# --------------------------------------------------------------------------- serving


def test_404_pages_link_absolutely_to_each_language(verified):
    _, site = verified
    zh, en = (site / "404.html").read_text(), (site / "en" / "404.html").read_text()
    assert "//en/" not in zh.replace("http://", "") and "//en/" not in en.replace("http://", "")
    assert 'href="/en/" hreflang="en" target="_self"' in zh and 'href="/" hreflang="zh" target="_self"' in en
    assert 'href="/en/assets/stylesheets/' in en and 'href="/assets/stylesheets/' in zh
    assert "页面不存在" in zh and "Page not found" in en


def test_the_server_compresses_and_answers_404_with_the_page(verified):
    _, site = verified
    srv, url = serve_in_thread(site)
    try:
        for path, lang in (("nope/", "zh"), ("en/q/nope/", "en")):
            with pytest.raises(urllib.error.HTTPError) as exc:
                urllib.request.urlopen(url + path, timeout=10)
            assert exc.value.code == 404
            body = exc.value.read().decode()
            assert ("页面不存在" if lang == "zh" else "Page not found") in body
        req = urllib.request.Request(url + ENTRY, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.headers["Content-Encoding"] == "gzip"
            assert "PPO" in gzip.decompress(r.read()).decode()
        with urllib.request.urlopen(url + "search/index.json.gz", timeout=10) as r:  # served as it is
            assert r.headers.get("Content-Encoding") is None and r.read()[:2] == b"\x1f\x8b"
    finally:
        srv.shutdown()
        srv.server_close()


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
        assert "mj-state-passed" in body
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/en/nope/", timeout=5)
        assert exc.value.code == 404 and "Page not found" in exc.value.read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_minified_figure_is_the_same_picture():
    """minify() drops bytes, not drawing: the same elements and attributes, every number within 0.01 pt,
    and numbers under 1 (glyph scale factors such as 0.015625) exact. Oracle: the SVG matplotlib wrote."""
    import io
    import re
    import xml.etree.ElementTree as ET

    from matplotlib.figure import Figure

    from mianjing.site.figures import minify

    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    ax.plot([0.123456, 1.987654, 3.5], [10.000049, 2.2, 0.3333333])
    ax.set_title("Ulysses 4×")
    buf = io.BytesIO()
    with __import__("matplotlib").rc_context({"svg.fonttype": "path", "svg.hashsalt": "mianjing"}):
        fig.savefig(buf, format="svg")
    before = buf.getvalue()
    after = minify(before)
    assert len(after) < 0.9 * len(before)
    number = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")
    ref = re.compile(r"#[\w-]+")

    def walk(a, b):
        assert a.tag == b.tag and sorted(a.attrib) == sorted(b.attrib)
        for key, va in a.attrib.items():
            vb = b.attrib[key]
            if key == "id" or key.endswith("href"):  # names, not numbers: "p1e9…" would read as inf
                assert va == vb, key
                continue
            # references (clip-path="url(#p1e9…)") are names too, kept exactly; hashsalt above makes one read as 1e9…
            assert ref.findall(va) == ref.findall(vb), (key, va, vb)
            va, vb = ref.sub("#", va), ref.sub("#", vb)
            na, nb = number.findall(va), number.findall(vb)
            assert len(na) == len(nb), (key, va, vb)
            for x, y in zip(map(float, na), map(float, nb)):
                assert (abs(x - y) < 0.01) if abs(x) >= 1 else x == y, (key, x, y)
            assert number.sub("#", " ".join(va.split())) == number.sub("#", vb)
        kids_a, kids_b = list(a), list(b)
        assert len(kids_a) == len(kids_b)
        for x, y in zip(kids_a, kids_b):
            walk(x, y)

    strip = lambda root: [c for c in root if not c.tag.endswith("metadata")]  # noqa: E731
    ra, rb = ET.fromstring(before), ET.fromstring(after)
    assert [c.tag for c in strip(ra)] == [c.tag for c in rb]
    for x, y in zip(strip(ra), list(rb)):
        walk(x, y)
    assert b"scale(0.015625)" in after  # the glyph scale matplotlib writes, untouched


def test_thinned_code_spans_colour_every_character_as_pygments_does():
    """_highlight drops spans the theme draws in the code's own colour and merges operator/punctuation
    runs; every character must keep the colour pygments' own markup gives it under the theme's rules
    (.n = plain; .o and .p = one light colour). Oracle: pygments' untouched HTML."""
    import html as htmlmod
    import re

    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    from mianjing.site.codepages import _highlight

    source = (Path(__file__).resolve().parents[1] / "impls" / "rl" / "ppo.py").read_text(encoding="utf-8")
    same = {"n": "", "w": "", "": "", "o": "p", "p": "p"}

    def colours(markup: str) -> list[tuple[str, str]]:
        out, cls = [], [""]
        for m in re.finditer(r'<span class="([^"]+)">|</span>|([^<]+)', markup):
            if m.group(1) is not None:
                cls.append(m.group(1))
            elif m.group(2) is not None:
                out += [(ch, same.get(cls[-1], cls[-1])) for ch in htmlmod.unescape(m.group(2)) if not ch.isspace()]
            else:
                cls.pop()
        return out

    raw = highlight(source, PythonLexer(stripnl=False, ensurenl=True), HtmlFormatter(nowrap=True))
    thin = "\n".join(_highlight("impls/rl/ppo.py", source))
    assert colours(thin) == colours(raw)
    assert len(thin) < 0.85 * len(raw)
