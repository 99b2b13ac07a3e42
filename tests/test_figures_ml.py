"""Every figure in figures/ml.py draws in both languages, with labels in that language."""

from __future__ import annotations

import warnings

import pytest

from figures import ml as F
from tests.test_figures_inference import CJK, _labels

FIGURES = ["preln_postln_grad_norms", "softmax_saturation", "lora_trainable_params", "rope_wavelengths"]


@pytest.mark.parametrize("name", FIGURES)
def test_figure_in_both_languages(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zh, en = getattr(F, name)("zh"), getattr(F, name)("en")
    assert CJK.search(" ".join(_labels(zh))), f"{name}: no Chinese label"
    assert not CJK.search(" ".join(_labels(en))), f"{name}: Chinese text in the English figure"
    assert all(ax.has_data() for ax in en.axes)


def test_unknown_language_is_refused():
    with pytest.raises(ValueError, match="lang"):
        F.preln_postln_grad_norms("fr")
