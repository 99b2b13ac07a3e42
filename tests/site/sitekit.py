"""A tiny checkout with the real site configuration, for fast site builds in tests."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

from tests.minirepo import VERIFIER, entry_yaml, make_repo

REPO = Path(__file__).resolve().parents[2]

IS_ENTRY = textwrap.dedent("""\
    # yaml-language-server: $schema=../schema.json
    id: importance-ratio
    topic: rl/ppo
    asked_at: [{company: Baidu, team: AI Infra, round: 2}]
    difficulty: 2
    question: {zh: "PPO 为什么需要重要性采样？", en: "Why does PPO need importance sampling?"}
    answer:
      short:
        zh: "数据来自旧策略，用重要性采样比值 $r_t(\\\\theta)$ 修正分布差异。"
        en: "The data come from the old policy; the importance ratio $r_t(\\\\theta)$ corrects for the shift."
      full:
        zh: |
          优势函数 $\\hat A_t$ 在旧策略下估计，比值为

          $$r_t(\\theta) = \\frac{\\pi_\\theta(a_t \\mid s_t)}{\\pi_{\\theta_{old}}(a_t \\mid s_t)}$$

          代码里写作 `ratio = exp(logp - old_logp)`，其中 `$` 不是公式。

          - 裁剪后的目标紧贴在列表项里：
            $$L^{CLIP} = \\min\\big(r A,\\ \\mathrm{clip}(r, 1-\\epsilon, 1+\\epsilon) A\\big) ,$$
            其中 $|A|$ 不受限制。
        en: |
          The advantage $\\hat A_t$ is estimated under the old policy; the ratio is

          $$r_t(\\theta) = \\frac{\\pi_\\theta(a_t \\mid s_t)}{\\pi_{\\theta_{old}}(a_t \\mid s_t)}$$

          In code: `ratio = exp(logp - old_logp)`, where `$` is not maths.

          - The clipped objective, flush inside a list item:
            $$L^{CLIP} = \\min\\big(r A,\\ \\mathrm{clip}(r, 1-\\epsilon, 1+\\epsilon) A\\big) ,$$
            where $|A|$ is unbounded.
    key_points:
      - {zh: 重要性采样, en: importance sampling, match: {zh: [重要性采样], en: [importance]}}
    claims:
      - id: ratio.add-commutes
        verdict: holds
        method: property
        statement: {zh: "加法交换律成立（$a+b=b+a$），1 加 2 得 3.0", en: "addition commutes ($a+b=b+a$); 1 plus 2 is 3.0"}
      - id: ratio.paper-epsilon
        verdict: holds
        method: citation
        cite: {title: "Schulman et al. 2017, PPO", url: "https://arxiv.org/abs/1707.06347", locator: "§6.1"}
        statement: {zh: "论文中 ε 取 0.2", en: "the paper uses ε = 0.2"}
    implementations: [impls/arith.py::add]
    follow_ups: [adding]
    figures:
      - ref: figures/arith.py::sums
        caption: {zh: "前 $n$ 个整数之和（调用 `impls/arith.py` 计算）", en: "Sums of the first $n$ integers (computed by `impls/arith.py`)"}
    benchmarks: [benchmarks/results/add.json]
    references: [{title: "Schulman et al. 2017, PPO", url: "https://arxiv.org/abs/1707.06347", locator: "Eq. (6)"}]
    """)

BENCH = {
    "title": {"zh": "加法速度", "en": "Addition speed"},
    "machine": "test machine", "date": "2026-11-29", "command": "python benchmarks/add.py",
    "columns": ["n", "seconds"], "rows": [[1, 0.5], [2, 1.25]],
    "notes": {"zh": "越小越好", "en": "lower is better"},
}

EXTRA_VERIFIER = VERIFIER + textwrap.dedent("""\


    @pytest.mark.claim("ratio.add-commutes")
    def test_ratio_add(evidence):
        evidence["checked"] = 3
        evidence["partial_sums"] = [A.add(i, i) for i in range(6)]
        evidence.quote("one plus two", quoted=3, measured=A.add(1, 2), digits=0)
        assert A.add(1, 2) == A.add(2, 1)
    """)

# a figure that draws what impls/ computes, labelled in the language asked for
FIGURE = textwrap.dedent("""\
    from matplotlib.figure import Figure

    from impls.arith import add


    def sums(lang):
        fig = Figure(figsize=(4, 2))
        ax = fig.subplots()
        n = list(range(8))
        ax.plot(n, [add(k, 0) * (k + 1) / 2 for k in n])
        ax.set_xlabel("项数 n" if lang == "zh" else "terms n")
        return fig
    """)


def make_site_repo(tmp: Path) -> Path:
    """make_repo + one more entry with maths, an implementation, a benchmark; the real site config."""
    root = make_repo(tmp, verifier=EXTRA_VERIFIER)
    # the first entry was asked by a team whose company is not named
    adding = root / "qa" / "maths" / "adding.yaml"
    adding.write_text(adding.read_text().replace("difficulty: 1", "asked_at: [{team: AI Infra, round: 1}]\ndifficulty: 1"))
    (root / "figures").mkdir()
    (root / "figures" / "__init__.py").write_text("")
    (root / "figures" / "arith.py").write_text(FIGURE)
    (root / "qa" / "rl").mkdir()
    (root / "qa" / "rl" / "importance-ratio.yaml").write_text(IS_ENTRY, encoding="utf-8")
    (root / "benchmarks" / "results").mkdir(parents=True)
    (root / "benchmarks" / "results" / "add.json").write_text(json.dumps(BENCH), encoding="utf-8")
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(REPO / "docs", root / "docs")
    shutil.copy(REPO / "CONTRIBUTING.md", root / "CONTRIBUTING.md")
    (root / "src").mkdir()
    (root / "src" / "mianjing").symlink_to(REPO / "src" / "mianjing", target_is_directory=True)
    return root


__all__ = ["make_site_repo", "entry_yaml"]


# --------------------------------------------------------------------------- reading built pages


class Node:
    """An element of a parsed page: tag, attributes, children (Nodes and text strings)."""

    __slots__ = ("tag", "attrs", "children", "parent")

    def __init__(self, tag: str, attrs: dict, parent: "Node | None"):
        self.tag, self.attrs, self.children, self.parent = tag, attrs, [], parent

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def find_all(self, pred):
        return [n for n in self.iter() if pred(n)]

    def text(self, skip=lambda n: False) -> str:
        return "".join(c if isinstance(c, str) else ("" if skip(c) else c.text(skip)) for c in self.children)

    def texts(self, skip=lambda n: False) -> list[str]:
        """The text under this one in runs: a skipped element (a formula, code) ends a run, inline markup
        (**D**ecoupled) does not."""
        runs = [""]

        def walk(n):
            for c in n.children:
                if isinstance(c, str):
                    runs[-1] += c
                elif skip(c):
                    runs.append("")
                else:
                    walk(c)

        walk(self)
        return [r for r in runs if r.strip()]


_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr",
         "mspace", "none", "mprescripts"}


def parse(page_html: str) -> Node:
    """A tolerant tree of a page (the site's own HTML: well nested, void elements unclosed)."""
    from html.parser import HTMLParser

    root = Node("#root", {}, None)

    class P(HTMLParser):
        cur = root

        def handle_starttag(self, tag, attrs):
            node = Node(tag, dict(attrs), self.cur)
            self.cur.children.append(node)
            if tag not in _VOID:
                self.cur = node

        def handle_startendtag(self, tag, attrs):
            self.cur.children.append(Node(tag, dict(attrs), self.cur))

        def handle_endtag(self, tag):
            n = self.cur
            while n is not root and n.tag != tag:
                n = n.parent
            if n is not root:
                self.cur = n.parent

        def handle_data(self, data):
            self.cur.children.append(data)

    p = P(convert_charrefs=True)
    p.feed(page_html)
    return root
