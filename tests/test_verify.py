"""`mianjing verify`: per-claim outcomes, evidence, timeouts, selection, an atomic merged report."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from mianjing.loader import load
from mianjing.report import load_report
from mianjing.verify import run
from tests.minirepo import VERIFIER, make_repo


def verify(root, ids=None, **kw):
    kb = load(root).kb
    chosen = kb.select(ids)[0] if ids else None
    return run(root, kb, chosen, device="cpu", **kw)


def test_report_has_outcomes_evidence_environment(tmp_path):
    root = make_repo(tmp_path)
    res = verify(root)
    assert res.ok and res.problem is None
    rep = load_report(root / "build" / "verification.json")
    add, sub = rep.claims["add.commutative"], rep.claims["sub.commutative"]
    assert add["outcome"] == "passed" and add["evidence"] == {"pairs": 25}
    assert sub["outcome"] == "passed"
    assert sub["evidence"]["counterexample"] == {"a": 1, "b": 0, "a-b": 1, "b-a": -1}
    t = add["tests"][0]
    assert t["file"] == "verifiers/test_arith.py" and t["function"] == "test_add" and t["line"] == 5
    env = rep.environment
    assert env["python"] and env["date"] and "commit" in env and env["device"] == "cpu"
    assert rep.data["summary"]["passed"] == 2
    assert rep.outcome("add.commutative", rep.data["inputs_digest"]) == "passed"


def test_broken_implementation_fails_the_right_claim(tmp_path):
    root = make_repo(tmp_path)
    (root / "impls" / "arith.py").write_text("def add(a, b):\n    return a + 2 * b\n\n\ndef sub(a, b):\n    return a - b\n")
    res = verify(root)
    assert res.failed == ["add.commutative"]
    rec = res.claims["add.commutative"]
    assert "assert" in rec["tests"][0]["message"]


def test_a_hanging_verifier_is_stopped_and_the_rest_run(tmp_path):
    verifier = VERIFIER + "\n\n@pytest.mark.claim('add.commutative')\ndef test_hangs():\n    while True:\n        pass\n"
    root = make_repo(tmp_path, verifier=verifier)
    res = verify(root, timeout=2)
    assert res.failed == ["add.commutative"]
    assert res.claims["sub.commutative"]["outcome"] == "passed"
    hang = [t for t in res.claims["add.commutative"]["tests"] if t["function"] == "test_hangs"][0]
    assert hang["outcome"] == "failed" and "Timeout" in hang["message"]


def test_selection_runs_only_named_claims_and_merges(tmp_path):
    root = make_repo(tmp_path)
    verify(root)
    first = load_report(root / "build" / "verification.json")
    res = verify(root, ["sub.commutative"])
    assert set(res.claims) == {"sub.commutative"}
    rep = load_report(root / "build" / "verification.json")
    assert rep.claims["add.commutative"] == first.claims["add.commutative"]  # kept: code unchanged
    # a code change makes the unselected record stale: it is dropped, not shown as green
    (root / "impls" / "arith.py").write_text((root / "impls" / "arith.py").read_text() + "\n# changed\n")
    verify(root, ["sub.commutative"])
    rep = load_report(root / "build" / "verification.json")
    assert "add.commutative" not in rep.claims
    assert rep.data["summary"]["not-run"] == 1


def test_stale_when_code_changes(tmp_path):
    from mianjing.report import inputs_digest

    root = make_repo(tmp_path)
    verify(root)
    (root / "verifiers" / "test_arith.py").write_text(VERIFIER + "\n# edited\n")
    rep = load_report(root / "build" / "verification.json")
    assert rep.outcome("add.commutative", inputs_digest(root)) == "stale"


def test_unreadable_report_is_replaced_atomically(tmp_path):
    root = make_repo(tmp_path)
    (root / "build").mkdir()
    (root / "build" / "verification.json").write_text("{not json")
    assert verify(root).ok
    assert json.loads((root / "build" / "verification.json").read_text())["format"] == 1
    assert [p.name for p in (root / "build").iterdir() if p.suffix == ".tmp"] == []


def test_cli_exit_codes_and_summary(tmp_path):
    root = make_repo(tmp_path)
    env = dict(os.environ, MIANJING_ROOT=str(root), MIANJING_CATALOG=str(tmp_path / "shared/catalog/claims.yaml"))
    ok = subprocess.run([sys.executable, "-m", "mianjing.cli", "verify", "adding"], env=env, capture_output=True,
                        text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "verified" in ok.stdout and "2" in ok.stdout
    (root / "impls" / "arith.py").write_text("def add(a, b):\n    return a\n\n\ndef sub(a, b):\n    return 0\n")
    bad = subprocess.run([sys.executable, "-m", "mianjing.cli", "verify"], env=env, capture_output=True, text=True)
    assert bad.returncode == 1
    assert "FAILED add.commutative" in bad.stdout and "FAILED sub.commutative" in bad.stdout
    assert "Traceback" not in bad.stdout + bad.stderr
    unknown = subprocess.run([sys.executable, "-m", "mianjing.cli", "verify", "nope"], env=env, capture_output=True,
                             text=True)
    assert unknown.returncode == 2 and "no claim or entry with id: nope" in unknown.stderr


def test_evidence_of_any_type_crosses_parallel_workers(tmp_path):
    """numpy scalars, tensors and odd objects in evidence reach the report under -j 2."""
    verifier = VERIFIER + '''

@pytest.mark.claim("add.commutative")
def test_odd_evidence(evidence):
    import numpy as np
    import torch
    evidence["np_float"] = np.float64(0.5)
    evidence["np_int"] = np.int64(3)
    evidence["tensor"] = torch.tensor([1.0, 2.0])
    evidence["inf"] = float("inf")
    evidence["object"] = object
'''
    root = make_repo(tmp_path, verifier=verifier)
    res = verify(root, jobs=2)
    assert res.ok and res.problem is None
    ev = res.claims["add.commutative"]["evidence"]["test_odd_evidence"]
    assert ev["np_float"] == 0.5 and ev["np_int"] == 3 and ev["tensor"] == [1.0, 2.0] and ev["inf"] == "inf"
    assert "object" in ev["object"]
