"""The mutation suite: every mutant still applies to the code, and the runner classifies outcomes.

The full run (``make mutants``) is too slow for ``make test``; these checks are fast.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mianjing.mutation import Mutant, import_graph, load_mutants, run_all, selected_tests, stale_reason
from mianjing.paths import repo_root

ROOT = repo_root()
ALL = load_mutants(ROOT)
GRAPH = import_graph(ROOT)


def test_there_are_mutants_for_every_area():
    areas = {m.file.split("/")[1] for m in ALL if m.file.startswith("impls/")}
    assert {"coding", "distributed", "rl"} <= areas, areas


@pytest.mark.parametrize("mutant", ALL, ids=[m.name for m in ALL])
def test_mutant_still_applies(mutant):
    """The original snippet occurs exactly once and the mutated file parses; otherwise the mutant is stale."""
    assert stale_reason(ROOT, mutant) is None, f"{mutant.name}: {stale_reason(ROOT, mutant)} (update mutants/*.py)"


@pytest.mark.parametrize("mutant", [m for m in ALL if m.file.startswith("impls/")], ids=lambda m: m.name)
def test_some_verifier_imports_every_mutated_module(mutant):
    assert selected_tests(ROOT, mutant.file, GRAPH), f"no verifier imports {mutant.file}"


def _mini(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    (tmp_path / "impls").mkdir()
    (tmp_path / "impls" / "__init__.py").write_text("")
    (tmp_path / "impls" / "arith.py").write_text(textwrap.dedent("""\
        def add(a, b):
            return a + b


        def double(a):
            return add(a, a)
        """))
    (tmp_path / "verifiers").mkdir()
    (tmp_path / "verifiers" / "__init__.py").write_text("")
    (tmp_path / "verifiers" / "test_arith.py").write_text(textwrap.dedent("""\
        from impls.arith import double


        def test_double():
            assert double(3) == 6
        """))
    (tmp_path / "verifiers" / "test_other.py").write_text("def test_nothing_imported():\n    assert True\n")
    return tmp_path


def test_runner_classifies_killed_survived_equivalent_stale(tmp_path):
    root = _mini(tmp_path)
    f = "impls/arith.py"
    mutants = [
        Mutant("add.minus", f, "return a + b", "return a - b"),
        Mutant("double.swapped", f, "return add(a, a)", "return add(a, a) + 0"),  # no test can tell
        Mutant("double.declared", f, "return add(a, a)", "return add(a, a) * 1", equivalent="multiplying by 1"),
        Mutant("gone", f, "return a * b", "return a / b"),
    ]
    assert selected_tests(root, f) == ["verifiers/test_arith.py"]  # not the file that imports nothing
    report = run_all(root, mutants, jobs=2, timeout=60)
    got = {o.name: o.status for o in report.outcomes}
    assert got == {"add.minus": "killed", "double.swapped": "survived", "double.declared": "equivalent",
                   "gone": "stale"}, [(o.name, o.status, o.detail) for o in report.outcomes]
    killed = next(o for o in report.outcomes if o.name == "add.minus")
    assert killed.detail == "verifiers/test_arith.py::test_double"
    assert report.counts["stale"] == 1 and report.score == 0.5 and not report.ok
    assert (root / f).read_text().count("return a + b") == 1  # the checkout itself is never changed
    assert report.by_module() == {f: {"killed": 1, "survived": 1, "equivalent": 1, "stale": 1, "error": 0}}
