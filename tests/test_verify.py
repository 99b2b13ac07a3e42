"""`mianjing verify`: per-claim outcomes, evidence, timeouts, selection, an atomic merged report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from mianjing.loader import load
from mianjing.report import load_report
from mianjing.verify import run
from tests.minirepo import VERIFIER, make_repo


def verify(root, ids=None, env_extra=None, **kw):
    kb = load(root).kb
    chosen = kb.select(ids)[0] if ids else None
    saved = {k: os.environ.get(k) for k in env_extra or {}}
    os.environ.update(env_extra or {})
    try:
        return run(root, kb, chosen, device="cpu", **kw)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
    kept, before = rep.claims["add.commutative"], first.claims["add.commutative"]  # kept: code unchanged
    assert {k: v for k, v in kept.items() if k != "run"} == {k: v for k, v in before.items() if k != "run"}
    assert kept["run"] == dict(before["run"], status="reused")
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


# ------------------------------------------------------------------------- incremental verification

MUL_CLAIM = """\
- id: mul.commutative
  verdict: holds
  method: property
  statement: {zh: "乘法交换律成立", en: "multiplication commutes"}
"""
MUL_VERIFIER = """\
import pytest
import impls.mul as M


@pytest.mark.claim("mul.commutative")
def test_mul(evidence):
    assert all(M.mul(a, b) == M.mul(b, a) for a in range(4) for b in range(4))
    evidence["pairs"] = 16
"""


def _two_files(tmp_path):
    """The mini checkout plus a second verifier file (mul) importing a module of its own."""
    from tests.minirepo import entry_yaml

    claims = textwrap.dedent(entry_yaml().split("claims:\n", 1)[1]) + MUL_CLAIM
    root = make_repo(tmp_path, entry=entry_yaml(claims=claims))
    (root / "impls" / "mul.py").write_text("def mul(a, b):\n    return a * b\n")
    (root / "verifiers" / "test_mul.py").write_text(MUL_VERIFIER)
    return root


def _runs(root) -> dict[str, str]:
    return {c: r["run"]["status"] for c, r in load_report(root / "build" / "verification.json").claims.items()}


def test_an_unchanged_tree_reuses_every_result_and_runs_no_pytest(tmp_path):
    root = _two_files(tmp_path)
    first = verify(root)
    assert first.ok and first.rerun == {"add.commutative", "sub.commutative", "mul.commutative"} and not first.reused
    again = verify(root)
    assert again.ok and not again.rerun and again.reused == first.rerun
    assert "nothing to rerun" in again.log_path.read_text()
    assert set(_runs(root).values()) == {"reused"}
    rep = load_report(root / "build" / "verification.json")
    assert rep.data["incremental"] == {"rerun": 0, "reused": 3, "reuse": True}
    assert rep.claims["mul.commutative"]["evidence"] == {"pairs": 16}  # the result itself is kept
    assert rep.data["summary"]["passed"] == 3
    forced = verify(root, reuse=False)
    assert forced.rerun == first.rerun and not forced.reused


def test_a_change_reruns_only_the_claims_that_depend_on_it(tmp_path):
    root = _two_files(tmp_path)
    verify(root)
    (root / "impls" / "mul.py").write_text("def mul(a, b):\n    return b * a\n")  # only test_mul imports it
    res = verify(root)
    assert res.rerun == {"mul.commutative"} and res.reused == {"add.commutative", "sub.commutative"}
    assert _runs(root) == {"mul.commutative": "rerun", "add.commutative": "reused", "sub.commutative": "reused"}
    # the claim's own text is an input; another claim's is not
    entry = root / "qa" / "maths" / "adding.yaml"
    entry.write_text(entry.read_text().replace('en: "multiplication commutes"', 'en: "a*b equals b*a"'))
    res = verify(root)
    assert res.rerun == {"mul.commutative"}
    # so are the hypothesis settings and the device
    res = verify(root, env_extra={"MIANJING_MAX_EXAMPLES": "7"})
    assert res.rerun == {"add.commutative", "sub.commutative", "mul.commutative"}
    from mianjing.verify import claim_files, claim_keys

    kb, files = load(root).kb, claim_files(root)
    cpu, cuda = claim_keys(root, kb, "cpu", files), claim_keys(root, kb, "cuda", files)
    assert len(cpu) == 3 and all(cpu[c] != cuda[c] for c in cpu)


def test_conftests_and_data_files_beside_the_code_are_inputs_too(tmp_path):
    """Keys only (no run): pytest loads verifiers/conftest.py for every verifier; a JSON file beside the
    implementations is data they may read; a file elsewhere is neither."""
    from mianjing.verify import claim_files, claim_keys

    root = _two_files(tmp_path)
    (root / "verifiers" / "conftest.py").write_text("SEED = 0\n")
    (root / "impls" / "table.json").write_text("[1, 2]\n")
    (root / "notes.txt").write_text("not an input\n")
    kb, files = load(root).kb, claim_files(root)

    def keys():
        return claim_keys(root, kb, "cpu", files)

    first = keys()
    (root / "notes.txt").write_text("still not an input\n")
    assert keys() == first
    (root / "verifiers" / "conftest.py").write_text("SEED = 1\n")
    second = keys()
    assert all(second[c] != first[c] for c in first)
    (root / "impls" / "table.json").write_text("[1, 3]\n")
    third = keys()
    assert all(third[c] != second[c] for c in first)


def test_a_failed_claim_is_rerun_even_when_nothing_changed(tmp_path):
    root = _two_files(tmp_path)
    (root / "impls" / "mul.py").write_text("def mul(a, b):\n    return a - b\n")
    assert verify(root).failed == ["mul.commutative"]
    res = verify(root)
    assert res.rerun == {"mul.commutative"} and res.failed == ["mul.commutative"]


_LOADED = """
import importlib, json, os, sys
root = sys.argv[1]
sys.path[:0] = [root]
os.environ.setdefault("TRITON_INTERPRET", "1")
out = {}
for rel in json.loads(sys.argv[2]):
    for m in [m for m in sys.modules if m.split(".")[0] in ("impls", "verifiers", "figures")]:
        del sys.modules[m]
    importlib.import_module(rel[:-3].replace("/", "."))
    out[rel] = sorted(m for m in sys.modules if m.split(".")[0] == "impls")
print(json.dumps(out))
"""


def test_a_change_to_gae_reruns_exactly_the_claims_whose_verifiers_load_it(tmp_path):
    """On a copy of this checkout: the claims whose key changes when impls/rl/gae.py changes are exactly
    those with a verifier file that, imported on its own, loads impls.rl.gae (the oracle imports every
    verifier file with the project's modules unloaded in between; the keys read the sources only)."""
    from mianjing.mutation import make_scratch
    from mianjing.verify import claim_files, claim_keys

    checkout = Path(__file__).resolve().parents[1]
    scratch = make_scratch(checkout, tmp_path / "checkout")
    kb = load(scratch).kb
    files = claim_files(scratch)
    before = claim_keys(scratch, kb, "cpu", files)
    gae = scratch / "impls" / "rl" / "gae.py"
    gae.write_text(gae.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    after = claim_keys(scratch, kb, "cpu", files)
    changed = {c for c in before if after.get(c) != before[c]}
    every_file = sorted(set().union(*files.values()))
    res = subprocess.run([sys.executable, "-c", _LOADED, str(scratch), json.dumps(every_file)], capture_output=True,
                         text=True, timeout=600, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert res.returncode == 0, res.stderr[-2000:]
    loaders = {f for f, mods in json.loads(res.stdout).items() if "impls.rl.gae" in mods}
    assert "verifiers/rl/test_gae.py" in loaders and len(loaders) < len(every_file) / 2
    assert changed == {c for c in before if files[c] & loaders}
    assert len(before) - len(changed) > len(changed)  # most claims stay reusable
