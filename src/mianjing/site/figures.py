"""Entry figures: ``figures/<area>.py::fn`` drawn to SVG at build time, cached by content hash.

An entry lists ``figures: [{ref: figures/rl.py::ppo_clip_objective, caption: {zh, en}}]``;
``fn(lang) -> matplotlib.figure.Figure`` draws with labels in ``lang``, computing what it
shows by calling ``impls/`` or reading ``benchmarks/results/*.json``.

The key of a figure is a hash of everything that can change the picture: the figure
module, every module of this checkout it imports (transitively: ``impls/``, ``figures/``),
every ``benchmarks/results`` file it names, the house style, matplotlib's version and the
language. SVGs live in ``build/cache/figures/<key>.svg``; only missing ones are drawn, in
one child process (torch and matplotlib load once there, and the site's pages are built
meanwhile). Text is drawn as paths (``svg.fonttype: path``), so a reader needs no CJK
font; the build does (``fonts-wqy-microhei``), and a glyph missing from every font is a
build problem, as is a Chinese figure without Chinese text or an English one with it.

Run as ``python -m mianjing.site.figures ROOT CACHE JOBS_JSON`` (what ``Renderer`` does).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

VERSION = "3"  # bump when the drawing or the SVG post-processing changes

STYLE = {
    "font.family": ["DejaVu Sans"],  # + the first installed font of CJK_FONTS, as a fallback
    "font.size": 9.5,
    "axes.titlesize": 10,
    "axes.labelsize": 9.5,
    "legend.fontsize": 8.5,
    "legend.frameon": False,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "figure.figsize": [6.4, 3.0],
    "figure.dpi": 100,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "lines.linewidth": 1.8,
    # colour-blind-safe, and still distinct after the dark theme inverts the figure
    "axes.prop_cycle.colors": ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"],
    "svg.fonttype": "path",
    "svg.hashsalt": "mianjing",
}


CJK_FONTS = ("WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC")


@dataclass(frozen=True)
class Job:
    ref: str  # figures/rl.py::ppo_clip_objective
    lang: str
    key: str

    @property
    def file(self) -> str:
        """The SVG's name in the cache and in the site's ``assets/figures/``."""
        path, fn = self.ref.split("::", 1)
        return f"{Path(path).stem}.{fn}.{self.key}.{self.lang}.svg"


# ----------------------------------------------------------------------------- keys


def _module_file(root: Path, dotted: str) -> list[Path]:
    """The file(s) a dotted module name loads inside this checkout: package __init__s and the module."""
    parts = dotted.split(".")
    out: list[Path] = []
    for i in range(1, len(parts) + 1):
        base = root.joinpath(*parts[:i])
        if (base / "__init__.py").is_file():
            out.append(base / "__init__.py")
        elif i == len(parts) and base.with_suffix(".py").is_file():
            out.append(base.with_suffix(".py"))
    return out


def _imports(root: Path, path: Path) -> tuple[list[Path], list[str]]:
    """Files of this checkout that ``path`` imports, and the ``*.json`` names its string constants mention."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return [], []
    rel_pkg = path.relative_to(root).parent.as_posix().replace("/", ".")
    files: list[Path] = []
    jsons: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                files += _module_file(root, a.name)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = rel_pkg.split(".")[: len(rel_pkg.split(".")) - (node.level - 1)]
                mod = ".".join([*base, mod] if mod else base)
            files += _module_file(root, mod)
            for a in node.names:  # from impls.rl import ppo
                files += [f for f in _module_file(root, f"{mod}.{a.name}") if f.name != "__init__.py" or f.parent.name == a.name]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".json"):
            jsons.append(node.value)
    return files, jsons


def inputs(root: Path, module: Path) -> list[Path]:
    """Every file whose content can change the figures of ``module``, in a stable order."""
    seen: dict[Path, None] = {}
    todo = [module]
    results = root / "benchmarks" / "results"
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen[p] = None
        files, jsons = _imports(root, p)
        todo += [f for f in files if f not in seen]
        for name in jsons:
            for cand in (root / name, results / Path(name).name):
                if cand.is_file():
                    seen.setdefault(cand, None)
                    break
    return sorted(seen, key=lambda q: q.relative_to(root).as_posix())


def _mpl_version() -> str:
    try:
        return metadata.version("matplotlib")
    except metadata.PackageNotFoundError:
        return "none"


def keys_for(root: Path, refs: list[str], langs=("zh", "en")) -> dict[tuple[str, str], Job]:
    """(ref, lang) -> Job with its content key, for every figure ref."""
    digests: dict[str, str] = {}
    out: dict[tuple[str, str], Job] = {}
    common = json.dumps([VERSION, _mpl_version(), STYLE], sort_keys=True).encode()
    for ref in refs:
        path = ref.split("::", 1)[0]
        if path not in digests:
            h = hashlib.sha256(common)
            module = root / path
            if module.is_file():
                for f in inputs(root, module):
                    h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
            digests[path] = h.hexdigest()
        for lang in langs:
            key = hashlib.sha256(f"{digests[path]}|{ref}|{lang}".encode()).hexdigest()[:16]
            out[(ref, lang)] = Job(ref, lang, key)
    return out


# ----------------------------------------------------------------------------- rendering (parent side)


class Renderer:
    """Draws the figures missing from the cache in one child process, while the pages build."""

    def __init__(self, root: Path, cache: Path, jobs: list[Job]):
        self.root, self.cache = root, cache
        self.jobs = list(dict.fromkeys(jobs))
        self.missing = [j for j in self.jobs if not (cache / j.file).is_file()]
        self.proc: subprocess.Popen | None = None
        self.started = time.perf_counter()
        self.seconds = 0.0
        if self.missing:
            cache.mkdir(parents=True, exist_ok=True)
            env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=os.pathsep.join(
                [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]))
            jobs = json.dumps([[j.ref, j.lang, j.file] for j in self.missing])
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mianjing.site.figures", str(root), str(cache), jobs],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=root)

    def wait(self, timeout: float = 600) -> list[str]:
        """Problems (one line each) once every figure is drawn or has failed."""
        problems: list[str] = []
        if self.proc is not None:
            try:
                out, err = self.proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                out, err = self.proc.communicate()
                problems.append(f"figures: drawing took more than {timeout:.0f} s; stopped")
            for line in out.splitlines():
                if line.startswith("{"):
                    rec = json.loads(line)
                    problems.append(f"figure {rec['ref']} ({rec['lang']}): {rec['problem']}")
            if self.proc.returncode not in (0, None) and not problems:
                tail = " ".join(err.strip().splitlines()[-1:]) or f"exit status {self.proc.returncode}"
                problems.append(f"figures: the drawing process failed: {tail}")
            self.proc = None
        self.seconds = time.perf_counter() - self.started if self.missing else 0.0
        for j in self.jobs:
            if not (self.cache / j.file).is_file() and not any(j.ref in p and f"({j.lang})" in p for p in problems):
                problems.append(f"figure {j.ref} ({j.lang}): not drawn")
        return problems

    def copy_to(self, site_dir: Path, lang: str) -> None:
        dest = site_dir / "assets" / "figures"
        dest.mkdir(parents=True, exist_ok=True)
        for j in self.jobs:
            if j.lang == lang and (self.cache / j.file).is_file():
                data = (self.cache / j.file).read_bytes()
                (dest / j.file).write_bytes(data)

    def prune(self) -> None:
        """Forget SVGs no figure of this checkout uses any more."""
        keep = {j.file for j in self.jobs}
        if self.cache.is_dir():
            for p in self.cache.glob("*.svg"):
                if p.name not in keep:
                    p.unlink(missing_ok=True)


# ----------------------------------------------------------------------------- rendering (child side)


def _has_cjk(text: str) -> bool:
    return any("\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" for ch in text)


def draw(root: Path, ref: str, lang: str) -> tuple[bytes | None, list[str]]:
    """One figure as SVG bytes, and its problems."""
    import importlib
    import io
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    path, fn_name = ref.split("::", 1)
    module = path[:-3].replace("/", ".")
    style = {k: v for k, v in STYLE.items() if k != "axes.prop_cycle.colors"}
    from cycler import cycler
    from matplotlib import font_manager

    style["axes.prop_cycle"] = cycler(color=STYLE["axes.prop_cycle.colors"])
    installed = {f.name for f in font_manager.fontManager.ttflist}
    cjk = next((f for f in CJK_FONTS if f in installed), None)
    style["font.family"] = [*STYLE["font.family"], *([cjk] if cjk else [])]
    problems: list[str] = []
    if cjk is None and lang == "zh":
        problems.append(f"no Chinese font installed (one of {', '.join(CJK_FONTS)}; apt install fonts-wqy-microhei)")
    with matplotlib.rc_context(style), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn = getattr(importlib.import_module(module), fn_name)
            fig = fn(lang)
        except Exception as exc:  # the figure's own code failed: say where, in one line
            import traceback

            tb = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).is_relative_to(root)]
            spots = [f"{Path(f.filename).relative_to(root)}:{f.lineno}" for f in tb]
            here = " → ".join(dict.fromkeys([spots[0], spots[-1]])) if spots else "?"
            return None, [f"{type(exc).__name__}: {' '.join(str(exc).split())} (at {here})"]
        if not isinstance(fig, Figure):
            return None, [f"returned {type(fig).__name__}, not a matplotlib Figure"]
        texts = " ".join(t.get_text() for t in fig.findobj(Text) if t.get_visible())
        if lang == "zh" and not _has_cjk(texts):
            problems.append("the Chinese figure has no Chinese text: label it in the language asked for")
        if lang == "en" and _has_cjk(texts):
            problems.append("the English figure has Chinese text: label it in the language asked for")
        buf = io.BytesIO()
        fig.savefig(buf, format="svg", transparent=True, bbox_inches="tight", metadata={"Date": None})
    for w in caught:
        msg = str(w.message)
        if "missing from" in msg and "font" in msg:
            problems.append(f"{msg} (install fonts-wqy-microhei)")
    return minify(buf.getvalue()), list(dict.fromkeys(problems))


_METADATA = re.compile(rb"<metadata>.*?</metadata>\s*|<!--.*?-->", re.S)
_LONG_DECIMAL = re.compile(rb"(?<![\d.])([1-9]\d*\.\d\d)\d+")  # 1 and above: glyph scales (0.015625) stay exact
_BREAK = re.compile(rb"\s*\n\s*")
_GAP = re.compile(rb">\s+<")
_TRAILING = re.compile(rb'\s+"(?=[\s/>])')  # `d="M 0 0 L 1 1 "`: the space before an attribute's closing quote


def minify(svg: bytes) -> bytes:
    """The same picture in fewer bytes (about a sixth fewer): no metadata or comments, coordinates
    of 1 pt and more to 0.01 pt (far below a pixel; scale factors under 1 stay exact), no line breaks or indentation."""
    svg = _METADATA.sub(b"", svg)
    svg = _LONG_DECIMAL.sub(rb"\1", svg)
    svg = _BREAK.sub(b" ", svg)
    svg = _GAP.sub(b"><", svg)
    return _TRAILING.sub(b'"', svg)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    root, cache = Path(argv[0]).resolve(), Path(argv[1])
    jobs = json.loads(argv[2])
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    for ref, lang, file in jobs:
        svg, problems = draw(root, ref, lang)
        for p in problems:
            print(json.dumps({"ref": ref, "lang": lang, "problem": p}, ensure_ascii=False), flush=True)
        if svg is not None and not problems:
            _write_atomic(cache / file, svg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
