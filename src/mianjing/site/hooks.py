"""mkdocs hooks: generate the entry, index and report pages in memory; maths to MathML; English half.

Named in ``mkdocs.yml`` (``hooks:``). mkdocs loads this file by path, so imports are absolute.
The Chinese build (``extra.mj_lang: zh``, the default) builds the English one into
``<site_dir>/en/`` when it finishes, from the same knowledge base, with ``docs/en``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from mkdocs.structure.files import File

from mianjing.site import mathml
from mianjing.site import pages as P

log = logging.getLogger("mkdocs.plugins.mianjing")

_state: dict = {}

SUMMARY_MARK = "<!-- mj:summary -->"
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

    root = _root(config)
    loaded = load(root)
    for p in loaded.problems:
        log.warning("knowledge base: %s", p)
    data = P.SiteData.read(root, loaded.kb)
    if data.report_problem:
        log.warning("%s", data.report_problem)
    _state.clear()
    _state.update(lang=_lang(config), data=data, root=root)
    docs = Path(config.docs_dir)
    guides = [(_title(docs / g), g) for g in P.GUIDES if (docs / g).is_file()]
    config.nav = P.nav(_state["lang"], data, guides)
    return config


def on_files(files, config, **kwargs):
    lang, data = _state["lang"], _state["data"]
    for src, text in P.generated_pages(lang, data).items():
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
    markdown = mathml.inline_display_math(markdown)
    if SUMMARY_MARK in markdown:
        markdown = markdown.replace(SUMMARY_MARK, P.kb_summary(_state["lang"], _state["data"]))
    if EXAMPLE_MARK in markdown:
        markdown = markdown.replace(EXAMPLE_MARK, _contributing_example(_state["root"]))
    return markdown


def on_page_content(html, page, config, files, **kwargs):
    def problem(msg: str) -> None:
        log.warning("%s: %s", page.file.src_uri, msg)

    return P.fill_sources(mathml.render(html, on_error=problem))


def on_post_build(config, **kwargs):
    if _lang(config) != "zh":
        return
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
    plugins = []
    for p in raw.get("plugins") or []:
        if p == "search" or (isinstance(p, dict) and "search" in p):
            plugins.append({"search": {"lang": ["en"]}})
        else:
            plugins.append(p)
    en_docs = extra.get("mj_docs_en", "docs/en")
    en = load_config(
        cfg_path,
        docs_dir=str(Path(cfg_path).parent / en_docs),
        site_dir=str(Path(config.site_dir) / "en"),
        theme=theme,
        plugins=plugins,
        extra=extra,
        strict=config.strict,
        site_url=(config.site_url.rstrip("/") + "/en/") if config.site_url else None,
    )
    en.plugins.on_startup(command="build", dirty=False)
    try:
        build(en)
    finally:
        en.plugins.on_shutdown()
