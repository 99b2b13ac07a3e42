"""Every figure of ``figures/systems.py`` draws in both languages from the code it names."""

from __future__ import annotations

import re
import warnings

import pytest
from matplotlib.figure import Figure

from figures import systems

FIGURES = [systems.ring_allreduce_steps, systems.planner_layouts, systems.serving_latency, systems.stale_update_bias]
CJK = re.compile(r"[\u4e00-\u9fff]")


def _texts(fig: Figure) -> list[str]:
    out = [fig.get_suptitle()] if fig.get_suptitle() else []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        out += [t.get_text() for t in ax.get_yticklabels()]
        legend = ax.get_legend()
        if legend is not None:
            out += [t.get_text() for t in legend.get_texts()]
    return [t for t in out if t]


@pytest.mark.parametrize("fn", FIGURES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("lang", ["zh", "en"])
def test_figure_in_each_language(fn, lang):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # CJK glyphs may be missing from the default font
        fig = fn(lang)
    assert isinstance(fig, Figure) and fig.axes
    texts = " ".join(_texts(fig))
    assert bool(CJK.search(texts)) == (lang == "zh"), texts


@pytest.mark.parametrize("fn", FIGURES, ids=lambda f: f.__name__)
def test_unknown_language_is_refused(fn):
    with pytest.raises(ValueError, match="lang"):
        fn("fr")


def test_ring_figure_ends_with_every_chunk_summed():
    fig = systems.ring_allreduce_steps("en")
    last = fig.axes[-1]
    numbers = [t.get_text() for t in last.texts]
    assert numbers == ["4"] * 16                         # after 2(N-1) = 6 steps every rank holds every sum
    after_rs = [t.get_text() for t in fig.axes[3].texts]  # after the 3 reduce steps: one full chunk per rank
    assert after_rs.count("4") == 4


def test_planner_figure_shows_fitting_then_not_fitting():
    fig = systems.planner_layouts("en")
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(labels) == 12 and all("does not fit" in x for x in labels[8:]) and not any("does not fit" in x for x in labels[:8])
