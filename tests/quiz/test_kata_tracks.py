"""Katas by track, in both languages: `kata list` groups RL / ML / kernels / LeetCode with difficulty and entry,
`kata start --lang zh` writes a Chinese stub for every kata, `mianjing check` refuses a kata without its Chinese
text, and `mianjing mock` draws its coding question from any track, by company or topic."""

from __future__ import annotations

import ast
import re
import subprocess

import pytest

from mianjing.quiz.katas import REGISTRY, TRACKS, available, given_symbols, stub
from tests.quiz.kb import CHECKOUT, MIANJING, cli_env, mini_kb

CJK = re.compile(r"[\u4e00-\u9fff]")


def cli(args, env, cwd, **kw):
    return subprocess.run([MIANJING, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120, **kw)


def test_every_registered_kata_has_a_track():
    assert {k.track for k in REGISTRY} <= set(TRACKS)
    assert len({k.name for k in REGISTRY}) == len(REGISTRY)


@pytest.mark.parametrize("kata", [k.name for k in available(CHECKOUT)])
def test_the_chinese_stub_is_chinese_and_gives_nothing_away(kata):
    k = next(x for x in available(CHECKOUT) if x.name == kata)
    assert k.zh_missing(CHECKOUT) == [], k.zh_missing(CHECKOUT)
    zh, en = stub(CHECKOUT, k, "zh"), stub(CHECKOUT, k, "en")
    for text in (zh, en):
        compile(text, f"{kata}.py", "exec")
        assert f"# mianjing-kata: {kata}" in text
        body = text.split(f"# mianjing-kata: {kata}", 1)[1]
        for given in given_symbols(k):  # a kernel kata's launch wrapper is given whole: only the kernels are asked
            node = next(n for n in ast.parse(body).body if isinstance(n, ast.FunctionDef) and n.name == given)
            lines = body.splitlines()
            body = "\n".join(lines[:node.lineno - 1] + lines[node.end_lineno:])
        code = [ln.strip() for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]
        assert not [ln for ln in code if re.match(r"(return|for|while|if)\b", ln)], kata
    assert "在这里写你的代码" in zh and "约定" in zh and "评测命令" in zh
    assert "your code here" not in zh
    for name, _ in k.properties(CHECKOUT):  # every property listed in the header, in Chinese
        line = next(ln for ln in zh.splitlines() if ln.strip().startswith(f"* {name}:"))
        assert CJK.search(line), line
    # the docstring of the function (or class) to write is Chinese too
    after = zh.split(f"# mianjing-kata: {kata}", 1)[1]
    doc = after.split('"""')[1] if '"""' in after else ""
    assert CJK.search(doc), doc[:200]


def test_kata_list_groups_by_track_with_difficulty_and_entry(tmp_path):
    env = cli_env(CHECKOUT, tmp_path)
    out = cli(["kata", "list"], env, tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    positions = [text.index(title) for title in ("RL ·", "ML ·", "LeetCode ·")]
    assert positions == sorted(positions)
    assert "kernels" in text
    assert re.search(r"LRUCache\s+│\s+2 core\s+│\s+lru-cache", text), text
    assert re.search(r"trap\s+│\s+3 deep\s+│\s+trapping-rain-water", text)
    only = cli(["kata", "list", "--track", "leetcode", "--lang", "zh"], env, tmp_path)
    assert only.returncode == 0 and "LeetCode 算法" in only.stdout and "gae" not in only.stdout
    assert "1 热身" in only.stdout and "num_islands" in only.stdout
    n = int(re.search(r"共 (\d+) 个 kata", only.stdout).group(1))
    assert n == sum(1 for k in available(CHECKOUT) if k.track == "leetcode")


@pytest.mark.parametrize("args, says", [
    (["kata", "list", "--track", "sorting"], "--track must be one of rl, ml, kernels, leetcode"),
    (["kata", "start", "LRUCache", "--lang", "fr"], "--lang must be zh or en"),
    (["kata", "start", "no_such_kata", "--lang", "zh"], "no kata named 'no_such_kata'"),
    (["mock", "--track", "sorting", "--minutes", "5"], "--track must be one of"),
], ids=["unknown-track", "unknown-lang", "missing-kata", "mock-unknown-track"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, says):
    out = cli(args, cli_env(CHECKOUT, tmp_path), tmp_path, input="")
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert says in out.stderr and "Traceback" not in out.stderr + out.stdout
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_kata_start_writes_the_stub_in_the_language_asked(tmp_path):
    env = cli_env(CHECKOUT, tmp_path)
    out = cli(["kata", "start", "num_islands", "--lang", "zh", "--to", str(tmp_path)], env, tmp_path)
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "num_islands.py").read_text(encoding="utf-8")
    assert "统计岛屿数" in text and "raise NotImplementedError  # 在这里写你的代码" in text
    out = cli(["kata", "start", "num_islands", "--lang", "en", "--to", str(tmp_path), "--force"], env, tmp_path)
    assert out.returncode == 0
    assert not CJK.search((tmp_path / "num_islands.py").read_text(encoding="utf-8"))


def test_check_refuses_a_kata_without_its_chinese_text(tmp_path):
    root = mini_kb(tmp_path, with_kata=True)
    env = cli_env(root, tmp_path)
    before = cli(["check"], env, tmp_path)
    assert "no Chinese text" not in before.stdout + before.stderr  # (the mini base has problems of its own)
    props = root / "verifiers" / "katas" / "level_order.py"
    text = props.read_text(encoding="utf-8")
    start = text.index("\nZH = {")
    end = text.index("\n}\n", start) + 3
    props.write_text(text[:start] + "\n" + text[end:], encoding="utf-8")
    out = cli(["check"], env, tmp_path)
    assert out.returncode == 1
    assert "kata level_order_with_depth: no Chinese text for doc, prop_none_root" in out.stdout + out.stderr


def test_mock_draws_its_kata_from_the_track_company_or_topic(tmp_path):
    from mianjing.loader import load
    from mianjing.quiz.mock import pick_kata
    from mianjing.quiz.store import Store

    kb = load(CHECKOUT).kb
    store = Store(tmp_path / "r.sqlite3")
    try:
        k, e = pick_kata(CHECKOUT, kb, None, track="leetcode", store=store)
        assert k.track == "leetcode" and e is not None and e.id == k.entry
        k, _ = pick_kata(CHECKOUT, kb, None, topic="coding/graph", store=store)
        assert k.name in ("num_islands", "find_order")
        k, _ = pick_kata(CHECKOUT, kb, "Shopee", store=store)
        assert k.name == "LRUCache"
        k, _ = pick_kata(CHECKOUT, kb, "ByteDance", track="leetcode", topic="coding/tree", store=store)
        assert k.name == "is_valid_bst"  # asked at ByteDance, on coding/tree
        # a kata already rehearsed (reviewed, not due) gives way to one never rehearsed
        from mianjing.quiz import scheduler
        from mianjing.quiz.store import Review, now_utc

        first, entry = pick_kata(CHECKOUT, kb, None, track="leetcode", store=store)
        at = now_utc()
        store.record(Review(entry_id=entry.id, topic=entry.topic, rating=3, reviewed_at=at.isoformat(), source="kata",
                            covered=[], missed=[], duration_s=1.0, suggested=3, lang="en"),
                     scheduler.card_id(entry.id), lambda cj: scheduler.review(cj, entry.id, 3, at))
        again, _ = pick_kata(CHECKOUT, kb, None, track="leetcode", store=store)
        assert again.name != first.name
    finally:
        store.close()
