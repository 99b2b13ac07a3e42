"""A figure's smallest text is at least 9 px on a 390 px phone, or the strict build says which text and what it needs."""

from __future__ import annotations

import textwrap

from mianjing.site import figures as F

PROBE = textwrap.dedent("""
    from matplotlib.figure import Figure


    def _fig(size, title_pt, lang):
        fig = Figure(figsize=size)
        ax = fig.subplots()
        ax.plot([0, 1], [0, 1])
        ax.set_title(("图 " if lang == "zh" else "") + "title", fontsize=title_pt)
        return fig


    def house(lang):          # 5 in wide, the house style's sizes: 9.2 px on a phone
        return _fig((5.0, 3.2), None, lang)


    def wide(lang):           # 9 in wide (7.6 in as saved): its 9.5 pt ticks are 6.2 px on a phone
        return _fig((9.0, 3.0), None, lang)


    def small_text(lang):     # 2 in wide, shown at its own size, but a 6 pt title is 8 px
        return _fig((2.0, 1.2), 6, lang)
""")


def _draw(tmp_path, monkeypatch, fn: str) -> list[str]:
    (tmp_path / "phoneprobe").mkdir(exist_ok=True)
    (tmp_path / "phoneprobe" / "__init__.py").write_text("")
    (tmp_path / "phoneprobe" / "figs.py").write_text(PROBE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    svg, problems = F.draw(tmp_path, f"phoneprobe/figs.py::{fn}", "en")
    assert svg is not None
    return problems


def test_the_house_style_reads_on_a_phone(tmp_path, monkeypatch):
    assert _draw(tmp_path, monkeypatch, "house") == []


def test_a_wide_figure_is_refused_with_the_size_it_needs(tmp_path, monkeypatch):
    (problem,) = _draw(tmp_path, monkeypatch, "wide")
    assert "text of 9.5 pt" in problem and "px on a phone, where the figure is 358 px wide" in problem, problem
    px = float(problem.split(") is ")[1].split(" px")[0])
    assert 6.0 < px < 6.5, problem


def test_small_text_in_a_small_figure_is_refused(tmp_path, monkeypatch):
    (problem,) = _draw(tmp_path, monkeypatch, "small_text")
    assert "text of 6 pt ('title') is 8.0 px on a phone" in problem, problem
