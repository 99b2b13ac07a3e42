"""The layout checks of tests/site/layout.py on the Chinese pages."""

from __future__ import annotations

import pytest

from tests.site.layout import (  # noqa: F401 -- collected here, run on this module's `layout`
    layout_pass,
    pages_in,
    test_display_formulas_fit_their_column,
    test_inline_formulas_sit_on_the_baseline,
    test_no_horizontal_overflow_on_a_phone,
    test_no_inline_formula_is_cut_on_a_phone_without_a_cue,
    test_numbers_and_claim_ids_on_a_phone,
)


@pytest.fixture(scope="module")
def layout(browser, site_url, real_site):
    return layout_pass(browser, site_url, pages_in(real_site[0], "zh"))
