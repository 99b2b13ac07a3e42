"""Every figure in figures/gpu.py draws in both languages; the occupancy figure places the project's kernels
where the calculator puts their compiled registers and shared memory, and the roofline where their counts do."""

from __future__ import annotations

import warnings

import pytest

from figures import gpu as F
from impls.gpu.compiled import missing
from impls.gpu.project_kernels import KERNELS
from tests.test_figures_inference import CJK, _labels

FIGURES = ["bank_conflicts_by_stride", "sectors_by_stride", "occupancy_vs_registers", "roofline_kernels"]


@pytest.mark.parametrize("name", FIGURES)
def test_figure_in_both_languages(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zh, en = getattr(F, name)("zh"), getattr(F, name)("en")
    assert CJK.search(" ".join(_labels(zh))), f"{name}: no Chinese label"
    assert not CJK.search(" ".join(_labels(en))), f"{name}: Chinese text in the English figure"
    assert all(ax.has_data() for ax in en.axes)


def test_bank_figure_is_the_model():
    ax = F.bank_conflicts_by_stride("en").axes[0]
    plain, padded = (line.get_ydata() for line in ax.get_lines()[:2])
    assert plain[31] == 32 and padded[31] == 1          # pitch 32: 32-way; padded to 33: conflict-free


@pytest.mark.skipif(bool(missing(sass=False)), reason=missing(sass=False) or "")
def test_occupancy_figure_marks_every_project_kernel():
    ax = F.occupancy_vs_registers("en").axes[0]
    marks = [t.get_text() for t in ax.texts]
    assert len(marks) == 2 * len(KERNELS) and any("FlashAttention (sm_90)" == m for m in marks)


def test_roofline_places_kernels_by_their_counts():
    ax = F.roofline_kernels("en").axes[0]
    points = {t.get_text(): t.xy for t in ax.texts if t.get_text() in ("FlashAttention", "GAE", "fused log-prob")}
    for key, label in (("flash_attention", "FlashAttention"), ("gae", "GAE"), ("fused_logprob", "fused log-prob")):
        assert points[label][0] == pytest.approx(KERNELS[key].intensity)
