"""Figures drawn from the code at site-build time.

One module per area (``figures/rl.py``, ``figures/inference.py``, ...). A figure is a
function ``fn(lang: str) -> matplotlib.figure.Figure`` whose labels are in ``lang``
(``"zh"`` or ``"en"``); an entry names it in ``figures: [{ref: figures/x.py::fn, caption}]``.
It computes what it draws by calling ``impls/`` (or reading ``benchmarks/results/`` through
:func:`results`, naming the file literally so the site's cache sees it), never from numbers
typed into the figure. The site renders it to SVG, cached by content hash
(``src/mianjing/site/figures.py``): the house style (fonts with a CJK fallback, colours,
sizes) is set around the call, so a figure sets only what is particular to it. Build with
``matplotlib.figure.Figure`` (no pyplot state); Chinese labels need Chinese text, English
labels none, or the site build reports the figure.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def L(lang: str, zh: str, en: str) -> str:
    """The label in the figure's language."""
    return zh if lang == "zh" else en


def results(name: str) -> dict:
    """A benchmark result, ``benchmarks/results/<name>`` (e.g. ``results("gae_scan.json")``)."""
    return json.loads((ROOT / "benchmarks" / "results" / name).read_text(encoding="utf-8"))
