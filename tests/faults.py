"""pytest plugin for fault-injection tests: swap an implementation before collection.

``MIANJING_FAULTS="impls.coding.bst_iterator:BSTIterator=tests.broken:RightChildIterator;..."``
replaces the attribute in its module at ``pytest_configure`` time, so verifier
modules importing it at collection see the broken version. Ranks spawned by
``impls.distributed.probes.launch`` call :func:`apply` with the same variable, so
a fault reaches the gloo processes too.
"""

from __future__ import annotations

import importlib
import os


def apply(spec: str) -> None:
    """Patch every ``module:attr=module:attr`` pair of ``spec`` (separated by ``;``)."""
    for item in filter(None, spec.split(";")):
        target, replacement = item.split("=", 1)
        t_mod, t_attr = target.split(":")
        r_mod, r_attr = replacement.split(":")
        setattr(importlib.import_module(t_mod), t_attr, getattr(importlib.import_module(r_mod), r_attr))


def pytest_configure(config) -> None:
    apply(os.environ.get("MIANJING_FAULTS", ""))
