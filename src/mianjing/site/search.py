"""The search index: plain text (TeX rendered as text), per entry and section, gzip-compressed.

Written to ``search/index.json.gz`` of each language; ``assets/mj-search.js`` fetches it the
first time a reader uses the search box (never on page load), tokenises it and ranks in the
browser. Each entry carries its other language's question, short answer, key points and claims
as a low-weight field, so a Chinese query finds entries on the English site and vice versa;
topic, company and team names come in both languages (``百度`` finds the Baidu questions).

Document format (short keys keep the file small)::

    {"u": url from the language root, "n": number or 0, "t": title, "o": the other language's title,
     "p": topic line, "k": names and ids, "x": other-language text, "s": [[anchor, heading, text], ...]}

The home page is not indexed: it holds nothing to find but example queries.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from ..schema import Entry
from . import mathml
from .pages import SiteData, entry_path, page_url, plain as plain_title
from .text import plain

INDEX_FILE = "search/index.json.gz"
_HEADING = re.compile(r"^(#{2,6})\s+(.*?)\s*(?:\{#[^}]*\})?\s*$", re.M)


def _text(md: str) -> str:
    return plain(md, mathml.to_text)


def _sections(md: str, anchors: dict[str, str], default: str) -> list[list[str]]:
    """Split markdown at its headings: [anchor, heading, text] per part."""
    out: list[list[str]] = []
    fence = False
    heading, anchor, buf = "", default, []
    for line in md.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        m = None if fence else _HEADING.match(line)
        if m:
            if "".join(buf).strip():
                out.append([anchor, heading, _text("\n".join(buf))])
            heading = _text(m.group(2))
            anchor, buf = anchors.get(heading, anchor), []
        else:
            buf.append(line)
    if "".join(buf).strip():
        out.append([anchor, heading, _text("\n".join(buf))])
    return out


def entry_doc(e: Entry, lang: str, data: SiteData, anchors: dict[str, str]) -> dict:
    other = "en" if lang == "zh" else "zh"
    names = data.kb.names
    keys = [names.topic(e.topic, "zh"), names.topic(e.topic, "en"), names.area(e.topic, "zh"), names.area(e.topic, "en"), e.id]
    for a in e.asked_at:
        if a.company:
            keys += [a.company, names.company(a.company, "zh"), names.company(a.company, "en")]
        if a.team:
            keys += [a.team, names.team(a.team, "zh"), names.team(a.team, "en")]
    sections = [["", "", _text(e.answer.short.get(lang))]]
    sections += _sections(e.answer.full.get(lang), anchors, "full")
    sections.append(["key-points", "", " · ".join(_text(k.get(lang)) for k in e.key_points)])
    for c in e.claims:
        bits = [c.statement.get(lang)]
        if c.correction is not None:
            bits.append(c.correction.get(lang))
        if c.cite is not None:
            bits.append(f"{c.cite.title} {c.cite.locator or ''}")
        sections.append([f"claim-{c.id}", "", _text("\n".join(bits))])
    x = [e.answer.short.get(other), e.answer.full.get(other), *(k.get(other) for k in e.key_points),
         *(c.statement.get(other) for c in e.claims)]
    return {"u": page_url(entry_path(e)), "n": data.number[e.id], "t": _text(e.question.get(lang)),
            "o": _text(e.question.get(other)),
            "p": f"{names.area(e.topic, lang)} › {names.topic(e.topic, lang)}",
            "k": " ".join(dict.fromkeys(keys)), "x": _text("\n".join(x)), "s": sections}


def page_doc(src: str, title: str, markdown: str, anchors: dict[str, str]) -> dict:
    body = re.sub(r"<!--.*?-->", "", markdown, flags=re.S)
    body = re.sub(r"^# .*$", "", body, count=1, flags=re.M)
    return {"u": page_url(src), "n": 0, "t": title, "p": "", "k": "", "x": "", "s": _sections(body, anchors, "")}


def write(site_dir: Path, lang: str, data: SiteData, anchors: dict[str, dict[str, str]],
          pages: list[tuple[str, str, str]]) -> int:
    """Write ``search/index.json.gz``; ``pages`` are hand-written pages (src, title, markdown). Returns bytes."""
    docs = [entry_doc(e, lang, data, anchors.get(entry_path(e), {})) for e in data.ordered]
    docs += [page_doc(src, plain_title(title), md, anchors.get(src, {})) for src, title, md in pages if src != "index.md"]
    raw = json.dumps({"lang": lang, "docs": docs}, ensure_ascii=False, separators=(",", ":")).encode()
    out = site_dir / INDEX_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    blob = gzip.compress(raw, compresslevel=9, mtime=0)
    out.write_bytes(blob)
    return len(blob)
