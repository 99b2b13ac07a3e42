"""Figures a claim's text quotes, and the ``evidence.quote(...)`` calls in its verifiers that pin them.

A *figure* is a decimal number, a percentage or a multiple (``0.094``, ``44%``, ``2.2×``) in a claim's
statement or correction; section numbers (``§3.1``), exponents (``10^{-3}``) and model versions (``Llama-3.1``) are not figures. Every
figure an executable claim quotes must be asserted by a verifier of that claim with
``evidence.quote(name, quoted=<the figure>, ...)`` where the figure is a literal, or a loop variable
over a literal table (a percentage may be quoted as 44 or 0.44), and
the Chinese and English texts must quote the same figures. Static (AST), so ``mianjing check`` stays fast.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from .markers import _is_claim_mark

# a decimal, percentage or multiple not glued to a word, a section sign, an exponent, a subscript or a
# model's version (Llama-3.1, GPT-3.5: a letter and a hyphen before it)
FIGURE = re.compile(r"(?<![\w§^_{.\\])(?<![A-Za-z]-)(\d+\.\d+|\d+(?:\.\d+)?(?=\s?%|×|\s?倍|\stimes\b))")


def figures(text: str) -> list[float]:
    """The figures quoted in ``text``, in order (duplicates kept)."""
    return [float(m.group(1)) for m in FIGURE.finditer(text)]


def pinned(figure: float, quoted: set[float]) -> bool:
    """Is ``figure`` among the quoted values (a percentage may be quoted as a fraction, and vice versa)?"""
    def same(a: float, b: float) -> bool:
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))

    return any(same(figure, abs(q)) or same(figure, 100 * abs(q)) or same(figure / 100, abs(q)) for q in quoted)


@dataclass(frozen=True)
class QuoteUse:
    claim_ids: tuple[str, ...]
    name: str | None
    quoted: float
    path: str
    line: int


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    return None


def _loop_values(fn: ast.AST) -> dict[str, list[float]]:
    """Names bound by ``for`` loops over literal sequences inside ``fn``: ``for n, q in ((2, 1.6), (4, 2.29))``
    binds q to [1.6, 2.29] (so a quote in the loop body pins every value)."""
    bound: dict[str, list[float]] = {}
    for node in ast.walk(fn):
        if not (isinstance(node, ast.For) and isinstance(node.iter, (ast.Tuple, ast.List))):
            continue
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        for row in node.iter.elts:
            items = row.elts if isinstance(row, (ast.Tuple, ast.List)) else [row]
            if len(items) != len(targets):
                continue
            for t, v in zip(targets, items):
                num = _number(v)
                if isinstance(t, ast.Name) and num is not None:
                    bound.setdefault(t.id, []).append(num)
    return bound


def _claims_of(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    ids: list[str] = []
    for dec in fn.decorator_list:
        for sub in ast.walk(dec):
            if isinstance(sub, ast.Call) and _is_claim_mark(sub.func):
                ids += [a.value for a in sub.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return tuple(ids)


def find_quotes(root: Path) -> list[QuoteUse]:
    """Every ``<x>.quote(name, quoted=<literal>, ...)`` inside a test function that carries claim markers."""
    out: list[QuoteUse] = []
    folder = root / "verifiers"
    for path in sorted(folder.rglob("*.py")) if folder.is_dir() else []:
        rel = path.relative_to(root).as_posix()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        except SyntaxError:
            continue  # mianjing check reports unparsable verifiers already
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            ids = _claims_of(fn)
            if not ids:
                continue
            loops = _loop_values(fn)
            for call in ast.walk(fn):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "quote"):
                    continue
                args = {kw.arg: kw.value for kw in call.keywords if kw.arg}
                name = call.args[0] if call.args else args.get("name")
                value = args.get("quoted", call.args[1] if len(call.args) > 1 else None)
                if value is None:
                    continue
                values = loops.get(value.id, []) if isinstance(value, ast.Name) else [_number(value)]
                label = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None
                out += [QuoteUse(ids, label, q, rel, call.lineno) for q in values if q is not None]
    return out


def quoted_by_claim(quotes: list[QuoteUse]) -> dict[str, set[float]]:
    by: dict[str, set[float]] = {}
    for q in quotes:
        for cid in q.claim_ids:
            by.setdefault(cid, set()).add(q.quoted)
    return by


def claim_figures(claim, lang: str = "en") -> list[float]:
    """The figures a claim's text asserts: its correction's, and its statement's unless the claim is refuted
    (a refuted statement's figures are the misconception's, not the base's)."""
    parts = [claim.correction.get(lang)] if claim.correction is not None else []
    if claim.verdict.value != "refuted":
        parts.insert(0, claim.statement.get(lang))
    return list(dict.fromkeys(figures("\n".join(parts))))
