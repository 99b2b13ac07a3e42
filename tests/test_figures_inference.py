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
    assert zh.axes[0].get_ylabel() and any(ax.get_xlabel() for ax in en.axes)  # stacked panels: the x label at the foot


def test_unknown_language_is_refused():
    with pytest.raises(ValueError, match="lang"):
        F.kv_memory_vs_seq("fr")


def test_flash_attention_io_draws_the_shipped_kernels_tile_and_bytes():
    """The IO figure follows impls/inference/flash_attention_triton.py: its BLOCK_M × BLOCK_N tile in the legend,
    and its hbm_bytes() (not a copy of the formula) for the kernel's points, on top of the Q-outer count."""
    from impls.inference.flash_attention_triton import BLOCK_M, BLOCK_N, hbm_bytes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = F.flash_attention_io("en")
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    tile = f"{BLOCK_M}×{BLOCK_N}"
    assert sum(tile in label for label in lines) >= 3            # both loop orders and the kernel
    kernel = next(line for label, line in lines.items() if "hbm_bytes" in label and "causal" not in label)
    q_outer = next(line for label, line in lines.items() if "Q outer" in label)
    ns = [int(x) for x in kernel.get_xdata()]
    assert list(kernel.get_ydata()) == pytest.approx([hbm_bytes(n, 64) / 2**20 for n in ns])
    # the same traffic as the Q-outer count, but for the lse: fp32 (4 bytes) in the kernel, one fp16 element there
    for n, k_mib, q_mib in zip(ns, kernel.get_ydata(), q_outer.get_ydata()):
        assert k_mib * 2**20 == pytest.approx(q_mib * 2**20 + 2 * n)
