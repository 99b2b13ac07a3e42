"""Missing figures are drawn by several processes working through one list: each figure exactly once."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from mianjing.site import figures as F

FIGS = textwrap.dedent("""
    import os
    from matplotlib.figure import Figure


    def _fig(name, lang):
        with open(os.environ["DRAWN_LOG"], "a") as log:
            log.write(f"{name} {lang} {os.getpid()}\\n")
        fig = Figure(figsize=(2, 1))
        fig.subplots().set_title("图" if lang == "zh" else "figure")
        return fig
""") + "".join(f"\n\ndef f{i}(lang):\n    return _fig('f{i}', lang)\n" for i in range(6))


def test_how_many_drawing_processes(monkeypatch):
    monkeypatch.setenv("MIANJING_FIGURE_JOBS", "3")
    assert [F.drawing_processes(n) for n in (1, 4, 5, 9, 40)] == [1, 1, 2, 3, 3]
    monkeypatch.delenv("MIANJING_FIGURE_JOBS")
    assert F.drawing_processes(4 * (os.cpu_count() or 1) + 1) == (os.cpu_count() or 1)


def test_parallel_processes_draw_each_figure_once(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "figures").mkdir(parents=True)
    (root / "figures" / "__init__.py").write_text("")
    (root / "figures" / "many.py").write_text(FIGS, encoding="utf-8")
    log = tmp_path / "drawn.log"
    monkeypatch.setenv("DRAWN_LOG", str(log))
    monkeypatch.setenv("MIANJING_FIGURE_JOBS", "2")
    jobs = list(F.keys_for(root, [f"figures/many.py::f{i}" for i in range(6)]).values())
    renderer = F.Renderer(root, tmp_path / "cache", jobs)
    assert renderer.workers == 2
    assert renderer.wait() == []
    drawn = [line.split() for line in log.read_text().splitlines()]
    assert sorted((name, lang) for name, lang, _ in drawn) == sorted((j.ref.split("::")[1], j.lang) for j in jobs)
    assert len({pid for *_, pid in drawn}) <= 2
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(j.file for j in jobs)  # no claim files left
    again = F.Renderer(root, tmp_path / "cache", jobs)
    assert again.missing == [] and again.workers == 0 and again.wait() == []
