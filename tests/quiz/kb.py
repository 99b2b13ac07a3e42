"""A tiny knowledge base for the quiz tests (built on tests/minirepo.py), and CLI and process helpers."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from pathlib import Path

from tests.minirepo import make_repo

CHECKOUT = Path(__file__).resolve().parents[2]
MIANJING = str(Path(sys.executable).with_name("mianjing"))


def _entry(eid: str, topic: str, difficulty: int, company: str, q: tuple[str, str], kps: list[tuple],
           follow_ups: str = "[]", kind: str = "question", impls: str = "[]") -> str:
    points = "".join(
        f"  - zh: \"{zh}\"\n    en: \"{en}\"\n    match: {{zh: {mz}, en: {me}}}\n" for zh, en, mz, me in kps)
    return textwrap.dedent(f"""\
        # yaml-language-server: $schema=../schema.json
        id: {eid}
        kind: {kind}
        topic: {topic}
        asked_at: [{{company: {company}, round: 1}}]
        difficulty: {difficulty}
        question: {{zh: "{q[0]}", en: "{q[1]}"}}
        answer:
          short: {{zh: "{q[0]}的简答", en: "short answer to: {q[1]}"}}
          full: {{zh: "$x$", en: "$x$"}}
        """) + "key_points:\n" + points + f"follow_ups: {follow_ups}\nimplementations: {impls}\n"


ENTRIES = {
    "gae-basics": _entry("gae-basics", "rl/gae", 1, "Baidu", ("GAE 是什么？", "What is GAE?"), [
        ("指数加权的 TD 残差", "exponentially weighted TD residuals", '["TD", "残差"]', '["TD residual", "td error"]'),
        ("λ 在偏差和方差之间权衡", "lambda trades bias for variance", '["偏差", "方差"]', '["bias", "variance"]'),
        ("最后一个 token 之后不再 bootstrap", "no bootstrap after the last token", '["bootstrap", "自举"]',
         '["bootstrap"]'),
    ], follow_ups="[ppo-clip]"),
    "ppo-clip": _entry("ppo-clip", "rl/ppo", 2, "ByteDance", ("PPO 为什么要裁剪？", "Why does PPO clip?"), [
        ("限制策略更新幅度", "limits the policy update", '["更新幅度", "信赖域"]', '["update size", "trust region"]'),
        ("A>0 时只限制上界 1+ε", "for A>0 only 1+eps binds", '["上界", "1+ε"]', '["upper bound", "1+eps"]'),
    ]),
    "zero-stages": _entry("zero-stages", "distributed/zero", 3, "Baidu", ("ZeRO 三个阶段分别切什么？",
                                                                          "What does each ZeRO stage shard?"), [
        ("ZeRO-1 切优化器状态", "ZeRO-1 shards optimizer states", '["优化器状态"]', '["optimizer state"]'),
        ("ZeRO-3 切参数", "ZeRO-3 shards parameters", '["参数"]', '["parameter"]'),
    ]),
}

LEVEL_ORDER_ENTRY = _entry(
    "level-order-with-depth", "coding/tree", 2, "Baidu", ("手撕层次遍历", "Write a level-order traversal"), [
        ("用队列按层出队", "a queue consumed one level at a time", '["队列"]', '["queue"]'),
    ], kind="coding", impls="[impls/coding/level_order.py::level_order_with_depth]")

KATA_FILES = ["impls/coding/__init__.py", "impls/coding/trees.py", "impls/coding/level_order.py",
              "verifiers/katas/__init__.py", "verifiers/katas/level_order.py", "verifiers/coding/__init__.py",
              "verifiers/coding/strategies.py"]


def mini_kb(tmp: Path, *, with_kata: bool = False) -> Path:
    """A checkout with three entries (topics rl/gae, rl/ppo, distributed/zero; difficulties 1, 2, 3);
    ``with_kata`` adds the level-order kata copied from this checkout and its entry."""
    root = make_repo(tmp)
    (root / "qa" / "maths" / "adding.yaml").unlink()
    for eid, text in ENTRIES.items():
        folder = root / "qa" / ENTRIES_FOLDER.get(eid, "rl")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{eid}.yaml").write_text(text, encoding="utf-8")
    if with_kata:
        for rel in KATA_FILES:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(CHECKOUT / rel, root / rel)
        (root / "qa" / "coding").mkdir(exist_ok=True)
        (root / "qa" / "coding" / "level-order-with-depth.yaml").write_text(LEVEL_ORDER_ENTRY, encoding="utf-8")
    return root


ENTRIES_FOLDER = {"zero-stages": "distributed"}


def cli_env(root: Path, tmp: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIANJING_")}
    env.update(MIANJING_ROOT=str(root), MIANJING_DB=str(tmp / "reviews.sqlite3"),
               TERM="dumb", PYTHONIOENCODING="utf-8",
               LANG="C.UTF-8", LC_ALL="C.UTF-8", COLUMNS="200")
    env.update(extra)
    return env


def processes_with(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line contains ``marker``."""
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
