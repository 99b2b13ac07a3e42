"""The mutation suite: every mutant still applies to the code, and the runner classifies outcomes.

The full run (``make mutants``) is too slow for ``make test``; these checks are fast.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mianjing.mutation import (Mutant, Outcome, Report, area_of, command, import_graph, load_mutants, run_all,
                               selected_tests, stale_reason)
from mianjing.paths import repo_root

ROOT = repo_root()
ALL = load_mutants(ROOT)
GRAPH = import_graph(ROOT)


def test_there_are_mutants_for_every_area():
    areas = {m.file.split("/")[1] for m in ALL if m.file.startswith("impls/")}
    assert {"coding", "distributed", "rl", "parallel", "arch", "scale"} <= areas, areas


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
    assert report.by_module() == {f: {"killed": 1, "survived": 1, "equivalent": 1, "stale": 1, "timeout": 0,
                                      "error": 0}}
    assert report.by_area() == {"impls": {"killed": 1, "survived": 1, "equivalent": 1, "stale": 1, "timeout": 0,
                                          "error": 0, "score": 0.5}}


def test_tests_that_run_out_of_time_are_no_kill(tmp_path):
    """A mutant whose tests do not finish in time is a time-out, scored against the run, never a kill: on a
    loaded machine the unmutated tests can take as long (the old runner called it "killed, hung")."""
    root = _mini(tmp_path)
    (root / "verifiers" / "test_arith.py").write_text(
        "import time\nfrom impls.arith import double\n\n\ndef test_double():\n    time.sleep(20)\n"
        "    assert double(3) == 6\n")
    report = run_all(root, [Mutant("add.minus", "impls/arith.py", "return a + b", "return a - b")], jobs=1, timeout=2)
    (o,) = report.outcomes
    assert o.status == "timeout" and "larger --timeout" in o.detail, (o.status, o.detail)
    assert report.score == 0.0 and not report.ok


def test_a_mutant_that_allocates_without_end_is_killed_not_left_to_the_oom_killer(tmp_path):
    """Each mutant's tests run under an address-space cap: code that grows without end fails with MemoryError (a
    kill) in seconds. Without the cap lc.buildtree.right-preorder-offset grew to 24 GB and the kernel killed it (-9)."""
    from mianjing.mutation import memory_cap

    root = _mini(tmp_path)
    grow = "return a + b"
    endless = "return [bytearray(1 << 26) for _ in iter(int, 1)] and a + b"  # 64 MiB at a time, forever
    report = run_all(root, [Mutant("add.grows", "impls/arith.py", grow, endless)], jobs=2, timeout=60)
    (o,) = report.outcomes
    assert o.status == "killed" and o.detail == "verifiers/test_arith.py::test_double", (o.status, o.detail)
    assert o.seconds < 60
    assert 4 << 30 <= memory_cap(2) <= memory_cap(1)


def test_area_of_names_the_impls_folder_or_the_tool():
    assert area_of("impls/rl/ppo.py") == "impls/rl"
    assert area_of("impls/scale/fused_logprobs_triton.py") == "impls/scale"
    assert area_of("src/mianjing/calculators/zero_cli.py") == "tool"


def test_score_per_area_in_report_and_json():
    """Each area gets its own killed / (killed + survived + error); equivalent and stale are not scored."""
    outcomes = [Outcome("a", "impls/rl/x.py", "killed"), Outcome("b", "impls/rl/y.py", "survived"),
                Outcome("c", "impls/arch/z.py", "killed"), Outcome("d", "impls/arch/z.py", "equivalent"),
                Outcome("e", "impls/arch/z.py", "stale"), Outcome("f", "src/mianjing/mutation.py", "error"),
                Outcome("g", "impls/scale/k.py", "equivalent")]
    report = Report(outcomes, wall=1.0, jobs=1)
    areas = report.by_area()
    assert {a: r["score"] for a, r in areas.items()} == {"impls/arch": 1.0, "impls/rl": 0.5, "impls/scale": None,
                                                         "tool": 0.0}
    assert areas["impls/arch"] == {"killed": 1, "survived": 0, "equivalent": 1, "stale": 1, "timeout": 0, "error": 0,
                                   "score": 1.0}
    data = report.to_json()
    assert data["by_area"] == areas and data["score"] == 2 / 4


def test_command_prints_the_score_of_each_area(tmp_path):
    import io

    from rich.console import Console

    root = _mini(tmp_path)
    (root / "mutants").mkdir()
    (root / "mutants" / "arith.py").write_text(
        "from mianjing.mutation import Mutant as M\n"
        "MUTANTS = [M('add.minus', 'impls/arith.py', 'return a + b', 'return a - b'),\n"
        "           M('double.noop', 'impls/arith.py', 'return add(a, a)', 'return add(a, a) * 1', equivalent='x1')]\n")
    out = io.StringIO()
    code = command(root, None, 1, 60, 5, False, Console(file=out, width=200), Console(file=io.StringIO()))
    text = out.getvalue()
    assert code == 0, text
    assert "score per area" in text and "per area: impls 1/1" in text, text
    import json

    saved = json.loads((root / "build" / "mutants.json").read_text())
    assert saved["by_area"]["impls"]["score"] == 1.0
