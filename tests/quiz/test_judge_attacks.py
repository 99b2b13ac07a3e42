"""Every way we know to fool or escape the kata judge, each asserted REJECTED or contained.

The attacks are in tests/quiz/attacks.py. The judge runs here in the test process (the trusted
side) except where the attack targets the judge's own process: then it runs as the CLI in a child
process. Guarantees that need bubblewrap's namespaces (setsid escapes, a submission that signals
the judge, no network) are skipped where bubblewrap cannot run; CI installs it (.ci/run).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from mianjing.quiz import sandbox
from mianjing.quiz.judge import judge
from mianjing.quiz.katas import find
from tests.quiz import attacks as A
from tests.quiz import solutions as S
from tests.quiz.kb import CHECKOUT, MIANJING, cli_env, mini_kb

BWRAP = sandbox.bwrap_path() is not None
needs_bwrap = pytest.mark.skipif(not BWRAP, reason="bubblewrap is not usable here (CI installs it)")


@pytest.fixture(autouse=True)
def _few_examples(monkeypatch):
    monkeypatch.setenv("MIANJING_MAX_EXAMPLES", "25")


def run(tmp_path, code: str, kata: str = "level_order_with_depth", **kw):
    k = find(CHECKOUT, kata)
    if k is None:
        pytest.skip(f"kata {kata} has not landed in this checkout")
    f = tmp_path / f"{kata}_attack.py"
    f.write_text(code)
    kw.setdefault("timeout", 10)
    return judge(CHECKOUT, k, f, **kw)


def rejected(res) -> str:
    """The result is a rejection with a stated cause; returns every reason given, as one string."""
    assert not res.ok, res.summary()
    reasons = [res.fatal or ""] + [p.reason for p in res.props if p.passed is False]
    text = " | ".join(r for r in reasons if r)
    assert text, f"rejected without a reason: {res.summary()}"
    assert not re.fullmatch(r"REJECTED: \d+/\d+ properties passed \([\d.]+ s\)", res.summary())
    return text


def processes_with(marker: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
            with open(f"/proc/{pid}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state != b"Z":
            out.append(int(pid))
    return out


def gone(marker: str, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not processes_with(marker):
            return True
        time.sleep(0.1)
    return not processes_with(marker)


# -- fooling the verdict --------------------------------------------------------------------


def test_forged_results_and_os_exit_are_rejected(tmp_path):
    res = run(tmp_path, A.FORGE_RESULTS)
    why = rejected(res)
    # the forged frames answer [] to everything: right only for the empty tree, then the stream ends
    assert res.passed <= 1 and ("wrong result" in why or "exited" in why or "garbled" in why), why


def test_patching_the_properties_or_given_changes_nothing(tmp_path):
    res = run(tmp_path, A.PATCH_PROPERTIES)
    why = rejected(res)
    assert "wrong result" in why
    # [] is right for the empty tree and leaves every tree unchanged; nothing else passes
    assert {p.name for p in res.props if p.passed} <= {"prop_none_root", "prop_does_not_modify_tree"}
    assert "import verifiers.katas.level_order" in res.attempts  # the attempt is reported


def test_importing_the_reference_is_refused_and_named(tmp_path):
    res = run(tmp_path, A.CALL_REFERENCE)
    why = rejected(res)
    assert res.fatal and "the judge runs your code alone" in res.fatal and "impls" in res.fatal, why


def test_reaching_the_reference_by_path_is_refused(tmp_path):
    res = run(tmp_path, A.CALL_REFERENCE_SNEAKY.replace("CHECKOUT", repr(str(CHECKOUT))))
    why = rejected(res)
    assert res.passed <= 1, why  # the fallback [[0]] is right for nothing but what it fails
    assert any(a.startswith("import impls") for a in res.attempts), res.attempts


def test_values_that_compare_equal_to_everything_arrive_as_plain_values(tmp_path):
    res = run(tmp_path, A.ALWAYS_EQUAL)
    assert "wrong result" in rejected(res)
    assert {p.name for p in res.props if p.passed} <= {"prop_does_not_modify_tree"}


def test_a_tensor_subclass_that_always_compares_equal_is_rejected(tmp_path):
    k = find(CHECKOUT, "grpo_advantages")
    first = k.properties(CHECKOUT)[0][0]
    res = run(tmp_path, A.TENSOR_ALWAYS_EQUAL, kata="grpo_advantages", only=[first], timeout=30)
    assert "wrong result" in rejected(res)


def test_the_judge_hands_out_only_node_fields(tmp_path, monkeypatch):
    """The pointer-read counter lives on the judge's side: asking to reset it over the raw channel
    fails, and wasted reads are caught by the work bound however the code pokes at the channel."""
    monkeypatch.setenv("MIANJING_MAX_EXAMPLES", "5")  # every read is a round trip: keep the trees few
    k = find(CHECKOUT, "BSTIterator")
    res = run(tmp_path, A.PROBE_COUNTER, kata="BSTIterator", only=["prop_amortised_pushes"], timeout=30)
    why = rejected(res)
    assert "wrong result" in why and "pointer reads" in res.props[0].message, (why, res.props[0].message)
    assert k is not None


def test_a_value_nested_too_deep_is_a_reason_not_a_crash(tmp_path):
    res = run(tmp_path, A.DEEP_RETURN, only=["prop_levels_match_oracle"])
    assert "cannot read" in rejected(res)


# -- what kind of failure -------------------------------------------------------------------


@pytest.mark.parametrize("code, cause", [
    (A.INFINITE_LOOP, r"timed out after 2 s"),
    (A.ALLOCATE_20GB, r"memory limit exceeded \(4096 MiB\)"),
    (S.LEVEL_ORDER_EXIT, r"called sys.exit\(3\)"),
    (S.LEVEL_ORDER_OS_EXIT, r"exited with code 7"),
    (A.SEGFAULT, r"crashed \(SIGSEGV"),
    (A.CLOSE_RESULTS, r"results stream was closed"),
    (A.GARBLE_RESULTS, r"results stream was garbled"),
    (A.WRITE_GIGABYTE_FILE, r"file-size limit exceeded"),
    (A.PRINT_GIGABYTE, r"output limit exceeded"),
], ids=["timeout", "20GB", "sys.exit", "os._exit", "segfault", "closed-stream", "garbled-stream",
        "1GiB-file", "1GiB-output"])
def test_every_rejection_names_its_cause(tmp_path, code, cause):
    res = run(tmp_path, code, timeout=2, only=["prop_levels_match_oracle"])
    why = rejected(res)
    assert re.search(cause, why), why
    if "timed out" not in cause:
        assert "timed out" not in why, why


@pytest.mark.parametrize("code, cause", [
    (A.EXIT_AT_IMPORT, r"importing your file failed: your code called sys.exit\(3\)"),
    (A.OS_EXIT_AT_IMPORT, r"importing your file failed: your code exited with code 5"),
    ("while True:\n    pass\n", r"importing your file failed: timed out after 2 s"),
])
def test_failures_at_import_are_named(tmp_path, code, cause):
    res = run(tmp_path, code, timeout=2)
    assert res.fatal and re.search(cause, res.fatal), res.fatal
    assert f"REJECTED: {res.fatal}" in res.summary()


# -- containment ----------------------------------------------------------------------------


def test_children_do_not_outlive_the_judge(tmp_path):
    mark = f"mjk-{uuid.uuid4().hex}"
    res = run(tmp_path, A.CHILDREN.replace("MARK", mark), only=["prop_levels_match_oracle"])
    assert res.ok, res.summary()  # the code itself is right; its children are the problem
    assert gone(mark + "-plain"), "a child of the submission outlived the judge"
    if BWRAP:
        assert gone(mark + "-setsid"), "a setsid'd grandchild outlived the judge"


@needs_bwrap
def test_a_submission_that_kills_the_judge_does_not_reach_it(tmp_path):
    root = mini_kb(tmp_path, with_kata=True)
    env = cli_env(root, tmp_path, MIANJING_MAX_EXAMPLES="10")
    f = tmp_path / "level_order_with_depth.py"
    f.write_text(A.KILL_THE_JUDGE)
    out = subprocess.run([MIANJING, "kata", "judge", str(f), "--no-record", "--timeout", "10"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)  # the judge lived to say REJECTED
    assert "REJECTED" in out.stdout, out.stdout


@needs_bwrap
def test_killing_the_judge_from_outside_takes_every_descendant_with_it(tmp_path):
    root = mini_kb(tmp_path, with_kata=True)
    env = cli_env(root, tmp_path, MIANJING_MAX_EXAMPLES="10")
    mark = f"mjk-{uuid.uuid4().hex}"
    f = tmp_path / "level_order_with_depth.py"
    f.write_text(A.LINGER_THEN_HANG.replace("MARK", mark))
    proc = subprocess.Popen([MIANJING, "kata", "judge", str(f), "--no-record", "--timeout", "60"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not processes_with(mark + "-orphan") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(mark + "-orphan"), "the submission never started its grandchild"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert gone(mark + "-orphan", within=10), "a setsid'd grandchild outlived a judge killed with SIGKILL"


@needs_bwrap
def test_the_worker_sees_an_empty_home_no_network_no_store(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    store = tmp_path / "reviews.sqlite3"
    store.write_bytes(b"")
    (tmp_path / "secret.txt").write_text("the user's own file")
    code = A.LOOK_AROUND.replace("PORT", str(server.getsockname()[1])).replace("STORE", repr(str(store)))
    res = run(tmp_path, code)
    m = re.search(r"LOOK (\{.*\})", res.fatal_detail)
    assert m, (res.fatal, res.fatal_detail)
    info = json.loads(m.group(1))
    assert info["listdir"] == [] and info["home"] == info["cwd"]
    assert info["uid"] != 0
    assert set(info["env"]) <= set(sandbox.SCRUBBED_ENV) | {"HOME", "TMPDIR", "PWD"}, info["env"]
    assert info["network"].startswith("refused"), info
    assert store.read_bytes() == b""  # whatever it wrote went to its own throwaway file system
    assert "secret.txt" not in info["next_to_me"], info  # only the submission is there, read-only
    with pytest.raises(socket.timeout):
        server.accept()  # nothing connected
    server.close()


def test_without_bubblewrap_the_fallback_still_refuses_the_checkout_and_network(tmp_path, monkeypatch):
    monkeypatch.setenv("MIANJING_SANDBOX", "none")
    res = run(tmp_path, A.CALL_REFERENCE)
    assert res.sandbox == "rlimits"
    assert res.fatal and "the judge runs your code alone" in res.fatal
    res = run(tmp_path, A.ALLOCATE_20GB, only=["prop_none_root"])
    assert "memory limit exceeded" in rejected(res)
    mark = f"mjk-{uuid.uuid4().hex}"
    res = run(tmp_path, A.CHILDREN.replace("MARK", mark), only=["prop_none_root"])
    assert gone(mark + "-plain"), "a child outlived the judge (process group)"
    for pid in processes_with(mark):  # the fallback cannot catch setsid escapes: clean up after it
        os.kill(pid, signal.SIGKILL)


# -- options ---------------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (["--timeout", "0"], "--timeout must be a positive number of seconds"),
    (["--timeout", "-3"], "--timeout must be a positive number of seconds"),
    (["--timeout", "nan"], "--timeout must be a positive number of seconds"),
    (["--timeout", "inf"], "--timeout must be a positive number of seconds"),
    (["--memory-mb", "-1"], "--memory-mb must be at least 64"),
    (["--memory-mb", "0"], "--memory-mb must be at least 64"),
])
def test_bad_judge_options_are_one_line(tmp_path, args, message):
    root = mini_kb(tmp_path, with_kata=True)
    env = cli_env(root, tmp_path)
    f = tmp_path / "level_order_with_depth.py"
    f.write_text(S.LEVEL_ORDER_OK)
    out = subprocess.run([MIANJING, "kata", "judge", str(f), *args], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0], out.stderr
    assert "Traceback" not in out.stdout + out.stderr


def test_the_codec_never_builds_objects_it_was_not_asked_for():
    from mianjing.quiz.judge_worker import Codec, FrameReader, WireError

    c = Codec(lambda x: (_ for _ in ()).throw(WireError("no")), lambda tag, p: (_ for _ in ()).throw(WireError(tag)))
    import torch

    for t in (torch.arange(6, dtype=torch.float64).reshape(2, 3), torch.tensor([True, False]),
              torch.tensor([1.5, -2.0], dtype=torch.bfloat16), torch.zeros(0, 3)):
        back = c.decode(json.loads(json.dumps(c.encode(t))))
        assert type(back) is torch.Tensor and back.dtype == t.dtype and torch.equal(back, t)
    assert c.decode(c.encode([1, (2.5, float("nan")), {"a": {3}}, b"x", None]))[1][0] == 2.5
    bad = [{"tensor": {"dtype": "float64", "shape": [3], "data": "AAAA"}},  # 3 bytes for 24
           {"tensor": {"dtype": "object", "shape": [1], "data": ""}},
           {"pickle": "gASV"}, {"t": 5}, {"f": "1e999"}, {"a": 1, "b": 2}]
    for v in bad:
        with pytest.raises(WireError):
            c.decode(v)
    deep = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(WireError):
        c.decode(deep)
    r = FrameReader()
    r.feed(b"\xff\xff\xff\xff")
    with pytest.raises(WireError):
        r.pop()
    r = FrameReader()
    r.feed(b"\x00\x00\x00\x03abc")
    with pytest.raises(WireError):
        r.pop()


@needs_bwrap
def test_a_python_that_lives_under_tmp_is_visible_in_the_sandbox(tmp_path, monkeypatch):
    """A checkout (and its .venv) under /tmp: the sandbox's empty /tmp must not hide the interpreter's
    folders (CI on a clone in /tmp saw every submission 'exit with code 1' at import)."""
    root = tmp_path / "venv-like"
    root.mkdir()
    (root / "probe.txt").write_text("visible")
    assert str(root).startswith("/tmp/"), root
    real = sandbox._python_roots()
    monkeypatch.setattr(sandbox, "_python_roots", lambda: [*real, str(root)])
    submission = tmp_path / "submission.py"  # bound on its own: not what is being probed
    submission.write_text("")
    argv = sandbox.bwrap_argv(sandbox.bwrap_path(), submission,
                              [sys.executable, "-I", "-c", f"print(open({str(root / 'probe.txt')!r}).read())"],
                              dict(sandbox.SCRUBBED_ENV, HOME="/sandbox", TMPDIR="/tmp"))
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "visible", (out.returncode, out.stderr[-500:])
