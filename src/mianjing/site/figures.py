"""Entry figures: ``figures/<area>.py::fn`` drawn to SVG at build time, cached by content hash.

An entry lists ``figures: [{ref: figures/rl.py::ppo_clip_objective, caption: {zh, en}}]``;
``fn(lang) -> matplotlib.figure.Figure`` draws with labels in ``lang``, computing what it
shows by calling ``impls/`` or reading ``benchmarks/results/*.json``.

The key of a figure is a hash of everything that can change the picture: the figure
module, every module of this checkout it imports (transitively: ``impls/``, ``figures/``;
the import graph of :mod:`mianjing.imports`) and the data files they name or keep beside
them, the house style, the versions of matplotlib and of the bundled font, and the
language. SVGs live in ``build/cache/figures/<key>.svg``; only missing ones are drawn, by
child processes working through one list in parallel (torch and matplotlib load once in
each; the site's pages are built meanwhile).

Fonts come with the project, not the machine: DejaVu Sans (matplotlib's own) and, for
Chinese, Noto Sans SC from the ``pylopdf-fonts-zh-cn`` wheel pinned in the ``site`` extra,
registered with matplotlib by file path when drawing starts (no system font and no font
cache is consulted for it). Text is drawn as paths (``svg.fonttype: path``), so a reader
needs no font either. A glyph missing from both fonts is a build problem, as is a Chinese
figure without Chinese text or an English one with it.

Run as ``python -m mianjing.site.figures ROOT CACHE JOBS_JSON CLAIMS START`` (what ``Renderer``
does: each child starts at its own place in the list and claims a job by creating
``CLAIMS/<file>``, so no figure is drawn twice and the children finish together).
"""

from __future__ import annotations

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

VERSION = "5"  # bump when the drawing or the SVG post-processing changes

# A figure is shown at the size it is drawn (1 pt = 4/3 CSS px), at most as wide as the text column: 358 CSS px on a
# 390 px phone (tests/site/test_reader.py measures it). Its smallest text must still be PHONE_TEXT_PX there, so a
# figure 5 in wide needs text of 9 pt and more; the house style below meets that at its own size.
PHONE_COLUMN_PX = 358
PHONE_TEXT_PX = 9

STYLE = {
    "font.family": ["DejaVu Sans", "Noto Sans SC"],  # Latin from the first, Chinese from the bundled second
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "legend.fontsize": 9.5,
    "legend.frameon": False,
    "xtick.labelsize": 9.5,
    "ytick.labelsize": 9.5,
    "figure.figsize": [5.0, 3.2],
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

# The Chinese font: (distribution, package, file) -- Noto Sans SC (SIL OFL 1.1; every GB 2312 and GBK
# character but one, all of CJK Unified Ideographs), 8 MB, pinned in pyproject's site extra.
CJK_FONT = ("pylopdf-fonts-zh-cn", "pylopdf_fonts_zh_cn", "NotoSansSC-Regular.otf")


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


def inputs(root: Path, module: Path, graph: dict[str, set[str]] | None = None) -> list[Path]:
    """Every file whose content can change the figures of ``module``, in a stable order."""
    from ..imports import closure, data_files, import_graph, module_name, project_modules

    files = project_modules(root, ("impls", "figures"))
    graph = graph if graph is not None else import_graph(root, ("impls", "figures"))
    name = module_name(module.relative_to(root).as_posix())
    code = [files[m] for m in closure(graph, [name]) if m in files] or [module]
    return sorted({*code, *data_files(root, code)}, key=lambda q: q.relative_to(root).as_posix())


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "none"


def keys_for(root: Path, refs: list[str], langs=("zh", "en")) -> dict[tuple[str, str], Job]:
    """(ref, lang) -> Job with its content key, for every figure ref."""
    digests: dict[str, str] = {}
    out: dict[tuple[str, str], Job] = {}
    common = json.dumps([VERSION, _version("matplotlib"), _version(CJK_FONT[0]), STYLE], sort_keys=True).encode()
    graph = None
    for ref in refs:
        path = ref.split("::", 1)[0]
        if path not in digests:
            h = hashlib.sha256(common)
            module = root / path
            if module.is_file():
                if graph is None:
                    from ..imports import import_graph

                    graph = import_graph(root, ("impls", "figures"))
                for f in inputs(root, module, graph):
                    h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
            digests[path] = h.hexdigest()
        for lang in langs:
            key = hashlib.sha256(f"{digests[path]}|{ref}|{lang}".encode()).hexdigest()[:16]
            out[(ref, lang)] = Job(ref, lang, key)
    return out


# ----------------------------------------------------------------------------- rendering (parent side)


def drawing_processes(n_missing: int) -> int:
    """Drawing processes for ``n_missing`` figures: one per core (``MIANJING_FIGURE_JOBS`` overrides),
    and at least four figures each, since every process first imports torch and matplotlib."""
    want = os.environ.get("MIANJING_FIGURE_JOBS", "")
    n = int(want) if want.isdigit() and int(want) > 0 else (os.cpu_count() or 1)
    return max(1, min(n, -(-n_missing // 4)))


class Renderer:
    """Draws the figures missing from the cache in parallel child processes, while the pages build."""

    def __init__(self, root: Path, cache: Path, jobs: list[Job]):
        self.root, self.cache = root, cache
        self.jobs = list(dict.fromkeys(jobs))
        # grouped by module, so that a child mostly draws the figures of the modules it has imported
        self.missing = sorted((j for j in self.jobs if not (cache / j.file).is_file()), key=lambda j: (j.ref, j.lang))
        self.procs: list[subprocess.Popen] = []
        self.claims: str | None = None
        self.workers = 0  # drawing processes started
        self.started = time.perf_counter()
        self.seconds = 0.0
        if self.missing:
            import tempfile

            cache.mkdir(parents=True, exist_ok=True)
            self.claims = tempfile.mkdtemp(prefix=".claims-", dir=cache)
            env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=os.pathsep.join(
                [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]))
            jobs = json.dumps([[j.ref, j.lang, j.file] for j in self.missing])
            n = self.workers = drawing_processes(len(self.missing))
            for i in range(n):
                start = str(i * len(self.missing) // n)
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "mianjing.site.figures", str(root), str(cache), jobs, self.claims, start],
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                    cwd=root))

    def wait(self, timeout: float = 600) -> list[str]:
        """Problems (one line each) once every figure is drawn or has failed."""
        problems: list[str] = []
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                problems.append(f"figures: drawing took more than {timeout:.0f} s; stopped")
            lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            problems += [f"figure {rec['ref']} ({rec['lang']}): {rec['problem']}" for rec in lines]
            if proc.returncode not in (0, None) and not lines:
                tail = " ".join(err.strip().splitlines()[-1:]) or f"exit status {proc.returncode}"
                problems.append(f"figures: a drawing process failed: {tail}")
        self.procs = []
        if self.claims is not None:
            import shutil

            shutil.rmtree(self.claims, ignore_errors=True)
            self.claims = None
        self.seconds = time.perf_counter() - self.started if self.missing else 0.0
        problems = list(dict.fromkeys(problems))
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

    def sizes(self) -> dict[str, tuple[float, float]]:
        """Each drawn figure's width and height in CSS pixels (its SVG's, in points, times 4/3)."""
        out = {}
        for j in self.jobs:
            try:
                head = (self.cache / j.file).read_bytes()[:600].decode("utf-8", "replace")
            except OSError:
                continue
            m = re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"', head)
            if m:
                out[j.file] = (float(m.group(1)) * 4 / 3, float(m.group(2)) * 4 / 3)
        return out

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


def cjk_font_file() -> Path | None:
    """The bundled Noto Sans SC file (found without importing its package), None if not installed."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(CJK_FONT[1])
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / CJK_FONT[2]
        if path.is_file():
            return path
    return None


_registered: list[str] = []


def register_fonts() -> str | None:
    """Add the bundled Chinese font to matplotlib's font manager by its path (once per process) and make
    it the only font of its family name, so that no system copy and no stale font cache can stand in.
    Returns why it cannot be used, or None."""
    if _registered:
        return None
    path = cjk_font_file()
    if path is None:
        return (f"no Chinese font: {CJK_FONT[0]} is not installed (pip install -e '.[site]' or make setup; "
                "it is a dependency of the site)")
    from matplotlib import font_manager

    fm = font_manager.fontManager
    name = font_manager.FontProperties(fname=str(path)).get_name()
    if name != STYLE["font.family"][1]:
        return f"the bundled font {path.name} is named {name!r}, not {STYLE['font.family'][1]!r}"
    fm.ttflist = [f for f in fm.ttflist if f.name != name]
    fm.addfont(str(path))  # clears the font lookup cache too
    _registered.append(str(path))
    return None


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

    style["axes.prop_cycle"] = cycler(color=STYLE["axes.prop_cycle.colors"])
    problems: list[str] = []
    no_font = register_fonts()
    if no_font is not None:
        if lang == "zh":
            problems.append(no_font)
        style["font.family"] = STYLE["font.family"][:1]
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
        small = too_small_on_a_phone(buf.getvalue(), fig)
        if small:
            problems.append(small)
    for w in caught:
        msg = str(w.message)
        if "missing from" in msg and "font" in msg and no_font is None:
            problems.append(f"{msg} (neither bundled font has it: write the label without it)")
    return minify(buf.getvalue()), list(dict.fromkeys(problems))


_GLYPH_SCALE = re.compile(rb'scale\(([\d.]+) -')  # a glyph drawn as a path: scale(size / FONT_SCALE, -size / FONT_SCALE)


def too_small_on_a_phone(svg: bytes, fig) -> str | None:
    """Why the smallest text of a drawn figure would be under PHONE_TEXT_PX on a phone, or None."""
    from matplotlib.text import Text
    from matplotlib.textpath import TextToPath

    m = re.search(rb'width="([\d.]+)pt"', svg[:600])
    sizes = [float(x) * TextToPath.FONT_SCALE for x in _GLYPH_SCALE.findall(svg)]
    if not m or not sizes:
        return None
    width_px = float(m.group(1)) * 4 / 3
    shown = min(width_px, PHONE_COLUMN_PX)
    smallest = min(sizes)
    px = smallest * 4 / 3 * shown / width_px
    if px >= PHONE_TEXT_PX:
        return None
    which = [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()
             and abs(t.get_fontsize() - smallest) < 0.06]
    need = PHONE_TEXT_PX * 3 / 4 * width_px / shown
    return (f"text of {smallest:g} pt ({which[0][:30]!r}) is {px:.1f} px on a phone, where the figure is {shown:.0f} px "
            f"wide: at {width_px * 3 / 4 / 72:.1f} in wide it needs {need:.1f} pt (or a narrower figure)"
            if which else f"text of {smallest:g} pt is {px:.1f} px on a phone")


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


def _claim(claims: Path, file: str) -> bool:
    """True for the one process that gets to draw ``file``."""
    try:
        os.close(os.open(claims / file, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def main(argv: list[str]) -> int:
    root, cache = Path(argv[0]).resolve(), Path(argv[1])
    jobs = json.loads(argv[2])
    claims = Path(argv[3]) if len(argv) > 3 else None
    start = int(argv[4]) if len(argv) > 4 else 0
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    for ref, lang, file in jobs[start:] + jobs[:start]:
        if claims is not None and not _claim(claims, file):
            continue
        svg, problems = draw(root, ref, lang)
        for p in problems:
            print(json.dumps({"ref": ref, "lang": lang, "problem": p}, ensure_ascii=False), flush=True)
        if svg is not None and not problems:
            _write_atomic(cache / file, svg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
