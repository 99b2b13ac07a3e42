"""Code shown on the site, highlighted once per file: page snippets, lazily loaded verifier sources, file pages.

Every file a page shows code from is highlighted once (Pygments, the classes the theme
colours in light and dark) and split into lines; a snippet is a slice of those lines, so a
function shown on an entry page and the same lines on the file's own page always agree.

- ``inline(snippet)``: HTML for a page (reference implementations): the code, line numbers,
  and a link to the file's page at those lines.
- ``lazy(snippet, root_prefix)``: a placeholder that loads the code when its section is
  opened (verifier sources: long, and inside collapsed cards; the page stays light).
- ``write(site_dir)``: the file pages ``src/<path>.html`` (one line anchor per line) and the
  snippet fragments ``src/_/<key>.html`` that ``lazy`` placeholders load. Written once, at the
  site root, for both languages.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

from .source import Snippet

SRC_DIR = "src"
CACHE_VERSION = "3"
# Spans that change nothing on screen, dropped for lighter pages: whitespace, and names (the theme
# colours ``.n`` with the code's own foreground colour, --md-code-hl-name-color = --md-code-fg-color).
_PLAIN_SPAN = re.compile(r'<span class="[wn]">([^<]*)</span>')
# Operators and punctuation share one colour in the theme (--md-default-fg-color--light): one class,
# and a run of them in one span.
_OPERATOR_SPAN = re.compile(r'<span class="o">')
_RUN = re.compile(r'<span class="p">([^<]*)</span><span class="p">')

# highlighted lines by the sha256 of the file's text: shared by both languages, kept between builds
_HIGHLIGHTED: dict[str, list[str]] = {}
_dirty = False


def load_cache(path: Path) -> None:
    global _dirty
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") == CACHE_VERSION:
            _HIGHLIGHTED.update(data.get("files") or {})
    except (OSError, ValueError, AttributeError):
        pass
    _dirty = False


def save_cache(path: Path, keep: set[str] | None = None) -> None:
    """Write the cache (only the files still in use, when ``keep`` names their digests)."""
    global _dirty
    if not _dirty:
        return
    from ..report import write_json_atomic

    files = {k: v for k, v in _HIGHLIGHTED.items() if keep is None or k in keep}
    write_json_atomic(path, {"version": CACHE_VERSION, "files": files})
    _dirty = False


def _highlight(path: str, text: str) -> list[str]:
    global _dirty
    key = hashlib.sha256(f"{path}\0{text}".encode()).hexdigest()
    if key not in _HIGHLIGHTED:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import TextLexer, get_lexer_for_filename
        from pygments.util import ClassNotFound

        try:
            lexer = get_lexer_for_filename(path, stripnl=False, ensurenl=True)
        except ClassNotFound:
            lexer = TextLexer(stripnl=False, ensurenl=True)
        n = len(text.splitlines())
        out = highlight(text, lexer, HtmlFormatter(nowrap=True))
        out = _PLAIN_SPAN.sub(r"\1", out)
        out = _OPERATOR_SPAN.sub('<span class="p">', out)
        while True:
            merged = _RUN.sub(r'<span class="p">\1', out)
            if merged == out:
                break
            out = merged
        lines = out.split("\n")
        _HIGHLIGHTED[key] = (lines + [""] * n)[:n]
        _dirty = True
    return _HIGHLIGHTED[key]


@dataclass(frozen=True)
class _Fragment:
    path: str
    start: int
    end: int


class Code:
    def __init__(self, root: Path):
        self.root = root
        self._lines: dict[str, list[str]] = {}
        self.files: set[str] = set()
        self.fragments: dict[str, _Fragment] = {}

    # ------------------------------------------------------------------ highlighting

    def lines(self, path: str) -> list[str]:
        """The highlighted lines of a file (HTML, one string per source line)."""
        if path not in self._lines:
            self._lines[path] = _highlight(path, (self.root / path).read_text(encoding="utf-8"))
        return self._lines[path]

    def _block(self, path: str, start: int, end: int) -> str:
        body = "".join(f'<span class="mj-line">{line or " "}</span>\n'
                       for line in self.lines(path)[start - 1 : end])
        return (f'<div class="language-python highlight mj-code"><pre><code class="mj-lines" '
                f'style="counter-reset: mj-line {start - 1}">{body}</code></pre></div>')

    # ------------------------------------------------------------------ what pages embed

    def file_url(self, path: str, start: int | None = None, end: int | None = None) -> str:
        """The file page's URL relative to the site root, with a line anchor."""
        self.files.add(path)
        anchor = f"#L{start}" + (f"-L{end}" if end and end != start else "") if start else ""
        return f"{SRC_DIR}/{path}.html{anchor}"

    def title(self, snip: Snippet, root_prefix: str) -> str:
        where = f"{snip.path}::{snip.name}" if snip.name else snip.path
        url = root_prefix + self.file_url(snip.path, snip.start, snip.end)
        return (f'<div class="mj-src-title"><a href="{html.escape(url)}"><code>{html.escape(where)}</code></a>'
                f' <span>L{snip.start}–{snip.end}</span></div>')

    def inline(self, snip: Snippet, root_prefix: str) -> str:
        return f'<div class="mj-src">{self.title(snip, root_prefix)}{self._block(snip.path, snip.start, snip.end)}</div>'

    def lazy(self, snip: Snippet, root_prefix: str, note: str) -> str:
        """A placeholder as tall as the listing it loads (the note, then blank lines in the same box), so that
        nothing below it moves when the code arrives: a link to a heading further down lands where it points."""
        self.files.add(snip.path)
        text = (self.root / snip.path).read_bytes()
        key = hashlib.sha256(f"{snip.path}\0{snip.start}\0{snip.end}\0".encode() + text).hexdigest()[:16]
        self.fragments[key] = _Fragment(snip.path, snip.start, snip.end)
        url = f"{root_prefix}{SRC_DIR}/_/{key}.html"
        lines = f'<span class="mj-line">{html.escape(note)}</span>\n' + '<span class="mj-line"> </span>\n' * (snip.end - snip.start)
        return (f'<div class="mj-src mj-lazy" data-src="{html.escape(url)}" data-search-exclude>'
                f'{self.title(snip, root_prefix)}<div class="language-python highlight mj-code mj-reserve"><pre><code '
                f'class="mj-lines" style="counter-reset: mj-line {snip.start - 1}">{lines}</code></pre></div></div>')

    # ------------------------------------------------------------------ the files

    def write(self, site_dir: Path) -> int:
        """Write file pages and fragments under ``site_dir/src``; returns how many files."""
        base = site_dir / SRC_DIR
        (base / "_").mkdir(parents=True, exist_ok=True)
        for key, f in self.fragments.items():
            (base / "_" / f"{key}.html").write_text(self._block(f.path, f.start, f.end), encoding="utf-8")
        for path in sorted(self.files):
            out = base / f"{path}.html"
            out.parent.mkdir(parents=True, exist_ok=True)
            depth = path.count("/") + 1  # src/ plus the folders of path
            out.write_text(_file_page(path, self.lines(path), "../" * depth), encoding="utf-8")
        return len(self.files) + len(self.fragments)


def _file_page(path: str, lines: list[str], root: str) -> str:
    body = "".join(f'<span class="l" id="L{i}"><a class="n" href="#L{i}">{i}</a>{line or " "}</span>'
                   for i, line in enumerate(lines, 1))  # block spans: a newline between them would be a blank line
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{html.escape(path)} · mianjing</title><meta name="robots" content="noindex"><link rel="icon" href="data:,">
<script>{_THEME_JS.replace("ROOT", root)}</script><style>{_PAGE_CSS}</style></head>
<body><header><a href="{root}">mianjing 面经</a><h1><code>{html.escape(path)}</code></h1></header>
<main><pre class="highlight" tabindex="0"><code>{body}</code></pre></main>
<script>{_PAGE_JS}</script></body></html>
"""


# the theme the reader chose on the site (mkdocs-material keeps it in localStorage under the site's root)
_THEME_JS = """(function(){try{var p=JSON.parse(localStorage.getItem(new URL("ROOT",location).pathname+".__palette"));
var s=p&&p.color&&p.color.scheme;if(s)document.documentElement.setAttribute("data-theme",s==="slate"?"dark":"light");}catch(e){}})();"""

_DARK = "--bg:#1e2129;--fg:#ddd;--rule:#333;--a:#8c9eff;--num:#9e9e9e;--hit:#4a3f10;--k:#ce93d8;--s:#a5d6a7;--c:#b0b0b0;--m:#ef9a9a;--f:#90caf9;--b:#ffcc80"
_PAGE_CSS = """
:root{--bg:#fff;--fg:#222;--rule:#ddd;--a:#3f51b5;--num:#6b6b6b;--hit:#fff3c4;--k:#7b1fa2;--s:#2e7d32;--c:#616161;--m:#c62828;--f:#1565c0;--b:#a84300}
html[data-theme=dark]{""" + _DARK + """}
@media (prefers-color-scheme:dark){html:not([data-theme=light]){""" + _DARK + """}}
body{margin:0;font:14px/1.5 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--bg);color:var(--fg)}
header{font-family:system-ui,sans-serif;padding:.6em 1em;border-bottom:1px solid var(--rule);overflow-wrap:anywhere}
header a{color:var(--a)}
h1{font-size:1rem;font-weight:600;margin:.2em 0 0}h1 code{font-size:inherit}
pre{margin:0;padding:.5em 0;overflow-x:auto}
.l{display:block;padding-right:1em;white-space:pre;scroll-margin-top:4em}
.l:target,.l.hit{background:var(--hit)}
.n{display:inline-block;width:3.5em;margin-right:1em;text-align:right;color:var(--num);text-decoration:none;user-select:none}
.k,.kn,.kd,.kc,.ow{color:var(--k)}.s,.s1,.s2,.sd,.sa,.se{color:var(--s)}.c,.c1,.cm{color:var(--c);font-style:italic}
.mi,.mf,.il{color:var(--m)}.nf,.nc{color:var(--f)}.nd,.bp,.nb{color:var(--b)}
"""

# the lines a link names (#L12 or #L12-L30): marked, and the first scrolled to the top
_PAGE_JS = """(function(){function go(){document.querySelectorAll('.l.hit').forEach(function(e){e.classList.remove('hit');});
var m=/^#L(\\d+)(?:-L(\\d+))?$/.exec(location.hash);if(!m)return;var a=+m[1],b=+(m[2]||m[1]);
for(var i=a;i<=b;i++){var e=document.getElementById('L'+i);if(e)e.classList.add('hit');}
var first=document.getElementById('L'+a);if(first)first.scrollIntoView({block:'start'});}
go();window.addEventListener('hashchange',go);})();"""
