"""Where things live: the repository root, the catalog, the build folder.

The root is found from ``$MIANJING_ROOT`` or by walking up from the current
directory to the first folder holding both ``qa/`` and ``pyproject.toml``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


class RootNotFound(RuntimeError):
    pass


def repo_root(start: Path | None = None) -> Path:
    env = os.environ.get("MIANJING_ROOT")
    if env:
        return Path(env).resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "qa").is_dir() and (folder / "pyproject.toml").is_file():
            return folder
    # Fall back to the source checkout this package was installed from (editable install).
    src_root = Path(__file__).resolve().parents[2]
    if (src_root / "qa").is_dir():
        return src_root
    raise RootNotFound(
        f"no mianjing checkout found from {here}: run inside the repository or set MIANJING_ROOT"
    )


def catalog_path(root: Path) -> Path:
    """``$MIANJING_CATALOG``, else ``../shared/catalog/claims.yaml`` beside the checkout."""
    env = os.environ.get("MIANJING_CATALOG")
    if env:
        return Path(env)
    return root.parent / "shared" / "catalog" / "claims.yaml"


NAMES_FILE = "qa/names.yaml"  # topic, company and team names (not an entry)


def build_dir(root: Path) -> Path:
    return root / "build"


def cache_dir(root: Path) -> Path:
    """Where the site keeps what it computed once (figures, MathML, highlighted code):
    ``$MIANJING_CACHE``, else ``build/cache``."""
    env = os.environ.get("MIANJING_CACHE")
    return Path(env) if env else build_dir(root) / "cache"


def report_path(root: Path) -> Path:
    return build_dir(root) / "verification.json"


def ensure_importable(root: Path) -> None:
    """Put the checkout on ``sys.path`` so ``impls`` and ``verifiers`` import."""
    s = str(root)
    if s not in sys.path:
        sys.path.insert(0, s)
