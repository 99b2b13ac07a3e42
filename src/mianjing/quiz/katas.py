"""The kata registry: which reference function a kata is, which properties judge it, its entry.

A kata is offered only when its reference file defines the symbol and its property module
exists (discovered from the files, parsed with ``ast``: listing katas imports no torch).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path



@dataclass(frozen=True)
class Kata:
    name: str
    ref_path: str  # impls/rl/gae.py
    symbol: str  # gae
    props_path: str  # verifiers/katas/gae.py
    entry: str  # the entry a judged kata counts as a review of

    @property
    def ref_module(self) -> str:
        return self.ref_path[:-3].replace("/", ".")

    @property
    def props_module(self) -> str:
        return self.props_path[:-3].replace("/", ".")

    @property
    def impl_ref(self) -> str:
        return f"{self.ref_path}::{self.symbol}"

    def properties(self, root: Path) -> list[tuple[str, str]]:
        """``[(prop name, first docstring line)]`` in the module's ``ALL`` order, else source order."""
        tree = ast.parse((root / self.props_path).read_text(encoding="utf-8"))
        funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("prop_")}
        order = list(funcs)
        for node in tree.body:
            if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ALL" for t in node.targets)
                    and isinstance(node.value, (ast.List, ast.Tuple))):
                named = [e.id for e in node.value.elts if isinstance(e, ast.Name) and e.id in funcs]
                if named:
                    order = named
        return [(n, " ".join((ast.get_docstring(funcs[n]) or "").split())) for n in order]

    def node_fields(self, root: Path) -> tuple[str, ...] | None:
        """``NODE_FIELDS = ("val", "left", "right")`` in the property module, if it sets one."""
        tree = ast.parse((root / self.props_path).read_text(encoding="utf-8"))
        for node in tree.body:
            if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "NODE_FIELDS"
                                                     for t in node.targets)
                    and isinstance(node.value, (ast.List, ast.Tuple))):
                names = [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if names:
                    return tuple(names)
        return None


REGISTRY: tuple[Kata, ...] = (
    Kata("gae", "impls/rl/gae.py", "gae", "verifiers/katas/gae.py", "ppo-loss-and-gae-lambda"),
    Kata("ppo_clip_loss", "impls/rl/ppo.py", "ppo_clip_loss", "verifiers/katas/ppo_clip_loss.py",
         "ppo-clip-by-advantage-sign"),
    Kata("grpo_advantages", "impls/rl/grpo.py", "grpo_advantages", "verifiers/katas/grpo_advantages.py",
         "grpo-loss-sequence-to-token"),
    Kata("kl_estimate", "impls/rl/kl.py", "kl_estimate", "verifiers/katas/kl_estimate.py", "kl-estimators"),
    Kata("dpo_loss", "impls/rl/dpo.py", "dpo_loss", "verifiers/katas/dpo_loss.py", "dpo-derivation"),
    Kata("BSTIterator", "impls/coding/bst_iterator.py", "BSTIterator", "verifiers/katas/bst_iterator.py",
         "bst-iterator"),
    Kata("online_logprobs", "impls/scale/fused_logprobs.py", "online_logprobs", "verifiers/katas/online_logprobs.py",
         "fused-logprob-entropy-kernel"),
    Kata("fused_logprob_backward", "impls/scale/fused_logprobs.py", "fused_logprob_backward",
         "verifiers/katas/fused_logprob_backward.py", "fused-logprob-entropy-kernel"),
    Kata("level_order_with_depth", "impls/coding/level_order.py", "level_order_with_depth",
         "verifiers/katas/level_order.py", "level-order-with-depth"),
)


def _defines(path: Path, symbol: str) -> ast.AST | None:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == symbol:
            return node
    return None


def available(root: Path) -> list[Kata]:
    out = []
    for k in REGISTRY:
        if (root / k.props_path).is_file() and _defines(root / k.ref_path, k.symbol) is not None:
            try:
                if k.properties(root):
                    out.append(k)
            except (OSError, SyntaxError, ValueError):
                continue
    return out


def find(root: Path, name: str) -> Kata | None:
    for k in available(root):
        if k.name == name or k.name.casefold() == name.casefold():
            return k
    return None


def entry_for(kb, kata: Kata):
    """The entry this kata reviews (None when the knowledge base lacks it)."""
    return None if kb is None else kb.entries.get(kata.entry)


MARKER = "# mianjing-kata: "


def _segment(lines: list[str], start: int, end: int) -> list[str]:
    return lines[start - 1:end]


def _def_stub(lines: list[str], node: ast.FunctionDef, indent: str = "") -> list[str]:
    """Signature (all its lines) + docstring + ``raise NotImplementedError``; never the body."""
    first = node.body[0]
    has_doc = isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
        and isinstance(first.value.value, str)
    start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    out = _segment(lines, start, first.lineno - 1)
    body_indent = " " * first.col_offset
    if has_doc:
        out += _segment(lines, first.lineno, first.end_lineno)
    out.append(f"{body_indent}raise NotImplementedError  # your code here")
    return out


_KEEP_IMPORT_PREFIXES = ("import torch", "from torch", "from typing", "from collections", "import math")

# The judge runs the candidate's file alone (impls/ is not there), so a tree kata's stub defines the
# node type it is given instead of importing ours.
_TREE_NODE = '''

class TreeNode:
    """What the judge passes in: a binary-tree node with the LeetCode fields."""

    def __init__(self, val=0, left=None, right=None):
        self.val = val
        self.left = left
        self.right = right'''



def stub(root: Path, kata: Kata) -> str:
    """The stub the candidate edits: conventions and signature from the reference, no solution."""
    src = (root / kata.ref_path).read_text(encoding="utf-8")
    lines = src.splitlines()
    tree = ast.parse(src)
    node = _defines(root / kata.ref_path, kata.symbol)
    assert node is not None
    props_doc = ast.get_docstring(ast.parse((root / kata.props_path).read_text(encoding="utf-8"))) or ""
    head = [f'r"""Kata `{kata.name}` -- write `{kata.symbol}` below; the judge runs these properties on it:', ""]
    head += [f"  * {n}: {d}" for n, d in kata.properties(root)]
    head += ["", "Conventions (from the properties):", ""]
    head += ["  " + ln if ln else "" for ln in props_doc.replace('"""', "'''").splitlines()]
    head += ["", f"Judge it with:  mianjing kata judge {kata.name}.py", '"""', MARKER + kata.name, ""]
    imports = ["from __future__ import annotations", ""]
    for n in tree.body:
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            text = "\n".join(_segment(lines, n.lineno, n.end_lineno))
            if text.startswith(_KEEP_IMPORT_PREFIXES):
                imports.append(text)
    if "from impls.coding.trees import" in src:
        imports.append(_TREE_NODE)
    body: list[str] = ["", ""]
    if isinstance(node, ast.FunctionDef):
        body += _def_stub(lines, node)
    else:
        first = node.body[0]
        body += _segment(lines, node.lineno, node.lineno if node.body else node.end_lineno)
        if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant):
            body += _segment(lines, first.lineno, first.end_lineno)
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and (item.name == "__init__" or not item.name.startswith("_")):
                body.append("")
                body += _def_stub(lines, item)
    return "\n".join(head + imports + body) + "\n"
