"""mkdocs hooks: generate pages in memory, maths to MathML, figures, code pages, search; English half.

Named in ``mkdocs.yml`` (``hooks:``). mkdocs loads this file by path, so imports are absolute.
The Chinese build (``extra.mj_lang: zh``, the default) starts drawing the figures of both
languages in a child process, builds the English site into ``<site_dir>/en/`` when its own
pages are done, then collects the figures. Timings land in ``mianjing.site.STATS``.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from urllib.parse import urlsplit

from mkdocs.structure.files import File

from mianjing.site import SHARED, STATS, codepages
from mianjing.site import figures as F
from mianjing.site import indexes as I
from mianjing.site import mathml
from mianjing.site import pages as P
from mianjing.site import search

log = logging.getLogger("mkdocs.plugins.mianjing")

_state: dict = {}

SUMMARY_MARK = "<!-- mj:summary -->"
QUESTIONS_MARK = "<!-- mj:questions -->"
EXAMPLE_MARK = "<!-- mj:contributing-example -->"


def _lang(config) -> str:
    return (config.extra or {}).get("mj_lang", "zh")


def _root(config) -> Path:
    return Path(config.config_file_path).resolve().parent


def _title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def on_config(config, **kwargs):
    from mianjing.loader import load

    t0 = time.perf_counter()
    lang, root = _lang(config), _root(config)
    from mianjing.paths import cache_dir

    cache = cache_dir(root)
    shared = SHARED.get("data")
    if lang == "en" and shared is not None and shared.root == root:
        data = shared  # the English half of the same build: the same knowledge base, report and code
    else:
        loaded = load(root)
        for p in loaded.problems:
            log.warning("knowledge base: %s", p)
        data = P.SiteData.read(root, loaded.kb)
        if data.report_problem:
            log.warning("%s", data.report_problem)
        codepages.load_cache(cache / "highlight.json")
    mathml.load_cache(cache / f"mathml-{lang}.json")
    refs = [f.ref for e in data.ordered for f in e.figures]
    data.figures = F.keys_for(root, refs)
    _state.clear()
    _state.update(lang=lang, data=data, root=root, cache=cache, anchors={}, pages=[], t0=t0)
    if lang == "zh":
        STATS.clear()
        STATS["started"] = t0
        SHARED["data"] = data
        _state["renderer"] = F.Renderer(root, cache / "figures", list(data.figures.values()))
    docs = Path(config.docs_dir)
    guides = [(_title(docs / g), g) for g in P.GUIDES if (docs / g).is_file()]
    config.nav = I.nav(lang, data, guides)
    return config


def on_files(files, config, **kwargs):
    lang, data = _state["lang"], _state["data"]
    for src, text in I.generated_pages(lang, data).items():
        if files.get_file_from_path(src) is not None:
            log.warning("docs/%s/%s hides a generated page; remove it", lang, src)
            files.remove(files.get_file_from_path(src))
        files.append(File.generated(config, src, content=text))
    if lang == "zh":  # problems are the same in both languages: say them once
        for problem in dict.fromkeys(data.problems):
            log.warning("%s", problem)
    return files


def _contributing_example(root: Path) -> str:
    text = (root / "CONTRIBUTING.md").read_text(encoding="utf-8") if (root / "CONTRIBUTING.md").is_file() else ""
    m = re.search(r"^```yaml\n.*?^```\n", text, re.S | re.M)
    if not m:
        log.warning("CONTRIBUTING.md has no ```yaml example to include")
        return ""
    return m.group(0)


def on_page_markdown(markdown, page, config, files, **kwargs):
    lang, data = _state["lang"], _state["data"]
    if not page.file.generated_by:  # a hand-written page: searchable as it is written
        _state["pages"].append((page.file.src_uri, page.title or page.file.src_uri, markdown))
    markdown = mathml.inline_display_math(markdown)
    if SUMMARY_MARK in markdown:
        markdown = markdown.replace(SUMMARY_MARK, I.kb_summary(lang, data))
    if QUESTIONS_MARK in markdown:
        markdown = markdown.replace(QUESTIONS_MARK, P.raw(I.questions_table(lang, data)))
    if EXAMPLE_MARK in markdown:
        markdown = markdown.replace(EXAMPLE_MARK, _contributing_example(_state["root"]))
    return markdown


def _toc_anchors(items, out: dict[str, str]) -> None:
    for it in items:
        out.setdefault(" ".join(re.sub(r"<[^>]+>", "", it.title).split()), it.id)
        _toc_anchors(it.children, out)


def on_page_content(html, page, config, files, **kwargs):
    def problem(msg: str) -> None:
        log.warning("%s: %s", page.file.src_uri, msg)

    anchors: dict[str, str] = {}
    _toc_anchors(page.toc.items if page.toc else [], anchors)
    _state["anchors"][page.file.src_uri] = anchors
    return P.fill_raw(mathml.render(html, on_error=problem))


_PRE = re.compile(r"(<pre\b.*?</pre>)", re.S)
_INDENT = re.compile(r"[ \t]*\n\s*")


def compact(html: str) -> str:
    """Drop the templates' indentation: a run of blanks holding a line break becomes one line break
    (which renders as the same single space), except inside <pre>. About a tenth of every page."""
    parts = _PRE.split(html)
    return "".join(p if i % 2 else _INDENT.sub("\n", p) for i, p in enumerate(parts))


def _html_lang(page_html: str, config) -> str:
    """The theme says ``lang="zh"``; the pages are in simplified Chinese as written in mainland China."""
    return page_html.replace('<html lang="zh"', '<html lang="zh-CN"', 1) if _lang(config) == "zh" else page_html


def on_post_page(output, page, config, **kwargs):
    return compact(_html_lang(output, config))


def on_post_template(output_content, template_name, config, **kwargs):
    return compact(_html_lang(output_content, config)) if template_name.endswith(".html") else output_content


def on_page_context(context, page, config, nav, **kwargs):
    context["mj_root"] = _site_path(config, own=False)
    return context


def on_template_context(context, template_name, config, **kwargs):
    """The 404 page is served at any depth: its links must be absolute, to its own language's root."""
    if template_name == "404.html":
        context["base_url"] = _site_path(config)
    context["mj_root"] = _site_path(config, own=False)
    return context


def _site_path(config, own: bool = True) -> str:
    """The absolute path of this language's root (``own``), or of the site's root that both share."""
    path = (config.extra or {}).get("mj_site_path") or urlsplit(config.site_url or "/").path or "/"
    path = path.rstrip("/") + "/"
    if not own and _lang(config) == "en":
        path = path[: -len("en/")] if path.endswith("/en/") else "/"
    return path


def on_post_build(config, **kwargs):
    lang, data, root = _state["lang"], _state["data"], _state["root"]
    site_dir = Path(config.site_dir)
    shared_root = site_dir.parent if lang == "en" else site_dir
    search.write(site_dir, lang, data, _state["anchors"], _state["pages"])
    mathml.save_cache(_state["cache"] / f"mathml-{lang}.json")
    STATS[f"pages_{lang}"] = time.perf_counter() - _state["t0"]
    if lang != "zh":
        return
    renderer: F.Renderer = _state["renderer"]
    try:
        _build_english(config)
    finally:
        SHARED.pop("data", None)
    data.code.write(shared_root)  # code pages for both languages, once
    codepages.save_cache(_state["cache"] / "highlight.json")
    t0 = time.perf_counter()
    for problem in renderer.wait():
        log.warning("%s", problem)
    STATS["figures_wait"] = time.perf_counter() - t0
    STATS["figures_drawn"] = len(renderer.missing)
    STATS["figures_total"] = len(renderer.jobs)
    STATS["figures_seconds"] = renderer.seconds
    STATS["figures_workers"] = renderer.workers
    renderer.copy_to(site_dir, "zh")
    renderer.copy_to(site_dir / "en", "en")
    sizes = renderer.sizes()
    for e in data.ordered:
        if e.figures:
            for folder in (site_dir, site_dir / "en"):
                P.fill_sizes(folder / P.page_url(P.entry_path(e)) / "index.html", sizes)
    renderer.prune()


def _build_english(config) -> None:
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.utils.yaml import yaml_load

    cfg_path = config.config_file_path
    with open(cfg_path, encoding="utf-8") as f:
        raw = yaml_load(f)
    extra = dict(raw.get("extra") or {})
    extra["mj_lang"] = "en"
    theme = dict(raw.get("theme") or {})
    theme["language"] = "en"
    en_docs = extra.get("mj_docs_en", "docs/en")
    site_path = urlsplit(config.site_url).path if config.site_url else "/"
    extra["mj_site_path"] = site_path.rstrip("/") + "/en/"
    en = load_config(
        cfg_path,
        docs_dir=str(Path(cfg_path).parent / en_docs),
        site_dir=str(Path(config.site_dir) / "en"),
        theme=theme,
        extra=extra,
        strict=config.strict,
        site_url=(config.site_url.rstrip("/") + "/en/") if config.site_url else None,
    )
    en.plugins.on_startup(command="build", dirty=False)
    try:
        build(en)
    finally:
        en.plugins.on_shutdown()
