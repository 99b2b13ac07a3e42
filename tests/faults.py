"""pytest plugin for fault-injection tests: swap an implementation before collection.

``MIANJING_FAULTS="impls.coding.bst_iterator:BSTIterator=tests.broken:RightChildIterator;..."``
replaces the attribute in its module at ``pytest_configure`` time, so verifier
modules importing it at collection see the broken version.
"""

from __future__ import annotations

import importlib
import os


def pytest_configure(config) -> None:
    for spec in filter(None, os.environ.get("MIANJING_FAULTS", "").split(";")):
        target, replacement = spec.split("=", 1)
        t_mod, t_attr = target.split(":")
        r_mod, r_attr = replacement.split(":")
        setattr(importlib.import_module(t_mod), t_attr, getattr(importlib.import_module(r_mod), r_attr))
