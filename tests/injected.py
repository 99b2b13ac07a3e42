"""Run the verifiers of some claims with a named fault injected (``tests/faults.py`` applies it in the
verifier process) and return each claim's outcome: the shared half of the ``test_injected_bugs_*`` tests."""

from __future__ import annotations

from mianjing.verify import run


def outcomes_with_fault(root, kb, claims: set[str], fault: str, report_dir, monkeypatch) -> dict[str, str]:
    """``{claim id: outcome}`` of ``mianjing verify`` on ``claims`` with ``MIANJING_FAULTS=fault``."""
    monkeypatch.setenv("MIANJING_FAULTS", fault)
    res = run(root, kb, claims, device="cpu", extra_pytest_args=["-p", "tests.faults"],
              report_file=report_dir / "verification.json")
    return {c: r["outcome"] for c, r in res.claims.items()}
