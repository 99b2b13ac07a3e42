"""Every figure of ``figures/parallel.py`` draws in both languages from the code it names."""

from __future__ import annotations

import re
import warnings

import pytest
from matplotlib.figure import Figure

from figures import parallel

FIGURES = [parallel.pipeline_timeline, parallel.activation_memory, parallel.context_parallel_traffic]
CJK = re.compile(r"[\u4e00-\u9fff]")


def _texts(fig: Figure) -> list[str]:
    out = []
    for ax in fig.axes:
        out += [ax.get_title(loc="left"), ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        legend = ax.get_legend()
        if legend is not None:
            out += [t.get_text() for t in legend.get_texts()]
    out += [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    return [t for t in out if t]


@pytest.mark.parametrize("fn", FIGURES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("lang", ["zh", "en"])
def test_figure_in_each_language(fn, lang):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # CJK glyphs may be missing from the default font
        fig = fn(lang)
    assert isinstance(fig, Figure) and fig.axes
    texts = " ".join(_texts(fig))
    assert texts
    assert bool(CJK.search(texts)) == (lang == "zh"), texts


def test_pipeline_titles_carry_the_simulated_bubbles():
    fig = parallel.pipeline_timeline("en")
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert [t.split(" — ")[0] for t in titles] == ["GPipe", "1F1B", "interleaved 1F1B (v = 2)", "ZB-H1 (B, W 1 unit each)"]
    assert "27.3%" in titles[0] and "27.3%" in titles[1] and "15.8%" in titles[2] and "11.1%" in titles[3]


@pytest.mark.parametrize("fn", FIGURES, ids=lambda f: f.__name__)
def test_unknown_language_is_refused(fn):
    with pytest.raises(ValueError, match="lang"):
        fn("fr")
