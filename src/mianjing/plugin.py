"""pytest plugin: claim markers, the ``evidence`` and ``device`` fixtures, per-claim outcomes.

A verifier names its claims with ``@pytest.mark.claim("id", ...)``. The plugin
records each test's outcome, duration, message and evidence, and with
``--mianjing-report PATH`` writes them grouped per claim (the verify runner
merges that into ``build/verification.json``). Works under pytest-xdist: all
per-test data travels in ``user_properties``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from .report import to_jsonable, write_json_atomic

_CLAIMS = "mianjing_claims"
_EVIDENCE = "mianjing_evidence"
_WHERE = "mianjing_where"
NEEDS_CUDA = "needs CUDA"
_CONFIG: dict = {}  # the controller's config (reports arrive without it)


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("mianjing")
    g.addoption("--mianjing-report", default=None, help="write per-claim outcomes (JSON) here")
    g.addoption("--mianjing-claims", default=None, help="comma-separated claim ids: run only their verifiers")
    g.addoption("--mianjing-progress", action="store_true", help="print one machine-readable line per test")
    g.addoption("--mianjing-partial", default=None,
                help="append each test's record here as it finishes (JSON lines), so a verifier that kills "
                     "the interpreter cannot erase what ran before it")


def _partial(config, **line) -> None:
    path = config.getoption("--mianjing-partial") if config is not None else None
    if not path or hasattr(config, "workerinput"):
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line, default=str) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def pytest_runtest_logstart(nodeid: str, location) -> None:
    config = _CONFIG.get("config")
    if config is not None and config.getoption("--mianjing-partial") and not hasattr(config, "workerinput"):
        claims = _CONFIG.get("claims", {}).get(nodeid, [])
        _partial(config, start=nodeid, claims=claims, where=[location[0], (location[1] or 0) + 1, location[2]])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "claim(*ids): the knowledge-base claims this test settles")
    config.addinivalue_line("markers", "cuda: needs a CUDA device")
    config._mianjing_tests = {}  # nodeid -> record


def claim_ids(item: pytest.Item) -> list[str]:
    ids: list[str] = []
    for mark in item.iter_markers("claim"):
        for arg in mark.args:
            if arg not in ids:
                ids.append(arg)
    return ids


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    _CONFIG["claims"] = {item.nodeid: claim_ids(item) for item in session.items}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = config.getoption("--mianjing-claims")
    if wanted is None:
        return
    chosen = set(filter(None, wanted.split(",")))
    keep, drop = [], []
    for item in items:
        (keep if chosen & set(claim_ids(item)) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def selected_device() -> str:
    """``MIANJING_DEVICE``: auto (cuda when available) | cpu | cuda."""
    want = os.environ.get("MIANJING_DEVICE", "auto")
    if want == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return want


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    path, line, name = item.location
    item.user_properties.append((_CLAIMS, claim_ids(item)))
    item.user_properties.append((_WHERE, [path, (line or 0) + 1, name]))
    if item.get_closest_marker("cuda") is not None and selected_device() != "cuda":
        pytest.skip(NEEDS_CUDA)


class Evidence(dict):
    """A verifier's figures and counterexamples (plain JSON in the report), plus :meth:`quote`."""

    def quote(self, name: str, quoted: float, measured: float, *, digits: int | None = None,
              rel: float | None = None, abs: float | None = None) -> None:
        """Assert that a figure the claim's text quotes is what the code measures, and record both.

        Exactly one precision: ``digits`` (the measured value rounds to the quoted one at that many
        decimals), ``rel`` (|m - q| <= rel*|q|) or ``abs`` (|m - q| <= abs). The site shows
        ``evidence["quoted"][name] = {quoted, measured, precision}`` beside the claim.
        """
        given = [k for k, v in (("digits", digits), ("rel", rel), ("abs", abs)) if v is not None]
        if len(given) != 1:
            raise TypeError(f"quote({name!r}): give exactly one of digits=, rel=, abs= (got {given or 'none'})")
        m, q = float(measured), float(quoted)
        if digits is not None:
            ok, precision = round(m, digits) == round(q, digits), f"{digits} decimals"
        elif rel is not None:
            ok, precision = builtins_abs(m - q) <= rel * builtins_abs(q), f"rel {rel:g}"
        else:
            ok, precision = builtins_abs(m - q) <= abs, f"abs {abs:g}"
        self.setdefault("quoted", {})[name] = {"quoted": q, "measured": m, "precision": precision}
        assert ok, f"{name}: the claim quotes {q:g}, the code measures {m:.6g} ({precision})"


builtins_abs = abs


@pytest.fixture
def evidence(request: pytest.FixtureRequest):
    """An :class:`Evidence` dict of figures and counterexamples; it lands in the report beside the claim."""
    data = Evidence()
    yield data
    # a JSON round trip: whatever a verifier stored, only plain JSON crosses to the report
    plain = json.loads(json.dumps(to_jsonable(data), default=str))
    request.node.user_properties.append((_EVIDENCE, plain))


@pytest.fixture(scope="session")
def device():
    """The ``torch.device`` chosen by ``mianjing verify --device`` (auto: cuda if present)."""
    import torch

    dev = selected_device()
    if dev == "cuda" and not torch.cuda.is_available():
        pytest.skip(NEEDS_CUDA)
    return torch.device(dev)


def _message(report: pytest.TestReport) -> str | None:
    if report.passed:
        return None
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message[:4000]
    return str(report.longrepr)[-4000:] if report.longrepr else None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    config = _CONFIG.get("config")
    if config is None or hasattr(config, "workerinput"):
        return
    tests = config._mianjing_tests
    rec = tests.setdefault(
        report.nodeid,
        {"nodeid": report.nodeid, "claims": [], "file": None, "line": None, "function": None,
         "outcome": "passed", "duration": 0.0, "message": None, "evidence": {}},
    )
    for key, value in report.user_properties:
        if key == _CLAIMS:
            rec["claims"] = list(value)
        elif key == _WHERE:
            rec["file"], rec["line"], rec["function"] = value
        elif key == _EVIDENCE:
            rec["evidence"] = value
    rec["duration"] += float(getattr(report, "duration", 0.0) or 0.0)
    if report.failed:
        rec["outcome"] = "failed"
        rec["message"] = (f"[{report.when}] " if report.when != "call" else "") + (_message(report) or "failed")
    elif report.skipped and rec["outcome"] != "failed":
        rec["outcome"] = "skipped"
        rec["message"] = _message(report)
    if report.when == "teardown":
        _partial(config, done=rec)
    if report.when == "teardown" and config.getoption("--mianjing-progress"):
        print(f"\nMJ-PROGRESS {rec['outcome']} {report.nodeid}", flush=True)



@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG["config"] = session.config
    session.config._mianjing_started = time.time()


def group_by_claim(tests: dict[str, dict]) -> dict[str, dict]:
    """Per claim: failed if any test failed, passed if any passed and none failed, else skipped."""
    claims: dict[str, dict] = {}
    for rec in tests.values():
        for cid in rec["claims"]:
            c = claims.setdefault(cid, {"outcome": "skipped", "duration": 0.0, "evidence": {}, "tests": []})
            c["tests"].append({k: v for k, v in rec.items() if k != "claims"})
            c["duration"] += rec["duration"]
            if rec["outcome"] == "failed":
                c["outcome"] = "failed"
            elif rec["outcome"] == "passed" and c["outcome"] != "failed":
                c["outcome"] = "passed"
            if len(c["tests"]) == 1:
                c["evidence"] = rec["evidence"]
            else:
                c["evidence"] = {t["function"] or t["nodeid"]: t["evidence"] for t in c["tests"]}
    return claims


def environment(config: pytest.Config) -> dict:
    env = {
        "python": sys.version.split()[0],
        "platform": sys.platform,
        "device": os.environ.get("MIANJING_DEVICE", "auto"),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    torch = sys.modules.get("torch")
    if torch is None:  # an xdist controller never imported it; the workers did
        try:
            import torch
        except ImportError:
            torch = None
    if torch is not None:
        env["torch"] = torch.__version__
        env["cuda"] = bool(torch.cuda.is_available())
        if env["device"] == "auto":
            env["device"] = "cuda" if env["cuda"] else "cpu"
        if env["cuda"]:
            env["gpu"] = torch.cuda.get_device_name(0)
    hyp = sys.modules.get("hypothesis")
    if hyp is not None:
        s = hyp.settings()
        env["hypothesis"] = {"version": hyp.__version__, "max_examples": s.max_examples,
                             "derandomize": s.derandomize}
    return env


# A test that needs a system package skips with a reason naming the command that installs it, e.g.
# pytest.skip("no Chromium at /usr/bin/chromium (apt-get install chromium)").
_INSTALL = re.compile(r"\bapt(?:-get)? install ([a-z0-9][a-z0-9.+-]*)")


def missing_packages(reports) -> dict[str, list[str]]:
    """System package -> the node ids of the skipped tests whose reason names its install command."""
    out: dict[str, list[str]] = {}
    for rep in reports:
        msg = _message(rep) if getattr(rep, "skipped", False) else None
        hit = _INSTALL.search(msg or "")
        if hit:
            out.setdefault(hit.group(1), []).append(rep.nodeid)
    return dict(sorted(out.items()))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """End the run with one line per missing system package: what it skipped and how to install it."""
    for package, nodeids in missing_packages(terminalreporter.stats.get("skipped", [])).items():
        files = sorted({n.split("::", 1)[0] for n in nodeids})
        where = ", ".join(files[:3]) + (f" and {len(files) - 3} more files" if len(files) > 3 else "")
        terminalreporter.write_line(
            f"missing system package {package}: {len(set(nodeids))} test(s) skipped ({where}); "
            f"install it with: apt-get install {package}", yellow=True, bold=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    out = config.getoption("--mianjing-report")
    if not out or hasattr(config, "workerinput"):
        return
    tests = config._mianjing_tests
    data = {
        "exitstatus": int(exitstatus),
        "wall": time.time() - getattr(config, "_mianjing_started", time.time()),
        "environment": environment(config),
        "tests": list(tests.values()),
        "claims": group_by_claim(tests),
    }
    write_json_atomic(Path(out), json.loads(json.dumps(data, default=str)))
