"""`evidence.quote` fails when a quoted figure is not what the code measures, at the quoted precision."""

from __future__ import annotations

import pytest

from mianjing.plugin import Evidence


def test_digits_pass_and_record():
    ev = Evidence()
    ev.quote("speed-up", 1.69, 1.6935, digits=2)
    assert ev["quoted"]["speed-up"] == {"quoted": 1.69, "measured": 1.6935, "precision": "2 decimals"}


@pytest.mark.parametrize("kw, measured", [({"digits": 2}, 1.6951), ({"rel": 0.01}, 1.72), ({"abs": 0.001}, 1.692)])
def test_off_by_more_than_the_precision_fails(kw, measured):
    ev = Evidence()
    with pytest.raises(AssertionError, match="the claim quotes 1.69"):
        ev.quote("speed-up", 1.69, measured, **kw)
    assert ev["quoted"]["speed-up"]["measured"] == measured  # recorded even when it fails


@pytest.mark.parametrize("kw", [{}, {"digits": 2, "rel": 0.1}])
def test_exactly_one_precision(kw):
    with pytest.raises(TypeError, match="exactly one"):
        Evidence().quote("x", 1.0, 1.0, **kw)
