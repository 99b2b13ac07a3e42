"""``mianjing pp``: the timeline it prints is the simulator's, bad arguments are one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction

import pytest

from mianjing.paths import repo_root

ROOT = repo_root()


def _pp(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mianjing.cli", "pp", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def _rows(out: str) -> list[list[str]]:
    """The timeline's cells, one list per device row."""
    return [line.split("|")[1].split(" ") for line in out.splitlines() if line.startswith("dev ")]


@pytest.mark.parametrize("schedule, extra, bubble", [
    ("gpipe", [], Fraction(3, 11)), ("1f1b", [], Fraction(3, 11)),
    ("interleaved", ["--chunks", "2"], Fraction(3, 19)), ("zb-h1", [], Fraction(3, 27)),
])
def test_timeline_and_bubble(schedule, extra, bubble):
    res = _pp("--stages", "4", "--micro", "8", "--schedule", schedule, *extra)
    assert res.returncode == 0, res.stderr
    rows = _rows(res.stdout)
    assert len(rows) == 4 and len({len(r) for r in rows}) == 1
    idle = sum(cell.startswith("·") for row in rows for cell in row)
    assert Fraction(idle, sum(len(r) for r in rows)) == bubble            # counted from the printed cells
    assert f"bubble {bubble.numerator}/{bubble.denominator} = {float(bubble):.4f}" in res.stdout
    for row in rows:                                                      # every micro-batch appears in F and B
        labels = {cell.strip() for cell in row if not cell.startswith("·")}
        assert {lab.rstrip("ab")[1:] for lab in labels if lab.startswith("F")} == {str(i) for i in range(8)}


def test_1f1b_in_flight_line():
    res = _pp("--stages", "4", "--micro", "8", "--schedule", "1f1b")
    assert "peak in-flight micro-batches per device: 4, 3, 2, 1" in res.stdout


@pytest.mark.parametrize("args, names", [
    (["--stages", "x"], "--stages"),
    (["--micro", "0"], "--micro"),
    (["--schedule", "foo"], "--schedule"),
    (["--schedule", "interleaved", "--micro", "6"], "--micro"),
    (["--schedule", "interleaved", "--chunks", "1"], "--chunks"),
    (["--schedule", "gpipe", "--chunks", "2"], "--chunks"),
    (["--stages", "-3"], "--stages"),
])
def test_bad_arguments_are_one_line(args, names):
    res = _pp(*args)
    assert res.returncode == 2
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and names in lines[0], res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""
