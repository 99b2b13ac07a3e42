"""The GEMM intensity figure draws in both languages, and its bars and ridge lines are the model's figures."""

from __future__ import annotations

import warnings

import pytest

from figures import kernels as F
from impls.kernels import gemm_model as G
from tests.test_figures_inference import CJK, _labels


def test_gemm_intensity_in_both_languages_and_from_the_model():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zh, en = F.gemm_intensity("zh"), F.gemm_intensity("en")
    assert CJK.search(" ".join(_labels(zh))), "no Chinese label"
    assert not CJK.search(" ".join(_labels(en))), "Chinese text in the English figure"
    ax = en.axes[0]
    fp32 = sorted(p.get_height() for p in ax.containers[0])
    assert fp32[0] == pytest.approx(G.intensity(G.NAIVE, 4)) and fp32[-1] > G.MACHINES["H100"].ridge(False)
    ridges = sorted(line.get_ydata()[0] for line in ax.get_lines())
    want = sorted(G.MACHINES[m].ridge(tc) for m in ("A100", "H100") for tc in (False, True))
    assert ridges == pytest.approx(want)
