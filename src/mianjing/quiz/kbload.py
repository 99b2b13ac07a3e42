"""Load the knowledge base for the quiz through the one loader, with a start-up cache.

The cache is a pickle of the loader's own :class:`~mianjing.loader.LoadResult` under the user
cache directory, keyed by the path, mtime and size of every ``qa/**/*.yaml`` file and of the
schema module; any change (or an unreadable cache) means a fresh ``load(root)``.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

from ..loader import LoadResult, entry_files, load
from .. import schema as _schema

CACHE_FORMAT = 1


def _key(root: Path) -> str:
    h = hashlib.sha256(f"{CACHE_FORMAT}|{root.resolve()}".encode())
    for p in [Path(_schema.__file__), *entry_files(root)]:
        st = p.stat()
        h.update(f"|{p}|{st.st_mtime_ns}|{st.st_size}".encode())
    return h.hexdigest()


def cache_dir() -> Path:
    env = os.environ.get("MIANJING_CACHE_DIR")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("mianjing", appauthor=False))


def load_cached(root: Path, use_cache: bool = True) -> LoadResult:
    if not use_cache:
        return load(root)
    key = _key(root)
    where = cache_dir() / f"kb-{hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]}.pickle"
    try:
        with open(where, "rb") as fh:
            stored_key, result = pickle.load(fh)
        if stored_key == key and isinstance(result, LoadResult):
            return result
    except Exception:  # missing, stale format, unreadable: rebuild
        pass
    result = load(root)
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        tmp = where.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            pickle.dump((key, result), fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, where)
    except OSError:
        pass
    return result
