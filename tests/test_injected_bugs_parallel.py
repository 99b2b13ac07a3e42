"""Injected bugs in the parallelism code make the claims that depend on them fail.

Each case swaps one implementation (``tests/faults.py`` patches the module attribute at
``pytest_configure`` time, and ``impls.distributed.probes.launch`` re-applies the patch in every
spawned gloo rank) and runs ``mianjing verify`` on a few claims: the ones that rest on the
broken behaviour must fail, an unrelated one must still pass. The broken code lives here.
"""

from __future__ import annotations

import functools
import importlib.util

import pytest
import torch

from mianjing.loader import load
from mianjing.paths import repo_root
from tests.injected import outcomes_with_fault

ROOT = repo_root()


@functools.lru_cache(maxsize=1)
def _reference_split_columns():
    """The unpatched ``split_columns`` (the module attribute is swapped, so load the file afresh)."""
    import impls.parallel.tensor as T

    spec = importlib.util.spec_from_file_location("_tensor_reference", T.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.split_columns


def split_columns_along_input(weight: torch.Tensor, rank: int, world: int, groups: int = 1) -> torch.Tensor:
    """The column-parallel weight split along the wrong axis: input features (dim 1) instead of outputs."""
    if weight.dim() == 1:                  # biases have no second axis
        return _reference_split_columns()(weight, rank, world, groups)
    return weight.chunk(world, dim=1)[rank].clone()


def no_all_reduce(x: torch.Tensor, group) -> torch.Tensor:
    """g without its all-reduce: each rank keeps its partial sum."""
    return x


def bubble_warmup_only(tl) -> "Fraction":  # noqa: F821
    """Counts only the idle time before each device's first op, forgetting the drain at the end."""
    from fractions import Fraction

    idle = sum((dev[0].start for dev in tl.slots), Fraction(0))
    return idle / (tl.p * tl.makespan)


ME = "tests.test_injected_bugs_parallel"
CASES = [
    ("impls.parallel.tensor:split_columns=" + ME + ":split_columns_along_input",
     {"tp.mlp-column-row-no-comm", "tp.four-allreduces-per-layer", "tp.sequence-parallel-same-bytes"},
     {"tp.row-split-needs-sync", "pp.gpipe-bubble"}),
    ("impls.parallel.tensor:reduce_from_tp=" + ME + ":no_all_reduce",
     {"tp.mlp-column-row-no-comm", "tp.four-allreduces-per-layer", "tp.column-parallel-no-allgather"},
     {"tp.row-split-needs-sync"}),
    ("impls.parallel.pipeline:bubble_fraction=" + ME + ":bubble_warmup_only",
     {"pp.gpipe-bubble", "pp.1f1b-same-bubble"},
     {"pp.zero-bubble-h1", "tp.row-split-needs-sync"}),
]


@pytest.mark.parametrize("fault, must_fail, must_pass", CASES, ids=["wrong-split-axis", "missing-all-reduce", "bubble-accounting"])
def test_injected_bug_fails_named_claims(tmp_path, monkeypatch, fault, must_fail, must_pass):
    kb = load(ROOT).kb
    assert (must_fail | must_pass) <= set(kb.claim_index()), "the parallelism claims were renamed: update this test"
    monkeypatch.setenv("MIANJING_MAX_EXAMPLES", "15")
    outcomes = outcomes_with_fault(ROOT, kb, must_fail | must_pass, fault, tmp_path, monkeypatch)
    assert {c for c in must_fail if outcomes.get(c) == "failed"} == must_fail, outcomes
    assert {c for c in must_pass if outcomes.get(c) == "passed"} == must_pass, outcomes
