"""``mianjing zero`` prints the ZeRO paper's worked example and sane tables."""

import re

import pytest
from rich.console import Console

from mianjing.calculators.zero_cli import run


def _render(**kwargs) -> str:
    console = Console(record=True, width=200, color_system=None)
    run(console=console, **kwargs)
    return console.export_text()


def test_paper_worked_example():
    # ZeRO (arXiv 1910.02054) Figure 1 / §5: Ψ = 7.5B, N_d = 64, K = 12
    out = _render(params=7.5e9, gpus=64)
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") >= 6}
    assert "120.00" in rows["DP"]
    assert "31.41" in rows["ZeRO-1 (P_os)"]     # paper prints 31.4
    assert "16.64" in rows["ZeRO-2 (P_os+g)"]   # paper prints 16.6
    assert "1.88" in rows["ZeRO-3 (P_os+g+p)"]  # paper prints 1.88 (exact 1.875)
    assert "3Ψ" in rows["ZeRO-3 (P_os+g+p)"] and "2Ψ" in rows["DP"]
    assert "16" in rows["DP"].split("│")[2]     # bytes/param


def _column(out: str, stage: str, col: int) -> str:
    row = next(l for l in out.splitlines() if l.count("│") >= 6 and l.split("│")[1].strip() == stage)
    return row.split("│")[col].strip()


def test_ring_bytes_column():
    # a ring sends (N-1)/N of the paper's volume (2Ψ, 2Ψ, 2Ψ, 3Ψ elements) at 2 bytes per element:
    # Ψ = 7.5e9 on 64 ranks: 2·7.5e9·2·63/64 = 29.53125e9 and 3·7.5e9·2·63/64 = 44.296875e9 bytes
    out = _render(params=7.5e9, gpus=64)
    for stage in ("DP", "ZeRO-1 (P_os)", "ZeRO-2 (P_os+g)"):
        assert _column(out, stage, 6) == "29.53", stage
    assert _column(out, "ZeRO-3 (P_os+g+p)", 6) == "44.30"
    # two ranks send half the volume; one rank sends nothing
    out = _render(params=1e9, gpus=2)
    assert _column(out, "DP", 6) == "2.00" and _column(out, "ZeRO-3 (P_os+g+p)", 6) == "3.00"
    out = _render(params=1e9, gpus=1)
    assert all(_column(out, s, 6) == "0" for s in ("DP", "ZeRO-1 (P_os)", "ZeRO-2 (P_os+g)", "ZeRO-3 (P_os+g+p)"))


def test_two_gpus_zero1_is_not_4x():
    out = _render(params=7e9, gpus=2)
    line = next(l for l in out.splitlines() if "ZeRO-1" in l)
    factor = float(re.search(r"([\d.]+)×", line).group(1))
    assert factor == pytest.approx(1.6)        # 16 / (4 + 12/2)


def test_optimizer_bytes_changes_dp_row():
    out = _render(params=1e9, gpus=8, optimizer_bytes=8)
    dp = next(l for l in out.splitlines() if l.split("│")[1:2] and l.split("│")[1].strip() == "DP")
    assert "12.00" in dp                       # (2 + 2 + 8) · 1e9 bytes


@pytest.mark.parametrize("kwargs", [dict(params=0, gpus=8), dict(params=1e9, gpus=0), dict(params=1e9, gpus=2, optimizer_bytes=-1)])
def test_bad_input_is_a_clear_error(kwargs):
    with pytest.raises(ValueError, match="--"):
        run(**kwargs)
