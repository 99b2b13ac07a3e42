"""Build small throwaway checkouts for testing the tool itself."""

from __future__ import annotations

import textwrap
from pathlib import Path

PYPROJECT = """\
[project]
name = "mini"
version = "0"
[tool.pytest.ini_options]
pythonpath = ["."]
addopts = "-p mianjing.plugin"
"""

CATALOG = """\
questions:
- id: t.sum
  question: {en: "How do you add?", zh: "怎么加？"}
  claims:
  - id: t-01
    says: addition is commutative
  - id: t-02
    says: subtraction is commutative
"""


def entry_yaml(entry_id: str = "adding", *, claims: str | None = None, extra: str = "") -> str:
    if claims is None:
        claims = """\
        - id: add.commutative
          catalog: t-01
          verdict: holds
          method: property
          statement: {zh: "加法交换律成立", en: "addition commutes"}
        - id: sub.commutative
          catalog: t-02
          verdict: refuted
          method: numeric
          statement: {zh: "减法满足交换律", en: "subtraction commutes"}
          correction: {zh: "a−b = −(b−a)", en: "a−b = −(b−a)"}
        """
    return textwrap.dedent(f"""\
        # yaml-language-server: $schema=../schema.json
        id: {entry_id}
        catalog: t.sum
        topic: maths/arith
        difficulty: 1
        question: {{zh: "怎么加？", en: "How do you add?"}}
        answer:
          short: {{zh: "按位加", en: "digit by digit"}}
          full: {{zh: "$a+b$", en: "$a+b$"}}
        key_points:
          - zh: 交换律
            en: commutative
            match: {{zh: ["交换"], en: ["commut"]}}
        claims:
        """) + textwrap.indent(textwrap.dedent(claims), "  ") + extra


VERIFIER = """\
import pytest
import impls.arith as A


@pytest.mark.claim("add.commutative")
def test_add(evidence):
    for a in range(5):
        for b in range(5):
            assert A.add(a, b) == A.add(b, a)
    evidence["pairs"] = 25


@pytest.mark.claim("sub.commutative")
def test_sub(evidence):
    evidence["counterexample"] = {"a": 1, "b": 0, "a-b": A.sub(1, 0), "b-a": A.sub(0, 1)}
    assert A.sub(1, 0) != A.sub(0, 1)
"""

IMPL = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


NAMES = """\
topics:
  maths: {zh: 数学, en: Maths}
  maths/arith: {zh: 算术, en: Arithmetic}
  rl: {zh: 强化学习, en: Reinforcement learning}
  rl/ppo: {zh: PPO 与 TRPO, en: PPO and TRPO}
companies:
  Baidu: {zh: 百度, en: Baidu}
teams:
  AI Infra: {zh: AI Infra, en: AI Infra}
"""


def make_repo(tmp: Path, *, entry: str | None = None, verifier: str = VERIFIER, catalog: str = CATALOG) -> Path:
    root = tmp / "repo"
    (root / "qa" / "maths").mkdir(parents=True)
    (root / "impls").mkdir()
    (root / "verifiers").mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "impls" / "__init__.py").write_text("")
    (root / "impls" / "arith.py").write_text(IMPL)
    (root / "verifiers" / "__init__.py").write_text("")
    (root / "verifiers" / "test_arith.py").write_text(verifier)
    (root / "qa" / "maths" / "adding.yaml").write_text(entry if entry is not None else entry_yaml())
    (root / "qa" / "names.yaml").write_text(NAMES)
    (tmp / "shared" / "catalog").mkdir(parents=True)
    (tmp / "shared" / "catalog" / "claims.yaml").write_text(catalog)
    return root
