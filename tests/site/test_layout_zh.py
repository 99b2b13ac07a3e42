"""The layout checks of tests/site/layout.py on the Chinese pages."""

from tests.site.layout import *  # noqa: F403 -- the checks, collected here and run on this module's `layout`

layout = layout_fixture("zh")  # noqa: F405
