"""`mianjing quiz` and `mianjing stats` driven through a pseudo-terminal, like a candidate would."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone

import pexpect

from tests.quiz.kb import CHECKOUT, MIANJING, cli_env, mini_kb


def spawn(args: list[str], env: dict, timeout: int = 60) -> pexpect.spawn:
    return pexpect.spawn(MIANJING, args, env=env, encoding="utf-8", timeout=timeout, dimensions=(60, 200))


def rows(db, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_chinese_session_rates_stores_and_reschedules(tmp_path):
    root = mini_kb(tmp_path)
    env = cli_env(root, tmp_path)
    db = env["MIANJING_DB"]
    c = spawn(["quiz", "--lang", "zh", "--topic", "rl", "-n", "5"], env)
    c.expect("新题 · rl/gae · 难度 1 · 出现于 Baidu")
    c.expect("GAE 是什么？")
    c.expect("你的回答")
    c.sendline("GAE 就是把 TD 残差做指数加权")
    c.sendline("λ 用来在偏差和方差之间取舍")
    c.sendline("")
    c.expect("简要答案")
    c.expect(r"要点 \(2/3\)")
    c.expect(r"✓ \[已覆盖\] 指数加权的 TD 残差")
    c.expect(r"✓ \[已覆盖\] λ 在偏差和方差之间权衡")
    c.expect(r"✗ \[遗漏\] 最后一个 token 之后不再 bootstrap")
    c.expect("追问: PPO 为什么要裁剪？")
    c.expect("points> ")
    c.sendline("")  # keep the grader's ticks
    c.expect(r"回车 = 建议值 3 Good")
    c.expect("rating> ")
    c.sendline("")  # accept the suggestion
    c.expect("已保存：下次复习")
    c.expect("PPO 为什么要裁剪？")
    c.expect("你的回答")
    c.sendline("限制更新幅度，A>0 时只有上界 1+ε 起作用")
    c.sendline("")
    c.expect(r"要点 \(2/2\)")
    c.expect("points> ")
    c.sendline("")
    c.expect("rating> ")
    c.sendline("4")
    c.expect("本轮结束：已评分 2 题。")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0
    got = rows(db, "SELECT entry_id, rating, suggested, lang, source, covered FROM reviews ORDER BY id")
    assert [(e, r, s, lg, src) for e, r, s, lg, src, _ in got] == [
        ("gae-basics", 3, 3, "zh", "quiz"), ("ppo-clip", 4, 4, "zh", "quiz")]
    assert "exponentially weighted TD residuals" in got[0][5]
    now = datetime.now(timezone.utc)
    for entry_id, due in rows(db, "SELECT entry_id, due FROM cards"):
        assert datetime.fromisoformat(due) > now, f"{entry_id} was not rescheduled into the future"
    # Neither card is due now and no new rl question is left: nothing to ask.
    c = spawn(["quiz", "--lang", "zh", "--topic", "rl"], env)
    c.expect("没有符合条件的题目")
    c.expect(pexpect.EOF)
    # Outside rl the unseen ZeRO question is still offered.
    c = spawn(["quiz", "--lang", "zh", "-n", "1"], env)
    c.expect("ZeRO 三个阶段分别切什么？")
    c.close(force=True)


def test_english_session_ctrl_d_ends_the_answer_and_stats_show_it(tmp_path):
    root = mini_kb(tmp_path)
    env = cli_env(root, tmp_path)
    c = spawn(["quiz", "--lang", "en", "--company", "baidu", "--difficulty", "3"], env)
    c.expect("What does each ZeRO stage shard?")
    c.expect("Your answer")
    # Each line waits for its prompt, as a person does. A Ctrl-D typed ahead, before readline has put
    # the terminal in raw mode, reaches the line discipline in canonical mode and is dropped when
    # readline switches modes: the answer then never ends (this test timed out that way under load).
    for line in ("ZeRO-1 shards the optimizer states,", "and stage 2 the gradients."):
        c.expect("> ")
        c.sendline(line)
        c.expect_exact(line)
    c.expect("\r\n> ")
    c.sendeof()  # Ctrl-D on an empty line ends the answer
    c.expect(r"Key points \(1/2\)")
    c.expect(r"✓ \[covered\] ZeRO-1 shards optimizer states")
    c.expect(r"✗ \[missed\] ZeRO-3 shards parameters")
    c.expect("points> ")
    c.sendline("")
    c.expect("suggested 2 Hard")
    c.expect("rating> ")
    c.sendline("again")
    c.expect(r"saved: next review \+\d+ min")
    c.expect("Session over: 1 question")
    c.expect(pexpect.EOF)
    got = rows(env["MIANJING_DB"], "SELECT entry_id, rating, suggested, missed FROM reviews")
    assert got == [("zero-stages", 1, 2, '["ZeRO-3 shards parameters"]')]
    out = subprocess.run([MIANJING, "stats", "--lang", "en"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert re.search(r"reviews done \(today / 7 days / all\)\s*│\s*1 / 1 / 1", out.stdout)
    assert re.search(r"new \(never asked\)\s*│\s*2", out.stdout)
    assert "distributed/zero" in out.stdout and "ZeRO-3 shards parameters" in out.stdout


def test_ctrl_c_mid_session_keeps_the_earlier_review(tmp_path):
    root = mini_kb(tmp_path)
    env = cli_env(root, tmp_path)
    c = spawn(["quiz", "--lang", "en", "--topic", "rl"], env)
    c.expect("What is GAE?")
    c.expect("Your answer")
    c.sendline("bias and variance")
    c.sendline("")
    c.expect("points> ")
    c.sendline("")
    c.expect("rating> ")
    c.sendline("3")
    c.expect("saved: next review")
    c.expect("Why does PPO clip?")
    c.expect("Your answer")
    c.sendline("half an answ")
    c.sendintr()  # Ctrl-C while typing the second answer
    c.expect(r"Interrupted: the 1 rated question\(s\) are saved")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 130
    assert rows(env["MIANJING_DB"], "SELECT entry_id, rating FROM reviews") == [("gae-basics", 3)]
    con = sqlite3.connect(env["MIANJING_DB"])
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


def test_ctrl_c_that_lands_inside_input_before_it_waits_is_acted_on_at_once(tmp_path):
    """The Ctrl-C the loaded machine used to lose (the test above timed out): its handler runs inside
    ``input()`` after the prompt is shown and before readline waits for a key. The instrument in
    tests/quiz/sigint_in_input/ puts it exactly there on the second question's first line; the old
    code then slept in readline's select() until the test's timeout."""
    import termios

    root = mini_kb(tmp_path)
    env = cli_env(root, tmp_path, MIANJING_TEST_SIGINT_IN_INPUT="3",
                  PYTHONPATH=str(CHECKOUT / "tests" / "quiz" / "sigint_in_input"))
    c = spawn(["quiz", "--lang", "en", "--topic", "rl"], env)
    c.expect("What is GAE?")
    c.expect("Your answer")
    c.sendline("bias and variance")  # input("> ") calls 1 and 2
    c.sendline("")
    c.expect("points> ")
    c.sendline("")
    c.expect("rating> ")
    c.sendline("3")
    c.expect("Why does PPO clip?")  # call 3 gets the Ctrl-C: nothing is typed
    c.expect(r"Interrupted: the 1 rated question\(s\) are saved", timeout=15)
    lflag = termios.tcgetattr(c.child_fd)[3]  # readline's raw mode is undone before the message
    assert lflag & termios.ICANON and lflag & termios.ECHO
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 130
    assert rows(env["MIANJING_DB"], "SELECT entry_id, rating FROM reviews") == [("gae-basics", 3)]


def test_a_corrupt_store_gives_a_clear_message_and_is_not_touched(tmp_path):
    root = mini_kb(tmp_path)
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"\x00garbage" * 100)
    env = cli_env(root, tmp_path, MIANJING_DB=str(bad))
    out = subprocess.run([MIANJING, "quiz", "--lang", "en"], env=env, capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    assert "not a SQLite database" in out.stderr and "Traceback" not in out.stderr + out.stdout
    assert bad.read_bytes() == b"\x00garbage" * 100


def test_quiz_start_up_imports_no_torch_hypothesis_or_mkdocs(tmp_path):
    """Up to the first question: no torch, hypothesis, mkdocs, numpy; and once the knowledge-base
    index exists (after the first run), not even pydantic, yaml or typer (the full load and the
    grader's dictionaries come in a background thread while the candidate types)."""
    root = mini_kb(tmp_path)
    env = cli_env(root, tmp_path)
    first = subprocess.run([MIANJING, "quiz", "--lang", "en", "-n", "1"], env=env, capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
    assert "What does each ZeRO stage shard?" in first.stdout and (root / "build" / "quiz-index.json").is_file()
    code = ("import builtins\nfrom mianjing.quiz import kbindex\nkbindex.Background.start = lambda self: None\n"
            "def stop(*a):\n    raise SystemExit(0)\nbuiltins.input = stop\n"
            "from mianjing.entry import main\nmain(['quiz', '--lang', 'en', '-n', '1'])\n")
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env, capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert "What does each ZeRO stage shard?" in out.stdout  # it did get to the first question
    imported = {m.group(1).split(".")[0] for m in re.finditer(r"^import time:.*\|\s+(\S+)\s*$", out.stderr, re.M)}
    assert "rich" in imported and "sqlite3" in imported  # the breakdown was really parsed
    assert not imported & {"torch", "hypothesis", "mkdocs", "numpy", "pydantic", "yaml", "typer", "jieba"}, (
        imported & {"torch", "hypothesis", "mkdocs", "numpy", "pydantic", "yaml", "typer", "jieba"})


def test_the_candidate_overrides_the_ticks_and_the_suggestion_follows(tmp_path):
    root = mini_kb(tmp_path)
    env = cli_env(root, tmp_path)
    c = spawn(["quiz", "--lang", "en", "--company", "baidu", "--difficulty", "3"], env)
    c.expect("What does each ZeRO stage shard?")
    c.expect("Your answer")
    c.sendline("Stage one shards the optimizer state; stage three shards the parameters themselves.")
    c.sendline("")
    c.expect(r"Key points \(\d/2\)")
    c.expect("points> ")
    c.sendline("n")  # "I did not really say either"
    c.expect(r"1✗  2✗   your ticks: 0/2 key points")
    c.expect("points> ")
    c.sendline("1")
    c.expect(r"1✓  2✗   your ticks: 1/2 key points")
    c.expect("points> ")
    c.sendline("")
    c.expect("suggested 2 Hard")  # follows the ticks: 1/2
    c.expect("rating> ")
    c.sendline("")
    c.expect("Session over: 1 question")
    c.expect(pexpect.EOF)
    got = rows(env["MIANJING_DB"], "SELECT rating, suggested, covered, missed FROM reviews")
    assert got == [(2, 2, '["ZeRO-1 shards optimizer states"]', '["ZeRO-3 shards parameters"]')]


def test_maths_is_shown_as_text_not_latex(tmp_path):
    root = mini_kb(tmp_path)
    path = root / "qa" / "rl" / "gae-basics.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace(
        'question: {zh: "GAE 是什么？", en: "What is GAE?"}',
        'question: {zh: "GAE 是什么？", en: "What is $\\\\hat{A}_t = \\\\sum_l (\\\\gamma\\\\lambda)^l \\\\delta_{t+l}$?"}'),
        encoding="utf-8")
    env = cli_env(root, tmp_path)
    c = spawn(["quiz", "--lang", "en", "--topic", "rl/gae"], env)
    c.expect("Your answer")
    shown = c.before
    c.close(force=True)
    assert "What is Âₜ = Σₗ (γλ)^l δₜ₊ₗ?" in shown, shown
    assert "$" not in shown and "\\" not in shown
