"""Figures drawn from the code at site-build time.

One module per area (``figures/rl.py``, ``figures/inference.py``, ...). A figure is a
function ``fn(lang: str) -> matplotlib.figure.Figure`` whose labels are in ``lang``
(``"zh"`` or ``"en"``); an entry names it in ``figures: [{ref: figures/x.py::fn, caption}]``.
It computes what it draws by calling ``impls/`` (or reading ``benchmarks/results/``),
never from numbers typed into the figure. The site renders it to SVG, cached by content hash.
"""
