"""Every way we know to fool or escape the kata judge, each asserted REJECTED or contained.

The attacks are in tests/quiz/attacks.py. The judge runs here in the test process (the trusted
side) except where the attack targets the judge's own process: then it runs as the CLI in a child
process. Containment runs in both sandbox modes (the ``mode`` fixture: bubblewrap, skipped where it cannot run,
and the fallback); tests/quiz/test_judge_containment.py runs the attacks of issue 22 in both modes as
root and as an ordinary user.
"""

from __future__ import annotations

import glob
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from mianjing.quiz import judge_confine, sandbox
from mianjing.quiz.judge import judge
from mianjing.quiz.katas import find
from tests.quiz import attacks as A
from tests.quiz import solutions as S
from tests.quiz.kb import CHECKOUT, MIANJING, cli_env, mini_kb, processes_with

BWRAP = sandbox.bwrap_path() is not None
needs_bwrap = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot make its namespaces here" if shutil.which("bwrap")
                                 else "bubblewrap is not installed (apt-get install bubblewrap; CI installs it)")


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
    # 2 s only where the cause is the time limit: on a loaded machine writing up to the file-size limit can take
    # longer, and the run must then still name the file-size limit, not a time-out
    res = run(tmp_path, code, timeout=2 if "timed out" in cause else 30, only=["prop_levels_match_oracle"])
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


MODES = ["bwrap", "fallback"]
FALLBACK = judge_confine.landlock_abi() > 0 and platform.machine() in judge_confine.SYSCALLS


@pytest.fixture(params=MODES)
def mode(request, monkeypatch):
    """Both sandbox modes: bubblewrap (skipped where it cannot run) and the fallback without it (skipped where
    the kernel has no Landlock or seccomp table: the judge then says the run is unconfined, tested below)."""
    if request.param == "bwrap" and not BWRAP:
        pytest.skip("bubblewrap is not usable here (apt-get install bubblewrap; CI installs it)")
    if request.param == "fallback" and not FALLBACK:
        pytest.skip("no Landlock in this kernel, or no seccomp table for this machine: the fallback is unconfined")
    monkeypatch.setenv("MIANJING_SANDBOX", request.param)
    return request.param


def test_the_fallback_counts_as_confined_only_when_everything_held():
    held = {"no_new_privs": True, "landlock": 4, "seccomp": True, "uid": 65534, "errors": []}
    assert sandbox.confined("fallback", held) == (True, "as uid 65534, Landlock ABI 4")
    assert sandbox.confined("fallback", {**held, "uid": 0, "capabilities_dropped": True})[0]
    for broken, why in [({"landlock": False, "errors": ["landlock: ENOSYS"]}, "could not apply landlock (landlock: ENOSYS)"),
                        ({"seccomp": False}, "could not apply seccomp"),
                        ({"uid": 0}, "could not apply dropping root's capabilities")]:
        ok, note = sandbox.confined("fallback", {**held, **broken})
        assert not ok and note == why, note
    assert not sandbox.confined("unconfined", {})[0]
    assert sandbox.confined("bubblewrap", {})[0]


@pytest.mark.parametrize("machine", sorted(judge_confine.SYSCALLS))
def test_the_seccomp_filter_is_a_well_formed_program(machine):
    """Every jump lands inside the program, every path ends in a return, the architecture is checked first."""
    prog = judge_confine.seccomp_program(judge_confine.SYSCALLS[machine], 4242)
    assert prog[0] == (0x20, 0, 0, 4) and prog[1][3] == judge_confine.SYSCALLS[machine]["arch"]
    assert len(prog) < 4096 and prog[-1][0] == 0x06
    for i, (code, jt, jf, _k) in enumerate(prog):
        if code & 0x07 == 0x05:  # a jump
            assert i + 1 + jt < len(prog) and i + 1 + jf < len(prog), (i, prog[i])


def test_starting_a_process_is_refused_and_nothing_outlives_the_judge(tmp_path, mode):
    mark = f"mjk-{uuid.uuid4().hex}"
    res = run(tmp_path, A.CHILDREN.replace("MARK", mark), only=["prop_levels_match_oracle"])
    assert res.fatal and "cannot start another (subprocess.Popen)" in res.fatal, res.summary()
    assert res.confined and res.sandbox == ("bubblewrap" if mode == "bwrap" else "fallback")
    assert gone(mark), "a child of the submission outlived the judge"


def test_a_submission_that_kills_the_judge_does_not_reach_it(tmp_path, mode):
    root = mini_kb(tmp_path, with_kata=True)
    env = cli_env(root, tmp_path, MIANJING_MAX_EXAMPLES="10", MIANJING_SANDBOX=mode)
    f = tmp_path / "level_order_with_depth.py"
    f.write_text(A.KILL_THE_JUDGE)
    out = subprocess.run([MIANJING, "kata", "judge", str(f), "--no-record", "--timeout", "10"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)  # the judge lived to say REJECTED
    assert "REJECTED" in out.stdout and "Traceback" not in out.stdout + out.stderr, out.stdout


def test_killing_the_judge_from_outside_takes_the_worker_with_it(tmp_path, mode):
    root = mini_kb(tmp_path, with_kata=True)
    env = cli_env(root, tmp_path, MIANJING_MAX_EXAMPLES="10", MIANJING_SANDBOX=mode)
    mark = f"mj{uuid.uuid4().hex[:13]}"  # the worker names its own thread: /proc/<pid>/comm holds 15 bytes
    f = tmp_path / "level_order_with_depth.py"
    f.write_text(A.NAME_THEN_HANG.replace("MARK", mark))
    proc = subprocess.Popen([MIANJING, "kata", "judge", str(f), "--no-record", "--timeout", "60"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not named(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert named(mark), "the submission never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 10
    while named(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not named(mark), "the worker outlived a judge killed with SIGKILL"


def named(comm: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/comm") as fh:
                if fh.read().strip() == comm:
                    with open(f"/proc/{pid}/stat", "rb") as st:
                        if st.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                            out.append(int(pid))
        except (OSError, ValueError):
            continue
    return out


def test_the_worker_sees_an_empty_home_no_network_no_store(tmp_path, mode):
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
    assert info["uid"] != 0 or res.isolation.get("capabilities_dropped"), (info, res.isolation)
    assert set(info["env"]) <= set(sandbox.SCRUBBED_ENV) | {"HOME", "TMPDIR", "PWD"}, info["env"]
    assert info["network"].startswith("refused"), info
    if mode == "fallback":  # under bubblewrap the path exists only in its own throwaway /tmp
        assert info["store"].startswith("refused"), info
    assert store.read_bytes() == b""
    assert "secret.txt" not in info["next_to_me"], info  # only the submission is there, or nothing can be listed
    with pytest.raises(socket.timeout):
        server.accept()  # nothing connected
    server.close()


def test_unconfined_says_so_and_records_nothing(tmp_path):
    """MIANJING_SANDBOX=unconfined (what a machine without bubblewrap, Landlock or seccomp gets): the result is
    shown, the judge says plainly that the code ran unconfined, and no review is recorded."""
    root = mini_kb(tmp_path, with_kata=True)
    env = cli_env(root, tmp_path, MIANJING_MAX_EXAMPLES="10", MIANJING_SANDBOX="unconfined")
    f = tmp_path / "level_order_with_depth.py"
    f.write_text(S.LEVEL_ORDER_OK)
    out = subprocess.run([MIANJING, "kata", "judge", str(f), "--timeout", "10"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "sandbox: UNCONFINED" in out.stdout and "UNCONFINED: not a review" in out.stdout, out.stdout
    assert "not recorded as a review: your code ran unconfined here" in out.stdout, out.stdout
    import sqlite3

    con = sqlite3.connect(env["MIANJING_DB"])
    try:
        rows = con.execute("SELECT COUNT(*) FROM reviews").fetchone()[0]
    except sqlite3.OperationalError:
        rows = 0
    con.close()
    assert rows == 0


def test_a_symlink_swap_of_the_working_directory_leaves_nothing(tmp_path, monkeypatch):
    """Unconfined, where the swap succeeds: the judge removes its folder without following the links and
    without a traceback; the checkout the links point at is untouched."""
    monkeypatch.setenv("MIANJING_SANDBOX", "unconfined")
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep.txt").write_text("keep")
    own_tmp = tmp_path / "tmp"                  # this judge's workspaces only: others may be judging meanwhile
    own_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))
    res = run(tmp_path, A.SWAP_WORKDIR.replace("TARGET", str(target)), only=["prop_none_root"])
    assert not res.confined and res.fatal is None, res.summary()
    assert (target / "keep.txt").read_text() == "keep" and sorted(os.listdir(target)) == ["keep.txt"]
    assert os.listdir(own_tmp) == []


def test_a_judge_stopped_and_continued_is_not_a_timeout(tmp_path):
    """Ctrl-Z (SIGSTOP) for longer than the limit, then fg: the time stopped is not the candidate's."""
    root = mini_kb(tmp_path, with_kata=True)
    env = cli_env(root, tmp_path, MIANJING_MAX_EXAMPLES="20")
    f = tmp_path / "level_order_with_depth.py"
    f.write_text(S.LEVEL_ORDER_OK.replace("    out, level = [], ", "    import time\n    time.sleep(0.05)\n    out, level = [], "))
    proc = subprocess.Popen([MIANJING, "kata", "judge", str(f), "--no-record", "--timeout", "3"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(2.5)
    proc.send_signal(signal.SIGSTOP)
    time.sleep(6)
    proc.send_signal(signal.SIGCONT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "ACCEPTED" in out and "timed out" not in out, out


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
    from mianjing.quiz.judge_wire import FROM_WORKER, Codec, FrameReader, WireError

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
    r = FrameReader(FROM_WORKER)
    r.feed(b"\xff\xff\xff\xff")
    with pytest.raises(WireError):
        r.pop()
    r = FrameReader(FROM_WORKER)
    r.feed(b"\x00\x00\x00\x03abc")
    with pytest.raises(WireError):
        r.pop()



def test_every_bad_frame_is_a_wire_error_before_it_costs_memory():
    """The judge's reader refuses a frame by its header, by its element count, by its nesting, by its
    encoding, and a message of the wrong shape: each a WireError (the judge then loses the worker)."""
    import struct

    from mianjing.quiz.judge_wire import FROM_WORKER, FrameReader, WireError, check, parse

    def framed(payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + payload

    r = FrameReader(FROM_WORKER)
    r.feed(struct.pack(">I", 60 << 20))  # announced, not sent: refused from the header
    with pytest.raises(WireError, match="announces"):
        r.pop()
    for payload, why in [(b'{"op":"return","v":[' + b"0," * 1_000_001 + b"0]}", "more than"),
                         (b'{"op":"return","v":' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested too deep"),
                         (b'{"op":"return","v":' + b"1" * 5000 + b"}", "not a JSON message"),
                         (b"\xff\xfe", "not a JSON message"), (b"[1, 2]", "without an operation")]:
        r = FrameReader(FROM_WORKER)
        r.feed(framed(payload))
        with pytest.raises(WireError, match=why):
            r.pop()
    ok = parse(b'{"op":"raise","type":"ValueError","kind":"error","message":"' + b"m" * 9000 + b'"}', FROM_WORKER)
    assert len(check(ok, ("raise",))["message"]) == 4000  # strings clipped
    for bad in ({"op": "raise", "type": 3}, {"op": "return", "grads": True}, {"op": "hello", "pid": "1"},
                {"op": "loaded", "sig": [], "attempts": []}, {"op": "return"}):
        with pytest.raises(WireError):
            check(bad, ("raise", "hello", "loaded"))


@needs_bwrap
def test_a_python_that_lives_under_tmp_is_visible_in_the_sandbox(tmp_path, monkeypatch):
    """A checkout (and its .venv) under /tmp: the sandbox's empty /tmp must not hide the interpreter's
    folders (CI on a clone in /tmp saw every submission 'exit with code 1' at import)."""
    root = tmp_path / "venv-like"
    root.mkdir()
    (root / "probe.txt").write_text("visible")
    assert str(root).startswith("/tmp/"), root
    real = sandbox.python_roots()
    monkeypatch.setattr(sandbox, "python_roots", lambda: [*real, str(root)])
    submission = tmp_path / "submission.py"  # bound on its own: not what is being probed
    submission.write_text("")
    ws = sandbox.Workspace(submission)
    try:
        argv = sandbox.bwrap_argv(sandbox.bwrap_path(), ws.files, ws.submission, str(submission),
                                  [sys.executable, "-I", "-c", f"print(open({str(root / 'probe.txt')!r}).read())"],
                                  dict(sandbox.SCRUBBED_ENV, HOME="/sandbox", TMPDIR="/tmp"))
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    finally:
        ws.remove()
    assert out.returncode == 0 and out.stdout.strip() == "visible", (out.returncode, out.stderr[-500:])


def test_text_from_the_worker_reaches_the_console_escaped():
    from io import StringIO

    from rich.console import Console

    from mianjing.quiz.judge import PropResult
    from mianjing.quiz.judge_report import clean, print_result

    evil = "\x1b[1A\x1b[2K\rACCEPTED: 5/5\x07\u202e\u200b\x9b2J\ud800 ok\n\tnext line"
    assert clean(evil) == ("\\x1b[1A\\x1b[2K\\x0dACCEPTED: 5/5\\x07\\u202e\\u200b\\x9b2J\\ud800 ok\n\tnext line")
    buf = StringIO()
    print_result(Console(file=buf, width=200, color_system=None), PropResult("prop_x", False, "raised " + evil, evil, evil, evil))
    out = buf.getvalue()
    assert not any(ch in out for ch in "\x1b\r\x07\u202e\u200b\x9b\ud800"), repr(out)
    assert out.splitlines()[0].startswith("  FAIL  prop_x: raised ")
