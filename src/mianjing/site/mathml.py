"""Maths rendered offline: arithmatex's generic output -> MathML (server-side, latex2mathml).

``pymdownx.arithmatex`` (``generic: true``) finds ``$...$`` / ``$$...$$`` outside
code and emits ``<span class="arithmatex">\\(...\\)</span>`` or
``<div class="arithmatex">\\[...\\]</div>``; this module replaces them with
``<math>`` markup that browsers render natively, so no script or network is needed.
Display formulas sit in a ``.mj-display`` box that scrolls sideways instead of spilling
out of the column. A long inline formula is cut after its top-level relations (``=``, ``\\le``...)
into pieces the line may break between, as TeX breaks a formula in a paragraph; no box is put
around it, so it sits on the text's baseline (``assets/mj.js`` sets a piece that is wider than its
column on a line of its own, in a box that scrolls).
Conversions are cached (``load_cache``/``save_cache``) because the same formulas recur
in every build and in both languages.
"""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

_SPAN = re.compile(r'<span class="arithmatex">\\\((.*?)\\\)</span>', re.S)
_DIV = re.compile(r'<div class="arithmatex">\\\[(.*?)\\\]</div>', re.S)
_UNKNOWN = re.compile(r"<mi>(\\[A-Za-z]+)</mi>")
_SIZED_BRACE = re.compile(r"(<mo minsize=[^>]*>)\\([{}|])</mo>")
_NUMERIC_ENTITY = re.compile(r"&#x([0-9A-Fa-f]+);")
_XARROW = re.compile(r"\\x(right|left)arrow\s*(?=\{)")

CACHE_VERSION = "5"  # bump when the output of to_mathml changes
INLINE_SPLIT_CHARS = 20  # inline formulas with longer TeX are cut at their relations

_cache: dict[str, str] = {}
_cache_dirty = False


class MathError(ValueError):
    pass


def _braced(tex: str, i: int) -> int:
    """Index just past the brace group starting at ``tex[i] == '{'``."""
    depth, j = 0, i
    while j < len(tex):
        c = tex[j]
        if c == "\\":
            j += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise MathError(f"unbalanced braces in ${tex}$")


def _arrows(tex: str) -> str:
    """``\\xrightarrow{x}`` -> ``\\overset{x}{\\rightarrow}``: latex2mathml draws the label over the
    arrow with a negative offset; an over-script on a stretchy arrow is what browsers render well."""
    while True:
        m = _XARROW.search(tex)
        if not m:
            return tex
        end = _braced(tex, m.end())
        label = tex[m.end() + 1 : end - 1]
        tex = f"{tex[: m.start()]}\\overset{{\\;{label}\\;}}{{\\{m.group(1)}arrow}}{tex[end:]}"


def _environments(tex: str) -> str:
    """``aligned`` (which latex2mathml does not know) as the equivalent ``array`` of right/left columns."""
    return (tex.replace("\\begin{aligned}", "\\begin{array}{rlrlrl}")
               .replace("\\end{aligned}", "\\end{array}"))


def split_qquad(tex: str) -> list[str]:
    """A display formula's equations written side by side (``a,\\qquad b`` or ``a,\\quad b``): one piece
    each, so that a narrow column can put them one under the other. Only top-level spaces split."""
    pieces, depth, start, i = [], 0, 0, 0
    env = 0
    while i < len(tex):
        if tex.startswith("\\begin{", i):
            env += 1
        elif tex.startswith("\\end{", i):
            env -= 1
        c = tex[i]
        if c == "\\":
            word = re.match(r"\\([A-Za-z]+)", tex[i:])
            if word and word.group(1) in ("left", "right"):
                depth += 1 if word.group(1) == "left" else -1
                i += len(word.group(0))
                continue
            for space in ("\\qquad", "\\quad"):
                if depth == 0 and env == 0 and tex.startswith(space, i) and not tex[i + len(space): i + len(space) + 1].isalpha():
                    pieces.append(tex[start:i])
                    i += len(space)
                    start = i
                    break
            else:
                i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        i += 1
    pieces.append(tex[start:])
    return [p.strip() for p in pieces if p.strip()]


_RELATION = re.compile(r"(=|<|>|\\(?:approx|le|leq|ge|geq|ll|gg|neq|ne|to|mapsto|Rightarrow|Leftarrow|iff|equiv|sim|simeq|"
                       r"propto|in|notin|subset|subseteq|leftarrow|rightarrow|gets)(?![A-Za-z]))")


def break_points(tex: str) -> list[int]:
    """Where a line may break in an inline formula: just after each relation outside every group
    (braces, parentheses, brackets, ``\\left...\\right``, environments)."""
    out, depth, i = [], 0, 0
    while i < len(tex):
        c = tex[i]
        if tex.startswith("\\left", i) or tex.startswith("\\begin", i):
            depth += 1
        elif tex.startswith("\\right", i) or tex.startswith("\\end", i):
            depth -= 1
        if c == "\\":
            m = _RELATION.match(tex, i)
            if depth == 0 and m:
                out.append(m.end())
                i = m.end()
                continue
            word = re.match(r"\\([A-Za-z]+|.)", tex[i:])
            i += len(word.group(0)) if word else 1
            continue
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        elif depth == 0 and c in "=<>":
            out.append(i + 1)
        i += 1
    return [b for b in out if tex[b:].strip()]


def split_inline(tex: str, whole: str) -> str:
    """An inline formula as pieces a line may break between (``<wbr>``), or ``whole`` if it has no break
    point or a piece does not stand alone."""
    cuts = break_points(tex)
    if not cuts:
        return whole
    pieces = [tex[a:b].strip() for a, b in zip([0, *cuts], [*cuts, len(tex)])]
    try:
        return "<wbr>".join(to_mathml(p) for p in pieces)
    except MathError:
        return whole


def to_mathml(tex: str, display: bool = False) -> str:
    """LaTeX -> MathML; MathError for input latex2mathml cannot read or commands it does not know."""
    global _cache_dirty
    key = f"{int(display)}{tex}"
    if key in _cache:
        return _cache[key]
    from latex2mathml.converter import convert

    try:
        out = convert(_environments(_arrows(tex)), display="block" if display else "inline")
    except MathError:
        raise
    except Exception as exc:  # latex2mathml raises many kinds
        raise MathError(f"cannot convert ${tex}$ ({type(exc).__name__} {exc})".strip()) from None
    bad = _UNKNOWN.findall(out)
    if bad:
        raise MathError(f"unknown LaTeX command {', '.join(sorted(set(bad)))} in ${tex}$")
    # an over-scripted arrow stretches to its label
    out = out.replace("<mover><mrow><mo>&#x02192;</mo></mrow>", '<mover><mo stretchy="true">&#x02192;</mo>')
    out = out.replace("<mover><mrow><mo>&#x02190;</mo></mrow>", '<mover><mo stretchy="true">&#x02190;</mo>')
    out = out.replace(' xmlns="http://www.w3.org/1998/Math/MathML"', "", 1)
    # sized braces (\\Big\\{) come out with their backslash; a sized delimiter must be allowed to stretch
    out = _SIZED_BRACE.sub(r"\1\2</mo>", out)
    out = out.replace("<mo minsize=", '<mo stretchy="true" minsize=')
    # keep the source for copy/paste and for screen readers that prefer it
    annotation = f'<annotation encoding="application/x-tex">{html.escape(tex, quote=False)}</annotation>'
    out = out.replace("<math ", '<math class="mj-math" ', 1)
    if out.endswith("</math>"):
        inner = out[out.index(">") + 1 : -len("</math>")]
        head = out[: out.index(">") + 1]
        out = f"{head}<semantics>{inner}{annotation}</semantics></math>"
    _cache[key] = out
    _cache_dirty = True
    return out


def to_text(tex: str) -> str:
    """A formula as plain text for the search index: ``\\frac{K}{N_d}`` -> ``K/N_d``, ``3\\Psi`` -> ``3Ψ``."""
    try:
        ml = to_mathml(tex)
    except MathError:
        return tex
    try:
        root = ET.fromstring(_NUMERIC_ENTITY.sub(lambda m: html.escape(chr(int(m.group(1), 16))), ml))
    except ET.ParseError:
        return html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<annotation.*?</annotation>", "", ml)))

    def text(el) -> str:
        tag = el.tag.split("}")[-1]
        if tag == "annotation":
            return ""
        kids = [text(k) for k in el]
        if tag in ("mi", "mn", "mo", "mtext", "ms"):
            return (el.text or "").strip()
        if tag == "mfrac" and len(kids) == 2:
            num, den = kids
            num = num if len(num) <= 2 else f"({num})"
            den = den if len(den) <= 2 else f"({den})"
            return f"{num}/{den}"
        if tag == "msub" and len(kids) == 2:
            return f"{kids[0]}_{kids[1]}"
        if tag == "msup" and len(kids) == 2:
            return f"{kids[0]}^{kids[1]}"
        if tag == "msubsup" and len(kids) == 3:
            return f"{kids[0]}_{kids[1]}^{kids[2]}"
        if tag == "msqrt":
            return "√(" + "".join(kids) + ")"
        if tag in ("mover", "munder", "munderover") and kids:
            return kids[0] if tag == "mover" and len(kids[0]) == 1 and len(kids) == 2 and len(kids[1]) <= 1 else " ".join(kids)
        if tag == "mspace":
            return " "
        return "".join(kids)

    return " ".join(text(root).split())


_DOLLARS = re.compile(r"\$([^$]+)\$")


def inline_html(text: str, on_error=None) -> str:
    """Text with ``$...$`` maths, `code` and **bold**, as HTML (raw-HTML places: captions, table cells)."""
    out, last = [], 0
    for m in _DOLLARS.finditer(text):
        out.append(html.escape(text[last : m.start()]))
        try:
            out.append(to_mathml(m.group(1).strip()))
        except MathError as exc:
            if on_error is not None:
                on_error(str(exc))
            out.append(f'<code class="mj-tex-error">{html.escape(m.group(1))}</code>')
        last = m.end()
    out.append(html.escape(text[last:]))
    joined = re.sub(r"`([^`]+)`", r"<code>\1</code>", "".join(out))
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", joined)


def load_cache(path: Path) -> None:
    """Read conversions from an earlier build (a missing or unreadable file is an empty cache)."""
    global _cache_dirty
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") == CACHE_VERSION and isinstance(data.get("mathml"), dict):
            _cache.update(data["mathml"])
    except (OSError, ValueError, AttributeError):
        pass
    _cache_dirty = False


def save_cache(path: Path) -> None:
    global _cache_dirty
    if not _cache_dirty:
        return
    from ..report import write_json_atomic

    write_json_atomic(path, {"version": CACHE_VERSION, "mathml": _cache})
    _cache_dirty = False


def render(html_text: str, on_error=None) -> str:
    """Replace every arithmatex span/div in a page's HTML with MathML."""

    def sub(display: bool):
        def repl(m: re.Match) -> str:
            tex = html.unescape(m.group(1)).strip()
            shown_as_block = display
            if tex.startswith(DISPLAY_MARK.strip()):
                tex, shown_as_block = tex[len(DISPLAY_MARK.strip()):].strip(), True
            pieces = split_qquad(tex) if shown_as_block else [tex]
            try:
                try:
                    math = "".join(to_mathml(p, shown_as_block) for p in pieces)
                except MathError:
                    if len(pieces) == 1:
                        raise
                    pieces = [tex]  # the pieces do not stand alone: keep the formula whole
                    math = to_mathml(tex, shown_as_block)
            except MathError as exc:
                if on_error is not None:
                    on_error(str(exc))
                return f'<code class="mj-tex-error">{html.escape(tex)}</code>'
            cls = "mj-display mj-multi" if len(pieces) > 1 else "mj-display"
            if display:
                return f'<div class="{cls}">{math}</div>'
            if shown_as_block:  # a display formula inside a paragraph or list item
                return f'<span class="{cls}">{math}</span>'
            if len(tex) > INLINE_SPLIT_CHARS:
                return split_inline(tex, math)
            return math

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
