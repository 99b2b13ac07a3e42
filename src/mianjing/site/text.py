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


# ----------------------------------------------------------------------------- plain text

_CODE_FENCE = re.compile(r"^(```+|~~~+)[^\n]*\n.*?^\1\s*$", re.S | re.M)
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE = re.compile(r"(?<![\\$])\$(?!\s)([^$\n]+?)(?<![\s\\])\$(?!\d)")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"<[^>]+>")
_CODE = re.compile(r"`+([^`]*)`+")


def plain(markdown: str, maths) -> str:
    """Markdown -> one line of plain text; ``maths(tex) -> str`` renders each formula as text."""
    text = _CODE_FENCE.sub(" ", markdown)
    text = _DISPLAY.sub(lambda m: " " + maths(m.group(1)) + " ", text)
    text = _INLINE.sub(lambda m: maths(m.group(1)), text)
    text = _LINK.sub(r"\1", text)
    text = _CODE.sub(r"\1", text)
    text = _TAG.sub(" ", text)
    text = re.sub(r"^\s{0,3}#{1,6}\s*", "", text, flags=re.M)
    text = re.sub(r"^\s*(?:[-*+]|\d+\.)\s+", "", text, flags=re.M)
    text = re.sub(r"(\*\*|__|(?<!\w)\*(?!\s)|(?<!\s)\*(?!\w))", "", text)
    text = re.sub(r"^\s*(!!!|\?\?\?\+?)\s*\w+(\s+\"[^\"]*\")?", "", text, flags=re.M)
    return " ".join(html.unescape(text).split())
