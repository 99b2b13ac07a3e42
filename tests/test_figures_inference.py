"""Every figure in figures/inference.py draws in both languages, with labels in that language."""

from __future__ import annotations

import re
import warnings

import pytest

from figures import inference as F

FIGURES = ["flash_attention_io", "kv_memory_vs_seq", "roofline", "paged_kv_utilisation", "speculative_tokens"]
CJK = re.compile(r"[\u4e00-\u9fff]")


def _labels(fig) -> list[str]:
    out = []
    for ax in fig.axes:
        out += [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
        out += [t.get_text() for t in ax.get_xticklabels()]
        leg = ax.get_legend()
        if leg is not None:
            out += [t.get_text() for t in leg.get_texts()]
    return [s for s in out if s]


@pytest.mark.parametrize("name", FIGURES)
def test_figure_in_both_languages(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # missing CJK glyphs in the test machine's fonts
        zh, en = getattr(F, name)("zh"), getattr(F, name)("en")
    zh_text, en_text = " ".join(_labels(zh)), " ".join(_labels(en))
    assert CJK.search(zh_text), f"{name}: no Chinese label"
    assert not CJK.search(en_text), f"{name}: Chinese text in the English figure"
    assert all(ax.has_data() for ax in en.axes)
    assert zh.axes[0].get_ylabel() and en.axes[0].get_xlabel()


def test_unknown_language_is_refused():
    with pytest.raises(ValueError, match="lang"):
        F.kv_memory_vs_seq("fr")
