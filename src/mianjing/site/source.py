"""Source shown on the site is read from the files that run, by AST, at build time."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Snippet:
    path: str  # relative to the root
    name: str | None  # dotted symbol, None for the whole file
    start: int  # 1-based, first line (decorators included)
    end: int
    code: str


class SourceError(LookupError):
    pass


def _span(node: ast.AST) -> tuple[int, int]:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start, node.end_lineno or node.lineno


def _find(body: list[ast.stmt], parts: list[str]) -> ast.AST | None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == parts[0]:
            if len(parts) == 1:
                return node
            return _find(node.body, parts[1:]) if isinstance(node, ast.ClassDef) else None
        if len(parts) == 1 and isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == parts[0] for t in targets):
                return node
    return None


_PARSED: dict[tuple[str, int, int], tuple[str, ast.Module]] = {}


def _read(root: Path, rel: str) -> tuple[str, ast.Module]:
    """Text and AST of a file, parsed once per build (keyed by path, mtime and size)."""
    path = root / rel
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
        if key in _PARSED:
            return _PARSED[key]
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SourceError(f"{rel}: cannot read ({exc.strerror})") from None
    try:
        _PARSED[key] = (text, ast.parse(text, filename=rel))
    except SyntaxError as exc:
        raise SourceError(f"{rel}:{exc.lineno}: does not parse ({exc.msg})") from None
    return _PARSED[key]


def symbol_source(root: Path, rel: str, name: str | None) -> Snippet:
    """The source of ``name`` (``func`` or ``Class.method``) in ``rel``, or the whole file."""
    text, tree = _read(root, rel)
    lines = text.splitlines()
    if not name:
        return Snippet(rel, None, 1, len(lines), text.rstrip("\n"))
    node = _find(tree.body, name.split("."))
    if node is None:
        raise SourceError(f"{rel}: no function or class named {name!r}")
    start, end = _span(node)
    return Snippet(rel, name, start, end, "\n".join(lines[start - 1 : end]))


def test_source(root: Path, rel: str, function: str, line: int | None = None) -> Snippet:
    """A verifier's test function, found by name (the one nearest ``line`` when a name repeats)."""
    text, tree = _read(root, rel)
    lines = text.splitlines()
    base = function.split("[", 1)[0]  # parametrised ids: test_x[case]
    found = list(_functions(tree).get(base.split(".")[-1], []))
    if not found:
        raise SourceError(f"{rel}: no test function {base!r}")
    if line is not None:
        found.sort(key=lambda n: min(abs(_span(n)[0] - line), abs(n.lineno - line)))
    start, end = _span(found[0])
    return Snippet(rel, base, start, end, "\n".join(lines[start - 1 : end]))


_FUNCS: dict[int, dict[str, list]] = {}


def _functions(tree: ast.Module) -> dict[str, list]:
    """Every function in a module by name (methods included), computed once per parsed tree."""
    key = id(tree)
    if key not in _FUNCS:
        index: dict[str, list] = {}
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                index.setdefault(n.name, []).append(n)
        _FUNCS[key] = index
    return _FUNCS[key]
