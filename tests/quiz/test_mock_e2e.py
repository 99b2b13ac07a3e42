"""`mianjing mock`: a whole round through a pseudo-terminal, kata included, to its saved report."""

from __future__ import annotations

import json
import sqlite3

import pexpect

from tests.quiz import solutions as S
from tests.quiz.kb import MIANJING, cli_env, mini_kb


def test_mock_round_to_its_report(tmp_path):
    root = mini_kb(tmp_path, with_kata=True)
    env = cli_env(root, tmp_path, MIANJING_MAX_EXAMPLES="25")
    work = tmp_path / "work"
    work.mkdir()
    report = tmp_path / "report.md"
    c = pexpect.spawn(MIANJING, ["mock", "--lang", "en", "--minutes", "10", "--company", "Baidu", "--out", str(report),
                                 "--kata-dir", str(work), "--timeout", "20"],
                      env=env, encoding="utf-8", timeout=60, dimensions=(60, 200))
    c.expect(r"Mock interview · 10 min · 4 questions · Baidu")
    # warm-up (difficulty 1), with its clock: 10 min split 1:2:2:3 over warm-up, core, deep, kata
    c.expect(r"⏱ 00:0\d / 10:00 · budget for this question 01:15")
    c.expect("warm-up 1/4")
    c.expect("What is GAE?")
    c.expect("Your answer")
    c.sendline("TD residual, exponentially weighted; lambda sets bias vs variance; no bootstrap past the end")
    c.sendline("")
    c.expect(r"Key points \(3/3\)")
    c.expect(r"⏱ 00:0\d / 01:15")
    c.expect("core 2/4")
    c.expect("Why does PPO clip?")
    c.sendline("it limits the update size")
    c.sendline("")
    c.expect(r"Key points \(1/2\)")
    c.expect("deep 3/4")  # no second core question in this tiny base: that stage is dropped
    c.expect("What does each ZeRO stage shard?")
    c.sendline("")  # a blank answer
    c.expect(r"Key points \(0/2\)")
    c.expect("coding kata 4/4 · level_order_with_depth")
    c.expect("Stub written to (.+level_order_with_depth.py): implement")
    stub_path = c.match.group(1).strip()
    text = open(stub_path, encoding="utf-8").read()
    assert "raise NotImplementedError" in text
    with open(stub_path, "w", encoding="utf-8") as fh:
        fh.write(text.split("def level_order_with_depth")[0] + S.LEVEL_ORDER_OK)
    c.sendline("")  # judge it
    c.expect("ACCEPTED: 5/5 properties passed")
    c.expect("recorded as a review of `level-order-with-depth`")
    c.expect("Report")
    c.expect("report saved: ")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0
    md = report.read_text(encoding="utf-8")
    assert "## Time per question" in md and "## Key points covered per topic" in md and "## What to review next" in md
    assert "| 1 | warm-up | gae-basics |" in md and "| 4 | kata | level-order-with-depth |" in md
    assert "| rl/gae | 3/3 |" in md and "| distributed/zero | 0/2 |" in md
    assert "**zero-stages** (distributed/zero, 0/2): ZeRO-1 shards optimizer states; ZeRO-3 shards parameters" in md
    assert "**gae-basics**" not in md.split("## What to review next")[1]  # nothing missed there
    con = sqlite3.connect(env["MIANJING_DB"])
    got = con.execute("SELECT entry_id, source, rating FROM reviews ORDER BY id").fetchall()
    saved = json.loads(con.execute("SELECT report FROM mock_reports").fetchone()[0])
    con.close()
    assert got == [("gae-basics", "mock", 4), ("ppo-clip", "mock", 2), ("zero-stages", "mock", 1),
                   ("level-order-with-depth", "kata", 3)]
    assert [q["entry"] for q in saved["questions"]] == ["gae-basics", "ppo-clip", "zero-stages", "level-order-with-depth"]
