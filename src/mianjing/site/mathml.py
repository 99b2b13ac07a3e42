"""Maths rendered offline: arithmatex's generic output -> MathML (server-side, latex2mathml).

``pymdownx.arithmatex`` (``generic: true``) finds ``$...$`` / ``$$...$$`` outside
code and emits ``<span class="arithmatex">\\(...\\)</span>`` or
``<div class="arithmatex">\\[...\\]</div>``; this module replaces them with
``<math>`` markup that browsers render natively, so no script or network is needed.
"""

from __future__ import annotations

import html
import re

_SPAN = re.compile(r'<span class="arithmatex">\\\((.*?)\\\)</span>', re.S)
_DIV = re.compile(r'<div class="arithmatex">\\\[(.*?)\\\]</div>', re.S)
_UNKNOWN = re.compile(r"<mi>(\\[A-Za-z]+)</mi>")


class MathError(ValueError):
    pass


def to_mathml(tex: str, display: bool = False) -> str:
    """LaTeX -> MathML; MathError for input latex2mathml cannot read or commands it does not know."""
    from latex2mathml.converter import convert

    try:
        out = convert(tex, display="block" if display else "inline")
    except Exception as exc:  # latex2mathml raises many kinds
        raise MathError(f"cannot convert ${tex}$ ({type(exc).__name__} {exc})".strip()) from None
    bad = _UNKNOWN.findall(out)
    if bad:
        raise MathError(f"unknown LaTeX command {', '.join(sorted(set(bad)))} in ${tex}$")
    # keep the source for copy/paste and for screen readers that prefer it
    annotation = f'<annotation encoding="application/x-tex">{html.escape(tex, quote=False)}</annotation>'
    out = out.replace("<math ", '<math class="mj-math" ', 1)
    if out.endswith("</math>"):
        inner = out[out.index(">") + 1 : -len("</math>")]
        head = out[: out.index(">") + 1]
        out = f"{head}<semantics>{inner}{annotation}</semantics></math>"
    return out


def render(html_text: str, on_error=None) -> str:
    """Replace every arithmatex span/div in a page's HTML with MathML."""

    def sub(display: bool):
        def repl(m: re.Match) -> str:
            tex = html.unescape(m.group(1)).strip()
            shown_as_block = display
            if tex.startswith(DISPLAY_MARK.strip()):
                tex, shown_as_block = tex[len(DISPLAY_MARK.strip()):].strip(), True
            try:
                math = to_mathml(tex, shown_as_block)
            except MathError as exc:
                if on_error is not None:
                    on_error(str(exc))
                return f'<code class="mj-tex-error">{html.escape(tex)}</code>'
            return f'<div class="mj-display">{math}</div>' if display else math

        return repl

    html_text = _DIV.sub(sub(True), html_text)
    return _SPAN.sub(sub(False), html_text)


_FENCE = re.compile(r"^\s*(```|~~~)")


DISPLAY_MARK = "\\mjdisplay "


def inline_display_math(markdown: str) -> str:
    """Make ``$$...$$`` blocks written flush against surrounding text render as display maths.

    Authors often put a display formula on its own line inside a paragraph or a list item;
    Markdown then reads it as inline ``$`` maths with stray dollars, and blank lines around it
    would break the list. Such a block becomes inline maths marked for display
    (``$\\mjdisplay ...$``), which ``render`` turns into ``<math display="block">``.
    Free-standing blocks (blank lines around) and code fences are left alone.
    """
    lines = markdown.split("\n")
    out: list[str] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        if fence is not None or m or not line.strip().startswith("$$"):
            out.append(line)
            i += 1
            continue
        j = i
        body = line.strip()
        if not (len(body) > 2 and body.endswith("$$")):
            j = i + 1
            while j < len(lines) and not lines[j].strip().endswith("$$"):
                j += 1
            if j == len(lines):  # never closed: leave it as it is
                out.append(line)
                i += 1
                continue
        flush_before = bool(out) and bool(out[-1].strip())
        flush_after = j + 1 < len(lines) and bool(lines[j + 1].strip())
        if flush_before or flush_after:
            tex = " ".join(x.strip() for x in lines[i : j + 1])[2:-2].strip()
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}${DISPLAY_MARK}{tex}$")
        else:
            out.extend(lines[i : j + 1])
        i = j + 1
    return "\n".join(out)
