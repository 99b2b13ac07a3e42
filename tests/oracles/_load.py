"""Load one framework source file on a CPU box without its heavy package imports.

``load_file(module_name, path, stub_prefixes)`` executes the file as ``module_name`` with every import
under ``stub_prefixes`` replaced by an inert module: any attribute is a placeholder, calling one
returns another placeholder (so module-level ``logger = init_logger(...)`` works) and nothing real
happens. The functions compared in the oracle tests use torch only. Used for OpenRLHF, whose package ``__init__``
pulls deepspeed, vllm and ray although the functions compared here need none of them.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

_REAL = {"torch", "numpy", "typing", "math", "os", "time", "itertools", "datetime", "collections", "dataclasses",
         "functools", "abc", "copy", "json", "random", "warnings", "re", "enum", "logging"}


class _Inert:
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        # a decorator returns what it decorates; any other call (a logger factory, a config) returns
        # another placeholder, which fails loudly only if something later tries to use it for real
        if len(a) == 1 and not k and callable(a[0]):
            return a[0]
        return _Inert()

    def __getattr__(self, name):
        return _Inert()

    def __mro_entries__(self, bases):
        return (object,)


class _InertModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


class _StubFinder:
    def __init__(self, prefixes):
        self.prefixes = prefixes

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _REAL or name in sys.modules:
            return None
        if any(name == p or name.startswith(p + ".") for p in self.prefixes):
            return importlib.util.spec_from_loader(name, loader=self)
        return None

    def create_module(self, spec):
        m = _InertModule(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


def load_file(module_name: str, path: Path, stub_prefixes: tuple[str, ...]):
    """Execute ``path`` as ``module_name``; imports under ``stub_prefixes`` become inert modules."""
    finder = _StubFinder(stub_prefixes)
    sys.meta_path.insert(0, finder)
    try:
        spec = importlib.util.spec_from_file_location(module_name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = mod
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.meta_path.remove(finder)
