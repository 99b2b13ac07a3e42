"""Bad stores, paths and options for quiz/mock/kata: one line naming the problem, exit 2, before any
question is asked, nothing lost, no traceback."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import time

import pexpect
import pytest

from mianjing.quiz.store import Store
from tests.quiz import solutions as S  # noqa: F401
from tests.quiz.kb import MIANJING, cli_env, mini_kb


def one_line_error(out: subprocess.CompletedProcess | tuple, *needles: str) -> str:
    rc, stdout, stderr = (out.returncode, out.stdout, out.stderr) if not isinstance(out, tuple) else out
    assert rc == 2, (rc, stdout, stderr)
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    for n in needles:
        assert n in lines[0], lines[0]
    assert "Traceback" not in stdout + stderr
    return lines[0]


def quiz(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([MIANJING, "quiz", "--lang", "en", *args], env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def test_a_zero_byte_store_is_reported_not_treated_as_new(tmp_path):
    root = mini_kb(tmp_path)
    empty = tmp_path / "empty.sqlite3"
    empty.write_bytes(b"")
    out = quiz(cli_env(root, tmp_path, MIANJING_DB=str(empty)))
    one_line_error(out, "empty file (0 bytes)", str(empty))
    assert "What" not in out.stdout  # no question was asked
    assert empty.read_bytes() == b""


def test_a_dropped_table_is_found_before_the_first_question(tmp_path):
    root = mini_kb(tmp_path)
    db = tmp_path / "r.sqlite3"
    Store(db).close()
    con = sqlite3.connect(db)
    con.execute("DROP TABLE reviews")
    con.commit()
    con.close()
    out = quiz(cli_env(root, tmp_path, MIANJING_DB=str(db)))
    one_line_error(out, "no `reviews` table")
    assert "What" not in out.stdout


def test_malformed_pages_are_found_before_the_first_question(tmp_path):
    root = mini_kb(tmp_path)
    db = tmp_path / "r.sqlite3"
    s = Store(db)
    for i in range(300):  # enough rows for several pages
        s.con.execute("INSERT INTO mock_reports (created_at, path, report) VALUES (?, ?, ?)",
                      ("2026-01-01", None, "x" * 500))
    s.close()
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(db.read_bytes())
    page = 4096
    for off in range(3 * page, min(len(data), 12 * page), 7):  # scribble over a few pages
        data[off] = 0xA5
    db.write_bytes(bytes(data))
    before = db.read_bytes()
    out = quiz(cli_env(root, tmp_path, MIANJING_DB=str(db)))
    one_line_error(out, str(db))
    assert "What" not in out.stdout
    assert db.read_bytes() == before


def test_an_uncreatable_folder_is_reported(tmp_path):
    root = mini_kb(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = quiz(cli_env(root, tmp_path, MIANJING_DB=str(blocker / "sub" / "r.sqlite3")))
    one_line_error(out, "cannot create the folder")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="a read-only mount needs root and unshare (permissions do not stop root)")
def test_a_read_only_store_is_reported_before_the_first_question(tmp_path):
    root = mini_kb(tmp_path)
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "r.sqlite3"
    Store(db).close()
    env = cli_env(root, tmp_path, MIANJING_DB=str(db))
    script = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && exec {MIANJING} quiz --lang en"
    out = subprocess.run(["unshare", "-m", "sh", "-c", script], env=env, capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    if "mount:" in out.stderr:
        pytest.skip(f"cannot make a read-only mount here: {out.stderr.strip()}")
    one_line_error(out, "cannot be written")
    assert "What" not in out.stdout


def test_mock_out_is_checked_before_the_round(tmp_path):
    root = mini_kb(tmp_path)
    env = cli_env(root, tmp_path)
    for out_path, needle in ((tmp_path / "no-such-dir" / "r.md", "no such folder"), (tmp_path, "is a folder")):
        out = subprocess.run([MIANJING, "mock", "--lang", "en", "--out", str(out_path)], env=env, capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)
        one_line_error(out, "--out", needle)
        assert "Mock interview" not in out.stdout


def test_a_failed_report_write_keeps_the_report_in_the_store(tmp_path):
    root = mini_kb(tmp_path)
    env = cli_env(root, tmp_path)
    outdir = tmp_path / "reports"
    outdir.mkdir()
    report = outdir / "report.md"
    c = pexpect.spawn(MIANJING, ["mock", "--lang", "en", "--minutes", "10", "--out", str(report)], env=env,
                      encoding="utf-8", timeout=60, dimensions=(60, 200))
    c.expect("What is GAE?")
    shutil.rmtree(outdir)  # the folder disappears during the round
    for _ in range(3):
        c.expect("Your answer")
        c.sendline("bias and variance")
        c.sendline("")
    c.expect(r"could not write the report to .*report\.md .*kept in the review store .* id (\d+)\)")
    report_id = int(c.match.group(1))
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 1
    con = sqlite3.connect(env["MIANJING_DB"])
    saved = con.execute("SELECT path, report FROM mock_reports WHERE id = ?", (report_id,)).fetchone()
    con.close()
    assert saved and saved[0] == str(report) and "## Time per question" in saved[1]
    assert not outdir.exists()  # nothing stray was created in its place
    assert not list(tmp_path.glob("**/*.tmp"))


def test_kata_start_to_a_missing_folder_is_one_line(tmp_path):
    root = mini_kb(tmp_path, with_kata=True)
    env = cli_env(root, tmp_path)
    out = subprocess.run([MIANJING, "kata", "start", "level_order_with_depth", "--to", str(tmp_path / "nope")],
                         env=env, capture_output=True, text=True, timeout=60)
    one_line_error(out, "no such folder", "nope")
    out = subprocess.run([MIANJING, "kata", "start", "level_order_with_depth", "--to",
                          str(tmp_path / "nope" / "mine.py")], env=env, capture_output=True, text=True, timeout=60)
    one_line_error(out, "no such folder")
    ok = subprocess.run([MIANJING, "kata", "start", "level_order_with_depth", "--to", str(tmp_path / "mine.py")],
                        env=env, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and (tmp_path / "mine.py").is_file()


@pytest.mark.parametrize("delay", [0.02, 0.08, 0.15, 0.3])
def test_ctrl_c_at_start_up_is_not_a_traceback(tmp_path, delay):
    root = mini_kb(tmp_path)
    env = cli_env(root, tmp_path)
    proc = subprocess.Popen([MIANJING, "quiz", "--lang", "en"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert "Traceback" not in stdout + stderr, stderr
    assert proc.returncode in (130, -signal.SIGINT, 0, 1), proc.returncode
