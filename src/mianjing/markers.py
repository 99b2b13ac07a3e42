"""Find ``@pytest.mark.claim("...")`` markers in ``verifiers/`` without importing anything.

Static (AST) so that ``mianjing check`` stays fast and never imports torch.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MarkerUse:
    claim_id: str
    path: str  # relative to the repository root
    line: int
    function: str | None  # the test function the marker decorates, if any


def _is_claim_mark(func: ast.expr) -> bool:
    # pytest.mark.claim(...) or mark.claim(...)
    if not (isinstance(func, ast.Attribute) and func.attr == "claim"):
        return False
    base = func.value
    return (isinstance(base, ast.Attribute) and base.attr == "mark") or (
        isinstance(base, ast.Name) and base.id == "mark"
    )


class _Finder(ast.NodeVisitor):
    def __init__(self, rel: str):
        self.rel = rel
        self.uses: list[MarkerUse] = []
        self.stack: list[str] = []

    def _visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        for dec in node.decorator_list:
            self._collect(dec, node.name)
        self.stack.append(node.name)
        for child in node.body:
            self.visit(child)
        self.stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _visit_def

    def visit_Call(self, node: ast.Call) -> None:
        self._collect(node, self.stack[-1] if self.stack else None)

    def _collect(self, node: ast.AST, function: str | None) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and _is_claim_mark(sub.func):
                for arg in sub.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        self.uses.append(MarkerUse(arg.value, self.rel, arg.lineno, function))
        if isinstance(node, ast.Call):
            # do not descend again through generic_visit: ast.walk covered nested calls
            return
        self.generic_visit(node)


def find_markers(root: Path) -> tuple[list[MarkerUse], list[tuple[str, int, str]]]:
    """All claim markers under ``verifiers/`` and the files that failed to parse."""
    uses: list[MarkerUse] = []
    broken: list[tuple[str, int, str]] = []
    folder = root / "verifiers"
    if not folder.is_dir():
        return uses, broken
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        except SyntaxError as exc:
            broken.append((rel, exc.lineno or 1, exc.msg))
            continue
        finder = _Finder(rel)
        finder.visit(tree)
        # a decorator's call is seen by both _visit_def and visit_Call when nested: de-duplicate
        seen = set()
        for u in finder.uses:
            key = (u.claim_id, u.line)
            if key not in seen:
                seen.add(key)
                uses.append(u)
    return uses, broken


def defined_names(path: Path) -> set[str]:
    """Top-level functions and classes (and ``Class.method``) defined in a Python file."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, OSError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        names.add(f"{node.name}.{sub.name}")
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    names.add(t.id)
    return names
