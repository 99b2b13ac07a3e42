"""Author markdown as the site needs it: lists that render as lists, and plain text for search.

Entries are written in YAML block scalars, where a list often follows its introducing
sentence without a blank line ("Two conclusions:\\n- ...\\n- ..."). Python-Markdown then
reads the items as the same paragraph and prints a run-on line. ``normalise`` inserts the
blank line CommonMark would not need; ``plain`` strips markup and maths for the search index.
"""

from __future__ import annotations

import html
import re

_FENCE = re.compile(r"^\s*(```+|~~~+)")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+\.)\s+\S")
_NO_PARAGRAPH = re.compile(r"^\s*(?:#{1,6}\s|<|!!!|\?\?\?|>)")  # lines after which no blank line is needed


def normalise(markdown: str) -> str:
    """Insert a blank line before a list that starts right after a paragraph line.

    A list item after another item, or after a line continuing an item (indented, or a lazy
    continuation), is left alone, as are code fences, headings, HTML and admonitions.
    """
    out: list[str] = []
    fence: str | None = None
    in_list = False  # inside a list block: a new item continues it
    for line in markdown.split("\n"):
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            out.append(line)
            continue
        m = _FENCE.match(line)
        if m:
            fence, in_list = m.group(1), False
            out.append(line)
            continue
        prev = out[-1] if out else ""
        if _ITEM.match(line):
            if prev.strip() and not in_list and not _NO_PARAGRAPH.match(prev) and not prev.startswith((" ", "\t")):
                out.append("")
            in_list = True
        elif line.strip() and not line.startswith((" ", "\t")) and (not prev.strip() or line.lstrip().startswith("#")):
            in_list = False  # an unindented paragraph after a blank line, or a heading, ends the list
        out.append(line)
    return "\n".join(out)


_HEADING = re.compile(r"^(#{2,6})\s+(.*?)\s*$")


def headings(markdown: str) -> list[tuple[int, str]]:
    """(line index, heading text) of every heading outside code fences."""
    out, fence = [], None
    for i, line in enumerate(markdown.split("\n")):
        m = _FENCE.match(line)
        if fence is not None:
            fence = None if line.strip().startswith(fence) else fence
        elif m:
            fence = m.group(1)
        elif _HEADING.match(line):
            out.append((i, _HEADING.match(line).group(2)))
    return out


def same_anchors(markdown: str, english: str, maths, taken: set[str]) -> str:
    """Give each heading of ``markdown`` the id of the English heading in the same place (``{#why-sqrt-d}``),
    so that both languages' pages have the same anchors. Left as it is when the headings do not pair up
    (``mianjing check`` reports that) or a heading already names its id."""
    mine, theirs = headings(markdown), headings(english)
    if len(mine) != len(theirs):
        return markdown
    lines = markdown.split("\n")
    used = set(taken)
    for (i, text), (_, en) in zip(mine, theirs):
        if "{#" in text:
            continue
        base = re.sub(r"[^a-z0-9]+", "-", plain(en, maths).lower()).strip("-") or "section"
        slug, n = base, 2
        while slug in used:
            slug, n = f"{base}-{n}", n + 1
        used.add(slug)
        lines[i] = f"{lines[i].rstrip()} {{#{slug}}}"
    return "\n".join(lines)


# ----------------------------------------------------------------------------- plain text

_CODE_FENCE = re.compile(r"^(```+|~~~+)[^\n]*\n.*?^\1\s*$", re.S | re.M)
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE = re.compile(r"(?<![\\$])\$(?!\s)([^$\n]+?)(?<![\s\\])\$(?!\d)")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"<[^>]+>")
_CODE = re.compile(r"`+([^`]*)`+")
_KEPT = re.compile(r"\0(\d+)\0")


def plain(markdown: str, maths) -> str:
    """Markdown -> one line of plain text; ``maths(tex) -> str`` renders each formula as text.

    Formulas and code are set aside while tags and markup are stripped, so that ``$A<0$ ... $r>1$``
    is not read as one HTML tag."""
    kept: list[str] = []

    def keep(s: str) -> str:
        kept.append(s)
        return f"\0{len(kept) - 1}\0"

    text = _CODE_FENCE.sub(" ", markdown)
    text = _DISPLAY.sub(lambda m: " " + keep(maths(m.group(1))) + " ", text)
    text = _INLINE.sub(lambda m: keep(maths(m.group(1))), text)
    text = _CODE.sub(lambda m: keep(m.group(1)), text)
    text = _LINK.sub(r"\1", text)
    text = _TAG.sub(" ", text)
    text = re.sub(r"^\s{0,3}#{1,6}\s*", "", text, flags=re.M)
    # a table reads as its cells, one row after another (a snippet showed "| | TRPO | PPO | |---|---|")
    text = re.sub(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$", "", text, flags=re.M)
    text = re.sub(r"^[ \t]*\|(.*?)\|?[ \t]*$", lambda m: " · ".join(c.strip() for c in re.split(r"(?<!\\)\|", m.group(1))
                                                               if c.strip()) + ";", text, flags=re.M)
    text = re.sub(r"^\s*(?:[-*+]|\d+\.)\s+", "", text, flags=re.M)
    text = re.sub(r"(\*\*|__|(?<!\w)\*(?!\s)|(?<!\s)\*(?!\w))", "", text)
    text = re.sub(r"^\s*(!!!|\?\?\?\+?)\s*\w+(\s+\"[^\"]*\")?", "", text, flags=re.M)
    text = _KEPT.sub(lambda m: kept[int(m.group(1))], html.unescape(text))
    return " ".join(text.split())
