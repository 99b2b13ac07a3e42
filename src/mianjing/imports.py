"""Which project files a module depends on, read from the sources (AST; nothing is imported).

One import graph serves three users: ``mianjing mutants`` (the tests that import a mutated module),
``mianjing verify`` (a claim is reused only while nothing its verifiers load has changed) and the
site's figure cache (a figure is redrawn when anything it loads changes).

* :func:`import_graph`: project module -> the project modules it imports anywhere in the file
  (module level or inside a function; ``from a.b import c`` gives ``a``, ``a.b`` and ``a.b.c`` when
  those are project modules -- a package's ``__init__`` runs on the way in).
* :func:`closure`: the modules reached from some starting modules.
* :func:`data_files`: the non-Python files those modules can read: data beside them (``configs/``,
  ``zero_paper_table1.json``) and every file a string literal of theirs names (``"gae_scan.json"``
  of ``benchmarks/results``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

FOLDERS = ("impls", "verifiers", "tests", "figures", "src/mianjing")
_RESULTS = Path("benchmarks") / "results"


def module_name(rel: str) -> str:
    """``src/mianjing/plugin.py`` -> ``mianjing.plugin``; ``impls/rl/__init__.py`` -> ``impls.rl``."""
    parts = rel[:-3].split("/")
    if parts[0] == "src":
        parts = parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, OSError, UnicodeDecodeError, ValueError):
        return None


def _statements(body: list):
    """Every statement, however nested (imports are statements: expressions need no visit)."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            sub = getattr(node, field, None)
            if isinstance(sub, list):
                yield from _statements(sub)


def imports_of(path: Path, module: str, tree: ast.Module | None = None) -> set[str]:
    """Modules a file imports anywhere in it (absolute and relative; ``from a import b`` gives a and a.b)."""
    tree = tree if tree is not None else _parse(path)
    if tree is None:
        return set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[: len(up) - (node.level - 1)] if node.level > 1 else up
                base = ".".join(p for p in (*up, base) if p)
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def project_modules(root: Path, folders=FOLDERS) -> dict[str, Path]:
    """Dotted name -> file, for every ``*.py`` under ``folders`` of the checkout at ``root``."""
    files: dict[str, Path] = {}
    for folder in folders:
        base = root / folder
        for path in sorted(base.rglob("*.py")) if base.is_dir() else []:
            if "__pycache__" not in path.parts:
                files[module_name(path.relative_to(root).as_posix())] = path
    return files


def import_graph(root: Path, folders=FOLDERS) -> dict[str, set[str]]:
    """Project module -> the project modules it imports (impls, verifiers, tests, figures, mianjing)."""
    files = project_modules(root, folders)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        found = set()
        for imp in imports_of(path, name):
            # a.b.c imports a and a.b too (their __init__ runs)
            parts = imp.split(".")
            for i in range(1, len(parts) + 1):
                cand = ".".join(parts[:i])
                if cand in files and cand != name:
                    found.add(cand)
        graph[name] = found
    return graph


def closure(graph: dict[str, set[str]], start) -> set[str]:
    """``start`` and every module reached from it through ``graph``."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        todo.extend(graph.get(mod, ()))
    return seen


def _data_beside(folder: Path) -> list[Path]:
    """Files other than Python in ``folder`` and in its sub-folders that are not packages."""
    out: list[Path] = []
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        if p.is_file() and p.suffix not in (".py", ".pyc"):
            out.append(p)
        elif p.is_dir() and p.name != "__pycache__" and not (p / "__init__.py").is_file():
            out += [q for q in sorted(p.rglob("*")) if q.is_file() and "__pycache__" not in q.parts]
    return out


_NAMED = re.compile(r"""["']([^"'\s\\]{1,200}\.[A-Za-z0-9]{1,8})["']""")  # "x.json", 'configs/a.yaml'


def data_files(root: Path, paths, memo: dict | None = None) -> list[Path]:
    """Non-Python files the modules at ``paths`` can read (see the module docstring), sorted. ``memo``
    (a dict the caller keeps for one look at the tree) saves reading a module or a folder twice."""
    memo = {} if memo is None else memo
    inside = root.resolve()
    found: set[Path] = set()
    for path in paths:
        if path not in memo:
            mine: set[Path] = set()
            folder = ("dir", path.parent)
            if folder not in memo:
                memo[folder] = _data_beside(path.parent)
            mine.update(memo[folder])
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                text = ""
            tool = path.resolve().is_relative_to(inside / "src")
            for name in set(_NAMED.findall(text)):
                if tool and name.endswith(".py"):  # the tool's own tables of repository modules (the kata
                    continue                       # registry): a verifier that needs one of them imports it
                for cand in (root / name, root / _RESULTS / Path(name).name):
                    if cand.is_file() and cand.resolve().is_relative_to(inside):
                        mine.add(cand)
                        break
            memo[path] = mine
        found.update(memo[path])
    return sorted(found, key=lambda q: q.relative_to(root).as_posix())
