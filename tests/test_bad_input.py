"""Bad input to zero, check and verify: one clear line naming the argument or file:line, never a
traceback, never a silent skip, nothing already computed lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from mianjing.check import check
from tests.minirepo import VERIFIER, entry_yaml, make_repo

MIANJING = [sys.executable, "-m", "mianjing.entry"]
CHECKOUT = __import__("pathlib").Path(__file__).resolve().parents[1]  # zero reads impls/distributed from it


def cli(root, *args, env_extra=None, timeout=120):
    env = dict(os.environ, MIANJING_ROOT=str(root))
    env.update(env_extra or {})
    return subprocess.run(MIANJING + list(args), env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("args, message", [
    (["--params", "-5", "--gpus", "8"], "--params must be positive, got -5"),
    (["--params", "0", "--gpus", "8"], "--params must be positive"),
    (["--params", "nan", "--gpus", "8"], "--params must be a finite number"),
    (["--params", "inf", "--gpus", "8"], "--params must be a finite number"),
    (["--params", "1e30", "--gpus", "8"], "is absurd"),
    (["--params", "seven", "--gpus", "8"], "--params must be a number"),
    (["--params", "7e9", "--gpus", "0"], "--gpus must be at least 1"),
    (["--params", "7e9", "--gpus", "-2"], "--gpus must be at least 1"),
    (["--params", "7e9", "--gpus", "2.5"], "--gpus must be a whole number"),
    (["--params", "7e9", "--gpus", "1e9"], "--gpus 1000000000 is absurd"),
    (["--params", "100", "--gpus", "1000"], "a rank would hold less than one parameter"),
    (["--params", "7e9", "--gpus", "8", "--optimizer-bytes", "-1"], "--optimizer-bytes must be >= 0"),
    (["--params", "7e9", "--gpus", "8", "--gpu-memory-gb", "nan"], "--gpu-memory-gb must be a finite number"),
])
def test_zero_refuses_bad_numbers_in_one_line(tmp_path, args, message):
    out = cli(CHECKOUT, "zero", *args)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0], out.stderr
    assert "Traceback" not in out.stdout + out.stderr


def test_zero_says_when_a_configuration_cannot_fit(tmp_path):
    out = cli(CHECKOUT, "zero", "--params", "1e12", "--gpus", "8", "--gpu-memory-gb", "80")
    assert out.returncode == 0, out.stderr
    # 16 bytes x 1e12 / 8 ranks = 2000 GB per device under ZeRO-3; 80 GB devices need 200 ranks
    assert "does not fit" in out.stdout and "2,000.00 GB" in out.stdout and "N_d >= 200" in out.stdout
    ok = cli(CHECKOUT, "zero", "--params", "7.5e9", "--gpus", "64", "--gpu-memory-gb", "80")
    assert "fits a 80 GB device (model states only): ZeRO-1 (P_os), ZeRO-2 (P_os+g), ZeRO-3 (P_os+g+p)" in ok.stdout


def _write(root, name: str, text: str | bytes):
    path = root / "qa" / "maths" / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _problem(root, file: str):
    res = check(root, root.parent / "shared" / "catalog" / "claims.yaml")
    return [p for p in res.problems if p.path.endswith(file)]


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    root = make_repo(tmp_path)
    bomb = "".join(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9 if i else ['"lol"'] * 9) + "]\n" for i in range(9))
    _write(root, "bomb.yaml", bomb)
    t0 = time.monotonic()
    (p,) = _problem(root, "bomb.yaml")
    assert time.monotonic() - t0 < 10  # not 90 s and 4.6 GB
    assert p.line == 1 and "anchors and aliases" in p.message


def test_bad_utf8_is_reported_at_its_real_line(tmp_path):
    root = make_repo(tmp_path)
    text = entry_yaml("adding").encode("utf-8")
    lines = text.split(b"\n")
    i = next(i for i, ln in enumerate(lines) if ln.startswith(b"question:"))
    lines[i] = lines[i].replace(b"How do you add?", b"How do you \xff add?")
    _write(root, "adding.yaml", b"\n".join(lines))
    (p,) = _problem(root, "adding.yaml")
    assert p.line == i + 1 and "not UTF-8" in p.message and "0xff" in p.message, p


def test_a_duplicate_claim_id_is_reported_at_the_duplicate(tmp_path):
    root = make_repo(tmp_path)
    claims = """\
    - id: add.commutative
      verdict: holds
      method: property
      statement: {zh: "加法交换律成立", en: "addition commutes"}
    - id: add.commutative
      verdict: holds
      method: property
      statement: {zh: "又一次", en: "again"}
    """
    text = entry_yaml("adding", claims=claims).replace("catalog: t.sum\n", "")
    _write(root, "adding.yaml", text)
    probs = [p for p in _problem(root, "adding.yaml") if "twice" in p.message]
    second = [i for i, ln in enumerate(text.splitlines(), 1) if "- id: add.commutative" in ln][1]
    assert [p.line for p in probs] == [second], probs


def test_a_duplicate_claim_id_across_entries_is_reported_at_the_second(tmp_path):
    root = make_repo(tmp_path)
    claims = """\
    - id: add.commutative
      verdict: holds
      method: property
      statement: {zh: "重复", en: "again"}
    """
    text = entry_yaml("again", claims=claims).replace("catalog: t.sum\n", "")
    _write(root, "again.yaml", text)
    res = check(root, root.parent / "shared" / "catalog" / "claims.yaml")
    dup = [p for p in res.problems if "duplicate claim id" in p.message]
    assert len(dup) == 1 and dup[0].path.endswith("again.yaml")
    assert dup[0].line == [i for i, ln in enumerate(text.splitlines(), 1) if "- id: add.commutative" in ln][0]


def test_whitespace_only_match_terms_are_refused(tmp_path):
    root = make_repo(tmp_path)
    text = entry_yaml("adding").replace('match: {zh: ["交换"], en: ["commut"]}', 'match: {zh: ["交换"], en: ["commut", "   "]}')
    _write(root, "adding.yaml", text)
    probs = _problem(root, "adding.yaml")
    assert any("match term must not be empty or only whitespace" in p.message for p in probs), probs
    line = [i for i, ln in enumerate(text.splitlines(), 1) if '"   "' in ln][0]
    assert any(p.line == line for p in probs)


def test_a_missing_catalog_is_a_warning_not_a_silent_skip(tmp_path):
    root = make_repo(tmp_path)
    out = cli(root, "check", env_extra={"MIANJING_CATALOG": str(tmp_path / "nowhere.yaml")})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "warning: no catalog at" in out.stderr and "nowhere.yaml" in out.stderr
    res = check(root, None) if False else None  # noqa: F841 (the API form is covered below)
    explicit = cli(root, "check", "--catalog", str(tmp_path / "nowhere.yaml"))
    assert explicit.returncode == 1 and "no such file (given with --catalog)" in explicit.stdout


def test_a_verifier_that_aborts_the_interpreter_keeps_earlier_results(tmp_path):
    verifier = VERIFIER + '''

@pytest.mark.claim("sub.commutative")
def test_zz_aborts():
    import os
    os.abort()
'''
    root = make_repo(tmp_path, verifier=verifier)
    env = {"MIANJING_CATALOG": str(tmp_path / "shared/catalog/claims.yaml")}
    out = cli(root, "verify", "-j", "1", env_extra=env, timeout=300)
    assert out.returncode == 1
    assert "Traceback" not in out.stdout + out.stderr
    rep = json.loads((root / "build" / "verification.json").read_text())
    add, sub = rep["claims"]["add.commutative"], rep["claims"]["sub.commutative"]
    assert add["outcome"] == "passed" and add["evidence"] == {"pairs": 25}  # ran before the abort: kept
    assert sub["outcome"] == "failed"
    crashed = [t for t in sub["tests"] if t["function"] == "test_zz_aborts"]
    assert crashed and "interpreter died" in crashed[0]["message"] and "SIGABRT" in crashed[0]["message"]
    # the summary agrees with the per-claim lines
    assert rep["summary"]["passed"] == 1 and rep["summary"]["failed"] == 1
    table = {ln.split("│")[1].strip(): ln.split("│")[2].strip() for ln in out.stdout.splitlines() if ln.count("│") == 3}
    assert table.get("verified") == "1" and table.get("failed") == "1", out.stdout
    assert out.stdout.count("FAILED sub.commutative") == 1 and "FAILED add.commutative" not in out.stdout
    assert "interpreter died" in out.stdout + out.stderr
